package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentowl/agentowl/internal/mcpgateway"
	"github.com/agentowl/agentowl/internal/server/servertest"
	"github.com/agentowl/agentowl/internal/store/storetest"
)

// countingUpstream is a Go-SDK MCP server whose issue_refund counts its
// runs and records their arguments.
type countingUpstream struct {
	srv     *httptest.Server
	mu      sync.Mutex
	refunds []string
}

func newCountingUpstream(t *testing.T) *countingUpstream {
	u := &countingUpstream{}
	s := mcp.NewServer(&mcp.Implementation{Name: "billing", Version: "1"}, nil)
	s.AddTool(&mcp.Tool{Name: "issue_refund", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			u.mu.Lock()
			defer u.mu.Unlock()
			u.refunds = append(u.refunds, string(req.Params.Arguments))
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("refund #%d", len(u.refunds))}}}, nil
		})
	u.srv = httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
	t.Cleanup(u.srv.Close)
	return u
}

func (u *countingUpstream) count() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return len(u.refunds)
}

type tokenTransport struct{ token string }

func (b tokenTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// writeGatewayConfig writes a gateway configuration to dir/gateway.yaml
// and returns its path: head (the YAML of listen, provider, receiver…),
// the billing upstream at upstreamURL with one tool rule, and one agent
// with token.
func writeGatewayConfig(t *testing.T, dir, head, upstreamURL, rule, agent, token string) string {
	t.Helper()
	config := filepath.Join(dir, "gateway.yaml")
	must(t, os.WriteFile(config, fmt.Appendf(nil, `%s
data_dir: data
upstreams:
  - name: billing
    url: %s
    tools: [%s]
agents:
  - name: %s
    token_sha256: %s
    tools: ["billing/*"]
`, head, upstreamURL, rule, agent, mcpgateway.HashToken(token)), 0o600))
	return config
}

// provisionGateway runs `agentowl mcp-gateway provision` on config and
// returns what it printed.
func provisionGateway(t *testing.T, config, provToken string) map[string]any {
	t.Helper()
	return cliJSON(t, runCLI(t, "mcp-gateway", "provision", "--config", config, "--provisioner-token", provToken, "--json"))
}

// connectAgent connects an MCP client to the gateway at url with an
// agent's token.
func connectAgent(t *testing.T, url, token string) *mcp.ClientSession {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "1"}, nil)
	cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: url + "/mcp", MaxRetries: -1,
		HTTPClient: &http.Client{Transport: tokenTransport{token}}}, nil)
	must(t, err)
	return cs
}

// callRefund calls issue_refund with args on cs in the background; the
// result, or the error as one, comes on the channel.
func callRefund(cs *mcp.ClientSession, args any) <-chan *mcp.CallToolResult {
	ch := make(chan *mcp.CallToolResult, 1)
	go func() {
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "issue_refund", Arguments: args})
		if err != nil {
			res = &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: err.Error()}}}
		}
		ch <- res
	}()
	return ch
}

// startGatewayProcess runs `agentowl mcp-gateway serve` and waits for its
// /healthz.
func startGatewayProcess(t *testing.T, bin, config, addr string) *serveProcess {
	t.Helper()
	return startProcess(t, "agentowl mcp-gateway serve", exec.Command(bin, "mcp-gateway", "serve", "--config", config, "--json"), "http://"+addr)
}

// kill -9 of the gateway while a gated call waits: nothing is forwarded
// until the approval, the agent that repeats the call after the restart
// gets the same approval request, and the approved call runs once, even
// across another kill -9 after it ran.
func TestMCPGatewayCrash(t *testing.T) {
	t.Parallel()
	bin := buildAgentowl(t)
	up := newCountingUpstream(t)
	cfg := servertest.Config(t, storetest.Backends(t)[0])
	prov := servertest.Start(t, cfg)
	admin := prov.BootstrapToken()
	provToken := provisionerToken(t, prov.URL(), admin)

	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	token := "agent-token-crash-0123456789abcdef"
	config := writeGatewayConfig(t, t.TempDir(), fmt.Sprintf("listen: %s\nprovider:\n  url: %s", addr, prov.URL()), up.srv.URL,
		`{match: "*", gate: true}`, "refund-bot", token)
	out := provisionGateway(t, config, provToken)
	if out["instance_id"] == "" {
		t.Fatalf("provision: %v", out)
	}
	// Provisioning again returns the same instance (the saved submission).
	again := provisionGateway(t, config, provToken)
	if again["instance_id"] != out["instance_id"] {
		t.Fatalf("provisioning again gave instance %v, then %v", out["instance_id"], again["instance_id"])
	}

	args := `{"order":"A-7","amount_cents":990}`
	pending := func() []map[string]any {
		r := send(t, http.MethodGet, prov.URL()+"/api/v1/tenants/default/approvals?status=pending", admin, nil)
		expectStatus(t, "list approvals", r, http.StatusOK)
		var list struct{ Items []map[string]any }
		must(t, json.Unmarshal(r.body, &list))
		return list.Items
	}
	requestID := func(item map[string]any) string {
		if r, ok := item["request"].(map[string]any); ok {
			item = r
		}
		id, _ := item["id"].(string)
		return id
	}

	gw := startGatewayProcess(t, bin, config, addr)
	cs := connectAgent(t, gw.url, token)
	first := callRefund(cs, json.RawMessage(args))
	var items []map[string]any
	eventually(t, 30*time.Second, "the gated call's approval request", func() bool { items = pending(); return len(items) == 1 })
	id := requestID(items[0])
	// Operators see the MCP server and tool in `approvals list`.
	if list := runCLI(t, "approvals", "list", "--url", prov.URL(), "--token", admin).ok(t); !strings.Contains(list, "billing/issue_refund") {
		t.Errorf("approvals list does not show the MCP server and tool:\n%s", list)
	}
	gw.kill9(t)
	if r := <-first; !r.IsError {
		t.Errorf("the agent got a result from a killed gateway: %v", r.Content)
	}
	cs.Close()
	if up.count() != 0 {
		t.Fatal("forwarded before any approval")
	}

	// Restarted, the gateway forwards nothing by itself; the agent repeats
	// the call and waits on the same request.
	gw = startGatewayProcess(t, bin, config, addr)
	cs = connectAgent(t, gw.url, token)
	defer cs.Close()
	second := callRefund(cs, json.RawMessage(args))
	if got := pending(); len(got) != 1 || requestID(got[0]) != id {
		t.Fatalf("after the restart the pending requests are %v, want only %s", got, id)
	}
	if up.count() != 0 {
		t.Fatal("forwarded before the approval")
	}
	r := send(t, http.MethodPost, prov.URL()+"/api/v1/tenants/default/approvals/"+id+"/decision", admin,
		map[string]any{"decision": "approve", "valid_for": "10m"})
	expectStatus(t, "approve", r, http.StatusOK)
	var res *mcp.CallToolResult
	select {
	case res = <-second:
	case <-time.After(30 * time.Second):
		t.Fatal("no result after the approval")
	}
	if res.IsError || up.count() != 1 {
		t.Fatalf("after the approval: %v, %d refunds", res.Content, up.count())
	}
	if len(pending()) != 0 {
		t.Error("a second approval request was created")
	}
	// Killed again and restarted: the approval is never used twice.
	gw.kill9(t)
	gw = startGatewayProcess(t, bin, config, addr)
	cs2 := connectAgent(t, gw.url, token)
	defer cs2.Close()
	up.mu.Lock()
	got := up.refunds
	up.mu.Unlock()
	if len(got) != 1 || got[0] != args {
		t.Errorf("the upstream ran %v, want once with %s", got, args)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// `mcp-gateway serve --stdio --agent NAME` serves one agent on stdin and
// stdout, for MCP clients that start servers as subprocesses.
func TestMCPGatewayStdio(t *testing.T) {
	t.Parallel()
	bin := buildAgentowl(t)
	up := newCountingUpstream(t)
	prov := servertest.Start(t, servertest.Config(t, storetest.Backends(t)[0]))
	admin := prov.BootstrapToken()
	config := writeGatewayConfig(t, t.TempDir(), "provider: {url: "+prov.URL()+"}", up.srv.URL, `{match: "*"}`, "local-agent",
		"unused-local-token-0123456789")
	provisionGateway(t, config, provisionerToken(t, prov.URL(), admin))
	r := send(t, http.MethodPost, prov.URL()+"/api/v1/tenants/default/policies", admin,
		map[string]any{"tool": "billing/issue_refund", "effect": "approve", "condition": `context.mcp.agent == "local-agent"`})
	expectStatus(t, "create policy", r, http.StatusCreated)

	c := mcp.NewClient(&mcp.Implementation{Name: "local", Version: "1"}, nil)
	cs, err := c.Connect(context.Background(), &mcp.CommandTransport{Command: exec.Command(bin, "mcp-gateway", "serve", "--config", config, "--stdio", "--agent", "local-agent")}, nil)
	must(t, err)
	defer cs.Close()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "issue_refund", Arguments: map[string]any{"order": "S-1"}})
	must(t, err)
	if res.IsError || up.count() != 1 {
		t.Fatalf("gated call over stdio: %v, %d refunds", res.Content, up.count())
	}
}

// Asynchronous mode with the real binary: `provision` serves the gateway's
// receiver for the provider's verification, `serve` receives the decision
// as a signed webhook and forwards the approved call once.
func TestMCPGatewayAsynchronous(t *testing.T) {
	t.Parallel()
	bin := buildAgentowl(t)
	up := newCountingUpstream(t)
	dir := t.TempDir()
	cert, key := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	must(t, ensureSelfSigned(cert, key))
	caPEM, err := os.ReadFile(cert)
	must(t, err)
	cfg := servertest.Config(t, storetest.Backends(t)[0])
	cfg.Egress.AllowCIDRs = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}
	cfg.Egress.ExtraRootsPEM = caPEM
	prov := servertest.Start(t, cfg)
	admin := prov.BootstrapToken()
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	raddr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	token := "agent-token-async-0123456789abcdef"
	config := writeGatewayConfig(t, dir, fmt.Sprintf(`listen: %s
provider: {url: %s}
approval: {progress_interval: 30s}
receiver:
  listen: %s
  url: https://%s/aap/events
  tls_cert: %s
  tls_key: %s`, addr, prov.URL(), raddr, raddr, cert, key), up.srv.URL, `{match: "*"}`, "refund-bot", token)
	provisionGateway(t, config, provisionerToken(t, prov.URL(), admin))

	gw := startGatewayProcess(t, bin, config, addr)
	cs := connectAgent(t, gw.url, token)
	defer cs.Close()
	done := callRefund(cs, map[string]any{"order": "Z-1"})
	var id string
	eventually(t, 30*time.Second, "the approval request", func() bool {
		r := send(t, http.MethodGet, prov.URL()+"/api/v1/tenants/default/approvals?status=pending", admin, nil)
		var list struct {
			Items []struct{ Request struct{ ID string } }
		}
		must(t, json.Unmarshal(r.body, &list))
		if len(list.Items) == 1 {
			id = list.Items[0].Request.ID
		}
		return id != ""
	})
	r := send(t, http.MethodPost, prov.URL()+"/api/v1/tenants/default/approvals/"+id+"/decision", admin,
		map[string]any{"decision": "approve", "valid_for": "10m"})
	expectStatus(t, "approve", r, http.StatusOK)
	select {
	case res := <-done:
		if res.IsError || up.count() != 1 {
			t.Fatalf("after the webhook: %v, %d refunds", res.Content, up.count())
		}
	case <-time.After(25 * time.Second): // shorter than the 30s check: only the webhook can wake it
		t.Fatal("the approved call was not woken by the webhook")
	}
}
