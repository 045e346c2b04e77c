package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"runtime/pprof"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentowl/agentowl"
	"github.com/agentowl/agentowl/internal/access"
	"github.com/agentowl/agentowl/internal/buildinfo"
	"github.com/agentowl/agentowl/internal/server"
)

// cli holds the global flags and output streams shared by every command.
type cli struct {
	stdout, stderr io.Writer
	json           bool
	url, token     string
	tenant         string
}

func newRootCommand(stdout, stderr io.Writer) *cobra.Command {
	c := &cli{stdout: stdout, stderr: stderr}
	root := &cobra.Command{
		Use:          "agentowl",
		Short:        "AgentOwl: the control plane between AI agents and the people and channels around them",
		SilenceUsage: true,
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	pf := root.PersistentFlags()
	pf.BoolVar(&c.json, "json", false, "print one JSON document on stdout")
	pf.StringVar(&c.url, "url", "", "server URL (env AGENTOWL_URL, default http://127.0.0.1:8470)")
	pf.StringVar(&c.token, "token", "", "operator token (env AGENTOWL_TOKEN)")
	root.AddCommand(c.serveCommand(), c.adminCommand(), c.versionCommand(), c.secretsCommand())
	root.AddCommand(c.receiverCommand(), c.mcpGatewayCommand(), c.conformanceCommand())
	root.AddCommand(c.attestationCommands()...)
	// --version prints what `agentowl version` prints.
	root.Version = buildinfo.Get().String()
	root.SetVersionTemplate("{{.Version}}\n")
	c.addOperatorCommands(root)
	// Cobra prints every error once, to stderr, as "error: …" (usage errors
	// included); the exit code is then non-zero.
	root.SetErrPrefix("error:")
	requireNoArgs(root)
	return root
}

// requireNoArgs makes commands that declare no arguments refuse extra ones.
func requireNoArgs(cmd *cobra.Command) {
	if cmd.Args == nil && cmd.RunE != nil {
		cmd.Args = cobra.NoArgs
	}
	for _, sub := range cmd.Commands() {
		requireNoArgs(sub)
	}
}

func envOr(flag, env, def string) string {
	if flag != "" {
		return flag
	}
	if v := os.Getenv(env); v != "" {
		return v
	}
	return def
}

// tenantFlag adds --tenant (env AGENTOWL_TENANT, default "default").
func (c *cli) tenantFlag(cmd *cobra.Command) {
	cmd.Flags().StringVar(&c.tenant, "tenant", "", "tenant name (env AGENTOWL_TENANT; default: the tenant your token acts in)")
}

// tenantName is --tenant, else AGENTOWL_TENANT, else the one tenant the
// token acts in (asked of /api/v1/whoami once), else "default".
func (c *cli) tenantName() string {
	if name := envOr(c.tenant, "AGENTOWL_TENANT", ""); name != "" {
		return url.PathEscape(name)
	}
	var who struct {
		Tenants []struct {
			Tenant string `json:"tenant"`
		} `json:"tenants"`
	}
	c.tenant = "default"
	if err := c.call(context.Background(), http.MethodGet, "/api/v1/whoami", nil, &who); err == nil && len(who.Tenants) == 1 {
		c.tenant = who.Tenants[0].Tenant
	}
	return url.PathEscape(c.tenant)
}

// apiError is the server's error body.
type apiError struct {
	Status int
	Body   struct {
		Error struct {
			Type      string `json:"type"`
			Code      string `json:"code"`
			Message   string `json:"message"`
			Param     string `json:"param"`
			RequestID string `json:"request_id"`
		} `json:"error"`
	}
}

func (e *apiError) Error() string {
	b := e.Body.Error
	msg := fmt.Sprintf("%s (%d %s", b.Message, e.Status, b.Code)
	if b.Param != "" {
		msg += ", param " + b.Param
	}
	return msg + ", request " + b.RequestID + ")"
}

// server returns the server's base URL and the operator token.
func (c *cli) server() (base, token string, err error) {
	base = strings.TrimRight(envOr(c.url, "AGENTOWL_URL", "http://127.0.0.1:8470"), "/")
	token = envOr(c.token, "AGENTOWL_TOKEN", "")
	if token == "" {
		return "", "", errors.New("no operator token: set AGENTOWL_TOKEN or pass --token")
	}
	return base, token, nil
}

// answerError is the error of a non-2xx answer whose body is data.
func answerError(resp *http.Response, data []byte) error {
	e := &apiError{Status: resp.StatusCode}
	if json.Unmarshal(data, &e.Body) != nil || e.Body.Error.Code == "" {
		return fmt.Errorf("server answered %s", resp.Status)
	}
	return e
}

// call sends one operator API request and decodes a JSON response into out.
func (c *cli) call(ctx context.Context, method, path string, body, out any) error {
	base, token, err := c.server()
	if err != nil {
		return err
	}
	var payload []byte
	if body != nil {
		if payload, err = json.Marshal(body); err != nil {
			return err
		}
	}
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	var resp *http.Response
	var data []byte
	for {
		if resp, data, err = apiExchange(ctx, method, base+path, token, payload); err != nil {
			return fmt.Errorf("cannot reach %s: %w", base, err)
		}
		// Nothing of an overloaded write was stored: send it again once
		// the server's Retry-After has passed, as AAP clients do, for as
		// long as the command's minute allows.
		wait, again := overloadedRetry(resp.StatusCode, resp.Header, data)
		if !again || !sleepCtx(ctx, wait) {
			break
		}
	}
	if resp.StatusCode >= 300 {
		return answerError(resp, data)
	}
	if out == nil || len(data) == 0 {
		return nil
	}
	// Numbers stay json.Number so --json reprints tool arguments exactly.
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	return dec.Decode(out)
}

// apiExchange sends one request, with payload as its JSON body unless nil,
// and reads its whole answer.
func apiExchange(ctx context.Context, method, url, token string, payload []byte) (*http.Response, []byte, error) {
	var body io.Reader
	if payload != nil {
		body = bytes.NewReader(payload)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, body)
	if err != nil {
		return nil, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if payload != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	return resp, data, err
}

// overloadedRetry reports whether an answer is 503 overloaded (the server
// refused the write before storing any of it) and how long its Retry-After
// asks to wait (a second when it says nothing usable, at most ten).
func overloadedRetry(status int, header http.Header, body []byte) (time.Duration, bool) {
	if status != http.StatusServiceUnavailable {
		return 0, false
	}
	var e apiError
	if json.Unmarshal(body, &e.Body) != nil || e.Body.Error.Code != "overloaded" {
		return 0, false
	}
	secs, err := strconv.Atoi(header.Get("Retry-After"))
	if err != nil || secs < 0 {
		secs = 1
	}
	return time.Duration(min(secs, 10)) * time.Second, true
}

// sleepCtx waits d, or less if ctx ends first; it reports whether d passed.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// emit prints v as JSON with --json, and otherwise runs human.
func (c *cli) emit(v any, human func(w io.Writer)) error {
	if c.json {
		enc := json.NewEncoder(c.stdout)
		enc.SetIndent("", "  ")
		enc.SetEscapeHTML(false)
		return enc.Encode(v)
	}
	human(c.stdout)
	return nil
}

// do is most commands' whole run: it sends one operator API request and
// prints the object answered, as JSON with --json, else through human.
func (c *cli) do(ctx context.Context, method, path string, body any, human func(w io.Writer, out item)) error {
	var out item
	if err := c.call(ctx, method, path, body, &out); err != nil {
		return err
	}
	return c.emit(out, func(w io.Writer) { human(w, out) })
}

// table prints rows under a header, tab-aligned.
func table(w io.Writer, header string, rows [][]string) {
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	if header != "" {
		fmt.Fprintln(tw, header)
	}
	for _, r := range rows {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	tw.Flush()
}

// versionCommand prints the build: version, commit and Go version (--json:
// one object). It needs no server.
func (c *cli) versionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version, commit and Go version of this binary",
		RunE: func(cmd *cobra.Command, args []string) error {
			b := buildinfo.Get()
			return c.emit(b, func(w io.Writer) { fmt.Fprintln(w, b.String()) })
		},
	}
}

func (c *cli) serveCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the AgentOwl server (SQLite in --data-dir by default, PostgreSQL with --database-url)",
		Long:  "Run the AgentOwl server.\n\n" + settingsHelp(),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg := server.Config{Stdout: c.stdout}
			if err := configure(&cfg, cmd.Flags(), os.Getenv); err != nil {
				return err
			}
			if path := os.Getenv("AGENTOWL_CPU_PROFILE"); path != "" { // for BENCHMARKS.md work
				f, err := os.Create(path)
				if err != nil {
					return err
				}
				if err := pprof.StartCPUProfile(f); err != nil {
					return err
				}
				defer pprof.StopCPUProfile()
			}
			if cfg.DatabaseURL == "" {
				// SQLite is for one process: the data directory's lock
				// makes it so, and lets this one take over what a dead
				// predecessor left leased.
				if cfg.DataDir == "" {
					cfg.DataDir = server.DefaultDataDir
				}
				lock, err := lockDataDir(cfg.DataDir)
				if err != nil {
					return err
				}
				defer lock.unlock()
				cfg.SoleProcess = lock.exclusive()
			}
			srv, err := server.Start(cmd.Context(), cfg)
			if err != nil {
				return err
			}
			fmt.Fprintf(c.stdout, "AgentOwl listening on %s (%s)\n", srv.URL(), srv.Store().Dialect())
			<-cmd.Context().Done()
			fmt.Fprintln(c.stdout, "Shutting down…")
			return srv.Close()
		},
	}
	serveFlags(cmd.Flags())
	return cmd
}

// offlineDatabase is the database a command works on directly, without a
// server (admin bootstrap, secrets, attestation-keys): --data-dir or
// --database-url, else their variables.
type offlineDatabase struct{ dataDir, dbURL string }

// flags adds --data-dir and --database-url to cmd.
func (o *offlineDatabase) flags(cmd *cobra.Command) {
	cmd.Flags().StringVar(&o.dataDir, "data-dir", "", "data directory (env AGENTOWL_DATA_DIR, default ./agentowl-data)")
	cmd.Flags().StringVar(&o.dbURL, "database-url", "", "postgres:// URL (env AGENTOWL_DATABASE_URL)")
	cmd.MarkFlagsMutuallyExclusive("data-dir", "database-url")
}

// where returns the data directory and the PostgreSQL URL ("" for SQLite).
func (o *offlineDatabase) where() (dir, url string, err error) {
	url = envOr(o.dbURL, "AGENTOWL_DATABASE_URL", "")
	if url != "" && !server.IsPostgresURL(url) {
		return "", "", errors.New("database URL must start with postgres:// or postgresql://")
	}
	return envOr(o.dataDir, "AGENTOWL_DATA_DIR", server.DefaultDataDir), url, nil
}

// open opens the store with key (nil for what holds no sealed secret).
func (o *offlineDatabase) open(ctx context.Context, key []byte) (agentowl.Store, error) {
	dir, url, err := o.where()
	if err != nil {
		return nil, err
	}
	st, _, err := server.OpenStore(ctx, dir, url, key, 0)
	return st, err
}

func (c *cli) adminCommand() *cobra.Command {
	admin := &cobra.Command{Use: "admin", Short: "Offline administration, directly against the database"}
	var tenant string
	var db offlineDatabase
	bootstrap := &cobra.Command{
		Use:   "bootstrap",
		Short: "Create a tenant (if missing) and a new admin operator token for it",
		RunE: func(cmd *cobra.Command, args []string) error {
			// Tenants, operators and tokens hold no sealed secret: no key.
			st, err := db.open(cmd.Context(), nil)
			if err != nil {
				return err
			}
			defer st.Close()
			res, err := access.New(st, systemClock(), access.Config{}).Bootstrap(cmd.Context(), tenant)
			if err != nil {
				return err
			}
			out := map[string]any{
				"tenant":         map[string]string{"id": res.Tenant.ID, "name": res.Tenant.Name, "created_at": res.Tenant.CreatedAt.Format(time.RFC3339)},
				"operator":       res.Operator.Name,
				"operator_token": res.Token,
			}
			return c.emit(out, func(w io.Writer) {
				fmt.Fprintf(w, "Tenant %s (%s): admin operator token (shown once):\n%s\n", res.Tenant.Name, res.Tenant.ID, res.Token)
			})
		},
	}
	bootstrap.Flags().StringVar(&tenant, "tenant", "", "tenant name")
	bootstrap.MarkFlagRequired("tenant")
	db.flags(bootstrap)
	admin.AddCommand(bootstrap)
	return admin
}
