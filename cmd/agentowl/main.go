// Command agentowl is the AgentOwl server (`agentowl serve`), its offline
// administration (`agentowl admin …`) and the operator CLI (every other
// command, an HTTP client of the operator API).
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
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
	"github.com/agentowl/agentowl/internal/ratelimit"
	"github.com/agentowl/agentowl/internal/store"
	"github.com/agentowl/agentowl/internal/store/postgres"
	"github.com/agentowl/agentowl/internal/store/sqlite"
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
	// PublicURL is the externally reachable base URL (used in printed hints).
	PublicURL string
	HTTP      httpapi.Config
	Approval  approval.Config
	Delivery  delivery.Config
	Egress    egress.Config
	Clock     agentowl.Clock
	Logger    *slog.Logger
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

// openStore opens the configured store.
func openStore(ctx context.Context, dataDir, databaseURL string) (store.Store, error) {
	if databaseURL != "" {
		return postgres.Open(ctx, databaseURL)
	}
	return sqlite.Open(ctx, filepath.Join(dataDir, "agentowl.db"))
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
	cancel   context.CancelFunc
	done     chan struct{}
}

// Run opens the store, bootstraps the default tenant on first start, and
// starts serving and the maintenance loop. It returns once listening.
func (m *Main) Run(ctx context.Context) error {
	m.Config.defaults()
	if err := m.Config.validate(); err != nil {
		return err
	}
	cfg := &m.Config
	st, err := openStore(ctx, cfg.DataDir, cfg.DatabaseURL)
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
	m.engine = delivery.New(st, cfg.Clock, client, resolveDestination, cfg.Delivery, cfg.Logger)
	verifier := delivery.NewVerifier(client, cfg.Clock, nil).
		LimitDestinations(ratelimit.New("register-destination", delivery.DefaultRegisterLimit, st, cfg.Clock), nil)
	m.approval.EnableDelivery(verifier, client.CheckURL, m.engine.Wake)
	api := httpapi.New(acc, m.approval, st, cfg.Clock, cfg.Logger, cfg.HTTP)
	api.Register(m.engine.Metrics().Collectors(st)...)
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return err
	}
	m.Addr = ln.Addr().String()
	m.server = &http.Server{Handler: api.Handler(), ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute}
	bg, cancel := context.WithCancel(context.Background())
	m.cancel, m.done = cancel, make(chan struct{})
	go func() {
		defer close(m.done)
		var wg sync.WaitGroup
		wg.Go(func() { m.approval.Run(bg) })
		wg.Go(func() { m.engine.Run(bg) })
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

// resolveDestination maps an outbox destination to its current receiver.
func resolveDestination(ctx context.Context, tx store.Tx, destination string) (*delivery.Target, error) {
	url, secret, ok, err := approval.ResolveDestination(ctx, tx, destination)
	if err != nil || !ok {
		return nil, err
	}
	return &delivery.Target{URL: url, Secret: secret}, nil
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
