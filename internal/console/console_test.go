package console_test

import (
	"context"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/agentowl/agentowl"
	"github.com/agentowl/agentowl/internal/clocktest"
	"github.com/agentowl/agentowl/internal/server"
	"github.com/agentowl/agentowl/internal/store/storetest"
)

// HTTP-level tests of the console's session and security model; the
// browser tests (browser_test.go) run the flows in Chromium.

func withClock(c *clocktest.Fake) func(*server.Config) {
	return func(cfg *server.Config) { cfg.Clock = c }
}

func newClock() *clocktest.Fake { return clocktest.New(time.Date(2026, 9, 16, 12, 0, 0, 0, time.UTC)) }

const attention = "/console/t/default/attention"

// signedOut reports whether status answers a tenant page opened without a
// session in its tenant: the sign-in page (401, issue 26) or, as before,
// 404.
func signedOut(status int) bool {
	return status == http.StatusUnauthorized || status == http.StatusNotFound
}

func TestConsoleSessions(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		clock := newClock()
		s := start(t, b, withClock(clock))
		c := s.client()
		if p := c.get(attention); !signedOut(p.Status) {
			t.Fatalf("no session: %d", p.Status)
		}
		if p := c.get("/console/"); p.Status != http.StatusSeeOther || p.Header.Get("Location") != "/console/sign-in" {
			t.Fatalf("start without a session: %d %s", p.Status, p.Header.Get("Location"))
		}
		if p := c.signIn("owl_op_not-a-token"); p.Status != http.StatusUnauthorized || p.cookie("agentowl_session_default") != nil {
			t.Fatalf("bad token: %d %v", p.Status, p.Header)
		}
		if p := c.post("/console/sign-in", url.Values{"token": {s.admin}}); p.Status != http.StatusForbidden ||
			p.cookie("agentowl_session_default") != nil {
			t.Fatalf("sign-in without its CSRF token: %d", p.Status)
		}
		p := c.signIn(s.admin)
		ck := p.cookie("agentowl_session_default")
		if p.Status != http.StatusSeeOther || p.Header.Get("Location") != attention || ck == nil {
			t.Fatalf("sign-in: %d %v", p.Status, p.Header)
		}
		if !ck.HttpOnly || ck.SameSite != http.SameSiteStrictMode || ck.Secure || ck.Path != "/console/" ||
			!strings.HasPrefix(ck.Value, "owl_cs_") || strings.Contains(ck.Value, s.admin) {
			t.Fatalf("session cookie %+v", ck)
		}
		// Stored hashed: the secret finds its record only by its hash.
		if err := s.srv.Store().Read(context.Background(), func(tx agentowl.Tx) error {
			rec, _, err := tx.ConsoleSessionGetByHash(context.Background(), agentowl.HashToken(ck.Value))
			if err == nil && string(rec.Hash) == ck.Value {
				t.Error("the session secret is stored in the clear")
			}
			return err
		}); err != nil {
			t.Fatalf("the session is not stored under its hash: %v", err)
		}
		page := c.get(attention)
		if page.Status != http.StatusOK {
			t.Fatalf("signed in: %d", page.Status)
		}
		for h, want := range map[string]string{"X-Frame-Options": "DENY", "X-Content-Type-Options": "nosniff",
			"Referrer-Policy": "same-origin", "Cache-Control": "no-store"} {
			if got := page.Header.Get(h); got != want {
				t.Errorf("%s = %q, want %q", h, got, want)
			}
		}
		if csp := page.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") ||
			!strings.Contains(csp, "frame-ancestors 'none'") || strings.Contains(csp, "unsafe-inline") {
			t.Errorf("CSP %q", csp)
		}
		if strings.Contains(page.Body, "<script>") || strings.Contains(page.Body, "onclick=") || strings.Contains(page.Body, "style=") {
			t.Error("a page has an inline script or style")
		}

		// Idle expiry: activity keeps it, 30 minutes without ends it.
		for range 3 {
			clock.Advance(29 * time.Minute)
			if p := c.get(attention); p.Status != http.StatusOK {
				t.Fatalf("active session ended: %d", p.Status)
			}
		}
		// A page refreshing itself is not activity.
		clock.Advance(29 * time.Minute)
		req, _ := http.NewRequest(http.MethodGet, s.url+attention, nil)
		req.Header.Set("X-Console-Refresh", "1")
		if p := c.do(req); p.Status != http.StatusOK {
			t.Fatalf("refresh: %d", p.Status)
		}
		clock.Advance(2 * time.Minute)
		if p := c.get(attention); !signedOut(p.Status) {
			t.Fatalf("idle session still valid: %d", p.Status)
		}

		// Absolute expiry: 12 hours after sign-in, however active.
		c.signIn(s.admin)
		for range 35 {
			clock.Advance(20 * time.Minute)
			if p := c.get(attention); p.Status != http.StatusOK {
				t.Fatalf("active session ended early at %v", clock.Now())
			}
		}
		clock.Advance(20 * time.Minute)
		if p := c.get(attention); !signedOut(p.Status) {
			t.Fatalf("session outlived 12h: %d", p.Status)
		}

		// Revoking the operator's token ends its sessions.
		s.operator("mia", "member")
		tok := s.must(http.StatusCreated, http.MethodPost, "/api/v1/tenants/default/operator-tokens", s.admin, map[string]any{"operator": "mia"})
		m := s.client()
		m.signIn(tok["token"].(string))
		if p := m.get(attention); p.Status != http.StatusOK || !strings.Contains(p.Body, "mia (member)") {
			t.Fatalf("mia: %d", p.Status)
		}
		s.must(http.StatusOK, http.MethodDelete, "/api/v1/tenants/default/operator-tokens/"+tok["id"].(string), s.admin, nil)
		if p := m.get(attention); !signedOut(p.Status) {
			t.Fatalf("session of a revoked token: %d", p.Status)
		}

		// Sign-out ends the session and clears the cookie; the old secret
		// no longer works.
		c.signIn(s.admin)
		u, _ := url.Parse(s.url + "/console/")
		old := ""
		for _, k := range c.http.Jar.Cookies(u) {
			if k.Name == "agentowl_session_default" {
				old = k.Value
			}
		}
		csrf := c.get(attention).CSRF()
		out := c.post("/console/t/default/sign-out", url.Values{"csrf": {csrf}})
		if out.Status != http.StatusSeeOther || out.cookie("agentowl_session_default") == nil ||
			out.cookie("agentowl_session_default").MaxAge >= 0 {
			t.Fatalf("sign-out: %d %v", out.Status, out.Header)
		}
		replay := s.client()
		replay.http.Jar.SetCookies(u, []*http.Cookie{{Name: "agentowl_session_default", Value: old, Path: "/console/"}})
		if p := replay.get(attention); !signedOut(p.Status) {
			t.Fatalf("a signed-out session: %d", p.Status)
		}
	})
}

func TestConsoleLoginLinks(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		clock := newClock()
		s := start(t, b, withClock(clock))
		s.operator("mia", "member")
		link := s.must(http.StatusCreated, http.MethodPost, "/api/v1/tenants/default/console-login-links", s.admin,
			map[string]any{"operator": "mia"})["url"].(string)
		path := strings.TrimPrefix(link, s.url)
		code := strings.TrimPrefix(path, "/console/link?code=")
		c := s.client()
		for range 2 { // showing the link does not use it
			if p := c.get(path); p.Status != http.StatusOK || !strings.Contains(p.Body, "<strong>mia</strong>") {
				t.Fatalf("link page: %d", p.Status)
			}
		}
		form := c.get(path)
		if p := c.post("/console/link", url.Values{"code": {code}}); p.Status != http.StatusForbidden {
			t.Fatalf("link without CSRF: %d", p.Status)
		}
		p := c.post("/console/link", url.Values{"code": {code}, "csrf": {form.CSRF()}})
		if p.Status != http.StatusSeeOther || p.cookie("agentowl_session_default") == nil {
			t.Fatalf("link sign-in: %d %v", p.Status, p.Header)
		}
		if p := c.get(attention); !strings.Contains(p.Body, "mia (member)") {
			t.Fatalf("signed in as someone else: %s", p.Body)
		}
		other := s.client()
		f := other.get("/console/sign-in")
		if p := other.post("/console/link", url.Values{"code": {code}, "csrf": {f.CSRF()}}); p.Status != http.StatusUnauthorized {
			t.Fatalf("a link used twice: %d", p.Status)
		}
		late := strings.TrimPrefix(s.must(http.StatusCreated, http.MethodPost, "/api/v1/tenants/default/console-login-links", s.admin,
			nil)["url"].(string), s.url)
		clock.Advance(16 * time.Minute)
		if p := other.get(late); p.Status != http.StatusUnauthorized {
			t.Fatalf("an expired link: %d", p.Status)
		}
		mia := s.operator("max", "member")
		if st, out := s.api(http.MethodPost, "/api/v1/tenants/default/console-login-links", mia, map[string]any{"operator": "mia"}); st != http.StatusForbidden {
			t.Fatalf("a member's link for someone else: %d %v", st, out)
		}
	})
}

func TestConsoleCSRFAndOrigin(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		s := start(t, b, nil)
		id := s.request(s.instance(), refund("Duplicate charge."))
		att := "att_aap_" + id
		c := s.client()
		c.signIn(s.admin)
		item := c.get(attention + "/" + att)
		csrf := item.CSRF()
		if item.Status != http.StatusOK || csrf == "" {
			t.Fatalf("item: %d", item.Status)
		}
		ack := attention + "/" + att + "/ack"
		for _, tc := range []struct {
			what    string
			form    url.Values
			headers []string
		}{
			{"no CSRF token", url.Values{"assignee": {"x"}}, nil},
			{"a wrong CSRF token", url.Values{"assignee": {"x"}, "csrf": {csrf + "x"}}, nil},
			{"a token one character off", url.Values{"assignee": {"x"}, "csrf": {flip(csrf)}}, nil},
			{"another site", url.Values{"assignee": {"x"}, "csrf": {csrf}}, []string{"Origin", "https://evil.example"}},
			{"a cross-site fetch", url.Values{"assignee": {"x"}, "csrf": {csrf}}, []string{"Sec-Fetch-Site", "cross-site"}},
			// An opaque origin: a sandboxed frame or a data: URL of another
			// site, even with a token it has come by.
			{"an opaque origin", url.Values{"assignee": {"x"}, "csrf": {csrf}}, []string{"Origin", "null"}},
		} {
			if p := c.post(ack, tc.form, tc.headers...); p.Status != http.StatusForbidden {
				t.Fatalf("%s: %d", tc.what, p.Status)
			}
			if it := s.must(http.StatusOK, http.MethodGet, "/api/v1/tenants/default/attention/"+att, s.admin, nil); it["status"] != "open" {
				t.Fatalf("%s changed the item: %v", tc.what, it)
			}
		}
		if p := c.post(ack, url.Values{"assignee": {"alice"}, "csrf": {csrf}}, "Origin", s.url, "Sec-Fetch-Site", "same-origin"); p.Status != http.StatusSeeOther {
			t.Fatalf("with its token: %d %s", p.Status, p.Body)
		}
		if it := s.must(http.StatusOK, http.MethodGet, "/api/v1/tenants/default/attention/"+att, s.admin, nil); it["assignee"] != "alice" {
			t.Fatalf("acknowledged item %v", it)
		}
		// What the agent wrote is escaped.
		if strings.Contains(item.Body, "<script>window") || strings.Contains(item.Body, `<img src=x`) ||
			!strings.Contains(item.Body, "&lt;script&gt;window.__xss=1&lt;/script&gt;") {
			t.Fatalf("hostile text not escaped on the item page")
		}
	})
}

// TestConsoleTenants: a browser holds a session per tenant and switches
// between them; a page or deep link of a tenant it is not signed in to is
// 404, and a session put under another tenant's cookie does not count.
func TestConsoleTenants(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		s := start(t, b, nil)
		other, err := s.srv.Access().Bootstrap(context.Background(), "other")
		if err != nil {
			t.Fatal(err)
		}
		s.request(s.instance(), refund("Duplicate charge."))
		notice := s.must(http.StatusOK, http.MethodGet, "/api/v1/tenants/default/notifications", s.admin, nil)["items"].([]any)[0].(map[string]any)
		link := notice["link"].(string)

		c := s.client()
		c.signIn(other.Token)
		if p := c.get(link); !signedOut(p.Status) || strings.Contains(p.Body, "issue_refund") {
			t.Fatalf("another tenant's deep link: %d", p.Status)
		}
		u, _ := url.Parse(s.url + "/console/")
		var otherSecret string
		for _, k := range c.http.Jar.Cookies(u) {
			if k.Name == "agentowl_session_other" {
				otherSecret = k.Value
			}
		}
		forged := s.client()
		forged.http.Jar.SetCookies(u, []*http.Cookie{{Name: "agentowl_session_default", Value: otherSecret, Path: "/console/"}})
		if p := forged.get(link); !signedOut(p.Status) {
			t.Fatalf("another tenant's session under this tenant's cookie: %d", p.Status)
		}

		c.signIn(s.admin)
		p := c.get(link)
		if p.Status != http.StatusOK || !strings.Contains(p.Body, "issue_refund") {
			t.Fatalf("the deep link signed in: %d", p.Status)
		}
		if !strings.Contains(p.Body, `href="/console/t/other/attention">Switch to other`) {
			t.Fatalf("no tenant switcher entry for the other tenant")
		}
		if p := c.get("/console/t/other/attention"); p.Status != http.StatusOK || !strings.Contains(p.Body, "Switch to default") {
			t.Fatalf("switching: %d", p.Status)
		}
	})
}

func TestConsoleSecureCookie(t *testing.T) {
	t.Parallel()
	s := start(t, storetest.Backends(t)[0], func(c *server.Config) { c.PublicURL = "https://console.example" })
	c := s.client()
	form := c.get("/console/sign-in")
	if ck := form.cookie("agentowl_csrf"); ck == nil || !ck.Secure || !ck.HttpOnly {
		t.Fatalf("pre-session CSRF cookie %+v", ck)
	}
	req, _ := http.NewRequest(http.MethodPost, s.url+"/console/sign-in", strings.NewReader(url.Values{"csrf": {form.CSRF()},
		"token": {s.admin}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.AddCookie(form.cookie("agentowl_csrf"))
	p := c.do(req)
	if ck := p.cookie("agentowl_session_default"); p.Status != http.StatusSeeOther || ck == nil || !ck.Secure || !ck.HttpOnly ||
		ck.SameSite != http.SameSiteStrictMode {
		t.Fatalf("behind an https public URL: %d %+v", p.Status, ck)
	}
}

// flip changes the first character of s.
// wantForgedRefused posts form-less submissions of path as a forger would
// (no CSRF token, a wrong one, from another site): each must be 403, and
// changed, called after each, must report nothing changed ("").
func wantForgedRefused(t *testing.T, c *browserless, path, csrf, what string, changed func() string) {
	t.Helper()
	for _, tc := range []struct {
		what    string
		form    url.Values
		headers []string
	}{
		{"no CSRF token", url.Values{"step": {"submit"}}, nil},
		{"a wrong CSRF token", url.Values{"step": {"submit"}, "csrf": {flip(csrf)}}, nil},
		{"another site", url.Values{"step": {"submit"}, "csrf": {csrf}}, []string{"Origin", "https://evil.example"}},
	} {
		if p := c.post(path, tc.form, tc.headers...); p.Status != http.StatusForbidden {
			t.Fatalf("a %s with %s: %d", what, tc.what, p.Status)
		}
		if got := changed(); got != "" {
			t.Fatalf("a %s with %s %s", what, tc.what, got)
		}
	}
}

func flip(s string) string {
	if s[0] == 'A' {
		return "B" + s[1:]
	}
	return "A" + s[1:]
}

// The console's forms keep the text rule of every surface: a decision note
// with a NUL or bytes that are not UTF-8 is refused 400 and changes
// nothing, on both stores (issue 27: a 500 on PostgreSQL, and a U+0000
// stored on SQLite that reached the runtime in a decision push).
func TestConsoleFormsKeepTheTextRule(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		s := start(t, b, nil)
		id := s.request(s.instance(), refund("Duplicate charge."))
		c := s.client()
		c.signIn(s.admin)
		csrf := c.get(attention + "/att_aap_" + id).CSRF()
		decide := "/console/t/default/approvals/" + id + "/decide"
		for what, note := range map[string]string{"a NUL": "ok\x00then", "invalid UTF-8": "caf\xe9"} {
			p := c.post(decide, url.Values{"csrf": {csrf}, "decision": {"approve"}, "note": {note}})
			if p.Status != http.StatusBadRequest || !strings.Contains(string(p.Body), "not text") {
				t.Errorf("a note with %s: %d, want 400 saying why", what, p.Status)
			}
		}
		if p := c.post(decide, url.Values{"csrf": {csrf}, "decision": {"approve"}, "no\x00te": {"x"}}); p.Status != http.StatusBadRequest {
			t.Errorf("a field name with a NUL: %d, want 400", p.Status)
		}
		if it := s.must(http.StatusOK, http.MethodGet, "/api/v1/tenants/default/attention/att_aap_"+id, s.admin, nil); it["status"] != "open" {
			t.Fatalf("the request after refused forms: %v", it)
		}
		review := c.post(decide, url.Values{"csrf": {csrf}, "decision": {"approve"}, "note": {"Refund approved."}})
		digest := regexp.MustCompile(`name="digest" value="([0-9a-f]{64})"`).FindStringSubmatch(review.Body)
		if review.Status != http.StatusOK || digest == nil || !strings.Contains(review.Body, "Nothing has been submitted yet") {
			t.Fatalf("a text note's review: %d %s", review.Status, review.Body)
		}
		if p := c.post(decide, url.Values{"csrf": {csrf}, "step": {"submit"}, "decision": {"approve"}, "note": {"Refund approved."},
			"digest": {digest[1]}}); p.Status != http.StatusSeeOther {
			t.Fatalf("a text note: %d %s", p.Status, p.Body)
		}
	})
}

// TestConsoleErrorPages: an error page keeps the header's unread count,
// and a deep link opened without a session offers to sign in and come
// back to it (the return path stays inside the console).
func TestConsoleErrorPages(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		s := start(t, b, nil)
		s.request(s.instance(), refund("Duplicate charge."))
		c := s.client()
		c.signIn(s.admin)
		if p := c.get("/console/t/default/attention"); !strings.Contains(p.Body, `">expires in `) {
			t.Errorf("the inbox does not say how long the request has left:\n%s", p.Body)
		}
		p := c.get("/console/t/default/attention/att_missing")
		if p.Status != http.StatusNotFound || !strings.Contains(p.Body, `data-count="1"`) {
			t.Errorf("an error page: %d, unread count missing:\n%s", p.Status, p.Body)
		}
		anon := s.client()
		p = anon.get("/console/t/default/approvals")
		// The sign-in page itself (401, issue 26) or a page linking to it (404), keeping the target.
		if !(p.Status == http.StatusUnauthorized && strings.Contains(p.Body, `name="next" value="/console/t/default/approvals"`)) &&
			!(p.Status == http.StatusNotFound && strings.Contains(p.Body, `id="sign-in-return" href="/console/sign-in?next=%2fconsole%2ft%2fdefault%2fapprovals"`)) {
			t.Errorf("a deep link without a session: %d\n%s", p.Status, p.Body)
		}
		if p = anon.get("/console/sign-in?next=%2fconsole%2ft%2fdefault%2fapprovals"); !strings.Contains(p.Body, `name="next" value="/console/t/default/approvals"`) {
			t.Errorf("the sign-in form lost the return path:\n%s", p.Body)
		}
	})
}

// TestConsoleWorkFilterByName: the work list filters by an endpoint picked
// by its name, never by typing an ep_… ID.
func TestConsoleWorkFilterByName(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		s := start(t, b, nil)
		ep := s.must(http.StatusCreated, http.MethodPost, "/api/v1/tenants/default/endpoints", s.admin,
			map[string]any{"name": "Refund desk <b>", "url": "https://runtime.example.com/events", "config": map[string]any{"agent_work": true}})
		c := s.client()
		c.signIn(s.admin)
		p := c.get("/console/t/default/work?endpoint=" + ep["id"].(string))
		want := `<option value="` + ep["id"].(string) + `" selected>Refund desk &lt;b&gt;</option>`
		if p.Status != http.StatusOK || !strings.Contains(p.Body, want) || strings.Contains(p.Body, `placeholder="ep_`) {
			t.Errorf("the work filter (want %s):\n%s", want, p.Body)
		}
	})
}
