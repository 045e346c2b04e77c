// Package mcpgateway is the MCP approval gateway: the controlled execution
// boundary the AAP specification recommends (8_security.md, "Enforcement
// Limits"). Towards agents it is an MCP server (Streamable HTTP with one
// bearer token per agent, or stdio); towards services it is an MCP client
// of upstream MCP servers whose credentials only it holds. A gated
// tools/call becomes an AAP approval request and is forwarded upstream only
// through the harness kit's Adapter (aap.Adapter): approved, before
// decision.expires_at, with exactly the approved arguments, at most once,
// recorded in the gateway's own execution store (aap/sqlite).
package mcpgateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentowl/agentowl/aap"
	"github.com/agentowl/agentowl/ijson"
)

// Options are what the gateway needs besides its configuration.
type Options struct {
	// Provider is the AAP client with the instance credential. Required.
	Provider *aap.Client
	// Store keeps the executions (aap/sqlite by default). Required.
	Store aap.ExecutionStore
	// Clock decides approval expiry. Defaults to the system clock.
	Clock aap.Clock
	// Logger defaults to discarding.
	Logger *slog.Logger
	// Version is reported to agents as the server version.
	Version string
	// Receiver, if set, is the gateway's AAP webhook receiver (asynchronous
	// mode): a waiting call is woken by the provider's request.resolved
	// notification instead of holding a long poll, and checks the request
	// once per progress interval in case a notification is late.
	Receiver *aap.Receiver
}

// Gateway is a running gateway: its upstream sessions, one MCP server per
// agent and the adapter that gates calls.
type Gateway struct {
	cfg       *Config
	provider  *aap.Client
	receiver  *aap.Receiver
	waiters   sync.Map // request ID → chan struct{}, in asynchronous mode
	store     aap.ExecutionStore
	adapter   *aap.Adapter
	clock     aap.Clock
	log       *slog.Logger
	upstreams map[string]*upstream
	agents    map[string]*agent // by name
	byHash    map[string]*agent // by token hash

	seq  atomic.Uint64
	live sync.Map // liveHeader value → the HTTP request's context
	// calls counts the tool calls being handled, so that a stop lets each
	// write its answer before the sessions close.
	calls atomic.Int64

	mu      sync.Mutex
	orphans map[string]orphan // digest → execution waiting for its agent to come back

	bg     context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

type upstream struct {
	cfg     *UpstreamConfig
	session *mcp.ClientSession
	tools   []*mcp.Tool
}

type agent struct {
	cfg    *AgentConfig
	server *mcp.Server
	tools  []string // exposed names, sorted
}

type orphan struct {
	key      string
	deadline time.Time
}

// New connects to every upstream, lists its tools and builds each agent's
// server. It also takes over the executions a previous process left: those
// still waiting for a decision wait for their agent to repeat the call
// (Config.Approval.ReattachGrace), abandoned ones have their cancellation
// finished.
func New(ctx context.Context, cfg *Config, opts Options) (*Gateway, error) {
	if opts.Provider == nil || opts.Store == nil {
		return nil, errors.New("mcpgateway: Options needs Provider and Store")
	}
	g := &Gateway{cfg: cfg, provider: opts.Provider, receiver: opts.Receiver, store: opts.Store, clock: opts.Clock, log: opts.Logger,
		upstreams: map[string]*upstream{}, agents: map[string]*agent{}, byHash: map[string]*agent{}, orphans: map[string]orphan{}}
	if g.log == nil {
		g.log = slog.New(slog.DiscardHandler)
	}
	if g.clock == nil {
		g.clock = systemClock{}
	}
	var err error
	check := attestationCheck(&cfg.Attestations, opts.Provider)
	g.adapter, err = aap.NewAdapter(aap.AdapterConfig{Provider: opts.Provider, Store: opts.Store, Run: g.forward, Clock: g.clock, Logger: g.log,
		Attestations: check})
	if err != nil {
		return nil, err
	}
	if check != nil {
		g.log.Info("mcp gateway: approvals are verified by their attestations before forwarding", "jwks_url", check.JWKSURL, "issuer", check.Issuer)
	}
	g.bg, g.cancel = context.WithCancel(context.Background())
	ok := false
	defer func() {
		if !ok {
			g.Close()
		}
	}()
	version := opts.Version
	if version == "" {
		version = "dev"
	}
	for i := range cfg.Upstreams {
		u := &cfg.Upstreams[i]
		up, err := connectUpstream(ctx, u, version)
		if err != nil {
			return nil, fmt.Errorf("upstream %s: %w", u.Name, err)
		}
		g.upstreams[u.Name] = up
	}
	for i := range cfg.Agents {
		ac := &cfg.Agents[i]
		a := &agent{cfg: ac, server: mcp.NewServer(&mcp.Implementation{Name: "agentowl-mcp-gateway", Version: version},
			&mcp.ServerOptions{Capabilities: &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{}}})}
		seen := map[string]string{}
		for _, uc := range cfg.Upstreams {
			up := g.upstreams[uc.Name]
			for _, t := range up.tools {
				exposed, gated := up.cfg.rule(t.Name)
				if !exposed || !ac.may(uc.Name, t.Name) {
					continue
				}
				name := up.cfg.Prefix + t.Name
				if other, dup := seen[name]; dup {
					return nil, fmt.Errorf("agent %s: tool %s is exposed by upstreams %s and %s (set a prefix)", ac.Name, name, other, uc.Name)
				}
				seen[name] = uc.Name
				if !objectSchema(t.InputSchema) {
					g.log.Warn("mcp gateway: tool skipped: its input schema is not an object schema", "upstream", uc.Name, "tool", t.Name)
					continue
				}
				tool := *t
				tool.Name = name
				a.server.AddTool(&tool, g.handler(a, up, t.Name, gated))
				a.tools = append(a.tools, name)
			}
		}
		sort.Strings(a.tools)
		g.agents[ac.Name] = a
		g.byHash[ac.tokenHash] = a
	}
	if err := g.takeOver(ctx); err != nil {
		return nil, err
	}
	g.wg.Go(g.sweep)
	if g.receiver != nil {
		g.wg.Go(func() {
			_ = g.receiver.Dispatch(g.bg, aap.DispatchConfig{Handle: g.wake})
		})
	}
	ok = true
	return g, nil
}

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now().UTC() }

func objectSchema(s any) bool {
	m, ok := s.(map[string]any)
	return ok && m["type"] == "object"
}

// PooledTransport is an HTTP transport that keeps enough idle connections
// to one host for many concurrent calls (the default keeps two, so
// concurrent agents would open a connection per call).
func PooledTransport() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConns, t.MaxIdleConnsPerHost = 512, 256
	return t
}

// headerTransport adds the upstream's configured headers to every request.
type headerTransport struct {
	base    http.RoundTripper
	headers map[string]string
}

func (h *headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range h.headers {
		r.Header.Set(k, v)
	}
	return h.base.RoundTrip(r)
}

// baseEnv are the variables of the gateway's environment every stdio
// upstream gets: what finding programs, files and the locale needs.
var baseEnv = []string{"PATH", "HOME", "LANG", "TMPDIR", "TZ"}

// upstreamEnv is a stdio upstream's environment: from the gateway's
// (environ), only baseEnv, the LC_* locale variables and what the upstream
// inherits by name; then its own env, ${VAR} expanded from the gateway's.
// The gateway's token, the agents' tokens and other upstreams'
// credentials stay out unless named.
func upstreamEnv(environ []string, u *UpstreamConfig) []string {
	var env []string
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if slices.Contains(baseEnv, name) || strings.HasPrefix(name, "LC_") || slices.Contains(u.InheritEnv, name) {
			env = append(env, kv)
		}
	}
	for k, v := range u.Env {
		env = append(env, k+"="+os.ExpandEnv(v))
	}
	return env
}

func connectUpstream(ctx context.Context, u *UpstreamConfig, version string) (*upstream, error) {
	client := mcp.NewClient(&mcp.Implementation{Name: "agentowl-mcp-gateway", Version: version}, &mcp.ClientOptions{Capabilities: &mcp.ClientCapabilities{}})
	var t mcp.Transport
	if u.URL != "" {
		headers := map[string]string{}
		for k, v := range u.Headers {
			headers[k] = os.ExpandEnv(v)
		}
		t = &mcp.StreamableClientTransport{Endpoint: u.URL, DisableStandaloneSSE: true,
			HTTPClient: &http.Client{Transport: &headerTransport{base: PooledTransport(), headers: headers}}}
	} else {
		cmd := exec.Command(u.Command[0], u.Command[1:]...)
		cmd.Env = upstreamEnv(os.Environ(), u)
		cmd.Stderr = os.Stderr
		t = &mcp.CommandTransport{Command: cmd}
	}
	cs, err := client.Connect(ctx, t, nil)
	if err != nil {
		return nil, err
	}
	up := &upstream{cfg: u, session: cs}
	for tool, err := range cs.Tools(ctx, nil) {
		if err != nil {
			cs.Close()
			return nil, fmt.Errorf("list tools: %w", err)
		}
		up.tools = append(up.tools, tool)
	}
	return up, nil
}

// Handler is the agents' Streamable HTTP endpoint: it authenticates each
// request's bearer token, serves the agent's own server (only the tools it
// may call), and binds each MCP session to the agent that opened it. An
// agent that disconnects while a call waits cancels the call.
func (g *Gateway) Handler() http.Handler {
	h := mcp.NewStreamableHTTPHandler(func(r *http.Request) *mcp.Server {
		if a := g.agentOf(r.Context()); a != nil {
			return a.server
		}
		return nil
	}, &mcp.StreamableHTTPOptions{PropagateRequestCancellation: true, DisableLocalhostProtection: true})
	verify := func(_ context.Context, token string, _ *http.Request) (*auth.TokenInfo, error) {
		a, ok := g.byHash[HashToken(token)]
		if !ok {
			return nil, auth.ErrInvalidToken
		}
		return &auth.TokenInfo{UserID: a.cfg.Name}, nil
	}
	// Before protocol 2026-07-28 a session outlives its HTTP requests, so the
	// SDK does not cancel a handler whose agent disconnected. Each POST is
	// tagged with a header only the gateway sets, so a gated call can watch
	// its HTTP request and abandon when the agent goes away.
	tagged := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Header.Del(liveHeader)
		if r.Method == http.MethodPost {
			id := strconv.FormatUint(g.seq.Add(1), 10)
			r.Header.Set(liveHeader, id)
			g.live.Store(id, r.Context())
			defer g.live.Delete(id)
		}
		h.ServeHTTP(w, r)
	})
	return auth.RequireBearerToken(verify, &auth.RequireBearerTokenOptions{AllowMissingExpiration: true})(tagged)
}

// liveHeader carries the gateway's tag of an agent's HTTP request.
const liveHeader = "X-Agentowl-Gateway-Request"

// withConnection returns ctx, also cancelled when the HTTP request that
// carried req ends (the agent disconnected).
// It is also cancelled when the gateway stops.
func (g *Gateway) withConnection(ctx context.Context, req *mcp.CallToolRequest) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	stopBg := context.AfterFunc(g.bg, cancel)
	if req.Extra == nil || req.Extra.Header == nil {
		return ctx, func() { stopBg(); cancel() }
	}
	if v, ok := g.live.Load(req.Extra.Header.Get(liveHeader)); ok {
		stop := context.AfterFunc(v.(context.Context), cancel)
		return ctx, func() { stop(); stopBg(); cancel() }
	}
	return ctx, func() { stopBg(); cancel() }
}

func (g *Gateway) agentOf(ctx context.Context) *agent {
	ti := auth.TokenInfoFromContext(ctx)
	if ti == nil {
		return nil
	}
	return g.agents[ti.UserID]
}

// ServeStdio serves one agent on stdin and stdout (ServeIO).
func (g *Gateway) ServeStdio(ctx context.Context, agentName string) error {
	return g.ServeIO(ctx, agentName, os.Stdin, os.Stdout)
}

// stopGrace bounds how long a stopping gateway waits for the answers of the
// calls it ends to be written.
const stopGrace = 5 * time.Second

// ServeIO serves one agent over newline-delimited JSON-RPC (MCP's stdio
// transport, lineTransport) on r and w until r ends or ctx does. When ctx
// ends the gateway stops: calls waiting for a decision are answered with
// the documented "unavailable:" result (their executions stay waiting for
// the next start), and the connection closes once every call read has its
// answer, or after stopGrace. A stop is not an error.
func (g *Gateway) ServeIO(ctx context.Context, agentName string, r io.Reader, w io.Writer) error {
	a, ok := g.agents[agentName]
	if !ok {
		return fmt.Errorf("no agent %q in the configuration", agentName)
	}
	conn := newLineConn(r, w, MaxStdioLine)
	run, stop := context.WithCancel(context.WithoutCancel(ctx))
	defer stop()
	go func() {
		select {
		case <-ctx.Done():
		case <-run.Done():
			return
		}
		g.cancel()
		grace, cancel := context.WithTimeout(context.Background(), stopGrace)
		defer cancel()
		conn.drain(grace)
		stop()
	}()
	err := a.server.Run(run, lineTransport{conn})
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// Tools returns the tool names an agent sees.
func (g *Gateway) Tools(agentName string) []string {
	if a, ok := g.agents[agentName]; ok {
		return a.tools
	}
	return nil
}

// Close stops background work and the upstream sessions (stdio upstreams
// are terminated). Calls still waiting for a decision end with a tool error
// telling the agent to repeat the call once the gateway is back; their
// executions stay waiting, so the next process gives the repeated call the
// same approval request (as after a crash). Close it before the HTTP server.
func (g *Gateway) Close() error {
	g.cancel()
	g.wg.Wait()
	g.settle(time.Now().Add(stopGrace))
	for _, a := range g.agents {
		for ss := range a.server.Sessions() {
			ss.Close()
		}
	}
	var errs []error
	for _, up := range g.upstreams {
		if err := up.session.Close(); err != nil && !errors.Is(err, mcp.ErrConnectionClosed) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// settle waits, until deadline at the latest, for every tool call to return
// and every agent's HTTP request to finish writing its answer: the calls
// that were waiting answer "unavailable:" as soon as the gateway stops.
func (g *Gateway) settle(deadline time.Time) {
	busy := func() bool {
		n := false
		g.live.Range(func(any, any) bool { n = true; return false })
		return n || g.calls.Load() > 0
	}
	for busy() && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
}

// handler serves one exposed tool for one agent.
func (g *Gateway) handler(a *agent, up *upstream, tool string, gated bool) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		if path, dup := ijson.DuplicateName(req.Params.Arguments); dup {
			// Invalid params, not a tool result: the call is refused before
			// any policy reads it or the upstream runs it.
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams,
				Message: "arguments." + path + " appears twice in one object: member names must be unique (RFC 8259 §4, I-JSON)"}
		}
		if p := ijson.CheckText(req.Params.Arguments); p != nil {
			// The text rule of every surface: a tool must not get (and a
			// policy must not judge) bytes the API would refuse.
			where := "arguments"
			if p.Path != "" {
				where += "." + p.Path
			}
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams,
				Message: where + " must be UTF-8 text without U+0000"}
		}
		args, err := objectArgs(req.Params.Arguments)
		if err != nil {
			return toolError(err.Error()), nil
		}
		if !gated {
			cctx, cancel := context.WithTimeout(ctx, g.cfg.Approval.CallTimeout)
			defer cancel()
			res, err := up.session.CallTool(cctx, &mcp.CallToolParams{Name: tool, Arguments: args})
			if err != nil {
				return toolError("the upstream call failed: " + err.Error()), nil
			}
			return res, nil
		}
		g.calls.Add(1)
		defer g.calls.Add(-1)
		ctx, cancel := g.withConnection(ctx, req)
		defer cancel()
		return g.gated(ctx, req, a, up, tool, args)
	}
}

func objectArgs(raw json.RawMessage) (json.RawMessage, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return json.RawMessage(`{}`), nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil || m == nil {
		return nil, errors.New("the arguments must be a JSON object")
	}
	return raw, nil
}

func toolError(text string) *mcp.CallToolResult {
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: text}}}
}
