// Command agentowl is the AgentOwl server (`agentowl serve`), its offline
// administration (`agentowl admin …`) and the operator CLI (every other
// command, an HTTP client of the operator API).
package main

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/agentowl/agentowl"
	"github.com/agentowl/agentowl/internal/access"
	"github.com/agentowl/agentowl/internal/approval"
	"github.com/agentowl/agentowl/internal/delivery"
	"github.com/agentowl/agentowl/internal/egress"
	"github.com/agentowl/agentowl/internal/httpapi"
	"github.com/agentowl/agentowl/internal/ingress"
	"github.com/agentowl/agentowl/internal/ratelimit"
	"github.com/agentowl/agentowl/internal/secret"
	"github.com/agentowl/agentowl/internal/store"
	"github.com/agentowl/agentowl/internal/store/postgres"
	"github.com/agentowl/agentowl/internal/store/sqlite"
	"github.com/agentowl/agentowl/internal/work"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := newRootCommand(os.Stdout, os.Stderr).ExecuteContext(ctx); err != nil {
		os.Exit(1)
	}
}

// Config is the server's configuration, filled by cmd from flags and
// AGENTOWL_* environment variables (flags win).
type Config struct {
	// DataDir holds the SQLite database and the bootstrap operator token.
	// Defaults to ./agentowl-data.
	DataDir string
	// Listen is the HTTP listen address. Defaults to 127.0.0.1:8470.
	Listen string
	// DatabaseURL selects PostgreSQL when it starts with postgres:// or
	// postgresql://; empty means SQLite in DataDir.
	DatabaseURL string
	// PublicURL is the externally reachable base URL: callback URLs in
	// handoffs and ingress URLs are built from it. Defaults to
	// http://<the bound listen address>.
	PublicURL string
	HTTP      httpapi.Config
	Approval  approval.Config
	// RegisterPerDestination bounds receiver verifications per destination
	// host:port and resolved address, across tenants. Defaults to
	// delivery.DefaultRegisterLimit.
	RegisterPerDestination ratelimit.Limit
	Delivery               delivery.Config
	Egress                 egress.Config
	// SecretKey seals the stored secrets that must be read back (receiver,
	// endpoint and binding signing secrets, decision bearer secrets).
	// Defaults to AGENTOWL_SECRET_KEY or the key file in DataDir (see
	// secretKey).
	SecretKey []byte
	// Work configures agent work.
	Work    work.Config
	Ingress ingress.Config
	Clock   agentowl.Clock
	Logger  *slog.Logger
	// Stdout receives the first-start bootstrap notice.
	Stdout io.Writer
}

func (c *Config) defaults() {
	if c.DataDir == "" {
		c.DataDir = "agentowl-data"
	}
	if c.Listen == "" {
		c.Listen = "127.0.0.1:8470"
	}
	if c.Clock == nil {
		c.Clock = agentowl.SystemClock{}
	}
	if c.RegisterPerDestination.Per == 0 {
		c.RegisterPerDestination = delivery.DefaultRegisterLimit
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewJSONHandler(os.Stderr, nil))
	}
	if c.Stdout == nil {
		c.Stdout = io.Discard
	}
}

func (c *Config) validate() error {
	if c.DatabaseURL != "" && !isPostgresURL(c.DatabaseURL) {
		return fmt.Errorf("database URL must start with postgres:// or postgresql://")
	}
	return nil
}

func isPostgresURL(u string) bool {
	return strings.HasPrefix(u, "postgres://") || strings.HasPrefix(u, "postgresql://")
}

// openStore opens the configured store, its secrets sealed under key. It
// refuses a key other than the one that sealed the database's secrets. A
// nil key opens it for offline administration, which touches no sealed
// secret.
func openStore(ctx context.Context, dataDir, databaseURL string, key []byte) (store.Store, *secret.Box, error) {
	var box *secret.Box
	if key != nil {
		var err error
		if box, err = secret.New(key); err != nil {
			return nil, nil, err
		}
	}
	var st store.Store
	var err error
	if databaseURL != "" {
		st, err = postgres.Open(ctx, databaseURL, box)
	} else {
		st, err = sqlite.Open(ctx, filepath.Join(dataDir, "agentowl.db"), box)
	}
	if errors.Is(err, secret.ErrKeyMismatch) {
		// Another replica's data directory, or a changed AGENTOWL_SECRET_KEY:
		// secrets sealed under the first key could not be opened.
		return nil, nil, errors.New("the secret key differs from the one that sealed this database's secrets: " +
			"give every replica the same AGENTOWL_SECRET_KEY (or the same DATA-DIR/secret-key file)")
	}
	return st, box, err
}

// Main is the running server: `serve` and the end-to-end tests use it.
type Main struct {
	Config Config
	// Addr is the bound listen address once Run returns.
	Addr string

	store    store.Store
	server   *http.Server
	approval *approval.Service
	engine   *delivery.Engine
	work     *work.Service
	cancel   context.CancelFunc
	done     chan struct{}
}

// Run opens the store, bootstraps the default tenant on first start, and
// starts serving and the maintenance loop. It returns once listening.
func (m *Main) Run(ctx context.Context) error {
	// Limits from the environment fill what the Config leaves unset, before
	// the defaults do.
	if err := limitsFromEnv(&m.Config); err != nil {
		return err
	}
	m.Config.defaults()
	if err := m.Config.validate(); err != nil {
		return err
	}
	cfg := &m.Config
	key := cfg.SecretKey
	if key == nil {
		var err error
		if key, err = secretKey(cfg.DataDir); err != nil {
			return err
		}
	}
	st, box, err := openStore(ctx, cfg.DataDir, cfg.DatabaseURL, key)
	if err != nil {
		return fmt.Errorf("open store: %w", err)
	}
	m.store = st
	acc := access.New(st, cfg.Clock, access.Config{})
	if err := m.bootstrap(ctx, acc); err != nil {
		return err
	}
	m.approval = approval.New(st, acc, cfg.Clock, cfg.Approval, cfg.Logger)
	client, err := egress.New(cfg.Egress)
	if err != nil {
		return fmt.Errorf("egress: %w", err)
	}
	if m.engine, err = delivery.New(st, cfg.Clock, client, m.resolveDestination(), cfg.Delivery, cfg.Logger); err != nil {
		return err
	}
	verifier := delivery.NewVerifier(client, cfg.Clock, nil).
		LimitDestinations(ratelimit.New("register-destination", cfg.RegisterPerDestination, st, cfg.Clock), nil)
	m.approval.EnableDelivery(verifier, client.CheckURL, m.engine.Wake)
	api := httpapi.New(acc, m.approval, st, cfg.Clock, cfg.Logger, cfg.HTTP)
	api.Register(m.engine.Metrics().Collectors(st)...)
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return err
	}
	m.Addr = ln.Addr().String()
	if err := m.enableWork(api, box, client.CheckURL); err != nil {
		ln.Close()
		return err
	}
	m.server = api.HTTPServer()
	ln = api.LimitListener(ln)
	bg, cancel := context.WithCancel(context.Background())
	m.cancel, m.done = cancel, make(chan struct{})
	go func() {
		defer close(m.done)
		var wg sync.WaitGroup
		wg.Go(func() { m.approval.Run(bg) })
		wg.Go(func() { m.engine.Run(bg) })
		wg.Go(func() { m.work.Run(bg) })
		wg.Wait()
	}()
	go func() {
		if err := m.server.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			cfg.Logger.Error("http server stopped", "err", err)
		}
	}()
	cfg.Logger.Info("agentowl serving", "addr", m.Addr, "database", st.Dialect())
	return nil
}

// resolveDestination routes outbox destinations to their use-cases:
// "instance:" to AAP receivers, "endpoint:" to agent-work endpoints and
// "decision:" to endpoints' decision URLs. Work starts after the engine (it
// needs the engine's Wake), so its resolvers are looked up at call time.
func (m *Main) resolveDestination() delivery.Resolver {
	return delivery.Route(map[string]delivery.Resolver{
		"instance": approval.ResolveDestination,
		"endpoint": func(ctx context.Context, tx store.Tx, d string) (*delivery.Target, error) {
			return m.work.ResolveDestination(ctx, tx, d)
		},
		"decision": func(ctx context.Context, tx store.Tx, d string) (*delivery.Target, error) {
			return m.work.ResolveDecisionDestination(ctx, tx, d)
		},
	})
}

// bootstrap creates tenant "default" and an admin operator token on first
// start, writing the token to DataDir/operator-token (mode 0600).
func (m *Main) bootstrap(ctx context.Context, acc *access.Service) error {
	empty, err := acc.NeedsBootstrap(ctx)
	if err != nil || !empty {
		return err
	}
	res, err := acc.Bootstrap(ctx, "default")
	if err != nil {
		return fmt.Errorf("bootstrap: %w", err)
	}
	path := filepath.Join(m.Config.DataDir, "operator-token")
	if err := os.MkdirAll(m.Config.DataDir, 0o700); err != nil {
		return err
	}
	if err := os.WriteFile(path, []byte(res.Token+"\n"), 0o600); err != nil {
		return fmt.Errorf("write operator token: %w", err)
	}
	abs, _ := filepath.Abs(path)
	fmt.Fprintf(m.Config.Stdout, "First start: created tenant %q and an admin operator token in %s (mode 0600).\n", res.Tenant.Name, abs)
	fmt.Fprintf(m.Config.Stdout, "Use it with the CLI:  export AGENTOWL_TOKEN=$(cat %s)\n", abs)
	return nil
}

// Close stops serving (letting in-flight requests finish), stops maintenance
// and closes the store.
func (m *Main) Close() error {
	var err error
	if m.server != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		err = m.server.Shutdown(ctx)
	}
	if m.cancel != nil {
		m.cancel()
		<-m.done
	}
	if m.store != nil {
		err = errors.Join(err, m.store.Close())
	}
	return err
}

// enableWork starts agent work: endpoints, runtime credentials, bindings,
// handoffs and callbacks (docs/agent-work.md).
func (m *Main) enableWork(api *httpapi.Server, box *secret.Box, checkURL func(string) error) error {
	cfg := &m.Config
	wc := cfg.Work
	if wc.PublicURL == "" {
		wc.PublicURL = cfg.PublicURL
	}
	if wc.PublicURL == "" {
		wc.PublicURL = "http://" + m.Addr
	}
	w, err := work.New(m.store, cfg.Clock, box, checkURL, m.engine.Wake, wc, cfg.Logger)
	if err != nil {
		return err
	}
	m.work = w
	api.EnableWork(w, ingress.New(m.store, cfg.Clock, w, box, cfg.Ingress))
	return nil
}

// limitsFromEnv fills the limits that are unset in the Config from the
// environment (docs/limits.md lists them): each is a positive whole number,
// rates per minute.
func limitsFromEnv(cfg *Config) error {
	perMinute := func(l *ratelimit.Limit) func(int) error {
		return func(n int) error {
			if l.Per == 0 {
				*l = ratelimit.Limit{Events: n, Per: time.Minute}
			}
			return nil
		}
	}
	count := func(v *int, most int) func(int) error {
		return func(n int) error {
			if n > most {
				return fmt.Errorf("%d is more than the most, %d", n, most)
			}
			if *v == 0 {
				*v = n
			}
			return nil
		}
	}
	const unbounded = math.MaxInt
	for env, set := range map[string]func(n int) error{
		"AGENTOWL_CREATE_RATE":                      perMinute(&cfg.Approval.CreateLimit),
		"AGENTOWL_REGISTER_RATE":                    perMinute(&cfg.Approval.RegisterLimit),
		"AGENTOWL_REGISTER_DESTINATION_RATE":        perMinute(&cfg.RegisterPerDestination),
		"AGENTOWL_DELIVERY_TENANT_RATE":             perMinute(&cfg.Delivery.PerTenantRate),
		"AGENTOWL_DELIVERY_DESTINATION_RATE":        perMinute(&cfg.Delivery.PerHostRate),
		"AGENTOWL_DELIVERY_DESTINATION_CONCURRENCY": count(&cfg.Delivery.PerHostConcurrency, delivery.MaxPerHostConcurrency),
		"AGENTOWL_DELIVERY_CONCURRENCY":             count(&cfg.Delivery.Concurrency, unbounded),
		"AGENTOWL_CALLBACK_RATE":                    perMinute(&cfg.Work.CallbackLimit),
		"AGENTOWL_MAX_CALLBACKS_PER_WORK":           count(&cfg.Work.MaxCallbacksPerWork, unbounded),
		"AGENTOWL_INGRESS_RATE":                     perMinute(&cfg.Ingress.Limit),
		"AGENTOWL_MAX_CONNECTIONS":                  count(&cfg.HTTP.MaxConnections, unbounded),
	} {
		if v := os.Getenv(env); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n <= 0 {
				return fmt.Errorf("%s: %q is not a positive whole number", env, v)
			}
			if err := set(n); err != nil {
				return fmt.Errorf("%s: %w", env, err)
			}
		}
	}
	return nil
}

// secretKey returns the key that seals stored secrets:
// AGENTOWL_SECRET_KEY (base64) when set, otherwise the key file
// DataDir/secret-key, created (mode 0600, its directory 0700 when missing)
// on first start. Replicas sharing PostgreSQL must share the key: set
// AGENTOWL_SECRET_KEY on each.
func secretKey(dataDir string) ([]byte, error) {
	if v := os.Getenv("AGENTOWL_SECRET_KEY"); v != "" {
		key, err := base64.StdEncoding.DecodeString(strings.TrimSpace(v))
		if err != nil || len(key) != 32 {
			return nil, errors.New("AGENTOWL_SECRET_KEY must be the base64 of exactly 32 bytes (openssl rand -base64 32)")
		}
		return key, nil
	}
	path := filepath.Join(dataDir, "secret-key")
	if data, err := os.ReadFile(path); err == nil {
		key, err := base64.StdEncoding.DecodeString(strings.TrimSpace(string(data)))
		if err != nil || len(key) != 32 {
			return nil, fmt.Errorf("%s must hold the base64 of exactly 32 bytes", path)
		}
		return key, nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	key := secret.NewKey()
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return nil, err
	}
	// O_EXCL: a concurrent first start keeps the key that was written first.
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, os.ErrExist) {
		return secretKey(dataDir)
	}
	if err != nil {
		return nil, err
	}
	_, err = f.WriteString(base64.StdEncoding.EncodeToString(key) + "\n")
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return key, err
}
