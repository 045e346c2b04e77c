package mcpgateway_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentowl/agentowl/aap"
	"github.com/agentowl/agentowl/attest"
	"github.com/agentowl/agentowl/internal/clocktest"
	"github.com/agentowl/agentowl/internal/mcpgateway"
	"github.com/agentowl/agentowl/internal/server"
)

// strictUpstream is an upstream MCP server that does not trust the
// gateway: its issue_refund runs only when the tools/call carries, in
// _meta, an attestation signed by the provider's published keys for
// exactly the arguments it received, for billing/issue_refund, approved
// and not expired by its own clock, and not used before. Between the
// gateway and it sits a hook that can tamper with each tools/call on the
// wire, as a compromised gateway or network could.
type strictUpstream struct {
	srv    *httptest.Server
	keys   attest.KeySet
	issuer string
	clock  *clocktest.Fake

	mu       sync.Mutex
	ahead    time.Duration               // the upstream's clock runs this far ahead of the provider's
	tamper   func(params map[string]any) // applied to tools/call params on the wire
	accepted []receivedCall
	refused  []string
	used     map[string]bool // attestation IDs already spent
}

type receivedCall struct {
	args  json.RawMessage
	token string
}

func newStrictUpstream(t testing.TB, p *provider, clock *clocktest.Fake) *strictUpstream {
	u := &strictUpstream{keys: attest.NewRemoteKeySet(p.url+mcpgateway.JWKSPath, nil), issuer: p.url, clock: clock, used: map[string]bool{}}
	s := mcp.NewServer(&mcp.Implementation{Name: "billing", Version: "1"}, nil)
	s.AddTool(&mcp.Tool{Name: "issue_refund", Description: "Refund an order", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			tok, _ := req.Params.GetMeta()[mcpgateway.AttestationMetaKey].(string)
			args := append(json.RawMessage(nil), req.Params.Arguments...)
			if err := u.check(ctx, tok, args); err != nil {
				u.mu.Lock()
				u.refused = append(u.refused, err.Error())
				u.mu.Unlock()
				return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "attestation required: " + err.Error()}}}, nil
			}
			u.mu.Lock()
			u.accepted = append(u.accepted, receivedCall{args: args, token: tok})
			n := len(u.accepted)
			u.mu.Unlock()
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("refund #%d issued", n)}}}, nil
		})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil)
	u.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != upstreamSecret {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		u.mu.Lock()
		tamper := u.tamper
		u.mu.Unlock()
		if tamper != nil && r.Method == http.MethodPost {
			body, _ := io.ReadAll(r.Body)
			dec := json.NewDecoder(bytes.NewReader(body))
			dec.UseNumber()
			var msg map[string]any
			if dec.Decode(&msg) == nil && msg["method"] == "tools/call" {
				tamper(msg["params"].(map[string]any))
				body, _ = json.Marshal(msg)
			}
			r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(u.srv.Close)
	return u
}

// check is what an upstream does with the attestation of a call before
// running it.
func (u *strictUpstream) check(ctx context.Context, token string, args json.RawMessage) error {
	if token == "" {
		return errors.New("the call carries no attestation")
	}
	parsed, err := attest.Parse(token)
	if err != nil {
		return err
	}
	u.mu.Lock()
	now := u.clock.Now().Add(u.ahead)
	u.mu.Unlock()
	doc, err := attest.VerifyContext(ctx, token, u.keys, attest.Expectation{Issuer: u.issuer,
		Subject: attest.Subject{Kind: attest.SubjectAAPRequest, RequestID: parsed.Document.Subject.RequestID},
		Tool:    "billing/issue_refund", Arguments: args, Now: func() time.Time { return now }})
	if err != nil {
		return err
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.used[doc.ID] {
		return fmt.Errorf("attestation %s was used before (a replay)", doc.ID)
	}
	u.used[doc.ID] = true
	return nil
}

func (u *strictUpstream) set(ahead time.Duration, tamper func(map[string]any)) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.ahead, u.tamper = ahead, tamper
}

func (u *strictUpstream) counts() (accepted, refused int) {
	u.mu.Lock()
	defer u.mu.Unlock()
	return len(u.accepted), len(u.refused)
}

// attestEnv is a provider, a strict upstream and a gateway in front of it,
// with the refund-bot agent connected.
type attestEnv struct {
	t     *testing.T
	clock *clocktest.Fake
	p     *provider
	up    *strictUpstream
	gw    *gatewaySite
	agent *mcp.ClientSession
}

func newAttestEnv(t *testing.T, adjust ...func(*server.Config)) *attestEnv {
	e := &attestEnv{t: t, clock: clocktest.New(t0)}
	e.p = newProvider(t, e.clock, adjust...)
	e.up = newStrictUpstream(t, e.p, e.clock)
	e.gw = startGateway(t, gatewayYAML(e.up.srv.URL), e.p.provision("mcp-gateway"), e.clock, tempDB(t))
	e.agent = agentSession(t, e.gw.srv.URL, agentToken, nil)
	return e
}

// approvedCall makes the agent call issue_refund with args, approves the
// request for ten minutes and returns the agent's result and the request
// ID.
func approvedCall(t *testing.T, agent *mcp.ClientSession, gw *gatewaySite, p *provider, args string) (*mcp.CallToolResult, string) {
	t.Helper()
	out := make(chan *mcp.CallToolResult, 1)
	go func() {
		res, err := agent.CallTool(context.Background(), &mcp.CallToolParams{Name: "issue_refund", Arguments: json.RawMessage(args)})
		if err != nil {
			res = &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "protocol error: " + err.Error()}}}
		}
		out <- res
	}()
	id := waiting(t, gw.store)
	p.decide(id, true, 10*time.Minute, "ok")
	return receive(t, out), id
}

func refundArgsFor(order string) string {
	return `{"order":"` + order + `","amount_cents":125000,"currency":"EUR","lines":[1,2.5,"x"]}`
}

// The gateway passes each approved call's attestation to the upstream in
// _meta: it verifies there, against the provider's published keys, for
// exactly the arguments the upstream received. An upstream that requires
// one refuses a call forwarded without one, with a forged one, with one for
// other arguments, with an expired one, and one replayed.
func TestUpstreamVerifiesForwardedAttestation(t *testing.T) {
	e := newAttestEnv(t)
	res, id := approvedCall(t, e.agent, e.gw, e.p, refundArgs)
	if res.IsError || text(res) != "refund #1 issued" {
		t.Fatalf("the approved call: %v %q", res.IsError, text(res))
	}
	e.up.mu.Lock()
	got := e.up.accepted[0]
	e.up.mu.Unlock()
	// Checked here independently of the fixture: the token verifies with
	// the keys published at the provider, its subject is the request, and
	// its digest is that of the arguments the upstream received, which are
	// the agent's.
	keys, err := attest.ParseJWKS(fetch(t, e.p.url+mcpgateway.JWKSPath))
	must(t, err)
	doc, err := attest.Verify(got.token, keys, attest.Expectation{Issuer: e.p.url,
		Subject: attest.Subject{Kind: attest.SubjectAAPRequest, RequestID: id}, Tool: "billing/issue_refund",
		Arguments: got.args, Now: e.clock.Now})
	must(t, err)
	sum, err := attest.ArgumentsDigest(got.args)
	must(t, err)
	if doc.Action.ArgumentsSHA256 != sum || doc.Decision != attest.Approved || !sameJSON(t, got.args, refundArgs) {
		t.Fatalf("attested %s for %s (upstream received %s)", doc.Action.ArgumentsSHA256, sum, got.args)
	}

	other := newKey(t)
	cases := []struct {
		what   string
		ahead  time.Duration
		tamper func(params map[string]any)
		reason string
	}{
		{"without an attestation", 0, func(p map[string]any) { delete(p["_meta"].(map[string]any), mcpgateway.AttestationMetaKey) },
			"carries no attestation"},
		{"with a forged attestation", 0, func(p map[string]any) {
			meta := p["_meta"].(map[string]any)
			meta[mcpgateway.AttestationMetaKey] = other.forge(t, meta[mcpgateway.AttestationMetaKey].(string))
		}, "bad signature"},
		{"with an attestation for other arguments", 0, func(p map[string]any) {
			p["arguments"].(map[string]any)["amount_cents"] = json.Number("99999900")
		}, "wrong action"},
		{"with an expired attestation", 11 * time.Minute, nil, "expired"},
	}
	for i, c := range cases {
		e.up.set(c.ahead, c.tamper)
		res, _ := approvedCall(t, e.agent, e.gw, e.p, refundArgsFor(fmt.Sprintf("B-%d", i)))
		if !res.IsError || !strings.Contains(text(res), "attestation required") || !strings.Contains(text(res), c.reason) {
			t.Errorf("a call forwarded %s: %v %q, want a refusal naming %q", c.what, res.IsError, text(res), c.reason)
		}
		if accepted, refused := e.up.counts(); accepted != 1 || refused != i+1 {
			t.Fatalf("after a call %s: %d accepted, %d refused", c.what, accepted, refused)
		}
	}
	e.up.set(0, nil)

	// Replayed by someone holding the upstream's credential: refused.
	c := mcp.NewClient(&mcp.Implementation{Name: "replayer", Version: "1"}, nil)
	cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: e.up.srv.URL, MaxRetries: -1,
		HTTPClient: &http.Client{Transport: headerRT{upstreamSecret}}}, nil)
	must(t, err)
	defer cs.Close()
	res, err = cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "issue_refund", Arguments: got.args,
		Meta: mcp.Meta{mcpgateway.AttestationMetaKey: got.token}})
	must(t, err)
	if !res.IsError || !strings.Contains(text(res), "replay") {
		t.Fatalf("a replayed attestation: %v %q", res.IsError, text(res))
	}
	// And the untampered path still works.
	if res, _ := approvedCall(t, e.agent, e.gw, e.p, refundArgsFor("C-1")); res.IsError {
		t.Fatalf("an untampered call after the refusals: %q", text(res))
	}
}

// A provider that signs no attestations: the gateway forwards the approved
// call without one (it does not verify by default), and the strict upstream
// refuses it.
func TestUpstreamRefusesCallWithoutAttestation(t *testing.T) {
	e := newAttestEnv(t, func(c *server.Config) { c.NoAttestations = true })
	res, _ := approvedCall(t, e.agent, e.gw, e.p, refundArgs)
	if !res.IsError || !strings.Contains(text(res), "carries no attestation") {
		t.Fatalf("approved without an attestation: %v %q", res.IsError, text(res))
	}
	if accepted, refused := e.up.counts(); accepted != 0 || refused != 1 {
		t.Fatalf("%d accepted, %d refused", accepted, refused)
	}
}

// providerFront sits between the gateway and the provider and can replace
// the provider's attestation answers: a provider (or network) that
// approves a call but hands the gateway the proof of another decision.
type providerFront struct {
	srv *httptest.Server

	mu       sync.Mutex
	answered map[string][]byte // request ID → the provider's attestation answer
	rewrite  func(id string, answered map[string][]byte) (int, []byte, bool)
}

var attestationPath = regexp.MustCompile(`^/v1/requests/([0-9a-f-]{36})/attestation$`)

func newProviderFront(t testing.TB, p *provider) *providerFront {
	f := &providerFront{answered: map[string][]byte{}}
	target, _ := url.Parse(p.url)
	rp := &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) { r.SetURL(target) },
		ModifyResponse: func(resp *http.Response) error {
			m := attestationPath.FindStringSubmatch(resp.Request.URL.Path)
			if m == nil || resp.StatusCode != http.StatusOK {
				return nil
			}
			body, err := io.ReadAll(resp.Body)
			if err != nil {
				return err
			}
			f.mu.Lock()
			f.answered[m[1]] = body
			f.mu.Unlock()
			resp.Body = io.NopCloser(bytes.NewReader(body))
			return nil
		}}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if m := attestationPath.FindStringSubmatch(r.URL.Path); m != nil {
			f.mu.Lock()
			rewrite := f.rewrite
			f.mu.Unlock()
			if rewrite != nil {
				f.mu.Lock()
				status, body, ok := rewrite(m[1], f.answered)
				f.mu.Unlock()
				if ok {
					w.Header().Set("Content-Type", "application/json")
					w.WriteHeader(status)
					_, _ = w.Write(body)
					return
				}
			}
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *providerFront) set(rewrite func(id string, answered map[string][]byte) (int, []byte, bool)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rewrite = rewrite
}

// With attestations.verify the gateway verifies each approval's
// attestation itself before forwarding: a call whose attestation is
// another call's (for other arguments), forged, or missing is not
// forwarded, and the agent gets "unverified:".
func TestGatewayVerifiesAttestations(t *testing.T) {
	clock := clocktest.New(t0)
	p := newProvider(t, clock)
	up := newUpstream(t)
	front := newProviderFront(t, p)
	client := p.provision("verifying-gateway")
	client.BaseURL = front.srv.URL // every provider call, the key set included, goes through the front
	yaml := gatewayYAML(up.srv.URL) + fmt.Sprintf("attestations:\n  verify: true\n  issuer: %s\n", p.url)
	gw := startGateway(t, yaml, client, clock, tempDB(t))
	agent := agentSession(t, gw.srv.URL, agentToken, nil)

	res, first := approvedCall(t, agent, gw, p, refundArgs)
	if res.IsError || up.refundCount() != 1 {
		t.Fatalf("a verified approval: %v %q, %d refunds", res.IsError, text(res), up.refundCount())
	}
	other := newKey(t)
	cases := []struct {
		what    string
		rewrite func(id string, answered map[string][]byte) (int, []byte, bool)
		reason  string
	}{
		{"another call's attestation (other arguments)", func(_ string, answered map[string][]byte) (int, []byte, bool) {
			return http.StatusOK, answered[first], true
		}, "wrong subject"},
		{"a forged attestation", func(id string, _ map[string][]byte) (int, []byte, bool) {
			direct := &aap.Client{BaseURL: p.url, Token: client.Token}
			tok, err := direct.RequestAttestation(context.Background(), id)
			must(t, err)
			b, _ := json.Marshal(map[string]string{"attestation": other.forge(t, tok)})
			return http.StatusOK, b, true
		}, "bad signature"},
		{"no attestation", func(string, map[string][]byte) (int, []byte, bool) {
			return http.StatusNotFound, []byte(`{"error":{"type":"invalid_request","code":"not_found","message":"none"}}`), true
		}, "has no attestation"},
	}
	for i, c := range cases {
		front.set(c.rewrite)
		res, id := approvedCall(t, agent, gw, p, refundArgsFor(fmt.Sprintf("V-%d", i)))
		want := "unverified: the call was not run (AgentOwl request " + id
		if !res.IsError || !strings.HasPrefix(text(res), want) || !strings.Contains(text(res), c.reason) {
			t.Errorf("%s: %v %q, want %q … %q", c.what, res.IsError, text(res), want, c.reason)
		}
		if up.refundCount() != 1 {
			t.Fatalf("%s: forwarded (%d refunds)", c.what, up.refundCount())
		}
	}
	front.set(nil)
	if res, _ := approvedCall(t, agent, gw, p, refundArgsFor("V-ok")); res.IsError || up.refundCount() != 2 {
		t.Fatalf("a verified approval after the refusals: %q, %d refunds", text(res), up.refundCount())
	}
}

// testKey signs forgeries: another key than the provider's, under the
// provider's kid.
type testKey struct{ priv ed25519.PrivateKey }

func newKey(t testing.TB) testKey {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	must(t, err)
	return testKey{priv}
}

// forge re-signs token's document with k, keeping the kid.
func (k testKey) forge(t testing.TB, token string) string {
	parsed, err := attest.Parse(token)
	must(t, err)
	forged, err := attest.Sign(parsed.Document, parsed.KeyID, k.priv)
	must(t, err)
	return forged
}

func fetch(t testing.TB, u string) []byte {
	t.Helper()
	resp, err := http.Get(u)
	must(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	must(t, err)
	return b
}

func sameJSON(t testing.TB, a json.RawMessage, b string) bool {
	var va, vb any
	must(t, json.Unmarshal(a, &va))
	must(t, json.Unmarshal([]byte(b), &vb))
	ja, _ := json.Marshal(va)
	jb, _ := json.Marshal(vb)
	return bytes.Equal(ja, jb)
}

func TestAttestationsConfig(t *testing.T) {
	base := gatewayYAML("https://billing.internal/mcp")
	cfg, err := mcpgateway.ParseConfig([]byte(base))
	must(t, err)
	if cfg.Attestations.Verify {
		t.Error("verification is on by default")
	}
	cfg, err = mcpgateway.ParseConfig([]byte(base + "attestations:\n  verify: true\n  issuer: https://owl.example.com/\n  jwks_url: https://owl.example.com/.well-known/agentowl/jwks.json\n"))
	must(t, err)
	if !cfg.Attestations.Verify || cfg.Attestations.Issuer != "https://owl.example.com" {
		t.Errorf("parsed %+v", cfg.Attestations)
	}
	for _, bad := range []string{"attestations:\n  jwks_url: owl.example.com/jwks.json\n", "attestations:\n  verfy: true\n"} {
		if _, err := mcpgateway.ParseConfig([]byte(base + bad)); err == nil {
			t.Errorf("accepted %q", bad)
		}
	}
}
