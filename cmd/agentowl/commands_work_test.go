package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentowl/agentowl/internal/server"
	"github.com/agentowl/agentowl/workclient"
)

// startWork runs Main on s with agent work able to deliver to local TLS
// runtimes (egress allowed to loopback, trusting httptest's certificate).
func (s site) startWork(t *testing.T, caPEM []byte) *running {
	t.Helper()
	return s.startWorkWith(t, caPEM, func(*server.Config) {})
}

// startWorkWith is startWork with the configuration adjusted by adjust.
func (s site) startWorkWith(t *testing.T, caPEM []byte, adjust func(*server.Config)) *running {
	t.Helper()
	return s.startWith(t, nil, func(cfg *server.Config) {
		cfg.Egress.AllowCIDRs = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}
		cfg.Egress.ExtraRootsPEM = caPEM
		cfg.Delivery.RetryMinDelay, cfg.Delivery.RetryMaxDelay = 50*time.Millisecond, 200*time.Millisecond
		adjust(cfg)
	})
}

// runtimeSink is a TLS endpoint that acknowledges every delivery.
type runtimeSink struct {
	srv  *httptest.Server
	mu   sync.Mutex
	docs []map[string]any
	// raw holds each delivery as sent, for checking its signature.
	raw []sinkDelivery
}

type sinkDelivery struct {
	header http.Header
	body   []byte
}

func newRuntimeSink(t *testing.T) *runtimeSink {
	rs := &runtimeSink{}
	rs.srv = newTLSServer(t, func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var doc map[string]any
		_ = json.Unmarshal(body, &doc)
		rs.mu.Lock()
		rs.docs = append(rs.docs, doc)
		rs.raw = append(rs.raw, sinkDelivery{header: r.Header.Clone(), body: body})
		rs.mu.Unlock()
		w.WriteHeader(http.StatusAccepted)
	})
	return rs
}

func (rs *runtimeSink) count() int {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return len(rs.docs)
}

// deliveries returns a copy of the deliveries as sent.
func (rs *runtimeSink) deliveries() []sinkDelivery {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return append([]sinkDelivery(nil), rs.raw...)
}

// TestCLIAgentWork runs the seed's command lines as written, against a
// server on each backend: endpoints, runtime credentials, a webhook
// binding, an event, callbacks from a runtime, and the work views.
func TestCLIAgentWork(t *testing.T) {
	forEachBackend(t, func(t *testing.T, s site) {
		rs := newRuntimeSink(t)
		srv := s.startWork(t, certPEM(rs.srv))
		admin, op := s.operator(t, srv)
		// endpoints create and update take --url for the endpoint's URL, so
		// the server is named with --api-url (or AGENTOWL_URL).
		epCmd := func(args ...string) cliResult {
			return runCLI(t, append(args, "--api-url", srv.url, "--token", admin)...)
		}
		dir := t.TempDir()
		secretFile := filepath.Join(dir, "decision-secret")
		if err := os.WriteFile(secretFile, []byte("decision-bearer-secret-0123456789\n"), 0o600); err != nil {
			t.Fatal(err)
		}

		// endpoints create, as the seed writes it, with and without --json.
		ep := cliJSON(t, epCmd("--json", "endpoints", "create", "--tenant", "default", "--name", "support-runtime", "--url", rs.srv.URL+"/events",
			"--agent-work", "--decision-url", "https://127.0.0.1:9/decisions", "--decision-secret-file", secretFile))
		epID, _ := ep["id"].(string)
		if !strings.HasPrefix(epID, "ep_") || get(ep, "config", "agent_work") != true || ep["decision_secret_set"] != true ||
			!strings.HasPrefix(ep["signing_secret"].(string), "whsec_") {
			t.Fatalf("endpoints create --json = %v", ep)
		}
		human := epCmd("endpoints", "create", "--tenant", "default", "--name", "plain", "--url", rs.srv.URL+"/plain").ok(t)
		if !strings.Contains(human, "Signing secret (shown once") || !strings.Contains(human, "whsec_") {
			t.Errorf("endpoints create output:\n%s", human)
		}
		header, rows := parseTable(t, op("endpoints", "list").ok(t))
		expectHeader(t, "endpoints list", header, "ID", "NAME", "AGENT", "WORK", "URL")
		if row := rowWith(t, "endpoints list", rows, epID); row[1] != "support-runtime" || row[2] != "true" {
			t.Errorf("endpoints list row %q", row)
		}
		if out := epCmd("endpoints", "update", epID, "--agent-work=false").ok(t); !strings.Contains(out, "agent_work:") || !strings.Contains(out, "false") {
			t.Errorf("endpoints update --agent-work=false:\n%s", out)
		}
		if up := cliJSON(t, epCmd("--json", "endpoints", "update", epID, "--agent-work")); get(up, "config", "agent_work") != true {
			t.Errorf("endpoints update --agent-work = %v", up)
		}
		epCmd("endpoints", "update", epID).failed(t, "nothing to change")
		epCmd("endpoints", "create", "--name", "bad", "--url", "http://example.com/").failed(t, "invalid_webhook_url")

		// The seed's runtime-credentials lines, as written.
		cred := cliJSON(t, runCLI(t, "--json", "runtime-credentials", "create", epID, "--days", "30", "--url", srv.url, "--token", admin))
		token, _ := cred["token"].(string)
		credID, _ := cred["id"].(string)
		if !strings.HasPrefix(token, "owl_rt_") || !strings.HasPrefix(credID, "rtc_") {
			t.Fatalf("runtime-credentials create --json = %v", cred)
		}
		header, rows = parseTable(t, op("runtime-credentials", "list", epID).ok(t))
		expectHeader(t, "runtime-credentials list", header, "ID", "STATUS", "SCOPES", "CREATED", "EXPIRES", "LABEL")
		if row := rowWith(t, "runtime-credentials list", rows, credID); row[1] != "active" || row[2] != "attachments:read,callbacks:write,decisions:read" {
			t.Errorf("runtime-credentials list row %q", row)
		}
		op("--json", "runtime-credentials", "create", epID, "--days", "91").failed(t, "invalid_field")
		op("--json", "runtime-credentials", "create", epID, "--days", "0").failed(t, "invalid_field")
		// Without --days the server's default lifetime (90 days) applies.
		def := cliJSON(t, op("--json", "runtime-credentials", "create", epID))
		created, _ := time.Parse(time.RFC3339, str(def["created_at"]))
		if expires, _ := time.Parse(time.RFC3339, str(def["expires_at"])); !expires.Equal(created.Add(90 * 24 * time.Hour)) {
			t.Errorf("runtime-credentials create without --days: created %v, expires %v; want 90 days", def["created_at"], def["expires_at"])
		}
		insp := op("endpoints", "inspect", epID).ok(t)
		if !strings.Contains(insp, credID) || strings.Contains(insp, "decision-bearer-secret") {
			t.Errorf("endpoints inspect:\n%s", insp)
		}

		// bindings create, as the seed writes it; the ingress URL is printed once.
		out := op("bindings", "create", "--tenant", "default", "--channel", "webhook", "--endpoint", epID).ok(t)
		lines := strings.Split(strings.TrimSpace(out), "\n")
		ingressURL := lines[len(lines)-1]
		if !strings.HasPrefix(ingressURL, srv.url+"/in/webhook/in_") {
			t.Fatalf("bindings create printed:\n%s", out)
		}
		r := send(t, http.MethodPost, ingressURL, "", map[string]any{"text": "Summarise ticket 7"})
		expectStatus(t, "POST ingress", r, http.StatusAccepted)

		// work list --json, as the seed writes it, with and without --status.
		var items []map[string]any
		eventually(t, 10*time.Second, "the handoff delivered", func() bool {
			items = itemsOf(t, cliJSON(t, runCLI(t, "--json", "work", "list", "--tenant", "default", "--url", srv.url, "--token", admin)))
			return len(items) == 1 && get(items[0], "delivery", "state") == "delivered"
		})
		workID, _ := items[0]["id"].(string)
		if get(items[0], "runtime", "status") != "pending" || rs.count() != 1 {
			t.Fatalf("work list = %v", items)
		}
		if n := len(itemsOf(t, cliJSON(t, op("--json", "work", "list", "--tenant", "default", "--status", "completed")))); n != 0 {
			t.Errorf("--status completed lists %d work before any callback", n)
		}
		op("work", "list", "--status", "done").failed(t, "invalid_field")

		// The runtime reports with the SDK.
		wk := &workclient.Work{WorkID: workID, CallbackURL: srv.url + "/runtime/v1/work/" + workID + "/callbacks"}
		rep := (&workclient.Client{Token: token}).Reporter(wk, 0)
		for _, st := range []workclient.Status{workclient.Accepted, workclient.Running, workclient.Completed} {
			if _, err := rep.Report(t.Context(), st, func(cb *workclient.Callback) {
				if st == workclient.Completed {
					cb.Result = &workclient.Result{Summary: "Report ready", URL: "https://runtime.example/results/7"}
				}
			}); err != nil {
				t.Fatalf("report %s: %v", st, err)
			}
		}
		if n := len(itemsOf(t, cliJSON(t, op("--json", "work", "list", "--tenant", "default", "--status", "completed")))); n != 1 {
			t.Errorf("--status completed lists %d work", n)
		}
		out = op("work", "inspect", workID).ok(t)
		for _, want := range []string{"delivery (HTTP acknowledgement):", "delivered", "runtime (callbacks):", "completed",
			"https://runtime.example/results/7", "decision (human decision receipt):", "work committed for handoff", "attempt 1: status 202",
			workID + ":3 seq 3: completed", "(1 routine running updates not shown; --all lists them)"} {
			if !strings.Contains(out, want) {
				t.Errorf("work inspect lacks %q:\n%s", want, out)
			}
		}
		if out := op("work", "inspect", workID, "--all").ok(t); !strings.Contains(out, workID+":2 seq 2: running") {
			t.Errorf("work inspect --all lacks the running update:\n%s", out)
		}
		insw := cliJSON(t, op("--json", "work", "inspect", workID))
		if get(insw, "runtime", "result", "summary") != "Report ready" || len(insw["timeline"].([]any)) != 5 {
			t.Errorf("work inspect --json = %v", insw)
		}

		// work replay: new work, generation 2, same conversation.
		out = op("work", "replay", workID).ok(t)
		if !strings.Contains(out, "(generation 2, conversation "+items[0]["conversation_id"].(string)) {
			t.Errorf("work replay printed:\n%s", out)
		}
		eventually(t, 10*time.Second, "the replay delivered", func() bool { return rs.count() == 2 })

		// runtime-credentials revoke, as the seed writes it.
		if out := op("runtime-credentials", "revoke", credID).ok(t); !strings.Contains(out, "Revoked runtime credential "+credID) {
			t.Errorf("revoke printed %q", out)
		}
		if _, err := (&workclient.Client{Token: token, MaxAttempts: 1}).Post(t.Context(), wk.CallbackURL,
			workclient.NewCallback(wk, 9, workclient.Running, time.Now())); err == nil || !strings.Contains(err.Error(), "401 unauthenticated") {
			t.Errorf("a revoked token: %v", err)
		}

		if out := op("endpoints", "rotate-secret", epID).ok(t); !strings.Contains(out, "whsec_") {
			t.Errorf("rotate-secret printed %q", out)
		}
		op("endpoints", "delete", epID).failed(t, "endpoint_in_use")
		bindings := itemsOf(t, cliJSON(t, op("--json", "bindings", "list")))
		op("bindings", "delete", bindings[0]["id"].(string)).ok(t)
		op("endpoints", "delete", epID).ok(t)
		op("endpoints", "inspect", epID).failed(t, "not_found")

		audit := op("audit", "list").ok(t)
		for _, want := range []string{"endpoint.create", "endpoint.update", "runtime_credential.create", "runtime_credential.revoke",
			"binding.create", "binding.delete", "endpoint.rotate_secret", "endpoint.delete", "work.replay"} {
			if !strings.Contains(audit, want) {
				t.Errorf("audit list lacks %s", want)
			}
		}
		// The secret key file sealing endpoint secrets was created once, private.
		if fi, err := os.Stat(filepath.Join(s.dataDir, "secret-key")); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("secret-key file: %v %v", fi, err)
		}
	})
}
