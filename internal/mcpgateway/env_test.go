package mcpgateway_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentowl/agentowl/aap"
	"github.com/agentowl/agentowl/aap/sqlite"
	"github.com/agentowl/agentowl/internal/clocktest"
	"github.com/agentowl/agentowl/internal/mcpgateway"
	"github.com/agentowl/agentowl/internal/server"
	"github.com/agentowl/agentowl/internal/server/servertest"
	"github.com/agentowl/agentowl/internal/store/storetest"
)

var t0 = time.Date(2026, 9, 16, 12, 0, 0, 0, time.UTC)

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// provider is an in-process AgentOwl server (the one assembly) on SQLite.
type provider struct {
	t    testing.TB
	srv  *server.Server
	url  string
	op   servertest.Operator // tenant "default"'s admin (the bootstrap token)
	prov string
}

func newProvider(t testing.TB, clock *clocktest.Fake, adjust ...func(*server.Config)) *provider {
	t.Helper()
	cfg := servertest.Config(t, storetest.Backends(t)[0]) // SQLite
	if clock != nil {
		cfg.Clock = clock
	}
	for _, f := range adjust {
		f(&cfg)
	}
	srv := servertest.Start(t, cfg)
	p := &provider{t: t, srv: srv, url: srv.URL(), op: servertest.Operator{T: t, URL: srv.URL(), Token: srv.BootstrapToken()}}
	p.prov = p.op.ProvisionerToken("gateway")
	return p
}

// decide approves (valid for validity) or denies a pending request.
func (p *provider) decide(id string, approve bool, validity time.Duration, note string) {
	p.t.Helper()
	if !p.op.Decide(id, approve, validity, note) {
		p.t.Fatalf("request %s was no longer pending", id)
	}
}

// provision creates the gateway's instance (no delivery: it long-polls)
// with the kit's Provisioner and returns its client.
func (p *provider) provision(name string) *aap.Client {
	p.t.Helper()
	pr := &aap.Provisioner{Provider: &aap.Client{BaseURL: p.url, Token: p.prov}}
	cred, err := pr.Provision(context.Background(), aap.NewSubmission(name, ""))
	must(p.t, err)
	return cred.Client(&http.Client{Transport: mcpgateway.PooledTransport(), Timeout: time.Minute})
}

// upstream is a Go-SDK MCP server with a counting issue_refund tool and a
// passthrough lookup tool, behind a header check: it accepts only the
// gateway's service credential and records every Authorization it saw.
type upstream struct {
	srv *httptest.Server

	mu      sync.Mutex
	refunds []json.RawMessage // the arguments of every issue_refund run
	auths   map[string]bool
}

const upstreamSecret = "Bearer sk-upstream-service-credential"

func newUpstream(t testing.TB) *upstream {
	u := &upstream{auths: map[string]bool{}}
	s := mcp.NewServer(&mcp.Implementation{Name: "billing", Version: "1"}, nil)
	obj := json.RawMessage(`{"type":"object"}`)
	s.AddTool(&mcp.Tool{Name: "issue_refund", Description: "Refund an order", InputSchema: obj},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			u.mu.Lock()
			u.refunds = append(u.refunds, append(json.RawMessage(nil), req.Params.Arguments...))
			n := len(u.refunds)
			u.mu.Unlock()
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("refund #%d issued", n)}}}, nil
		})
	s.AddTool(&mcp.Tool{Name: "lookup_order", Description: "Read an order", InputSchema: obj},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "order " + string(req.Params.Arguments)}}}, nil
		})
	s.AddTool(&mcp.Tool{Name: "delete_everything", Description: "Never exposed", InputSchema: obj},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			panic("the gateway exposed a tool no rule allows")
		})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil)
	u.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a := r.Header.Get("Authorization")
		u.mu.Lock()
		u.auths[a] = true
		u.mu.Unlock()
		if a != upstreamSecret {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(u.srv.Close)
	return u
}

func (u *upstream) refundCount() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return len(u.refunds)
}

const (
	agentToken = "agent-token-refund-bot-0123456789"
	otherToken = "agent-token-reader-0123456789abcd"
)

// gatewayYAML is the configuration of the tests' gateway in front of up.
func gatewayYAML(up string) string {
	return fmt.Sprintf(`
data_dir: data
approval:
  timeout: 30m
  progress_interval: 10s
upstreams:
  - name: billing
    url: %s
    headers:
      Authorization: "${MCPGW_TEST_UPSTREAM_AUTH}"
    tools:
      - match: issue_*
        gate: true
      - match: lookup_*
        gate: false
agents:
  - name: refund-bot
    token_sha256: %s
    tools: ["billing/*"]
  - name: reader
    token_sha256: %s
    tools: ["billing/lookup_*"]
`, up, mcpgateway.HashToken(agentToken), mcpgateway.HashToken(otherToken))
}

// gatewaySite is a gateway process in-process: its configuration, store
// and HTTP endpoint.
type gatewaySite struct {
	t     testing.TB
	cfg   *mcpgateway.Config
	store aap.Store
	path  string
	gw    *mcpgateway.Gateway
	srv   *httptest.Server
}

func startGateway(t testing.TB, yaml string, client *aap.Client, clock aap.Clock, dbPath string) *gatewaySite {
	t.Helper()
	st, err := sqlite.Open(context.Background(), dbPath)
	must(t, err)
	return startGatewayOn(t, yaml, client, clock, st, dbPath, nil)
}

// startGatewayOn starts a gateway on an open store, with a receiver in
// asynchronous mode.
func startGatewayOn(t testing.TB, yaml string, client *aap.Client, clock aap.Clock, st aap.Store, dbPath string, rcv *aap.Receiver) *gatewaySite {
	t.Helper()
	t.Setenv("MCPGW_TEST_UPSTREAM_AUTH", upstreamSecret)
	cfg, err := mcpgateway.ParseConfig([]byte(yaml))
	must(t, err)
	level := slog.LevelInfo
	if _, bench := t.(*testing.B); bench {
		level = slog.LevelWarn
	}
	gw, err := mcpgateway.New(context.Background(), cfg, mcpgateway.Options{Provider: client, Store: st, Clock: clock, Receiver: rcv,
		Logger: slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: level}))})
	must(t, err)
	g := &gatewaySite{t: t, cfg: cfg, store: st, path: dbPath, gw: gw, srv: httptest.NewServer(gw.Handler())}
	t.Cleanup(g.close)
	return g
}

func (g *gatewaySite) close() {
	if g.srv == nil {
		return
	}
	must(g.t, g.gw.Close())
	g.srv.CloseClientConnections()
	g.srv.Close()
	must(g.t, g.store.Close())
	g.srv = nil
}

// bearer adds an agent's token to every request.
type bearer struct{ token string }

var agentTransport = mcpgateway.PooledTransport()

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return agentTransport.RoundTrip(r)
}

// agentSession connects an agent (a Go-SDK client) to the gateway.
func agentSession(t testing.TB, endpoint, token string, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "test-agent", Version: "1"}, opts)
	cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: endpoint, MaxRetries: -1,
		HTTPClient: &http.Client{Transport: bearer{token}}}, nil)
	must(t, err)
	t.Cleanup(func() { cs.Close() })
	return cs
}

// waiting returns the request ID of the one execution waiting in the
// gateway's store, once there is one.
func waiting(t testing.TB, st aap.ExecutionStore) string {
	t.Helper()
	var id string
	servertest.Eventually(t, "a waiting execution", func() bool {
		list, err := st.ListExecutions(context.Background(), aap.ExecWaiting)
		must(t, err)
		if len(list) == 1 {
			id = list[0].RequestID
		}
		return id != ""
	})
	return id
}

func text(res *mcp.CallToolResult) string {
	var b bytes.Buffer
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

type tWriter struct{ t testing.TB }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

func tempDB(t testing.TB) string { return filepath.Join(t.TempDir(), "gateway.db") }
