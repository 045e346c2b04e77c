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

// startGatewayProcess runs `agentowl mcp-gateway serve` and waits for its
// /healthz.
func startGatewayProcess(t *testing.T, bin, config, addr string) *serveProcess {
	t.Helper()
	logs := t.TempDir()
	stderr, err := os.Create(filepath.Join(logs, "stderr"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "mcp-gateway", "serve", "--config", config, "--json")
	cmd.Stdout, cmd.Stderr = stderr, stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &serveProcess{cmd: cmd, url: "http://" + addr, exited: make(chan struct{})}
	go func() {
		cmd.Wait()
		stderr.Close()
		close(p.exited)
	}()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-p.exited
		if t.Failed() {
			out, _ := os.ReadFile(stderr.Name())
			t.Logf("mcp-gateway output:\n%.20000s", out)
		}
	})
	p.awaitHealthz(t, "agentowl mcp-gateway serve", stderr.Name())
	return p
}

// kill -9 of the gateway while a gated call waits: nothing is forwarded
// until the approval, the agent that repeats the call after the restart
// gets the same approval request, and the approved call runs once, even
// across another kill -9 after it ran.
func TestMCPGatewayCrash(t *testing.T) {
	bin := buildAgentowl(t)
	up := newCountingUpstream(t)
	cfg := servertest.Config(t, storetest.Backends(t)[0])
	prov := servertest.Start(t, cfg)
	admin := prov.BootstrapToken()
	provToken := provisionerToken(t, prov.URL(), admin)

	dir := t.TempDir()
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	token := "agent-token-crash-0123456789abcdef"
	config := filepath.Join(dir, "gateway.yaml")
	must(t, os.WriteFile(config, fmt.Appendf(nil, `
listen: %s
data_dir: data
provider:
  url: %s
upstreams:
  - name: billing
    url: %s
    tools: [{match: "*", gate: true}]
agents:
  - name: refund-bot
    token_sha256: %s
    tools: ["billing/*"]
`, addr, prov.URL(), up.srv.URL, mcpgateway.HashToken(token)), 0o600))
	out := cliJSON(t, runCLI(t, "mcp-gateway", "provision", "--config", config, "--provisioner-token", provToken, "--json"))
	if out["instance_id"] == "" {
		t.Fatalf("provision: %v", out)
	}
	// Provisioning again returns the same instance (the saved submission).
	again := cliJSON(t, runCLI(t, "mcp-gateway", "provision", "--config", config, "--provisioner-token", provToken, "--json"))
	if again["instance_id"] != out["instance_id"] {
		t.Fatalf("provisioning again gave instance %v, then %v", out["instance_id"], again["instance_id"])
	}

	connect := func(url string) *mcp.ClientSession {
		c := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "1"}, nil)
		cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: url + "/mcp", MaxRetries: -1,
			HTTPClient: &http.Client{Transport: tokenTransport{token}}}, nil)
		must(t, err)
		return cs
	}
	args := `{"order":"A-7","amount_cents":990}`
	callAsync := func(cs *mcp.ClientSession) <-chan *mcp.CallToolResult {
		ch := make(chan *mcp.CallToolResult, 1)
		go func() {
			res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "issue_refund", Arguments: json.RawMessage(args)})
			if err != nil {
				res = &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: err.Error()}}}
			}
			ch <- res
		}()
		return ch
	}
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
	cs := connect(gw.url)
	first := callAsync(cs)
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
	cs = connect(gw.url)
	defer cs.Close()
	second := callAsync(cs)
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
	cs2 := connect(gw.url)
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
	bin := buildAgentowl(t)
	up := newCountingUpstream(t)
	prov := servertest.Start(t, servertest.Config(t, storetest.Backends(t)[0]))
	admin := prov.BootstrapToken()
	dir := t.TempDir()
	config := filepath.Join(dir, "gateway.yaml")
	must(t, os.WriteFile(config, fmt.Appendf(nil, `
data_dir: data
provider: {url: %s}
upstreams:
  - name: billing
    url: %s
    tools: [{match: "*"}]
agents:
  - name: local-agent
    token_sha256: %s
    tools: ["billing/*"]
`, prov.URL(), up.srv.URL, mcpgateway.HashToken("unused-local-token-0123456789")), 0o600))
	cliJSON(t, runCLI(t, "mcp-gateway", "provision", "--config", config, "--provisioner-token", provisionerToken(t, prov.URL(), admin), "--json"))
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
	config := filepath.Join(dir, "gateway.yaml")
	must(t, os.WriteFile(config, fmt.Appendf(nil, `
listen: %s
data_dir: data
provider: {url: %s}
approval: {progress_interval: 30s}
receiver:
  listen: %s
  url: https://%s/aap/events
  tls_cert: %s
  tls_key: %s
upstreams:
  - name: billing
    url: %s
    tools: [{match: "*"}]
agents:
  - name: refund-bot
    token_sha256: %s
    tools: ["billing/*"]
`, addr, prov.URL(), raddr, raddr, cert, key, up.srv.URL, mcpgateway.HashToken(token)), 0o600))
	cliJSON(t, runCLI(t, "mcp-gateway", "provision", "--config", config, "--provisioner-token", provisionerToken(t, prov.URL(), admin), "--json"))

	gw := startGatewayProcess(t, bin, config, addr)
	c := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "1"}, nil)
	cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: gw.url + "/mcp", MaxRetries: -1,
		HTTPClient: &http.Client{Transport: tokenTransport{token}}}, nil)
	must(t, err)
	defer cs.Close()
	done := make(chan *mcp.CallToolResult, 1)
	go func() {
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "issue_refund", Arguments: map[string]any{"order": "Z-1"}})
		if err != nil {
			res = &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: err.Error()}}}
		}
		done <- res
	}()
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
