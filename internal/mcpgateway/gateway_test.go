package mcpgateway_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentowl/agentowl/aap"
	"github.com/agentowl/agentowl/internal/clocktest"
	"github.com/agentowl/agentowl/internal/server/servertest"
)

// env is one provider, one upstream and one gateway, with the refund-bot
// agent connected.
type env struct {
	t     *testing.T
	clock *clocktest.Fake
	p     *provider
	up    *upstream
	aap   *aap.Client
	gw    *gatewaySite
	agent *mcp.ClientSession

	mu       sync.Mutex
	progress []*mcp.ProgressNotificationParams
}

func newEnv(t *testing.T, gatewayClock func(*clocktest.Fake) aap.Clock) *env {
	e := &env{t: t, clock: clocktest.New(t0)}
	e.p = newProvider(t, e.clock)
	e.up = newUpstream(t)
	e.aap = e.p.provision("mcp-gateway")
	var gc aap.Clock = e.clock
	if gatewayClock != nil {
		gc = gatewayClock(e.clock)
	}
	e.gw = startGateway(t, gatewayYAML(e.up.srv.URL), e.aap, gc, tempDB(t))
	e.agent = agentSession(t, e.gw.srv.URL, agentToken, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
			e.mu.Lock()
			e.progress = append(e.progress, r.Params)
			e.mu.Unlock()
		}})
	return e
}

const refundArgs = `{"order":"A-1001","amount_cents":125000,"currency":"EUR","lines":[1,2.5,"x"]}`

// call runs a tool call in the background (with a progress token) and
// returns where its result arrives.
func (e *env) call(ctx context.Context, cs *mcp.ClientSession, tool, args string) <-chan *mcp.CallToolResult {
	out := make(chan *mcp.CallToolResult, 1)
	go func() {
		p := &mcp.CallToolParams{Name: tool, Arguments: json.RawMessage(args)}
		p.SetProgressToken("tok-1")
		res, err := cs.CallTool(ctx, p)
		if err != nil {
			res = &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "protocol error: " + err.Error()}}}
		}
		out <- res
	}()
	return out
}

func receive(t *testing.T, ch <-chan *mcp.CallToolResult) *mcp.CallToolResult {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(servertest.SyncLimit):
		t.Fatal("no tool result")
		return nil
	}
}

// approvalOf reads a request as operators see it.
func (e *env) approvalOf(id string) map[string]any {
	var out struct{ Request map[string]any }
	e.p.op.Call(http.MethodGet, "/approvals/"+id, nil, &out)
	return out.Request
}

func TestToolsListAndPassthrough(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	names := func(cs *mcp.ClientSession) []string {
		res, err := cs.ListTools(ctx, nil)
		must(t, err)
		var out []string
		for _, tl := range res.Tools {
			out = append(out, tl.Name)
			if b, _ := json.Marshal(tl); strings.Contains(string(b), "sk-upstream") {
				t.Errorf("a tool description shows the upstream's credential: %s", b)
			}
		}
		slices.Sort(out)
		return out
	}
	if got := names(e.agent); !slices.Equal(got, []string{"issue_refund", "lookup_order"}) {
		t.Errorf("refund-bot sees %v", got)
	}
	reader := agentSession(t, e.gw.srv.URL, otherToken, nil)
	if got := names(reader); !slices.Equal(got, []string{"lookup_order"}) {
		t.Errorf("reader sees %v", got)
	}
	// An ungated tool passes through at once with the agent's arguments.
	res, err := reader.CallTool(ctx, &mcp.CallToolParams{Name: "lookup_order", Arguments: map[string]any{"order": "A-1"}})
	must(t, err)
	if res.IsError || text(res) != `order {"order":"A-1"}` {
		t.Errorf("lookup_order: %+v %q", res.IsError, text(res))
	}
	// A tool the agent may not see cannot be called either.
	if res, err := reader.CallTool(ctx, &mcp.CallToolParams{Name: "issue_refund", Arguments: map[string]any{}}); err == nil && !res.IsError {
		t.Error("reader called issue_refund")
	}
	if res, err := e.agent.CallTool(ctx, &mcp.CallToolParams{Name: "delete_everything", Arguments: map[string]any{}}); err == nil && !res.IsError {
		t.Error("a tool no rule exposes was called")
	}
	// Without a valid token there is no session.
	c := mcp.NewClient(&mcp.Implementation{Name: "intruder", Version: "1"}, nil)
	if _, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: e.gw.srv.URL, MaxRetries: -1,
		HTTPClient: &http.Client{Transport: bearer{"wrong-token-0123456789"}}}, nil); err == nil {
		t.Error("connected with a wrong token")
	}
	resp, err := http.Post(e.gw.srv.URL, "application/json", strings.NewReader(`{}`))
	must(t, err)
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("no token: %d", resp.StatusCode)
	}
	// Another agent's valid token does not reach refund-bot's session: the
	// session ID is bound to the agent that opened it.
	hijack, _ := http.NewRequest(http.MethodPost, e.gw.srv.URL,
		strings.NewReader(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"issue_refund","arguments":{"amount":1}}}`))
	hijack.Header.Set("Authorization", "Bearer "+otherToken)
	hijack.Header.Set("Content-Type", "application/json")
	hijack.Header.Set("Accept", "application/json, text/event-stream")
	hijack.Header.Set("Mcp-Session-Id", e.agent.ID())
	resp, err = http.DefaultClient.Do(hijack)
	must(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("another agent's token used refund-bot's session: %d %s", resp.StatusCode, body)
	}
	// The upstream saw only the gateway's own credential, never an agent's.
	e.up.mu.Lock()
	defer e.up.mu.Unlock()
	for a := range e.up.auths {
		if a != upstreamSecret {
			t.Errorf("the upstream saw Authorization %q", a)
		}
	}
}

func TestApprovedCallForwardedOnce(t *testing.T) {
	e := newEnv(t, nil)
	ch := e.call(context.Background(), e.agent, "issue_refund", refundArgs)
	id := waiting(t, e.gw.store)
	servertest.Eventually(t, "a progress notification", func() bool {
		e.mu.Lock()
		defer e.mu.Unlock()
		return len(e.progress) > 0
	})
	// Operators see the MCP server and tool, the exact arguments and which
	// agent asked.
	a := e.approvalOf(id)
	if a["tool"] != "billing/issue_refund" || a["status"] != "pending" {
		t.Errorf("operators see %v", a)
	}
	cctx, _ := json.Marshal(a["context"])
	if string(cctx) != `{"mcp":{"agent":"refund-bot","server":"billing","tool":"issue_refund"}}` {
		t.Errorf("context %s", cctx)
	}
	if e.up.refundCount() != 0 {
		t.Fatal("forwarded before the approval")
	}
	// It is in Needs attention with the MCP server and tool.
	var inbox json.RawMessage
	e.p.op.Call(http.MethodGet, "/attention", nil, &inbox)
	if !strings.Contains(string(inbox), id) || !strings.Contains(string(inbox), "billing/issue_refund") {
		t.Errorf("Needs attention does not show the gated call: %s", inbox)
	}
	e.p.decide(id, true, 10*time.Minute, "ok")
	res := receive(t, ch)
	if res.IsError || text(res) != "refund #1 issued" {
		t.Fatalf("result: %v %q", res.IsError, text(res))
	}
	e.up.mu.Lock()
	got := string(e.up.refunds[0])
	e.up.mu.Unlock()
	if got != refundArgs {
		t.Errorf("the upstream got %s, the agent sent %s", got, refundArgs)
	}
	// The audit log names the agent behind the gateway.
	var audit struct{ Items []map[string]any }
	e.p.op.Call(http.MethodGet, "/audit", nil, &audit)
	found := false
	for _, it := range audit.Items {
		d, _ := it["details"].(map[string]any)
		found = found || it["target"] == "approval-request:"+id && d["mcp_agent"] == "refund-bot" && d["tool"] == "billing/issue_refund"
	}
	if !found {
		t.Errorf("no audit entry naming the agent: %v", audit.Items)
	}
	// A second delivery of the same approval runs nothing.
	x, err := e.gw.gw.Adapter().Resume(context.Background(), id)
	must(t, err)
	if x.State != aap.ExecFinished || e.up.refundCount() != 1 {
		t.Errorf("after a second delivery: state %s, %d refunds", x.State, e.up.refundCount())
	}
}

func TestRefusedCallsNeverForwarded(t *testing.T) {
	cases := []struct {
		name  string
		clock func(*clocktest.Fake) aap.Clock
		act   func(e *env, id string)
		want  string
	}{
		{"denied", nil, func(e *env, id string) { e.p.decide(id, false, 0, "over the limit") }, "denied"},
		{"expired", nil, func(e *env, id string) {
			servertest.Eventually(t, "the long poll", func() bool { return e.clock.Waiters() > 0 })
			e.clock.Advance(31 * time.Minute)
		}, "expired"},
		{"approval expired before forwarding", func(c *clocktest.Fake) aap.Clock { return lateClock{c, time.Hour} },
			func(e *env, id string) { e.p.decide(id, true, time.Minute, "quick") }, "expired: the call was not run"},
		{"cancelled by the instance", nil, func(e *env, id string) {
			_, err := e.aap.CancelRequest(context.Background(), id)
			must(t, err)
		}, "cancelled"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t, c.clock)
			ch := e.call(context.Background(), e.agent, "issue_refund", refundArgs)
			id := waiting(t, e.gw.store)
			c.act(e, id)
			res := receive(t, ch)
			if !res.IsError || !strings.HasPrefix(text(res), c.want) {
				t.Errorf("result %v %q, want an error starting %q", res.IsError, text(res), c.want)
			}
			if c.name == "denied" && !strings.Contains(text(res), "over the limit") {
				t.Errorf("the provider's note is missing: %q", text(res))
			}
			if n := e.up.refundCount(); n != 0 {
				t.Errorf("forwarded %d times", n)
			}
		})
	}
}

// lateClock is the gateway's clock running ahead of the provider's.
type lateClock struct {
	c  *clocktest.Fake
	by time.Duration
}

func (l lateClock) Now() time.Time { return l.c.Now().Add(l.by) }

func TestAgentCancelCancelsTheRequest(t *testing.T) {
	e := newEnv(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	ch := e.call(ctx, e.agent, "issue_refund", refundArgs)
	id := waiting(t, e.gw.store)
	cancel() // the SDK sends notifications/cancelled
	<-ch
	servertest.Eventually(t, "the AAP request cancelled", func() bool { return e.approvalOf(id)["status"] == "cancelled" })
	if e.up.refundCount() != 0 {
		t.Error("forwarded")
	}
	// The agent carries on in the same session.
	res, err := e.agent.CallTool(context.Background(), &mcp.CallToolParams{Name: "lookup_order", Arguments: map[string]any{}})
	must(t, err)
	if res.IsError {
		t.Error(text(res))
	}
}

func TestAgentDisconnectCancelsTheRequest(t *testing.T) {
	e := newEnv(t, nil)
	// An agent whose connections the test can cut.
	var mu sync.Mutex
	var conns []net.Conn
	tr := &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if err == nil {
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
		return c, err
	}}
	var dropped atomic.Bool
	c := mcp.NewClient(&mcp.Implementation{Name: "fragile-agent", Version: "1"}, nil)
	cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: e.gw.srv.URL, MaxRetries: -1,
		HTTPClient: &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
			if dropped.Load() {
				return nil, net.ErrClosed
			}
			r = r.Clone(r.Context())
			r.Header.Set("Authorization", "Bearer "+agentToken)
			return tr.RoundTrip(r)
		})}}, nil)
	must(t, err)
	defer cs.Close()
	ch := e.call(context.Background(), cs, "issue_refund", refundArgs)
	id := waiting(t, e.gw.store)
	dropped.Store(true)
	mu.Lock()
	for _, c := range conns {
		c.Close()
	}
	mu.Unlock()
	servertest.Eventually(t, "the AAP request cancelled", func() bool { return e.approvalOf(id)["status"] == "cancelled" })
	<-ch
	x, err := e.gw.store.ExecutionByRequest(context.Background(), id)
	must(t, err)
	if x.State != aap.ExecAbandoned || e.up.refundCount() != 0 {
		t.Errorf("state %s, %d refunds", x.State, e.up.refundCount())
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// A call left waiting by a stopped gateway is never run without its agent:
// approved while the gateway was down, it is abandoned after the grace
// period if the agent does not repeat it.
func TestRestartApprovedCallWithoutAgentNotRun(t *testing.T) {
	e := newEnv(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch := e.call(ctx, e.agent, "issue_refund", refundArgs)
	id := waiting(t, e.gw.store)
	path := e.gw.path
	// The gateway stops: the waiting agent is told to repeat the call, and
	// the execution stays waiting (as a killed process leaves it).
	e.gw.close()
	// The answer is written before the session closes (a stop is not a
	// dropped stream).
	if res := receive(t, ch); !res.IsError || !strings.HasPrefix(text(res), "unavailable:") {
		t.Errorf("the waiting agent got %q, want the unavailable: tool result", text(res))
	}
	e.p.decide(id, true, time.Hour, "while the gateway was down")
	g2 := startGateway(t, gatewayYAML(e.up.srv.URL), e.aap, e.clock, path)
	x, err := g2.store.ExecutionByRequest(context.Background(), id)
	must(t, err)
	if x.State != aap.ExecWaiting || e.up.refundCount() != 0 {
		t.Fatalf("after the restart: state %s, %d refunds", x.State, e.up.refundCount())
	}
	g2.gw.SweepOrphans(context.Background()) // within the grace period: kept
	e.clock.Advance(11 * time.Minute)
	g2.gw.SweepOrphans(context.Background())
	x, err = g2.store.ExecutionByRequest(context.Background(), id)
	must(t, err)
	if x.State != aap.ExecAbandoned || e.up.refundCount() != 0 {
		t.Fatalf("after the grace period: state %s, %d refunds", x.State, e.up.refundCount())
	}
	// The agent coming back later gets a new request, not the old approval.
	agent := agentSession(t, g2.srv.URL, agentToken, nil)
	ctx2, cancel2 := context.WithCancel(context.Background())
	ch2 := e.call(ctx2, agent, "issue_refund", refundArgs)
	servertest.Eventually(t, "a new request", func() bool {
		list, err := g2.store.ListExecutions(context.Background(), aap.ExecWaiting)
		must(t, err)
		return len(list) == 1 && list[0].RequestID != id
	})
	if e.up.refundCount() != 0 {
		t.Fatal("the old approval ran")
	}
	cancel2()
	receive(t, ch2)
}

// Policies decide gated calls as usual: an auto-approve rule for the MCP
// server's tool lets the call through at once; a deny rule refuses it.
func TestPoliciesDecideGatedCalls(t *testing.T) {
	e := newEnv(t, nil)
	e.p.op.Call(http.MethodPost, "/policies", map[string]any{"tool": "billing/issue_refund", "effect": "approve",
		"condition": `context.mcp.agent == "refund-bot" && arguments.amount_cents < 200000`, "note": "small refunds"}, nil)
	e.p.op.Call(http.MethodPost, "/policies", map[string]any{"tool": "billing/issue_refund", "effect": "deny", "note": "too large", "priority": 10}, nil)
	res := receive(t, e.call(context.Background(), e.agent, "issue_refund", refundArgs))
	if res.IsError || text(res) != "refund #1 issued" {
		t.Fatalf("auto-approved call: %v %q", res.IsError, text(res))
	}
	res = receive(t, e.call(context.Background(), e.agent, "issue_refund", `{"order":"B","amount_cents":900000}`))
	if !res.IsError || !strings.HasPrefix(text(res), "denied") || !strings.Contains(text(res), "too large") {
		t.Fatalf("denied call: %v %q", res.IsError, text(res))
	}
	if e.up.refundCount() != 1 {
		t.Errorf("%d refunds", e.up.refundCount())
	}
}

// A tools/call whose arguments name a member twice is refused with
// JSON-RPC -32602 (invalid params) before anything reads it: no approval
// request, no upstream call (issue 27: the raw bytes with both values went
// to the tool while a policy read one of them).
// TestDuplicateArgumentNamesRefused: arguments that break the rule of
// every surface (a member name twice in one object; a string that is not
// UTF-8 text without U+0000) are refused with -32602 naming the field,
// before any policy reads them or the upstream runs them.
func TestDuplicateArgumentNamesRefused(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	for _, c := range []struct{ tool, args, says string }{
		{"issue_refund", `{"order":"A-1","amount_cents":125000,"amount_cents":1}`, "arguments.amount_cents appears twice"}, // gated
		{"lookup_order", `{"order":"A-1","order":"B-2"}`, "arguments.order appears twice"},                                 // passed through
		{"issue_refund", `{"order":"A-1\u0000","amount_cents":1}`, "arguments.order must be UTF-8 text"},
		{"lookup_order", `{"order":{"n\u0000":1}}`, "arguments.order must be UTF-8 text"},
	} {
		_, err := e.agent.CallTool(ctx, &mcp.CallToolParams{Name: c.tool, Arguments: json.RawMessage(c.args)})
		var rpc *jsonrpc.Error
		if !errors.As(err, &rpc) || rpc.Code != jsonrpc.CodeInvalidParams || !strings.Contains(rpc.Message, c.says) {
			t.Errorf("%s %s: %v, want a -32602 error saying %q", c.tool, c.args, err, c.says)
		}
	}
	if n := e.up.refundCount(); n != 0 {
		t.Errorf("the upstream ran %d refunds", n)
	}
	if list, err := e.gw.store.ListExecutions(ctx, aap.ExecWaiting); err != nil || len(list) != 0 {
		t.Errorf("executions waiting after the refusals: %v %v", list, err)
	}
}
