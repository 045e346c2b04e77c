package console_test

import (
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/agentowl/agentowl/internal/server"
	"github.com/agentowl/agentowl/internal/store/storetest"
)

// The console's flows in a real browser: a refund approval and a runtime
// question decided end to end, notifications, CSRF, escaping, sign-out.

// TestBrowserApproveRefund: an AAP request created over /v1 appears in
// Needs attention; an operator reviews the action, confirms, and the
// harness adapter's long poll returns approved. What the agent wrote
// renders as text; the decision is audited as the signed-in operator.
func TestBrowserApproveRefund(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		s := start(t, b, nil)
		mia := s.operator("mia", "member")
		cred := s.instance()
		id := s.request(cred, refund("The customer was charged twice. "+hostile))
		att := "att_aap_" + id
		polled := make(chan map[string]any, 1)
		go func() {
			var last map[string]any
			for range 3 { // each long poll holds up to 30s
				if last = longPoll(s.url, id, cred); last["status"] != "pending" {
					break
				}
			}
			polled <- last
		}()

		ctx := tab(t)
		signIn(t, ctx, s, mia)
		ck := browserCookie(t, ctx, s, "agentowl_session_default")
		if ck == nil || !ck.HTTPOnly || ck.SameSite != "Strict" || ck.Secure || ck.Path != "/console/" {
			t.Fatalf("session cookie %+v", ck)
		}
		if eval[bool](t, ctx, `document.cookie.includes("agentowl_session")`) {
			t.Fatal("page scripts can read the session cookie")
		}
		waitFor(t, ctx, "the request in Needs attention", fmt.Sprintf(`!!document.querySelector('[data-id=%q]')`, att))
		accessible(t, ctx)
		noScript := `window.__xss === undefined && document.querySelectorAll("main img, main script").length === 0`
		if !eval[bool](t, ctx, noScript) {
			t.Fatal("the agent's text ran or rendered as markup in the list")
		}

		click(t, ctx, fmt.Sprintf(`[data-id=%q] a`, att), "Attention item")
		accessible(t, ctx)
		if !eval[bool](t, ctx, noScript) {
			t.Fatal("the agent's text ran or rendered as markup on the item page")
		}
		prompt := eval[string](t, ctx, `document.getElementById("prompt").textContent`)
		action := eval[string](t, ctx, `document.getElementById("action").textContent`)
		if !strings.Contains(prompt, "<script>window.__xss=1</script>") || !strings.Contains(action, "<img src=x onerror=") ||
			!strings.Contains(action, "issue_refund") {
			t.Fatalf("prompt %q, action %q: the agent's text is not shown as text", prompt, action)
		}
		digest := eval[string](t, ctx, `document.getElementById("digest").textContent`)

		click(t, ctx, "#approve", "Confirm decision")
		accessible(t, ctx)
		if got := eval[string](t, ctx, `document.getElementById("confirm-digest").textContent`); got != digest {
			t.Fatalf("confirm shows digest %q, the item %q", got, digest)
		}
		if st := s.must(http.StatusOK, http.MethodGet, "/v1/requests/"+id, cred, nil)["status"]; st != "pending" {
			t.Fatalf("the review step decided: %v", st)
		}
		click(t, ctx, "#confirm", "Attention item")
		waitFor(t, ctx, "the confirmation", `document.querySelector(".done") && document.querySelector(".done").textContent.includes("Decision submitted")`)
		if got := eval[string](t, ctx, `document.getElementById("request-status").textContent`); got != "approved" {
			t.Fatalf("request status on the page: %q", got)
		}
		select {
		case r := <-polled:
			if r["status"] != "approved" {
				t.Fatalf("the adapter's long poll returned %v", r)
			}
		case <-time.After(95 * time.Second):
			t.Fatal("the long poll did not return")
		}
		audit := s.must(http.StatusOK, http.MethodGet, "/api/v1/tenants/default/audit", s.admin, nil)["items"].([]any)
		found := false
		for _, e := range audit {
			e := e.(map[string]any)
			found = found || (e["action"] == "approval.decide" && e["actor"] == "operator:mia")
		}
		if !found {
			t.Fatalf("no approval.decide by operator:mia in the audit log: %v", audit)
		}
	})
}

// decisionRuntime is an agent runtime's TLS server: it acknowledges
// handoffs and accepts decision pushes, passing each decision on.
type decisionRuntime struct {
	srv       *httptest.Server
	decisions chan map[string]any
}

func newDecisionRuntime(t *testing.T) *decisionRuntime {
	rt := &decisionRuntime{decisions: make(chan map[string]any, 10)}
	rt.srv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/decisions" {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		if r.Header.Get("Authorization") != "Bearer decision-bearer-secret-0123456789" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		body, _ := io.ReadAll(r.Body)
		var doc map[string]any
		_ = json.Unmarshal(body, &doc)
		select {
		case rt.decisions <- doc:
		default:
		}
		fmt.Fprintf(w, `{"accepted": true, "decision_id": %q}`, doc["decision_id"])
	}))
	t.Cleanup(rt.srv.Close)
	return rt
}

// trust lets the server's egress reach rt on loopback.
func (rt *decisionRuntime) trust(cfg *server.Config) {
	cfg.Egress.AllowCIDRs = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}
	cfg.Egress.ExtraRootsPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: rt.srv.Certificate().Raw})
	cfg.Delivery.RetryMinDelay, cfg.Delivery.RetryMaxDelay = 50*time.Millisecond, 200*time.Millisecond
}

// question hands an event to a runtime endpoint with a decision URL and
// has the runtime ask a question; it returns the work ID.
func (s *site) question(rt *decisionRuntime, prompt string) string {
	s.t.Helper()
	base := "/api/v1/tenants/default"
	ep := s.must(http.StatusCreated, http.MethodPost, base+"/endpoints", s.admin, map[string]any{"name": "support-agent",
		"url": rt.srv.URL + "/events", "config": map[string]any{"agent_work": true}, "decision_url": rt.srv.URL + "/decisions",
		"decision_secret": "decision-bearer-secret-0123456789"})["id"].(string)
	tok := s.must(http.StatusCreated, http.MethodPost, base+"/endpoints/"+ep+"/runtime-credentials", s.admin,
		map[string]any{"scopes": []string{"callbacks:write", "decisions:read"}})["token"].(string)
	in := s.must(http.StatusCreated, http.MethodPost, base+"/bindings", s.admin, map[string]any{"channel": "webhook", "endpoint_id": ep})
	s.must(http.StatusAccepted, http.MethodPost, strings.TrimPrefix(in["ingress_url"].(string), s.url), "", map[string]any{"text": "refund please"})
	items := s.must(http.StatusOK, http.MethodGet, base+"/work", s.admin, nil)["items"].([]any)
	w := items[0].(map[string]any)["id"].(string)
	cb := map[string]any{"version": "agent-work.v1", "callback_id": w + ":1", "work_id": w, "sequence": 1, "status": "needs_input",
		"occurred_at": time.Now().UTC().Format(time.RFC3339), "requests": []any{map[string]any{"id": "account", "revision": 1,
			"kind": "question", "prompt": prompt, "allowed_decisions": []any{"answer"},
			"expires_at": time.Now().Add(time.Hour).UTC().Format(time.RFC3339)}}}
	s.must(http.StatusOK, http.MethodPost, "/runtime/v1/work/"+w+"/callbacks", tok, cb)
	return w
}

// TestBrowserAnswerQuestion: a runtime's question is answered in the
// browser by keyboard alone, the runtime's push receiver gets the decision,
// and the page shows its receipt when it refreshes.
func TestBrowserAnswerQuestion(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		rt := newDecisionRuntime(t)
		s := start(t, b, rt.trust)
		w := s.question(rt, "Which account gets the refund? "+hostile)

		ctx := tab(t)
		signIn(t, ctx, s, s.admin)
		waitFor(t, ctx, "the question", `!!document.querySelector("li.kind-question a")`)
		click(t, ctx, "li.kind-question a", "Attention item")
		if !eval[bool](t, ctx, `window.__xss === undefined && document.querySelectorAll("main img, main script").length === 0 &&
			document.getElementById("prompt").textContent.includes('<img src=x onerror="window.__xss=2">')`) {
			t.Fatal("the runtime's prompt is not shown as text")
		}
		// Keyboard only: type the answer, Tab to the button, Enter.
		do(t, ctx, "type the answer", chromedp.Focus(chromedp.ID("answer")), chromedp.SendKeys(chromedp.ID("answer"), "Savings account"))
		do(t, ctx, "Tab to the button", chromedp.KeyEvent(kb.Tab))
		if got := eval[string](t, ctx, `document.activeElement.id`); got != "review-answer" {
			t.Fatalf("Tab from the answer reached %q", got)
		}
		do(t, ctx, "press Enter", chromedp.KeyEvent(kb.Enter))
		waitTitle(t, ctx, "Confirm decision")
		if got := eval[string](t, ctx, `document.getElementById("confirm-answer").textContent`); got != "Savings account" {
			t.Fatalf("confirm shows %q", got)
		}
		do(t, ctx, "confirm by keyboard", chromedp.Focus(chromedp.ID("confirm")), chromedp.KeyEvent(kb.Enter))
		waitTitle(t, ctx, "Attention item")
		select {
		case d := <-rt.decisions:
			if d["answer"] != "Savings account" || d["work_id"] != w || d["request_id"] != "account" || d["decision"] != "answer" {
				t.Fatalf("pushed decision %v", d)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("the runtime never got the decision")
		}
		waitFor(t, ctx, "the receipt after a refresh", `document.getElementById("receipt").textContent.includes("received")`)
		screenshot(t, ctx, "question-answered")

		do(t, ctx, "open the work", chromedp.Navigate(s.url+"/console/t/default/work/"+w))
		waitTitle(t, ctx, "Work "+w)
		accessible(t, ctx)
		do(t, ctx, "open Agent work", chromedp.Navigate(s.url+"/console/t/default/work"))
		waitTitle(t, ctx, "Agent work")
		accessible(t, ctx)
		do(t, ctx, "open Conversations", chromedp.Navigate(s.url+"/console/t/default/conversations"))
		waitTitle(t, ctx, "Conversations")
		accessible(t, ctx)
		do(t, ctx, "open the conversation", chromedp.Evaluate[chromedp.Void](`document.querySelector("#conversations tbody a").click()`))
		waitFor(t, ctx, "the conversation page", `document.title.startsWith("Conversation: ")`)
		accessible(t, ctx)
	})
}

// TestBrowserNotificationsCSRFSignOut: a notice appears when the page
// refreshes (no navigation) and is marked read; its deep link opens the
// item; a form posted without its CSRF token changes nothing; a
// half-filled form survives refreshes; sign-out ends the session.
func TestBrowserNotificationsCSRFSignOut(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		s := start(t, b, nil)
		cred := s.instance()
		ctx := tab(t)
		signIn(t, ctx, s, s.admin)
		do(t, ctx, "open Notifications", chromedp.Navigate(s.url+"/console/t/default/notifications"))
		waitTitle(t, ctx, "Notifications")
		accessible(t, ctx)
		do(t, ctx, "mark the page", chromedp.Evaluate[chromedp.Void](`window.__same = 1`))
		id := s.request(cred, refund("Duplicate charge."))
		waitFor(t, ctx, "the notice after a refresh", `!!document.querySelector("#notices li.unread") &&
			document.getElementById("unread").dataset.count === "1"`)
		if !eval[bool](t, ctx, `window.__same === 1`) {
			t.Fatal("the page navigated instead of refreshing")
		}
		screenshot(t, ctx, "notifications")
		click(t, ctx, "#notices li.unread .mark-read", "Notifications")
		waitFor(t, ctx, "the notice read", `!!document.querySelector("#notices li.read") && !document.querySelector("#notices li.unread") &&
			document.getElementById("unread").dataset.count === "0"`)
		click(t, ctx, "#notices li a", "Attention item")
		if !eval[bool](t, ctx, fmt.Sprintf(`location.pathname === "/console/t/default/attention/att_aap_%s"`, id)) {
			t.Fatalf("the deep link opened %s", pageText(ctx))
		}

		// A half-filled form is kept while the page refreshes.
		do(t, ctx, "half-fill the assignee", chromedp.SendKeys(chromedp.ID("assignee"), "ali"))
		do(t, ctx, "blur", chromedp.Evaluate[chromedp.Void](`document.activeElement.blur(); document.body.removeAttribute("data-refreshed")`))
		waitFor(t, ctx, "a refresh", `document.body.hasAttribute("data-refreshed")`)
		if got := eval[string](t, ctx, `document.getElementById("assignee").value`); got != "ali" {
			t.Fatalf("the refresh lost the form: %q", got)
		}

		// The acknowledge form without its CSRF token changes nothing.
		do(t, ctx, "drop the CSRF token and submit", chromedp.Evaluate[chromedp.Void](
			`document.querySelector('form[action$="/ack"] input[name=csrf]').remove()`))
		click(t, ctx, "#ack", "Forbidden")
		if it := s.must(http.StatusOK, http.MethodGet, "/api/v1/tenants/default/attention/att_aap_"+id, s.admin, nil); it["status"] != "open" || it["assignee"] != nil {
			t.Fatalf("a form without its CSRF token changed the item: %v", it)
		}

		// On a phone-sized screen nothing needs sideways scrolling.
		do(t, ctx, "a phone screen", chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile),
			chromedp.Navigate(s.url+"/console/t/default/attention/att_aap_"+id))
		waitTitle(t, ctx, "Attention item")
		if w := eval[int](t, ctx, `document.documentElement.scrollWidth`); w > 390 {
			t.Errorf("the item page is %dpx wide on a 390px screen", w)
		}
		do(t, ctx, "back to a desktop screen", chromedp.EmulateViewport(1280, 900), chromedp.Navigate(s.url+"/console/t/default/approvals"))
		waitTitle(t, ctx, "Approvals")
		accessible(t, ctx)
		click(t, ctx, "#approval-items a", "Approval request")
		accessible(t, ctx)

		click(t, ctx, "#sign-out", "Sign in")
		if ck := browserCookie(t, ctx, s, "agentowl_session_default"); ck != nil {
			t.Fatalf("sign-out left the cookie %+v", ck)
		}
		do(t, ctx, "go back to the item", chromedp.Navigate(s.url+"/console/t/default/attention/att_aap_"+id))
		// The deep link, opened without a session, is the sign-in page
		// (issue 26), and signing in comes back to the item it named, not
		// to the inbox.
		waitTitle(t, ctx, "Sign in")
		do(t, ctx, "type the token and press Enter", chromedp.SendKeys(chromedp.ID("token"), s.admin+kb.Enter))
		waitTitle(t, ctx, "Attention item")
		if !eval[bool](t, ctx, fmt.Sprintf(`location.pathname === "/console/t/default/attention/att_aap_%s"`, id)) {
			t.Fatalf("signing in from the deep link opened %s", pageText(ctx))
		}
	})
}

// longPoll is the harness adapter's GET /v1/requests/{id}?wait=30s; it
// runs outside the test goroutine, so it reports failures in its result.
func longPoll(base, id, cred string) map[string]any {
	req, _ := http.NewRequest(http.MethodGet, base+"/v1/requests/"+id+"?wait=30s", nil)
	req.Header.Set("Authorization", "Bearer "+cred)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return map[string]any{"error": err.Error()}
	}
	defer resp.Body.Close()
	var out map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return map[string]any{"error": err.Error()}
	}
	return out
}
