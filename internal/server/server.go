// Package server is the one place that assembles AgentOwl: from one Config
// it opens the store, builds the use-cases, the delivery engine and the HTTP
// surfaces, and runs them until Close. `agentowl serve` and every test that
// needs a running server (through servertest) start it here.
package server

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/agentowl/agentowl"
	"github.com/agentowl/agentowl/internal/access"
	"github.com/agentowl/agentowl/internal/admission"
	"github.com/agentowl/agentowl/internal/approval"
	"github.com/agentowl/agentowl/internal/attachment"
	"github.com/agentowl/agentowl/internal/attestation"
	"github.com/agentowl/agentowl/internal/blob"
	"github.com/agentowl/agentowl/internal/console"
	"github.com/agentowl/agentowl/internal/delivery"
	"github.com/agentowl/agentowl/internal/doctor"
	"github.com/agentowl/agentowl/internal/egress"
	"github.com/agentowl/agentowl/internal/httpapi"
	"github.com/agentowl/agentowl/internal/ingress"
	"github.com/agentowl/agentowl/internal/ingress/smtp"
	"github.com/agentowl/agentowl/internal/maintenance"
	"github.com/agentowl/agentowl/internal/notify"
	"github.com/agentowl/agentowl/internal/ratelimit"
	"github.com/agentowl/agentowl/internal/secret"
	"github.com/agentowl/agentowl/internal/store/postgres"
	"github.com/agentowl/agentowl/internal/store/sqlite"
	"github.com/agentowl/agentowl/internal/work"
)

// Config is the whole server's configuration. cmd/agentowl fills it from
// flags and AGENTOWL_* variables through its settings table; tests fill it
// through servertest. Nothing here reads the environment.
type Config struct {
	// DataDir holds the SQLite database, the generated secret key and the
	// bootstrap operator token. Defaults to ./agentowl-data.
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
	// SecretKey seals the stored secrets that must be read back (receiver,
	// endpoint and binding signing secrets, decision bearer secrets): 32
	// bytes. Defaults to the key file DataDir/secret-key, created on first
	// start. Replicas sharing PostgreSQL must share it.
	SecretKey []byte
	// PreviousSecretKey is the key a rotation moves away from: it opens
	// the values it sealed until `agentowl secrets rotate-key` has
	// re-sealed them under SecretKey (docs/operating.md, "The secret
	// key"); it never seals. Defaults to the key file
	// DataDir/secret-key.previous when that exists.
	PreviousSecretKey []byte
	HTTP              httpapi.Config
	// Access bounds token lifetimes and console sessions.
	Access   access.Config
	Approval approval.Config
	// RegisterPerDestination bounds receiver verifications per destination
	// host:port and resolved address, across tenants. Defaults to
	// delivery.DefaultRegisterLimit.
	RegisterPerDestination ratelimit.Limit
	Delivery               delivery.Config
	// NoDelivery runs no delivery engine in this process: changes still
	// record their outbound messages, which wait for a replica that
	// delivers. For replicas that only serve the API (and tests that play the
	// engine's part). Defaults to false.
	NoDelivery bool
	// SoleProcess tells that no other process uses the SQLite store
	// (agentowl serve holds the data directory's lock): the delivery
	// engine then takes over the leases in it at start, which can only be
	// a dead predecessor's. Ignored with PostgreSQL, whose replicas keep
	// lease expiry as the bound.
	SoleProcess bool
	Egress      egress.Config
	Work        work.Config
	Ingress     ingress.Config
	// SMTP is the inbound SMTP listener; off unless SMTP.Listen is set.
	SMTP smtp.Config
	// BlobURL is the private object storage of retained attachments: ""
	// for the directory DataDir/attachments, file:///dir, or
	// s3://bucket?endpoint=…&region=… (internal/blob.Open).
	BlobURL     string
	Attachments attachment.Config
	// Maintenance configures the scheduler: its leadership, the jobs'
	// intervals, the overdue defaults and the retention windows.
	Maintenance maintenance.Config
	// Console configures the web console at /console/.
	Console console.Config
	// Attestation configures decision attestations (docs/attestations.md):
	// their Issuer is the public URL; Retention keeps retired keys
	// published.
	Attestation attestation.Config
	// NoAttestations records decisions without attestations (for measuring
	// their cost). Defaults to false: every approval and denial is signed.
	NoAttestations bool
	// Resolver resolves the host names of every outbound destination: for
	// the egress check and dial, and for the per-address limits. Defaults to
	// the system resolver; tests use one that never leaves the machine.
	Resolver egress.Resolver
	// SQLiteBusyTimeout is how long SQLite waits for a lock another process
	// holds before answering 503. Defaults to 10s.
	SQLiteBusyTimeout time.Duration
	// Clock defaults to the system clock; tests inject a fake one.
	Clock  agentowl.Clock
	Logger *slog.Logger
	// Stdout receives the first-start bootstrap notice. Defaults to nothing.
	Stdout io.Writer
}

func (c *Config) defaults() {
	if c.DataDir == "" {
		c.DataDir = DefaultDataDir
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
	if c.DatabaseURL != "" && !IsPostgresURL(c.DatabaseURL) {
		return errors.New("database URL must start with postgres:// or postgresql://")
	}
	if err := c.Attachments.Validate(); err != nil {
		return err
	}
	return c.Ingress.Validate()
}

// IsPostgresURL reports whether u selects PostgreSQL.
func IsPostgresURL(u string) bool {
	return strings.HasPrefix(u, "postgres://") || strings.HasPrefix(u, "postgresql://")
}

// Server is a running AgentOwl server.
type Server struct {
	cfg  Config
	addr string
	// bootstrapToken is the admin token made on this start, if it was the
	// database's first.
	bootstrapToken string

	store    agentowl.Store
	box      *secret.Box
	access   *access.Service
	approval *approval.Service
	engine   *delivery.Engine
	egress   *egress.Client
	work     *work.Service
	ingress  *ingress.Service
	blobs    *blob.Store
	attach   *attachment.Service
	signer   *attestation.Signer // nil with attestations off
	sched    *maintenance.Scheduler
	notify   *notify.Service
	api      *httpapi.Server
	http     *http.Server
	smtp     *smtp.Server
	smtpAddr string
	cancel   context.CancelFunc
	done     chan struct{}

	closeOnce sync.Once
	closeErr  error
}

// DefaultDataDir is the data directory of a Config that names none.
const DefaultDataDir = "agentowl-data"

// Start opens the store, bootstraps tenant "default" on a database's first
// start, assembles every component and serves until Close. It returns once
// listening; on error nothing is left running.
func Start(ctx context.Context, cfg Config) (*Server, error) {
	cfg.defaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg}
	if err := s.start(ctx); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// start assembles and starts the components; Close undoes what it did.
func (s *Server) start(ctx context.Context) (err error) {
	cfg := s.cfg
	key := cfg.SecretKey
	if key == nil {
		if key, err = KeyFile(cfg.DataDir); err != nil {
			return err
		}
	}
	previous := cfg.PreviousSecretKey
	if previous == nil {
		if previous, err = PreviousKeyFile(cfg.DataDir); err != nil {
			return err
		}
	}
	if s.store, s.box, err = OpenStoreRotating(ctx, cfg.DataDir, cfg.DatabaseURL, key, [][]byte{previous}, cfg.SQLiteBusyTimeout); err != nil {
		return fmt.Errorf("open store: %w", err)
	}
	s.access = access.New(s.store, cfg.Clock, cfg.Access)
	if err := s.bootstrap(ctx); err != nil {
		return err
	}
	if cfg.Resolver != nil {
		cfg.Egress.Resolver, cfg.Delivery.AddrResolver = cfg.Resolver, cfg.Resolver
	}
	if s.egress, err = egress.New(cfg.Egress); err != nil {
		return fmt.Errorf("egress: %w", err)
	}
	if s.engine, err = delivery.New(s.store, cfg.Clock, s.egress, cfg.Delivery, cfg.Logger); err != nil {
		return err
	}
	verifier := delivery.NewVerifier(s.egress, cfg.Clock, nil).
		LimitDestinations(ratelimit.New("register-destination", cfg.RegisterPerDestination, s.store, cfg.Clock), cfg.Resolver)
	s.approval = approval.New(s.store, s.access, cfg.Clock, cfg.Approval,
		&approval.Receivers{Verifier: verifier, CheckURL: s.egress.CheckURL, Wake: s.engine.Wake}, cfg.Logger)
	s.engine.Handle("instance", approval.ResolveDestination)

	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return err
	}
	s.addr = ln.Addr().String()
	wc := cfg.Work
	if wc.PublicURL == "" {
		wc.PublicURL = cfg.PublicURL
	}
	if wc.PublicURL == "" {
		wc.PublicURL = "http://" + s.addr
	}
	if s.work, err = work.New(s.store, cfg.Clock, s.egress.CheckURL, s.engine.Wake, wc, cfg.Logger); err != nil {
		ln.Close()
		return err
	}
	if !cfg.NoAttestations {
		ac := cfg.Attestation
		ac.Issuer = s.work.Config().PublicURL
		ac.Retention = KeyPublication(ac.Retention, cfg.Maintenance.Retention.Audit)
		if ac.Logger == nil {
			ac.Logger = cfg.Logger
		}
		signer, err := attestation.New(s.store, cfg.Clock, ac)
		if err == nil {
			err = signer.Ensure(ctx)
		}
		if err != nil {
			ln.Close()
			return fmt.Errorf("attestation key: %w", err)
		}
		s.signer = signer
		s.approval.UseAttestations(signer)
		s.work.UseAttestations(signer)
		if cfg.Maintenance.AuditCheckpoints.Signer == nil {
			cfg.Maintenance.AuditCheckpoints.Signer = auditCheckpointSigner{s.store} // the audit chain's checkpoints
		}
	}
	s.engine.Handle("endpoint", s.work.ResolveDestination)
	s.engine.Handle("decision", s.work.ResolveDecisionDestination)
	// The attachment profile may lower the email message limit (hosted: 1
	// MB); an attachment's file ceiling is the email part limit.
	ac := cfg.Attachments.WithDefaults()
	if mail := &cfg.Ingress.Mail; ac.MaxMessageBytes > 0 && (mail.MaxMessageBytes <= 0 || mail.MaxMessageBytes > ac.MaxMessageBytes) {
		mail.MaxMessageBytes = ac.MaxMessageBytes
	}
	s.ingress = ingress.New(s.store, cfg.Clock, s.work, cfg.Ingress)
	if s.blobs, err = blob.Open(ctx, cfg.BlobURL, cfg.DataDir); err != nil {
		ln.Close()
		return err
	}
	ac.MaxFileBytes = s.ingress.MailLimits().MaxPartBytes
	if s.attach, err = attachment.New(s.store, s.blobs, cfg.Clock, ac, cfg.Logger); err != nil {
		ln.Close()
		return err
	}
	s.ingress.SetPartSinks(ingress.RetainParts(s.attach))
	if cfg.Maintenance.RetainedBytes == nil {
		cfg.Maintenance.RetainedBytes = s.attach // the retained_bytes job: expired files and orphaned uploads
	}
	if s.sched, err = maintenance.New(s.store, cfg.Clock, cfg.Maintenance, maintenance.Services{Approval: s.approval, Work: s.work, Ingress: s.ingress}, cfg.Logger); err != nil {
		ln.Close()
		return err
	}

	doc := doctor.New(s.store, cfg.Clock, doctor.Config{MaxCallbacksPerWork: s.work.Config().MaxCallbacksPerWork,
		RetainedBytesLimit: s.attach.Config().TenantRetainedBytes, CallbackRate: s.work.CallbackRate(), Scheduler: s.sched,
		Overdue: s.sched, Engines: s.sched, SMTPDomain: cfg.Ingress.SMTPDomain})
	s.notify = notify.New(s.store, cfg.Clock)
	hc := cfg.HTTP
	hc.PublicURL = s.work.Config().PublicURL
	hc.Admission = admissionFor(hc.Admission, s.store.Dialect())
	if !cfg.NoDelivery && hc.Admission.Backlog == nil {
		// Writes wait for their turn only as long as the engine's backlog
		// leaves of the admission wait: the delay from a write to its
		// delivery stays bounded, and a lagging engine gets the CPU and the
		// database back.
		hc.Admission.Backlog = s.engine.Backlog
	}
	cc := cfg.Console
	cc.PublicURL = hc.PublicURL
	web, err := console.New(console.Services{Access: s.access, Approval: s.approval, Work: s.work, Notify: s.notify,
		Ingress: s.ingress, Attachments: s.attach,
		Clock: cfg.Clock, Log: cfg.Logger, StatusOf: httpapi.StatusOf}, cc)
	if err != nil {
		ln.Close()
		return err
	}
	s.api = httpapi.New(httpapi.Services{Access: s.access, Approval: s.approval, Work: s.work, Ingress: s.ingress,
		Doctor: doc, Database: s.store, Deliveries: delivery.NewViews(s.store), Clock: cfg.Clock, Log: cfg.Logger, Maintenance: s.sched, Attachments: s.attach,
		Notify: s.notify, Console: web}, hc)
	s.api.Register(s.engine.Metrics().Collectors(s.store)...)
	s.api.Register(s.sched.Collectors()...)
	s.http = s.api.HTTPServer()

	if cfg.SoleProcess && cfg.DatabaseURL == "" && !cfg.NoDelivery {
		// No other process serves this SQLite file: the message and slot
		// leases in it are a dead predecessor's (kill -9, a crash), and
		// waiting for them to lapse would protect nothing. PostgreSQL
		// replicas keep lease expiry as the bound: a frozen replica may
		// still be sending.
		if err := s.engine.TakeOverLeases(ctx); err != nil {
			ln.Close()
			return fmt.Errorf("take over delivery leases: %w", err)
		}
	}
	bg, cancel := context.WithCancel(context.Background())
	s.cancel, s.done = cancel, make(chan struct{})
	go func() {
		defer close(s.done)
		var wg sync.WaitGroup
		if !s.cfg.NoDelivery {
			wg.Go(func() { s.engine.Run(bg) })
		}
		wg.Go(func() { s.sched.Run(bg) })
		wg.Wait()
	}()
	if cfg.SMTP.Listen != "" {
		if err := s.startSMTP(); err != nil {
			ln.Close()
			return err
		}
	}
	limited := s.api.LimitListener(ln)
	go func() {
		if err := s.http.Serve(limited); err != nil && !errors.Is(err, http.ErrServerClosed) {
			cfg.Logger.Error("http server stopped", "err", err)
		}
	}()
	cfg.Logger.Info("agentowl serving", "addr", s.addr, "database", s.store.Dialect())
	return nil
}

// startSMTP starts the inbound SMTP listener.
func (s *Server) startSMTP() error {
	srv, err := smtp.New(s.cfg.SMTP, s.ingress, s.cfg.Clock, s.cfg.Logger)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", s.cfg.SMTP.Listen)
	if err != nil {
		return fmt.Errorf("smtp: %w", err)
	}
	s.smtp, s.smtpAddr = srv, ln.Addr().String()
	go func() {
		if err := srv.Serve(ln); err != nil {
			s.cfg.Logger.Error("smtp server stopped", "err", err)
		}
	}()
	s.cfg.Logger.Info("agentowl receiving mail", "addr", s.smtpAddr)
	return nil
}

// SMTPAddr is the bound SMTP listen address ("" without a listener).
func (s *Server) SMTPAddr() string { return s.smtpAddr }

// Addr is the bound listen address.
func (s *Server) Addr() string { return s.addr }

// URL is the server's base URL on its listen address.
func (s *Server) URL() string { return "http://" + s.addr }

// Config returns the server's configuration, its defaults filled in: tests
// start a second replica of the same database from it.
func (s *Server) Config() Config { return s.cfg }

// BootstrapToken is the admin operator token of tenant "default" made when
// this start was the database's first ("" otherwise).
func (s *Server) BootstrapToken() string { return s.bootstrapToken }

// Store returns the open store. Store, Access, Approval, Engine, Egress,
// Work and Box expose the assembled components to tests and benchmarks that
// drive them past the HTTP API.
func (s *Server) Store() agentowl.Store { return s.store }

// Access returns the identity use-cases.
func (s *Server) Access() *access.Service { return s.access }

// Approval returns the AAP provider use-cases.
func (s *Server) Approval() *approval.Service { return s.approval }

// Engine returns the delivery engine.
func (s *Server) Engine() *delivery.Engine { return s.engine }

// Egress returns the SSRF-safe client every outbound connection uses.
func (s *Server) Egress() *egress.Client { return s.egress }

// Work returns the agent-work use-cases.
func (s *Server) Work() *work.Service { return s.work }

// Notify returns the in-app notification use-cases.
func (s *Server) Notify() *notify.Service { return s.notify }

// Ingress returns the channel ingress use-cases.
func (s *Server) Ingress() *ingress.Service { return s.ingress }

// Attachments returns the retained-attachment use-cases: channels stream
// parts through it; maintenance calls its sweeps.
func (s *Server) Attachments() *attachment.Service { return s.attach }

// Blobs returns the object store of retained bytes.
func (s *Server) Blobs() *blob.Store { return s.blobs }

// Scheduler returns the maintenance scheduler.
func (s *Server) Scheduler() *maintenance.Scheduler { return s.sched }

// Box returns the sealing of stored secrets.
func (s *Server) Box() *secret.Box { return s.box }

// bootstrap creates tenant "default" and an admin operator token on a
// database's first start, writing the token to DataDir/operator-token
// (mode 0600).
func (s *Server) bootstrap(ctx context.Context) error {
	empty, err := s.access.NeedsBootstrap(ctx)
	if err != nil || !empty {
		return err
	}
	res, err := s.access.Bootstrap(ctx, "default")
	if err != nil {
		return fmt.Errorf("bootstrap: %w", err)
	}
	s.bootstrapToken = res.Token
	path := filepath.Join(s.cfg.DataDir, "operator-token")
	if err := os.MkdirAll(s.cfg.DataDir, 0o700); err != nil {
		return err
	}
	if err := os.WriteFile(path, []byte(res.Token+"\n"), 0o600); err != nil {
		return fmt.Errorf("write operator token: %w", err)
	}
	abs, _ := filepath.Abs(path)
	fmt.Fprintf(s.cfg.Stdout, "First start: created tenant %q and an admin operator token in %s (mode 0600).\n", res.Tenant.Name, abs)
	fmt.Fprintf(s.cfg.Stdout, "Use it with the CLI:  export AGENTOWL_TOKEN=$(cat %s)\n", abs)
	return nil
}

// Close stops serving (letting in-flight requests finish for up to 30s),
// stops the background loops and closes the store. Later calls return the
// first call's result.
func (s *Server) Close() error {
	s.closeOnce.Do(func() { s.closeErr = s.close() })
	return s.closeErr
}

func (s *Server) close() error {
	var err error
	if s.cancel != nil {
		// Delivery and the scheduler stop while the HTTP server drains:
		// the engine stops claiming at once, lets the attempts under way
		// finish within their timeout and hands its leases back.
		s.cancel()
	}
	if s.approval != nil {
		s.approval.Drain() // long-polls answer now rather than hold the shutdown for their 30 s
	}
	if s.http != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		err = s.http.Shutdown(ctx)
	}
	if s.smtp != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		err = errors.Join(err, s.smtp.Close(ctx))
	}
	if s.cancel != nil {
		s.cancel()
		<-s.done
	}
	if s.signer != nil {
		// Decisions committed but not yet signed are signed now rather
		// than at their first read or the next replica's sweep.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if ferr := s.signer.Flush(ctx); ferr != nil {
			s.cfg.Logger.Warn("attestations left for the sweep at shutdown", "err", ferr)
		}
		cancel()
	}
	if s.egress != nil {
		s.egress.CloseIdleConnections()
	}
	if s.store != nil {
		err = errors.Join(err, s.store.Close())
	}
	if s.blobs != nil {
		err = errors.Join(err, s.blobs.Close())
	}
	return err
}

// OpenStore opens the configured store, its secrets sealed under key. It
// refuses a key other than the one that sealed the database's secrets. A
// nil key opens it for offline administration, which touches no sealed
// secret.
func OpenStore(ctx context.Context, dataDir, databaseURL string, key []byte, busyTimeout time.Duration) (agentowl.Store, *secret.Box, error) {
	return OpenStoreRotating(ctx, dataDir, databaseURL, key, nil, busyTimeout)
}

// OpenStoreRotating is OpenStore with the previous keys of a key rotation:
// they open the values they sealed, key seals. Opened with a new key and
// the database's key as previous, the store starts a rotation (the
// database then refuses the old key alone); `agentowl secrets rotate-key`
// finishes it. A key that opens none of the database's secrets is refused
// with a message naming the settings.
func OpenStoreRotating(ctx context.Context, dataDir, databaseURL string, key []byte, previous [][]byte, busyTimeout time.Duration) (agentowl.Store, *secret.Box, error) {
	var box *secret.Box
	if key != nil {
		var err error
		if box, err = secret.New(key, previous...); err != nil {
			return nil, nil, err
		}
	}
	var st agentowl.Store
	var err error
	if databaseURL != "" {
		st, err = postgres.Open(ctx, databaseURL, box)
	} else {
		st, err = sqlite.OpenWith(ctx, filepath.Join(dataDir, "agentowl.db"), box, sqlite.Config{BusyTimeout: busyTimeout})
	}
	if err != nil {
		return nil, nil, keyError(err)
	}
	return st, box, nil
}

// keyError explains a store's refusal of the secret keys in terms of the
// settings.
func keyError(err error) error {
	switch {
	case errors.Is(err, secret.ErrKeyMismatch):
		// Another replica's data directory, or a changed AGENTOWL_SECRET_KEY:
		// secrets sealed under the first key could not be opened.
		return fmt.Errorf("the secret key opens none of this database's secrets: it differs from the one that sealed them "+
			"(and, during a key rotation, from the previous one): give every replica the same AGENTOWL_SECRET_KEY "+
			"(or the same DATA-DIR/secret-key file) (%w)", err)
	case errors.Is(err, secret.ErrKeyRetired):
		return fmt.Errorf("the secret key was retired by a finished key rotation: this database's secrets are sealed by the new key; "+
			"give the new key as AGENTOWL_SECRET_KEY (or DATA-DIR/secret-key) (%w)", err)
	case errors.Is(err, secret.ErrKeyRotating):
		return fmt.Errorf("a secret key rotation to a new key is under way: give the new key as AGENTOWL_SECRET_KEY (or DATA-DIR/secret-key) "+
			"and this one as AGENTOWL_SECRET_KEY_PREVIOUS (or DATA-DIR/secret-key.previous) (%w)", err)
	case errors.Is(err, secret.ErrPreviousKeyNeeded):
		return fmt.Errorf("a secret key rotation is unfinished: some secrets are still sealed by the previous key; give it as "+
			"AGENTOWL_SECRET_KEY_PREVIOUS (or DATA-DIR/secret-key.previous) until `agentowl secrets rotate-key` reports "+
			"that the old key can be removed (%w)", err)
	case errors.Is(err, secret.ErrRotationUnfinished):
		return fmt.Errorf("the database's secret key is given as the previous key of a new rotation while an earlier rotation "+
			"is unfinished: finish that one first (`agentowl secrets rotate-key` with its keys) (%w)", err)
	}
	return err
}

// PreviousKeyFile returns the key in DataDir/secret-key.previous, nil
// when there is no such file.
func PreviousKeyFile(dataDir string) ([]byte, error) {
	path := filepath.Join(dataDir, "secret-key.previous")
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	key, err := base64.StdEncoding.DecodeString(strings.TrimSpace(string(data)))
	if err != nil || len(key) != secret.KeySize {
		return nil, fmt.Errorf("%s must hold the base64 of exactly 32 bytes", path)
	}
	return key, nil
}

// KeyFile returns the key in DataDir/secret-key, creating it (mode 0600,
// its directory 0700 when missing) on first start.
func KeyFile(dataDir string) ([]byte, error) {
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
		return KeyFile(dataDir)
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

// admissionFor completes the admission queues' configuration for a store
// dialect. On PostgreSQL a surface runs at most as many writes at once as
// the store has connections: with more, a surface's own admitted writes
// queued for a connection, a wait the admission queue does not bound
// (BENCHMARKS.md, session 8: flat-out decision→ack p99 340–375 ms against
// 524–635 ms with 64). The limit is per surface: several busy surfaces,
// the delivery engine and maintenance still share the connections. SQLite's
// single writer commits the writes it is given together, so more of them
// at once make its batches larger.
func admissionFor(c admission.Config, dialect string) admission.Config {
	if c.Concurrency == 0 && dialect == "postgres" {
		c.Concurrency = postgres.MaxConns
	}
	return c
}
