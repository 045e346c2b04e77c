package console_test

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/agentowl/agentowl/internal/server"
	"github.com/agentowl/agentowl/internal/store/storetest"
)

const settingsPage = "/console/t/default/settings"

// cfgSite is a server (no delivery engine, a fake clock) with an endpoint,
// a webhook binding, a runtime credential that has reported once, an AAP
// instance, a policy and a member.
type cfgSite struct {
	*site
	clock                      interface{ Advance(time.Duration) }
	endpoint, binding, ingress string
	cred, credID, work         string
	memberToken, memberTokenID string
	instanceCred, policy       string
}

func startSettings(t *testing.T, b storetest.Backend) *cfgSite {
	t.Helper()
	clock := newClock()
	s := &cfgSite{site: start(t, b, func(cfg *server.Config) { cfg.NoDelivery = true; cfg.Clock = clock }), clock: clock}
	base := "/api/v1/tenants/default"
	s.endpoint = s.must(http.StatusCreated, http.MethodPost, base+"/endpoints", s.admin, map[string]any{"name": "support-agent",
		"url": "https://runtime.example.com/events", "config": map[string]any{"agent_work": true}})["id"].(string)
	in := s.must(http.StatusCreated, http.MethodPost, base+"/bindings", s.admin, map[string]any{"channel": "webhook",
		"endpoint_id": s.endpoint, "name": "website form"})
	s.binding, s.ingress = in["id"].(string), strings.TrimPrefix(in["ingress_url"].(string), s.url)
	cred := s.must(http.StatusCreated, http.MethodPost, base+"/endpoints/"+s.endpoint+"/runtime-credentials", s.admin,
		map[string]any{"label": "prod runner " + hostile, "scopes": []string{"callbacks:write"}})
	s.cred, s.credID = cred["token"].(string), cred["id"].(string)
	s.must(http.StatusAccepted, http.MethodPost, s.ingress, "", map[string]any{"text": "refund please"})
	s.work = s.must(http.StatusOK, http.MethodGet, base+"/work", s.admin, nil)["items"].([]any)[0].(map[string]any)["id"].(string)
	if st := s.callback(1); st != http.StatusOK {
		t.Fatalf("the runtime's first callback: %d", st)
	}
	s.instanceCred = s.instance()
	s.policy = s.must(http.StatusCreated, http.MethodPost, base+"/policies", s.admin, map[string]any{"name": "small refunds",
		"tool": "issue_refund", "effect": "approve", "condition": "arguments.amount < 1000"})["id"].(string)
	s.memberToken = s.operator("mia", "member")
	for _, tok := range s.must(http.StatusOK, http.MethodGet, base+"/operator-tokens", s.admin, nil)["items"].([]any) {
		if tok := tok.(map[string]any); tok["operator"] == "mia" || tok["operator_name"] == "mia" {
			s.memberTokenID = tok["id"].(string)
		}
	}
	if s.memberTokenID == "" {
		s.memberTokenID = s.must(http.StatusOK, http.MethodGet, base+"/operator-tokens", s.memberToken, nil)["items"].([]any)[0].(map[string]any)["id"].(string)
	}
	return s
}

// callback posts the runtime's callback number seq with the credential
// and returns the status.
func (s *cfgSite) callback(seq int) int {
	s.t.Helper()
	st, _ := s.api(http.MethodPost, "/runtime/v1/work/"+s.work+"/callbacks", s.cred, map[string]any{"version": "agent-work.v1",
		"callback_id": s.work + ":" + string(rune('0'+seq)), "work_id": s.work, "sequence": seq, "status": "running",
		"occurred_at": time.Date(2026, 9, 16, 12, 0, seq, 0, time.UTC).Format(time.RFC3339)})
	return st
}

// rowOf is the table row of the object id on a page.
func rowOf(t *testing.T, body, id string) string {
	t.Helper()
	i := strings.Index(body, `data-id="`+id+`"`)
	if i < 0 {
		t.Fatalf("no row of %s", id)
	}
	j := strings.Index(body[i:], "</tr>")
	return body[i : i+j]
}

// TestConsoleSettings: the settings page shows the tenant's configuration
// by name, with IDs to copy and never a secret; an admin revokes a runtime
// credential and an operator token behind a confirmation that changes
// nothing, the API refuses each at once (401), and both are audited as the
// signed-in operator; no revocation without the form's CSRF token.
func TestConsoleSettings(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		s := startSettings(t, b)
		s.clock.Advance(3 * time.Hour)
		c := s.client()
		c.signIn(s.admin)
		p := c.get(settingsPage)
		if p.Status != http.StatusOK || !strings.Contains(p.Body, `aria-current="page">Settings`) {
			t.Fatalf("settings: %d\n%s", p.Status, p.Body)
		}
		for _, secret := range []string{"owl_rt_", "owl_op_", "owl_inst_", "whsec_", s.cred, s.admin, s.memberToken, s.instanceCred} {
			if strings.Contains(p.Body, secret) {
				t.Fatalf("the settings page shows a secret (%.12s…)", secret)
			}
		}
		if strings.Contains(p.Body, "<script>window.__xss") || !strings.Contains(p.Body, "prod runner &lt;script&gt;") {
			t.Fatal("a credential's label is not escaped")
		}
		ep := rowOf(t, p.Body, s.endpoint)
		if !strings.Contains(ep, ">support-agent</a>") || !strings.Contains(ep, `<code class="cfg-id">`+s.endpoint+`</code>`) ||
			!strings.Contains(ep, "https://runtime.example.com/events") || !strings.Contains(ep, ">on<") || !strings.Contains(ep, "not set") {
			t.Errorf("the endpoint's row: %s", ep)
		}
		if r := rowOf(t, p.Body, s.binding); !strings.Contains(r, "website form") || !strings.Contains(r, ">webhook<") ||
			!strings.Contains(r, ">support-agent<") {
			t.Errorf("the binding's row: %s", r)
		}
		cr := rowOf(t, p.Body, s.credID)
		for _, want := range []string{">support-agent<", "callbacks:write", ">active<", "3 h ago", `datetime="2026-09-16T12:00:00Z"`,
			"in 89 days", `class="revoke"`} {
			if !strings.Contains(cr, want) {
				t.Errorf("the credential's row lacks %q: %s", want, cr)
			}
		}
		if r := rowOf(t, p.Body, s.policy); !strings.Contains(r, "small refunds") || !strings.Contains(r, "arguments.amount &lt; 1000") ||
			!strings.Contains(r, ">approve<") || !strings.Contains(r, "every instance") {
			t.Errorf("the policy's row: %s", r)
		}
		if !strings.Contains(p.Body, `id="cfg-instances"`) || !strings.Contains(p.Body, "agentowl runtime-credentials create") ||
			!strings.Contains(p.Body, "agentowl operator-tokens create") {
			t.Errorf("instances or the create help missing")
		}
		if r := rowOf(t, p.Body, s.memberTokenID); !strings.Contains(r, ">mia<") || !strings.Contains(r, ">active<") {
			t.Errorf("mia's token row: %s", r)
		}
		if !strings.Contains(p.Body, "mia<br>") || !strings.Contains(p.Body, ">member<") || !strings.Contains(p.Body, ">admin<") {
			t.Errorf("operators with roles missing")
		}

		// Revoke the runtime credential.
		revoke := settingsPage + "/runtime-credentials/" + s.credID + "/revoke"
		csrf := p.CSRF()
		wantForgedRefused(t, c, revoke, csrf, "revoke", func() string { return "" })
		confirm := c.post(revoke, url.Values{"csrf": {csrf}})
		if confirm.Status != http.StatusOK || !strings.Contains(confirm.Body, "Nothing has changed yet") ||
			!strings.Contains(confirm.Body, "support-agent") || !strings.Contains(confirm.Body, s.credID) {
			t.Fatalf("the revoke's confirmation: %d\n%s", confirm.Status, confirm.Body)
		}
		if st := s.callback(2); st != http.StatusOK {
			t.Fatalf("the credential stopped working before the revoke was confirmed: %d", st)
		}
		done := c.post(revoke, url.Values{"csrf": {confirm.CSRF()}, "step": {"submit"}})
		if done.Status != http.StatusSeeOther || !strings.HasPrefix(done.Header.Get("Location"), settingsPage+"?revoked=runtime-credential") {
			t.Fatalf("revoke: %d %v", done.Status, done.Header)
		}
		if st := s.callback(3); st != http.StatusUnauthorized {
			t.Fatalf("the revoked credential's next callback: %d, want 401", st)
		}
		if n := s.auditCount("runtime_credential.revoke", "runtime-credential:"+s.credID); n != 1 {
			t.Fatalf("runtime_credential.revoke audited %d times", n)
		}
		ap := c.get(auditPage + "?action=runtime_credential.revoke")
		if rows := auditRows(ap.Body); len(rows) != 1 || !strings.Contains(ap.Body, ">operator:admin<") ||
			!strings.Contains(ap.Body, "prod runner &lt;script&gt;") || !strings.Contains(ap.Body, `<code class="cfg-id">`+s.credID+`</code>`) {
			t.Errorf("the revoke on the audit page: %v\n%s", rows, ap.Body)
		}
		after := c.get(settingsPage + "?revoked=runtime-credential")
		if r := rowOf(t, after.Body, s.credID); !strings.Contains(r, ">revoked<") || strings.Contains(r, `class="revoke"`) {
			t.Errorf("the revoked credential's row: %s", r)
		}
		if !strings.Contains(after.Body, "Runtime credential revoked") {
			t.Error("no confirmation of the revoke")
		}

		// Revoke mia's operator token.
		if st, _ := s.api(http.MethodGet, "/api/v1/whoami", s.memberToken, nil); st != http.StatusOK {
			t.Fatalf("mia's token before: %d", st)
		}
		miaConsole := s.client()
		miaConsole.signIn(s.memberToken)
		tokRevoke := settingsPage + "/operator-tokens/" + s.memberTokenID + "/revoke"
		confirm = c.post(tokRevoke, url.Values{"csrf": {csrf}})
		if confirm.Status != http.StatusOK || !strings.Contains(confirm.Body, "mia") || strings.Contains(confirm.Body, `id="confirm-yours"`) {
			t.Fatalf("the token revoke's confirmation: %d\n%s", confirm.Status, confirm.Body)
		}
		if st, _ := s.api(http.MethodGet, "/api/v1/whoami", s.memberToken, nil); st != http.StatusOK {
			t.Fatalf("mia's token after the preview: %d", st)
		}
		if done := c.post(tokRevoke, url.Values{"csrf": {csrf}, "step": {"submit"}}); done.Status != http.StatusSeeOther {
			t.Fatalf("token revoke: %d", done.Status)
		}
		if st, _ := s.api(http.MethodGet, "/api/v1/whoami", s.memberToken, nil); st != http.StatusUnauthorized {
			t.Fatalf("mia's revoked token: %d, want 401", st)
		}
		if p := miaConsole.get(attention); p.Status == http.StatusOK {
			t.Fatal("mia's console session outlived her token")
		}
		if n := s.auditCount("operator_token.revoke", "operator-token:"+s.memberTokenID); n != 1 {
			t.Fatalf("operator_token.revoke audited %d times", n)
		}

		// Unknown IDs are 404 with their code, on the settings page.
		if p := c.post(settingsPage+"/runtime-credentials/rtc_nope/revoke", url.Values{"csrf": {csrf}}); p.Status != http.StatusNotFound ||
			!strings.Contains(p.Body, "not_found") || !strings.Contains(p.Body, `id="cfg-endpoints"`) {
			t.Fatalf("revoking an unknown credential: %d", p.Status)
		}
		if p := c.post(settingsPage+"/operator-tokens/tok_nope/revoke", url.Values{"csrf": {csrf}, "step": {"submit"}}); p.Status != http.StatusNotFound {
			t.Fatalf("revoking an unknown token: %d", p.Status)
		}

		// Revoking the token this session signed in with signs it out.
		own := s.operator("ops", "admin")
		oc := s.client()
		oc.signIn(own)
		op := oc.get(settingsPage)
		var ownID string
		for _, tok := range s.must(http.StatusOK, http.MethodGet, "/api/v1/tenants/default/operator-tokens", own, nil)["items"].([]any) {
			if tok := tok.(map[string]any); strings.Contains(op.Body, `data-id="`+tok["id"].(string)+`"`) &&
				strings.Contains(rowOf(t, op.Body, tok["id"].(string)), "this session signed in with it") {
				ownID = tok["id"].(string)
			}
		}
		if ownID == "" {
			t.Fatal("the page does not mark the session's own token")
		}
		ownRevoke := settingsPage + "/operator-tokens/" + ownID + "/revoke"
		if p := oc.post(ownRevoke, url.Values{"csrf": {op.CSRF()}}); !strings.Contains(p.Body, `id="confirm-yours"`) {
			t.Fatalf("no warning that revoking signs out:\n%s", p.Body)
		}
		if p := oc.post(ownRevoke, url.Values{"csrf": {op.CSRF()}, "step": {"submit"}}); p.Status != http.StatusSeeOther ||
			p.Header.Get("Location") != "/console/sign-in" {
			t.Fatalf("revoking the session's own token: %d %v", p.Status, p.Header)
		}
		if p := oc.get(settingsPage); p.Status != http.StatusUnauthorized {
			t.Fatalf("after revoking its own token the session goes on: %d", p.Status)
		}
	})
}

// TestConsoleSettingsMember: a member sees the configuration without
// forms, no runtime credentials and only their own tokens, as the API
// shows them; a member's revoke is refused and changes nothing. Another
// tenant's admin cannot revoke this tenant's credentials through theirs.
func TestConsoleSettingsMember(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		s := startSettings(t, b)
		c := s.client()
		c.signIn(s.memberToken)
		p := c.get(settingsPage)
		if p.Status != http.StatusOK || !strings.Contains(p.Body, `id="credentials-refused"`) || strings.Contains(p.Body, s.credID) ||
			strings.Contains(p.Body, "Revoke…") || strings.Contains(p.Body, "/revoke") {
			t.Fatalf("a member's settings page: %d\n%s", p.Status, p.Body)
		}
		if !strings.Contains(p.Body, s.memberTokenID) || !strings.Contains(p.Body, "support-agent") || !strings.Contains(p.Body, "small refunds") {
			t.Fatal("a member does not see the configuration or their own token")
		}
		adminTokens := s.must(http.StatusOK, http.MethodGet, "/api/v1/tenants/default/operator-tokens", s.admin, nil)["items"].([]any)
		for _, tok := range adminTokens {
			if id := tok.(map[string]any)["id"].(string); id != s.memberTokenID && strings.Contains(p.Body, id) {
				t.Fatalf("a member sees another operator's token %s", id)
			}
		}
		for _, path := range []string{"/runtime-credentials/" + s.credID + "/revoke", "/operator-tokens/" + s.memberTokenID + "/revoke"} {
			for _, step := range []string{"", "submit"} {
				if p := c.post(settingsPage+path, url.Values{"csrf": {p.CSRF()}, "step": {step}}); p.Status != http.StatusForbidden ||
					!strings.Contains(p.Body, "forbidden") {
					t.Fatalf("a member's revoke %s (step %q): %d", path, step, p.Status)
				}
			}
		}
		if st := s.callback(2); st != http.StatusOK {
			t.Fatalf("a member's refused revoke revoked the credential: %d", st)
		}
		if st, _ := s.api(http.MethodGet, "/api/v1/whoami", s.memberToken, nil); st != http.StatusOK {
			t.Fatalf("a member's refused revoke revoked the token: %d", st)
		}

		// Another tenant's admin, through their own tenant's pages.
		acme := s.must(http.StatusCreated, http.MethodPost, "/api/v1/tenants", s.admin, map[string]any{"name": "acme"})["admin"].(map[string]any)["token"].(string)
		ac := s.client()
		ac.signIn(acme)
		ap := ac.get("/console/t/acme/settings")
		if ap.Status != http.StatusOK || strings.Contains(ap.Body, s.credID) || strings.Contains(ap.Body, "support-agent") {
			t.Fatalf("acme's settings: %d", ap.Status)
		}
		for _, path := range []string{"/runtime-credentials/" + s.credID + "/revoke", "/operator-tokens/" + s.memberTokenID + "/revoke"} {
			for _, step := range []string{"", "submit"} {
				if p := ac.post("/console/t/acme/settings"+path, url.Values{"csrf": {ap.CSRF()}, "step": {step}}); p.Status != http.StatusNotFound {
					t.Fatalf("acme's revoke of default's %s (step %q): %d", path, step, p.Status)
				}
			}
		}
		// And with acme's session on default's pages: no session there.
		if p := ac.post(settingsPage+"/runtime-credentials/"+s.credID+"/revoke", url.Values{"csrf": {ap.CSRF()}, "step": {"submit"}}); p.Status != http.StatusNotFound {
			t.Fatalf("acme's session on default's revoke: %d", p.Status)
		}
		if st := s.callback(3); st != http.StatusOK {
			t.Fatalf("another tenant revoked the credential: %d", st)
		}
		if st, _ := s.api(http.MethodGet, "/api/v1/whoami", s.memberToken, nil); st != http.StatusOK {
			t.Fatalf("another tenant revoked the token: %d", st)
		}
	})
}

// TestBrowserRevokeCredential: in Chromium, an admin finds the runtime
// credential on Settings by its endpoint's name, revokes it through the
// confirmation page, and the runtime's next callback is refused (401); the
// audit page shows who revoked it.
func TestBrowserRevokeCredential(t *testing.T) {
	t.Parallel()
	s := startSettings(t, storetest.Backends(t)[0])
	ctx := tab(t)
	signIn(t, ctx, s.site, s.admin)
	click(t, ctx, `nav[aria-label="Main"] a[href$="/settings"]`, "Settings")
	accessible(t, ctx)
	row := fmt.Sprintf(`#cfg-credentials tr[data-id=%q]`, s.credID)
	if got := eval[string](t, ctx, fmt.Sprintf(`document.querySelector(%q).innerText`, row)); !strings.Contains(got, "support-agent") ||
		!strings.Contains(got, "active") {
		t.Fatalf("the credential's row: %s", got)
	}
	screenshot(t, ctx, "settings")
	click(t, ctx, row+" button.revoke", "Confirm revoke")
	accessible(t, ctx)
	screenshot(t, ctx, "settings-revoke")
	if st := s.callback(2); st != http.StatusOK {
		t.Fatalf("the confirmation page revoked the credential: %d", st)
	}
	click(t, ctx, "#confirm", "Settings")
	waitFor(t, ctx, "the revoke's confirmation", `!!document.querySelector("#revoked")`)
	if got := eval[string](t, ctx, fmt.Sprintf(`document.querySelector(%q).innerText`, row)); !strings.Contains(got, "revoked") {
		t.Fatalf("the revoked credential's row: %s", got)
	}
	if st := s.callback(3); st != http.StatusUnauthorized {
		t.Fatalf("the revoked credential's next callback: %d, want 401", st)
	}
	click(t, ctx, `nav[aria-label="Main"] a[href$="/audit"]`, "Audit")
	screenshot(t, ctx, "audit")
	if got := eval[string](t, ctx, `document.querySelector("#audit tbody tr").innerText`); !strings.Contains(got, "runtime_credential.revoke") ||
		!strings.Contains(got, "operator:admin") || !strings.Contains(got, s.credID) {
		t.Fatalf("the newest audit entry: %s", got)
	}
}
