package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentowl/agentowl/aap"
	"github.com/agentowl/agentowl/aap/sqlite"
)

// receiverCommand is `agentowl receiver …`: the standalone AAP webhook
// receiver for harnesses that stop between tool calls, and its provisioning.
func (c *cli) receiverCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "receiver", Short: "Run an AAP webhook receiver for harnesses, and provision instances that use it"}
	cmd.AddCommand(c.receiverServeCommand(), c.receiverProvisionCommand(), c.receiverReplaceCommand())
	return cmd
}

func receiverDataDir(flag string) string {
	return envOr(flag, "AGENTOWL_RECEIVER_DATA_DIR", "agentowl-receiver")
}

func receiverDBPath(dataDir string) string { return filepath.Join(dataDir, "receiver.db") }

// receiverConfig is `receiver serve`'s configuration.
type receiverConfig struct {
	DataDir       string
	Listen        string
	Path          string
	TLSCert       string
	TLSKey        string
	SelfSigned    bool
	WakeupListen  string
	Exec          string
	ExecWorkers   int
	ExecTimeout   time.Duration
	RetryDelay    time.Duration
	Logger        *slog.Logger
	Stdout        io.Writer
	Stderr        io.Writer
	selfSignedPEM string // set by Run: where the generated certificate is
}

// receiverServer is a running `receiver serve`.
type receiverServer struct {
	cfg        receiverConfig
	store      aap.Store
	receiver   *aap.Receiver
	servers    []*http.Server
	addr       string
	wakeupAddr string
	cancel     context.CancelFunc
	wg         sync.WaitGroup
}

func (s *receiverServer) run(ctx context.Context) error {
	cfg := &s.cfg
	if cfg.TLSCert != "" && cfg.SelfSigned {
		return errors.New("pass either --tls-cert/--tls-key or --tls-self-signed")
	}
	if (cfg.TLSCert == "") != (cfg.TLSKey == "") {
		return errors.New("--tls-cert and --tls-key go together")
	}
	st, err := sqlite.Open(ctx, receiverDBPath(cfg.DataDir))
	if err != nil {
		return fmt.Errorf("open receiver store: %w", err)
	}
	s.store = st
	if s.receiver, err = aap.NewReceiver(aap.ReceiverConfig{Store: st, Logger: cfg.Logger}); err != nil {
		return err
	}
	var tlsCfg *tls.Config
	switch {
	case cfg.SelfSigned:
		cfg.TLSCert, cfg.TLSKey = filepath.Join(cfg.DataDir, "cert.pem"), filepath.Join(cfg.DataDir, "key.pem")
		if err := ensureSelfSigned(cfg.TLSCert, cfg.TLSKey); err != nil {
			return fmt.Errorf("self-signed certificate: %w", err)
		}
		cfg.selfSignedPEM = cfg.TLSCert
		fallthrough
	case cfg.TLSCert != "":
		cert, err := tls.LoadX509KeyPair(cfg.TLSCert, cfg.TLSKey)
		if err != nil {
			return fmt.Errorf("TLS: %w", err)
		}
		tlsCfg = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	default:
		cfg.Logger.Warn("receiver serving plain HTTP: put a TLS-terminating proxy in front of it (providers require HTTPS)")
	}
	mux := http.NewServeMux()
	mux.Handle(cfg.Path, s.receiver)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return err
	}
	s.addr = ln.Addr().String()
	if tlsCfg != nil {
		ln = tls.NewListener(ln, tlsCfg)
	}
	s.serve(ln, mux)
	if cfg.WakeupListen != "" {
		wl, err := net.Listen("tcp", cfg.WakeupListen)
		if err != nil {
			return fmt.Errorf("wake-up API: %w", err)
		}
		s.wakeupAddr = wl.Addr().String()
		s.serve(wl, s.receiver.WakeupAPI(cfg.RetryDelay))
	}
	bg, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	if cfg.Exec != "" {
		for range max(cfg.ExecWorkers, 1) {
			s.wg.Go(func() {
				_ = s.receiver.Dispatch(bg, aap.DispatchConfig{Handle: s.execWakeup, Lease: cfg.RetryDelay})
			})
		}
	}
	s.wg.Go(func() {
		for {
			if n, err := s.receiver.Purge(bg); err != nil {
				cfg.Logger.Error("purge events", "err", err)
			} else if n > 0 {
				cfg.Logger.Info("purged events past retention", "count", n)
			}
			select {
			case <-bg.Done():
				return
			case <-time.After(time.Hour):
			}
		}
	})
	return nil
}

func (s *receiverServer) serve(ln net.Listener, h http.Handler) {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second, IdleTimeout: 2 * time.Minute}
	s.servers = append(s.servers, srv)
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.cfg.Logger.Error("receiver listener stopped", "err", err)
		}
	}()
}

// execWakeup runs the configured command for one wake-up; exit status 0
// acknowledges it.
func (s *receiverServer) execWakeup(ctx context.Context, w aap.Wakeup) error {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.ExecTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "/bin/sh", "-c", s.cfg.Exec)
	cmd.Env = append(os.Environ(), "AAP_EVENT_ID="+w.EventID, "AAP_REQUEST_ID="+w.RequestID,
		"AAP_INSTANCE_ID="+w.InstanceID, "AAP_ATTEMPT="+strconv.Itoa(w.Attempts))
	cmd.Stdout, cmd.Stderr = s.cfg.Stdout, s.cfg.Stderr
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("--exec command: %w", err)
	}
	s.cfg.Logger.Info("wake-up handled", "event_id", w.EventID, "request_id", w.RequestID)
	return nil
}

func (s *receiverServer) close() error {
	var err error
	for _, srv := range s.servers {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err = errors.Join(err, srv.Shutdown(ctx))
		cancel()
	}
	if s.cancel != nil {
		s.cancel()
		s.wg.Wait()
	}
	if s.store != nil {
		err = errors.Join(err, s.store.Close())
	}
	return err
}

func (c *cli) receiverServeCommand() *cobra.Command {
	var cfg receiverConfig
	var dataDir, listen string
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Receive AAP webhooks, record them durably, and wake harnesses (long-poll API and/or --exec)",
		Long: `Receives AAP webhooks on --path, answers verifications for registrations that
'agentowl receiver provision' stored, verifies and durably records
request.resolved notifications (SQLite in --data-dir), and wakes harnesses:

  - the local long-poll API on --wakeup-listen:
      GET  /wakeups?wait=30s          pending wake-ups (leased for --retry-delay)
      POST /wakeups/{event-id}/ack    acknowledge one
  - and/or --exec: a shell command run per wake-up with AAP_REQUEST_ID,
    AAP_INSTANCE_ID, AAP_EVENT_ID and AAP_ATTEMPT set; exit status 0
    acknowledges it, anything else retries it after --retry-delay.

Providers require HTTPS: pass --tls-cert/--tls-key, or --tls-self-signed (writes
cert.pem for 127.0.0.1, ::1 and localhost into --data-dir), or serve plain HTTP
behind a TLS-terminating proxy.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg.DataDir = receiverDataDir(dataDir)
			cfg.Listen = envOr(listen, "AGENTOWL_RECEIVER_LISTEN", "127.0.0.1:8471")
			cfg.Stdout, cfg.Stderr = c.stdout, c.stderr
			cfg.Logger = slog.New(slog.NewJSONHandler(c.stderr, nil))
			s := &receiverServer{cfg: cfg}
			if err := s.run(cmd.Context()); err != nil {
				s.close()
				return err
			}
			scheme := "https"
			if s.cfg.TLSCert == "" {
				scheme = "http"
			}
			out := map[string]any{"url": scheme + "://" + s.addr + cfg.Path, "data_dir": cfg.DataDir}
			if s.wakeupAddr != "" {
				out["wakeup_api"] = "http://" + s.wakeupAddr + "/wakeups"
			}
			if s.cfg.selfSignedPEM != "" {
				out["certificate"] = s.cfg.selfSignedPEM
			}
			if err := c.emit(out, func(w io.Writer) {
				fmt.Fprintf(w, "AgentOwl receiver listening on %s (SQLite in %s)\n", out["url"], cfg.DataDir)
				if s.wakeupAddr != "" {
					fmt.Fprintf(w, "Wake-up API on %s\n", out["wakeup_api"])
				}
				if s.cfg.selfSignedPEM != "" {
					fmt.Fprintf(w, "Self-signed certificate: %s (give it to the provider: AGENTOWL_EGRESS_CA_FILE)\n", s.cfg.selfSignedPEM)
				}
			}); err != nil {
				s.close()
				return err
			}
			<-cmd.Context().Done()
			return s.close()
		},
	}
	f := cmd.Flags()
	f.StringVar(&dataDir, "data-dir", "", "receiver data directory (env AGENTOWL_RECEIVER_DATA_DIR, default ./agentowl-receiver)")
	f.StringVar(&listen, "listen", "", "webhook listen address (env AGENTOWL_RECEIVER_LISTEN, default 127.0.0.1:8471)")
	f.StringVar(&cfg.Path, "path", "/aap/events", "path that receives webhooks")
	f.StringVar(&cfg.TLSCert, "tls-cert", "", "PEM certificate (chain) for HTTPS")
	f.StringVar(&cfg.TLSKey, "tls-key", "", "PEM private key for HTTPS")
	f.BoolVar(&cfg.SelfSigned, "tls-self-signed", false, "serve HTTPS with a self-signed certificate for 127.0.0.1, ::1 and localhost kept in --data-dir")
	f.StringVar(&cfg.WakeupListen, "wakeup-listen", "127.0.0.1:8472", "local address of the long-poll wake-up API (\"\" disables it)")
	f.StringVar(&cfg.Exec, "exec", "", "shell command to run per wake-up (env AAP_REQUEST_ID, AAP_INSTANCE_ID, AAP_EVENT_ID, AAP_ATTEMPT)")
	f.IntVar(&cfg.ExecWorkers, "exec-concurrency", 4, "how many --exec commands may run at once")
	f.DurationVar(&cfg.ExecTimeout, "exec-timeout", 5*time.Minute, "how long one --exec command may run")
	f.DurationVar(&cfg.RetryDelay, "retry-delay", 10*time.Second, "how long a handed-out wake-up waits before it is handed out again unless acknowledged")
	return cmd
}

// provisionFlags are the flags shared by provision and replace-delivery.
type provisionFlags struct {
	provider, token, dataDir, url, caFile string
}

func (p *provisionFlags) add(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&p.provider, "provider", "", "provider base URL (env AGENTOWL_URL, default http://127.0.0.1:8470)")
	f.StringVar(&p.token, "provisioner-token", "", "provisioner token (env AGENTOWL_PROVISIONER_TOKEN)")
	f.StringVar(&p.dataDir, "data-dir", "", "the receiver's data directory, as given to receiver serve (env AGENTOWL_RECEIVER_DATA_DIR, default ./agentowl-receiver)")
	f.StringVar(&p.url, "url", "", "the receiver's public HTTPS URL, such as https://harness.example.com/aap/events")
	f.StringVar(&p.caFile, "ca-file", "", "extra PEM roots to trust for the provider's TLS")
	cmd.MarkFlagRequired("url")
}

func (p *provisionFlags) open(ctx context.Context) (*aap.Provisioner, aap.Store, error) {
	token := envOr(p.token, "AGENTOWL_PROVISIONER_TOKEN", "")
	if token == "" {
		return nil, nil, errors.New("no provisioner token: pass --provisioner-token or set AGENTOWL_PROVISIONER_TOKEN")
	}
	hc := &http.Client{Timeout: 60 * time.Second}
	tlsConfig, err := clientTLS(p.caFile)
	if err != nil {
		return nil, nil, err
	}
	if tlsConfig != nil {
		hc.Transport = &http.Transport{TLSClientConfig: tlsConfig}
	}
	st, err := sqlite.Open(ctx, receiverDBPath(receiverDataDir(p.dataDir)))
	if err != nil {
		return nil, nil, fmt.Errorf("open receiver store: %w", err)
	}
	client := &aap.Client{BaseURL: envOr(p.provider, "AGENTOWL_URL", "http://127.0.0.1:8470"), Token: token, HTTP: hc}
	return &aap.Provisioner{Provider: client, Registrations: st}, st, nil
}

// submit sends the saved submission at path (for name, to this receiver's
// URL) with call, on the provisioner of these flags. A failed call is
// retried by running the same command again: it sends the same submission.
func (p *provisionFlags) submit(ctx context.Context, path, name, what string, call func(*aap.Provisioner, *aap.Submission) error) (*aap.Submission, error) {
	sub, err := pendingSubmission(path, name, p.url)
	if err != nil {
		return nil, err
	}
	prov, st, err := p.open(ctx)
	if err != nil {
		return nil, err
	}
	defer st.Close()
	if err := call(prov, sub); err != nil {
		return nil, fmt.Errorf("%s: %w (run the same command again to retry the same submission)", what, err)
	}
	return sub, nil
}

var safeName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

// pendingSubmission returns the saved submission at path if it is for the
// same input, a new saved one if there is none, or an error if the saved one
// is for other input.
func pendingSubmission(path, name, url string) (*aap.Submission, error) {
	s, err := aap.LoadSubmission(path)
	switch {
	case err == nil:
		if s.URL != url || s.Name != name {
			return nil, fmt.Errorf("%s holds a submission for %s to %s; use another name, or remove the file to start over", path, s.Name, s.URL)
		}
		return s, nil
	case errors.Is(err, os.ErrNotExist):
		s = aap.NewSubmission(name, url)
		return s, s.Save(path)
	}
	return nil, err
}

func (c *cli) receiverProvisionCommand() *cobra.Command {
	var pf provisionFlags
	var name, credFile string
	cmd := &cobra.Command{
		Use:   "provision",
		Short: "Create an AAP instance whose webhooks go to this receiver, and store its credential (mode 0600)",
		Long: `Generates a registration ID and a whsec_ signing secret, stores their
association in the receiver's store (--data-dir, the one 'receiver serve'
uses; the receiver must be running and reachable by the provider), then
creates the instance with POST /v1/instances. The prepared submission is kept
in DATA-DIR/provisioning/NAME.json, so running the same command again retries
the same submission (same Idempotency-Key) and returns the same instance. The
credential is written with mode 0600 to --credential-file (default
DATA-DIR/credentials/NAME.json); give that file to the harness, never the
signing secret.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if !safeName.MatchString(name) {
				return errors.New("--name must be 1-128 letters, digits, '.', '_' or '-'")
			}
			dataDir := receiverDataDir(pf.dataDir)
			if credFile == "" {
				credFile = filepath.Join(dataDir, "credentials", name+".json")
			}
			var cred *aap.Credential
			_, err := pf.submit(cmd.Context(), filepath.Join(dataDir, "provisioning", name+".json"), name, "provision",
				func(p *aap.Provisioner, sub *aap.Submission) (err error) {
					cred, err = p.Provision(cmd.Context(), sub)
					return err
				})
			if err != nil {
				return err
			}
			if err := cred.Save(credFile); err != nil {
				return fmt.Errorf("save credential: %w", err)
			}
			abs, _ := filepath.Abs(credFile)
			out := map[string]any{"instance_id": cred.InstanceID, "instance_name": cred.InstanceName,
				"registration_id": cred.RegistrationID, "credential_file": abs}
			return c.emit(out, func(w io.Writer) {
				fmt.Fprintf(w, "Instance %s (%s) delivers to %s\nCredential stored in %s (mode 0600)\n", cred.InstanceID, cred.InstanceName, pf.url, abs)
			})
		},
	}
	pf.add(cmd)
	cmd.Flags().StringVar(&name, "name", "", "instance name")
	cmd.Flags().StringVar(&credFile, "credential-file", "", "where to write the credential (default DATA-DIR/credentials/NAME.json)")
	cmd.MarkFlagRequired("name")
	return cmd
}

func (c *cli) receiverReplaceCommand() *cobra.Command {
	var pf provisionFlags
	var instance string
	cmd := &cobra.Command{
		Use:   "replace-delivery",
		Short: "Point an instance's webhooks at this receiver with a new registration and secret (PATCH /v1/instances/{id})",
		RunE: func(cmd *cobra.Command, args []string) error {
			dataDir := receiverDataDir(pf.dataDir)
			if !safeName.MatchString(instance) {
				return errors.New("--instance must be an instance ID")
			}
			path := filepath.Join(dataDir, "provisioning", "replace-"+instance+".json")
			sub, err := pf.submit(cmd.Context(), path, "", "replace delivery", func(p *aap.Provisioner, sub *aap.Submission) error {
				return p.ReplaceDelivery(cmd.Context(), instance, sub)
			})
			if err != nil {
				return err
			}
			// The next replacement is another submission with new values.
			_ = os.Remove(path)
			out := map[string]any{"instance_id": instance, "registration_id": sub.RegistrationID, "url": pf.url}
			return c.emit(out, func(w io.Writer) {
				fmt.Fprintf(w, "Instance %s now delivers to %s (registration %s)\n", instance, pf.url, sub.RegistrationID)
			})
		},
	}
	pf.add(cmd)
	cmd.Flags().StringVar(&instance, "instance", "", "instance ID")
	cmd.MarkFlagRequired("instance")
	return cmd
}

// ensureSelfSigned writes a self-signed certificate for 127.0.0.1, ::1 and
// localhost to certPath (and its key, mode 0600, to keyPath) unless both
// exist.
func ensureSelfSigned(certPath, keyPath string) error {
	if _, err := os.Stat(certPath); err == nil {
		if _, err := os.Stat(keyPath); err == nil {
			return nil
		}
	}
	if err := os.MkdirAll(filepath.Dir(certPath), 0o700); err != nil {
		return err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial, Subject: pkix.Name{CommonName: "agentowl receiver"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(2 * 365 * 24 * time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, BasicConstraintsValid: true, IsCA: true,
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}, DNSNames: []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return err
	}
	if err := os.WriteFile(keyPath, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		return err
	}
	return os.WriteFile(certPath, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644)
}
