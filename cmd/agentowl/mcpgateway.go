package main

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentowl/agentowl/aap"
	"github.com/agentowl/agentowl/aap/sqlite"
	"github.com/agentowl/agentowl/internal/buildinfo"
	"github.com/agentowl/agentowl/internal/mcpgateway"
)

// mcpGatewayCommand is `agentowl mcp-gateway …`: the MCP approval gateway
// (docs/mcp-gateway.md).
func (c *cli) mcpGatewayCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "mcp-gateway", Short: "Run the MCP approval gateway: agents reach MCP tools only through approvals"}
	cmd.AddCommand(c.mcpGatewayServeCommand(), c.mcpGatewayProvisionCommand(), c.mcpGatewayTokenCommand())
	return cmd
}

// mcpGateway is a running `mcp-gateway serve`.
type mcpGateway struct {
	store aap.Store
	gw    *mcpgateway.Gateway
	srv   *http.Server
	rsrv  *http.Server // the AAP receiver (asynchronous mode)
	addr  string
	url   string
}

// startGatewayReceiver serves the gateway's AAP webhook receiver
// (asynchronous mode) on its own listener.
func startGatewayReceiver(rc *mcpgateway.ReceiverConfig, st aap.Store, log *slog.Logger) (*aap.Receiver, *http.Server, error) {
	r, err := aap.NewReceiver(aap.ReceiverConfig{Store: st, Logger: log})
	if err != nil {
		return nil, nil, err
	}
	ln, err := net.Listen("tcp", rc.Listen)
	if err != nil {
		return r, nil, fmt.Errorf("receiver: %w", err)
	}
	if rc.TLSCert != "" {
		cert, err := tls.LoadX509KeyPair(rc.TLSCert, rc.TLSKey)
		if err != nil {
			ln.Close()
			return r, nil, fmt.Errorf("receiver TLS: %w", err)
		}
		ln = tls.NewListener(ln, &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12})
	} else {
		log.Warn("the gateway's AAP receiver serves plain HTTP: put a TLS-terminating proxy in front of it (providers require HTTPS)")
	}
	mux := http.NewServeMux()
	mux.Handle(rc.Path, r)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	return r, srv, nil
}

// startMCPGateway opens the store, connects the upstreams and, unless
// listen is false, serves the agents' endpoint.
func startMCPGateway(ctx context.Context, cfg *mcpgateway.Config, log *slog.Logger, listen bool) (*mcpGateway, error) {
	cred, err := aap.LoadCredential(cfg.CredentialPath())
	if err != nil {
		return nil, fmt.Errorf("instance credential: %w (run 'agentowl mcp-gateway provision' first)", err)
	}
	st, err := sqlite.Open(ctx, cfg.DataPath("gateway.db"))
	if err != nil {
		return nil, fmt.Errorf("open the gateway's store: %w", err)
	}
	m := &mcpGateway{store: st}
	// Long polls last up to 30s; the client's timeout leaves room for them.
	client := cred.Client(&http.Client{Timeout: 60 * time.Second, Transport: mcpgateway.PooledTransport()})
	opts := mcpgateway.Options{Provider: client, Store: st, Logger: log, Version: buildinfo.Get().Version}
	if cfg.Receiver != nil {
		if opts.Receiver, m.rsrv, err = startGatewayReceiver(cfg.Receiver, st, log); err != nil {
			st.Close()
			return nil, err
		}
	}
	m.gw, err = mcpgateway.New(ctx, cfg, opts)
	if err != nil {
		m.close()
		return nil, err
	}
	if !listen {
		return m, nil
	}
	mux := http.NewServeMux()
	mux.Handle(cfg.Path, m.gw.Handler())
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		m.close()
		return nil, err
	}
	m.addr = ln.Addr().String()
	m.url = "http://" + m.addr + cfg.Path
	m.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = m.srv.Serve(ln) }()
	return m, nil
}

func (m *mcpGateway) close() error {
	var errs []error
	if m.gw != nil { // first: waiting calls end, their executions stay for the next start
		errs = append(errs, m.gw.Close())
	}
	for _, srv := range []*http.Server{m.srv, m.rsrv} {
		if srv != nil {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			if err := srv.Shutdown(ctx); err != nil {
				srv.Close()
			}
			cancel()
		}
	}
	errs = append(errs, m.store.Close())
	return errors.Join(errs...)
}

func (c *cli) mcpGatewayServeCommand() *cobra.Command {
	var file, agentName string
	var stdio, verify bool
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Serve agents over Streamable HTTP (or stdio), gating tool calls of the upstream MCP servers through AAP approvals",
		Long: `Connects to the upstream MCP servers of --config (stdio subprocesses or
Streamable HTTP, with the credentials the file holds), then serves agents on
listen+path with one bearer token per agent. tools/list shows each agent the
tools it may call; a gated tools/call becomes an AAP approval request of the
gateway's instance ('agentowl mcp-gateway provision') and is forwarded only
once approved and before the approval expires, at most once (SQLite in
data_dir). With --stdio it serves one agent (--agent) on stdin/stdout.

Each approved call reaches its upstream with the provider's signed
attestation in the tools/call's _meta ("agentowl.dev/attestation"). With
--verify-attestations (or attestations.verify in the file) the gateway
also verifies it against the provider's published keys before forwarding,
and refuses a call whose attestation is missing or does not match.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := mcpgateway.LoadConfig(file)
			if err != nil {
				return err
			}
			if verify {
				cfg.Attestations.Verify = true
			}
			log := slog.New(slog.NewJSONHandler(c.stderr, nil))
			if fi, err := os.Stat(file); err == nil && fi.Mode().Perm()&0o077 != 0 {
				log.Warn("the configuration file holds service credentials and is readable by others: chmod 600 it", "file", file, "mode", fi.Mode().Perm().String())
			}
			if stdio {
				if agentName == "" {
					return errors.New("--stdio needs --agent NAME (one of the configuration's agents)")
				}
				m, err := startMCPGateway(cmd.Context(), cfg, log, false)
				if err != nil {
					return err
				}
				err = m.gw.ServeStdio(cmd.Context(), agentName)
				return errors.Join(err, m.close())
			}
			m, err := startMCPGateway(cmd.Context(), cfg, log, true)
			if err != nil {
				return err
			}
			tools := map[string][]string{}
			for _, a := range cfg.Agents {
				tools[a.Name] = m.gw.Tools(a.Name)
			}
			if err := c.emit(map[string]any{"url": m.url, "data_dir": cfg.DataPath(""), "tools": tools}, func(w io.Writer) {
				fmt.Fprintf(w, "AgentOwl MCP gateway listening on %s (SQLite in %s)\n", m.url, cfg.DataPath(""))
				for _, a := range cfg.Agents {
					fmt.Fprintf(w, "  agent %s: %d tools\n", a.Name, len(tools[a.Name]))
				}
			}); err != nil {
				m.close()
				return err
			}
			<-cmd.Context().Done()
			return m.close()
		},
	}
	f := cmd.Flags()
	f.StringVar(&file, "config", "gateway.yaml", "the gateway's configuration file")
	f.BoolVar(&stdio, "stdio", false, "serve one agent on stdin/stdout instead of HTTP")
	f.StringVar(&agentName, "agent", "", "with --stdio: the agent (its tools and its name towards operators)")
	f.BoolVar(&verify, "verify-attestations", false, "verify each approval's signed attestation before forwarding (attestations.verify)")
	return cmd
}

func (c *cli) mcpGatewayProvisionCommand() *cobra.Command {
	var file, token, provider string
	cmd := &cobra.Command{
		Use:   "provision",
		Short: "Create the gateway's AAP instance and store its credential (mode 0600)",
		Long: `Creates the instance the gateway asks for approvals as (POST /v1/instances,
no delivery: the gateway long-polls), named provider.instance_name, and writes
its credential to provider.credential_file (default DATA_DIR/credential.json,
mode 0600). The prepared submission is kept in DATA_DIR/provisioning.json, so
running the command again retries the same submission and returns the same
instance.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := mcpgateway.LoadConfig(file)
			if err != nil {
				return err
			}
			token = envOr(token, "AGENTOWL_PROVISIONER_TOKEN", "")
			if token == "" {
				return errors.New("no provisioner token: pass --provisioner-token or set AGENTOWL_PROVISIONER_TOKEN")
			}
			base := provider
			if base == "" {
				base = envOr(cfg.Provider.URL, "AGENTOWL_URL", "http://127.0.0.1:8470")
			}
			receiverURL := ""
			if cfg.Receiver != nil {
				receiverURL = cfg.Receiver.URL
			}
			sub, err := pendingSubmission(cfg.DataPath("provisioning.json"), cfg.Provider.InstanceName, receiverURL)
			if err != nil {
				return err
			}
			p := &aap.Provisioner{Provider: &aap.Client{BaseURL: base, Token: token, HTTP: &http.Client{Timeout: 60 * time.Second}}}
			if cfg.Receiver != nil {
				// The provider verifies the receiver before it answers: the
				// registration goes into the gateway's store, and the receiver
				// answers from there, whether this command serves it for the
				// moment or a running `serve` already does.
				st, err := sqlite.Open(cmd.Context(), cfg.DataPath("gateway.db"))
				if err != nil {
					return fmt.Errorf("open the gateway's store: %w", err)
				}
				defer st.Close()
				p.Registrations = st
				_, srv, err := startGatewayReceiver(cfg.Receiver, st, slog.New(slog.NewJSONHandler(c.stderr, &slog.HandlerOptions{Level: slog.LevelError})))
				if srv != nil {
					defer srv.Close()
				} else if !errors.Is(err, syscall.EADDRINUSE) {
					return err
				}
			}
			cred, err := p.Provision(cmd.Context(), sub)
			if err != nil {
				return fmt.Errorf("provision: %w (run the same command again to retry the same submission)", err)
			}
			if err := cred.Save(cfg.CredentialPath()); err != nil {
				return fmt.Errorf("save credential: %w", err)
			}
			out := map[string]any{"instance_id": cred.InstanceID, "instance_name": cred.InstanceName, "credential_file": cfg.CredentialPath()}
			return c.emit(out, func(w io.Writer) {
				fmt.Fprintf(w, "Instance %s (%s) at %s\nCredential stored in %s (mode 0600)\n", cred.InstanceID, cred.InstanceName, base, cfg.CredentialPath())
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&file, "config", "gateway.yaml", "the gateway's configuration file")
	f.StringVar(&token, "provisioner-token", "", "provisioner token (env AGENTOWL_PROVISIONER_TOKEN)")
	f.StringVar(&provider, "provider", "", "provider base URL (default: the configuration's provider.url, env AGENTOWL_URL, http://127.0.0.1:8470)")
	return cmd
}

func (c *cli) mcpGatewayTokenCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "new-token",
		Short: "Generate an agent token and the token_sha256 that goes into the configuration",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			b := make([]byte, 32)
			rand.Read(b)
			tok := "mcpgw_" + base64.RawURLEncoding.EncodeToString(b)
			return c.emit(map[string]string{"token": tok, "token_sha256": mcpgateway.HashToken(tok)}, func(w io.Writer) {
				fmt.Fprintf(w, "token:        %s   (give it to the agent)\ntoken_sha256: %s   (put it in the configuration)\n", tok, mcpgateway.HashToken(tok))
			})
		},
	}
}
