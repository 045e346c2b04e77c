// Package console is the web console served at /console/ (docs/console.md):
// server-rendered pages (html/template, assets embedded) over the same
// use-cases as the operator API and the CLI: Needs attention
// (internal/inbox), approvals (internal/approval), agent work and endpoints
// (internal/work), conversations (internal/ingress) and notifications
// (internal/notify). Each page makes the
// use-case calls its API equivalent makes; nothing here decides anything
// the use-cases do not.
//
// Security model: a session cookie per tenant (HttpOnly, SameSite=Strict,
// Secure behind TLS or an https public URL) holding a session secret stored
// hashed by internal/access; a CSRF token on every state-changing form; a
// strict Content-Security-Policy without inline scripts; frames denied.
// Every value is rendered through html/template, so what agents and senders
// wrote is escaped.
package console

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"embed"
	"encoding/base64"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/agentowl/agentowl"
	"github.com/agentowl/agentowl/internal/access"
	"github.com/agentowl/agentowl/internal/approval"
	"github.com/agentowl/agentowl/internal/attachment"
	"github.com/agentowl/agentowl/internal/inbox"
	"github.com/agentowl/agentowl/internal/ingress"
	"github.com/agentowl/agentowl/internal/notify"
	"github.com/agentowl/agentowl/internal/work"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed assets
var assetFS embed.FS

// Config configures the console.
type Config struct {
	// PublicURL is the server's externally reachable base URL; an https://
	// one makes the session cookie Secure even when TLS ends at a proxy.
	PublicURL string
	// RefreshInterval is how often a visible page refreshes its lists.
	// Defaults to 30s.
	RefreshInterval time.Duration
	// PageSize is how many items a list page shows. Defaults to 50.
	PageSize int
}

func (c Config) withDefaults() Config {
	if c.RefreshInterval <= 0 {
		c.RefreshInterval = 30 * time.Second
	}
	if c.PageSize <= 0 {
		c.PageSize = 50
	}
	return c
}

// Services are the use-cases the pages call.
type Services struct {
	Access   *access.Service
	Approval *approval.Service
	Work     *work.Service
	Notify   *notify.Service
	// Ingress serves the Conversations pages; Attachments the retained
	// files of a work page. Either may be nil: its pages then say so.
	Ingress     *ingress.Service
	Attachments *attachment.Service
	Clock       agentowl.Clock
	Log         *slog.Logger
	// StatusOf is the HTTP status of an error (httpapi's one map of codes to
	// statuses).
	StatusOf func(error) int
}

// Console serves the web console.
type Console struct {
	svc   Services
	inbox *inbox.Service
	cfg   Config
	pages map[string]*template.Template
	mux   *http.ServeMux
}

// New returns the console.
func New(svc Services, cfg Config) (*Console, error) {
	if svc.Access == nil || svc.Approval == nil || svc.Work == nil || svc.Notify == nil || svc.StatusOf == nil {
		return nil, errors.New("console: every service is required")
	}
	pages, err := parsedPages()
	if err != nil {
		return nil, err
	}
	c := &Console{svc: svc, cfg: cfg.withDefaults(), pages: pages,
		inbox: inbox.New(svc.Work, svc.Approval, svc.Clock)}
	c.routes()
	return c, nil
}

// parsedPages parses every page (with the layout and the shared parts)
// once per process: the templates are embedded and their functions fixed,
// so every Console shares one parse (tests start hundreds of servers), and
// executing a parsed html/template concurrently is safe.
var parsedPages = sync.OnceValues(func() (map[string]*template.Template, error) {
	names, err := fs.Glob(templateFS, "templates/*.html")
	if err != nil {
		return nil, err
	}
	pages := map[string]*template.Template{}
	for _, n := range names {
		base := strings.TrimSuffix(strings.TrimPrefix(n, "templates/"), ".html")
		if base == "layout" || base == "parts" {
			continue
		}
		t, err := template.New(base).Funcs(funcs).ParseFS(templateFS, "templates/layout.html", "templates/parts.html", n)
		if err != nil {
			return nil, fmt.Errorf("console: template %s: %w", n, err)
		}
		pages[base] = t
	}
	return pages, nil
})

// Cookie names. A browser holds one session per tenant it signed in to, in
// a cookie named for the tenant (tenant names are cookie-safe slugs).
const (
	sessionCookiePrefix = "agentowl_session_"
	// preCSRFCookie carries the CSRF token of the forms shown before a
	// session exists (sign-in), compared with the form's copy.
	preCSRFCookie = "agentowl_csrf"
	cookiePath    = "/console/"
	// maxSessions bounds the tenant sessions one browser's cookies are
	// checked for.
	maxSessions = 10
)

// ServeHTTP serves a console request with the security headers every
// answer carries.
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "+
		"connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	h.Set("X-Frame-Options", "DENY")
	h.Set("X-Content-Type-Options", "nosniff")
	// same-origin, not no-referrer: under no-referrer a browser sends
	// "Origin: null" even on the console's own form posts, and an opaque
	// origin must not pass sameOrigin. Other sites still get no referrer.
	h.Set("Referrer-Policy", "same-origin")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
	if r.Method != http.MethodGet && r.Method != http.MethodHead && !c.sameOrigin(r) {
		c.fail(w, r, nil, http.StatusForbidden, "This form was sent from another site.")
		return
	}
	c.mux.ServeHTTP(w, r)
}

// sameOrigin reports whether a state-changing request comes from the
// console's own pages, as far as the browser says (Sec-Fetch-Site, Origin):
// the origin must be the request's host or the public URL's (behind a
// proxy that rewrites Host). An opaque origin ("null": a sandboxed frame,
// a data: URL, a cross-site redirect) is not the console's. It backs the
// CSRF token up; it does not replace it.
func (c *Console) sameOrigin(r *http.Request) bool {
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" && site != "same-origin" && site != "none" {
		return false
	}
	if o := r.Header.Get("Origin"); o != "" {
		u, err := url.Parse(o)
		if err != nil {
			return false
		}
		pub, _ := url.Parse(c.cfg.PublicURL)
		return u.Host == r.Host || (pub != nil && pub.Host != "" && u.Host == pub.Host)
	}
	return true
}

// secure reports whether cookies must be Secure for r.
func (c *Console) secure(r *http.Request) bool {
	return r.TLS != nil || strings.HasPrefix(c.cfg.PublicURL, "https://")
}

// setCookie sets (value "": deletes) a console cookie that lives until
// expires (zero: the browser session). Its lifetime is sent as Max-Age,
// relative, so a browser whose clock differs from the server's keeps it
// as long as the server does.
func (c *Console) setCookie(w http.ResponseWriter, r *http.Request, name, value string, expires time.Time) {
	ck := &http.Cookie{Name: name, Value: value, Path: cookiePath, HttpOnly: true, SameSite: http.SameSiteStrictMode,
		Secure: c.secure(r)}
	if value == "" {
		ck.MaxAge = -1
	} else if !expires.IsZero() {
		ck.MaxAge = max(int(expires.Sub(c.svc.Clock.Now()).Seconds()), 1)
	}
	http.SetCookie(w, ck)
}

// csrfToken is the CSRF token of a session: an HMAC of its secret, which
// only the server and the HttpOnly cookie hold, so no page of another site
// can know it.
func csrfToken(sessionSecret string) string {
	m := hmac.New(sha256.New, []byte(sessionSecret))
	m.Write([]byte("agentowl console csrf"))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

func validToken(got, want string) bool {
	return want != "" && subtle.ConstantTimeCompare([]byte(got), []byte(want)) == 1
}

func randomToken() string {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand does not fail on supported platforms
	}
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// signedIn is one tenant session of the browser.
type signedIn struct {
	Tenant  string
	Session *access.Session
	secret  string
}

// sessions returns the browser's live sessions, by tenant name. The one of
// tenant touch (if any) records activity; the others only show in the
// tenant switcher.
func (c *Console) sessions(r *http.Request, touch string) []*signedIn {
	var out []*signedIn
	for _, ck := range r.Cookies() {
		tenant, ok := strings.CutPrefix(ck.Name, sessionCookiePrefix)
		if !ok || !agentowl.ValidSlug(tenant) || len(out) == maxSessions {
			continue
		}
		s, err := c.svc.Access.AuthenticateSession(r.Context(), ck.Value, tenant == touch && !isRefresh(r))
		if err != nil || s.Principal.Membership.TenantName != tenant {
			continue
		}
		out = append(out, &signedIn{Tenant: tenant, Session: s, secret: ck.Value})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Tenant < out[j].Tenant })
	return out
}

// isRefresh reports whether r is a page's own periodic refresh: it shows
// the page again but is no activity of the person, so it does not keep the
// session from idling out.
func isRefresh(r *http.Request) bool { return r.Header.Get("X-Console-Refresh") == "1" }
