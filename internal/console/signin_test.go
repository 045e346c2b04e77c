package console_test

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/agentowl/agentowl/internal/store/storetest"
)

// refusedNext are return targets that must never be followed after
// signing in: other sites, paths that leave /console/ once a browser
// resolves their dot segments (encoded or not), backslash and control
// character tricks, and scripts.
var refusedNext = []string{
	"https://evil.example/",
	"https://evil.example/console/t/default/attention",
	"http:/evil.example/console/",
	"//evil.example",
	"//evil.example/console/t/default/attention",
	"///evil.example/console/",
	"/\\evil.example",
	"\\\\evil.example",
	"/\\/evil.example/console/",
	"/console/../api/v1/whoami",
	"/console/t/default/../../../api/v1/whoami",
	"/console/t/default/%2e%2e/%2e%2e/%2e%2e/api/v1/whoami",
	"/console/t/default/%2E%2E/%2E%2E/%2E%2E/api/v1/whoami",
	"/console/t/default/.%2e/%2e./.%2E/api/v1/whoami",
	"/console/%2e%2e/api/v1/whoami",
	"/console/..%2fapi/v1/whoami",
	"/console/..%2Fapi/v1/whoami",
	"/console/..%5capi/v1/whoami",
	"/console/t/default/%252e%252e/%252e%252e/%252e%252e/api/v1/whoami",
	"/%2F%2Fevil.example/console/",
	"/%2f%2fevil.example",
	"%2F%2Fevil.example",
	"/%5Cevil.example",
	"/console/t/default/approvals\\..\\..\\..\\api",
	"/\t/evil.example/console/",
	"/console/\r\nLocation: https://evil.example",
	"/console/%0d%0aLocation:%20https://evil.example",
	"/console/t/default/%00",
	"javascript:alert(1)",
	"JaVaScRiPt:alert(1)",
	"javascript%3Aalert(1)",
	"javascript://%0aalert(1)",
	"/javascript:alert(1)",
	"data:text/html,<script>alert(1)</script>",
	"https:%2F%2Fevil.example",
	"/api/v1/whoami",
	"/console",
	"/",
	"console/t/default/attention",
	"/console/t/default/" + strings.Repeat("a", 2100),
}

// acceptedNext are return targets inside the console and where signing in
// lands for each: dot segments resolved, the query kept, the fragment
// dropped.
var acceptedNext = []struct{ next, lands string }{
	{"/console/t/default/approvals", "/console/t/default/approvals"},
	{"/console/t/default/work?status=failed&after=x", "/console/t/default/work?status=failed&after=x"},
	{"/console/t/default/x/../approvals", "/console/t/default/approvals"},
	{"/console/t/default/%2e%2e/default/approvals", "/console/t/default/approvals"},
	{"/console/t/default/./notifications#top", "/console/t/default/notifications"},
	{"/console/t/default/", "/console/t/default/"},
}

const home = "/console/t/default/attention"

// TestConsoleSignInNextRefused: a next that is not a console path of this
// server is ignored by the sign-in form, the token sign-in and the login
// link alike: signing in lands on the tenant's Needs attention.
func TestConsoleSignInNextRefused(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		s := start(t, b, nil)
		for _, next := range refusedNext {
			c := s.client()
			form := c.get("/console/sign-in?next=" + url.QueryEscape(next))
			if form.Status != http.StatusOK || !strings.Contains(form.Body, `name="next" value=""`) {
				t.Errorf("the sign-in form kept next %q:\n%s", next, form.Body)
			}
			p := c.post("/console/sign-in", url.Values{"csrf": {form.CSRF()}, "token": {s.admin}, "next": {next}})
			if p.Status != http.StatusSeeOther || p.Header.Get("Location") != home {
				t.Errorf("sign-in with next %q: %d, to %q", next, p.Status, p.Header.Get("Location"))
			}
			link := strings.TrimPrefix(s.must(http.StatusCreated, http.MethodPost, "/api/v1/tenants/default/console-login-links",
				s.admin, nil)["url"].(string), s.url)
			c = s.client()
			lf := c.get(link + "&next=" + url.QueryEscape(next))
			if lf.Status != http.StatusOK || !strings.Contains(lf.Body, `name="next" value=""`) {
				t.Errorf("the login link form kept next %q:\n%s", next, lf.Body)
			}
			code := strings.TrimPrefix(link, "/console/link?code=")
			p = c.post("/console/link", url.Values{"csrf": {lf.CSRF()}, "code": {code}, "next": {next}})
			if p.Status != http.StatusSeeOther || p.Header.Get("Location") != home {
				t.Errorf("link sign-in with next %q: %d, to %q", next, p.Status, p.Header.Get("Location"))
			}
		}
		for _, tc := range acceptedNext {
			c := s.client()
			form := c.get("/console/sign-in?next=" + url.QueryEscape(tc.next))
			p := c.post("/console/sign-in", url.Values{"csrf": {form.CSRF()}, "token": {s.admin}, "next": {tc.next}})
			if p.Status != http.StatusSeeOther || p.Header.Get("Location") != tc.lands {
				t.Errorf("sign-in with next %q: %d, to %q, want %q", tc.next, p.Status, p.Header.Get("Location"), tc.lands)
			}
		}
	})
}

// TestConsoleDeepLink: a tenant page opened without a session shows the
// sign-in form (401, the page kept as its target) instead of a 404; the
// token sign-in and a login link opened afterwards both land on it. A
// target in a tenant the person cannot see stays 404, and a tenant that
// does not exist looks like one that does to a signed-out browser.
func TestConsoleDeepLink(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		s := start(t, b, nil)
		id := s.request(s.instance(), refund("Duplicate charge."))
		target := "/console/t/default/approvals/" + id

		// By token.
		c := s.client()
		p := c.get(target)
		if p.Status != http.StatusUnauthorized || !strings.Contains(p.Body, `name="next" value="`+target+`"`) ||
			!strings.Contains(p.Body, `id="token"`) || strings.Contains(p.Body, "Not Found") {
			t.Fatalf("a deep link without a session: %d\n%s", p.Status, p.Body)
		}
		in := c.post("/console/sign-in", url.Values{"csrf": {p.CSRF()}, "token": {s.admin}, "next": {target}})
		if in.Status != http.StatusSeeOther || in.Header.Get("Location") != target {
			t.Fatalf("sign-in from a deep link: %d, to %q", in.Status, in.Header.Get("Location"))
		}
		if p := c.get(target); p.Status != http.StatusOK || !strings.Contains(p.Body, id) {
			t.Fatalf("the target after sign-in: %d", p.Status)
		}

		// By a login link opened after the deep link, in the same browser.
		s.operator("mia", "member")
		link := strings.TrimPrefix(s.must(http.StatusCreated, http.MethodPost, "/api/v1/tenants/default/console-login-links",
			s.admin, map[string]any{"operator": "mia"})["url"].(string), s.url)
		c = s.client()
		if p := c.get(target + "?x=1"); p.Status != http.StatusUnauthorized || p.cookie("agentowl_next") == nil {
			t.Fatalf("a deep link does not remember its target: %d %v", p.Status, p.Header)
		}
		lf := c.get(link)
		if !strings.Contains(lf.Body, `name="next" value="`+target+`?x=1"`) {
			t.Fatalf("the login link page lost the target:\n%s", lf.Body)
		}
		in = c.post("/console/link", url.Values{"csrf": {lf.CSRF()}, "code": {strings.TrimPrefix(link, "/console/link?code=")}})
		if in.Status != http.StatusSeeOther || in.Header.Get("Location") != target+"?x=1" {
			t.Fatalf("link sign-in from a deep link: %d, to %q", in.Status, in.Header.Get("Location"))
		}
		if ck := in.cookie("agentowl_next"); ck == nil || ck.MaxAge >= 0 {
			t.Fatalf("the remembered target is not forgotten after sign-in: %v", ck)
		}
		if p := c.get(target); p.Status != http.StatusOK || !strings.Contains(p.Body, "mia (member)") {
			t.Fatalf("the target after a link sign-in: %d", p.Status)
		}
		// The target is used once: the next sign-in lands on the inbox.
		c.post("/console/t/default/sign-out", url.Values{"csrf": {c.get(home).CSRF()}})
		if p := c.signIn(s.admin); p.Header.Get("Location") != home {
			t.Fatalf("a later sign-in: to %q", p.Header.Get("Location"))
		}

		// A tenant that does not exist looks the same as one that does.
		anon := s.client()
		if p := anon.get("/console/t/nope/approvals/" + id); p.Status != http.StatusUnauthorized || !strings.Contains(p.Body, `id="token"`) {
			t.Fatalf("a deep link into a tenant that does not exist: %d", p.Status)
		}
		// A post without a session is not a sign-in page.
		if p := anon.post(target+"/decide", url.Values{"decision": {"approve"}}); p.Status != http.StatusNotFound {
			t.Fatalf("a post without a session: %d", p.Status)
		}

		// Signed in to another tenant, the target stays 404.
		acme := s.must(http.StatusCreated, http.MethodPost, "/api/v1/tenants", s.admin, map[string]any{"name": "acme"})["admin"].(map[string]any)["token"].(string)
		c = s.client()
		p = c.get(target)
		in = c.post("/console/sign-in", url.Values{"csrf": {p.CSRF()}, "token": {acme}, "next": {target}})
		if in.Status != http.StatusSeeOther || in.Header.Get("Location") != target {
			t.Fatalf("sign-in to acme from default's deep link: %d, to %q", in.Status, in.Header.Get("Location"))
		}
		if p := c.get(target); p.Status != http.StatusNotFound || strings.Contains(p.Body, "Duplicate charge") || strings.Contains(p.Body, "issue_refund") {
			t.Fatalf("another tenant's target: %d\n%s", p.Status, p.Body)
		}
		if p := c.get("/console/t/acme/attention"); p.Status != http.StatusOK {
			t.Fatalf("acme after sign-in: %d", p.Status)
		}
	})
}

// TestBrowserDeepLink: in Chromium, a deep link opened signed out shows
// the sign-in page, and signing in by token (keyboard only) or by a login
// link opened afterwards lands on it.
func TestBrowserDeepLink(t *testing.T) {
	t.Parallel()
	s := start(t, storetest.Backends(t)[0], nil)
	id := s.request(s.instance(), refund("Duplicate charge."))
	target := "/console/t/default/approvals/" + id
	landed := fmt.Sprintf(`document.readyState === "complete" && location.pathname === %q && !document.title.startsWith("Sign in") && document.body.innerText.includes(%q)`,
		target, id)

	t.Run("token", func(t *testing.T) {
		ctx := tab(t)
		do(t, ctx, "open a deep link signed out", chromedp.Navigate(s.url+target))
		waitTitle(t, ctx, "Sign in")
		if got := eval[string](t, ctx, `location.pathname`); got != target {
			t.Fatalf("the sign-in page moved to %s", got)
		}
		accessible(t, ctx)
		do(t, ctx, "type the token and press Enter", chromedp.SendKeys(chromedp.ID("token"), s.admin+kb.Enter))
		waitFor(t, ctx, "the deep link's page", landed)
	})
	t.Run("login link", func(t *testing.T) {
		ctx := tab(t)
		do(t, ctx, "open a deep link signed out", chromedp.Navigate(s.url+target))
		waitTitle(t, ctx, "Sign in")
		link := s.must(http.StatusCreated, http.MethodPost, "/api/v1/tenants/default/console-login-links", s.admin, nil)["url"].(string)
		do(t, ctx, "open the login link", chromedp.Navigate(link))
		waitTitle(t, ctx, "Sign in with a link")
		accessible(t, ctx)
		click(t, ctx, "form[action='/console/link'] button[type=submit]", "")
		waitFor(t, ctx, "the deep link's page", landed)
	})
}
