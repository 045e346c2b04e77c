package console

import (
	"encoding/base64"
	"net/http"
	"net/url"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/agentowl/agentowl"
	"github.com/agentowl/agentowl/internal/access"
)

func (c *Console) start(w http.ResponseWriter, r *http.Request) {
	if all := c.sessions(r, ""); len(all) > 0 {
		http.Redirect(w, r, "/console/t/"+all[0].Tenant+"/attention", http.StatusSeeOther)
		return
	}
	http.Redirect(w, r, "/console/sign-in", http.StatusSeeOther)
}

// preCSRF returns the CSRF token of the forms shown before sign-in, setting
// its cookie when the browser has none.
func (c *Console) preCSRF(w http.ResponseWriter, r *http.Request) string {
	if ck, err := r.Cookie(preCSRFCookie); err == nil && len(ck.Value) == 43 {
		return ck.Value
	}
	v := randomToken()
	c.setCookie(w, r, preCSRFCookie, v, time.Time{})
	return v
}

// checkPreCSRF reports whether a form posted before sign-in carries the
// pre-session CSRF token of its cookie.
func (c *Console) checkPreCSRF(r *http.Request) bool {
	ck, err := r.Cookie(preCSRFCookie)
	return err == nil && r.ParseForm() == nil && validToken(r.PostForm.Get("csrf"), ck.Value)
}

// notTextNotice is the console's answer to a posted field that breaks the
// text rule, as every signed-in form answers it (400, the field named).
func notTextNotice(field string) *errorViewData {
	return notice("The field " + field + " holds something that is not text (a NUL character or bytes that are not UTF-8). Nothing was changed.")
}

// formText applies the text rule (agentowl.IsText) to every name and value
// of a posted form; it names the first field that breaks it.
func formText(r *http.Request) (field string, ok bool) {
	for name, values := range r.PostForm {
		if !agentowl.IsText(name) {
			return "name", false
		}
		for _, v := range values {
			if !agentowl.IsText(v) {
				return strconv.Quote(name), false
			}
		}
	}
	return "", true
}

type signInView struct {
	// Next is where signing in lands: a console path (returnPath), or ""
	// for the tenant's Needs attention.
	Next string
	Code string
	// Operator and LinkTenant name who a valid login link signs in as.
	Operator, LinkTenant string
	// DeepLink: the page is shown in place of a tenant page opened without
	// a session, which signing in opens.
	DeepLink bool
}

// Deep links. A tenant page opened without any session shows the sign-in
// form (401) in its place, keeping its path as the form's next and, for a
// login link opened afterwards, in a short-lived cookie: either way,
// signing in lands on the page that was opened. Only a path under
// /console/ of this server is ever a return target (returnPath).

// nextCookie remembers the deep link a signed-out browser opened for a
// login link opened afterwards, which cannot carry it (the token form
// carries it as next); nextLifetime is how long.
const (
	nextCookie   = "agentowl_next"
	nextLifetime = 30 * time.Minute
)

// maxNextBytes bounds a return target; a longer one is ignored.
const maxNextBytes = 2048

// returnPath returns next as a console path to go to after signing in, or
// "" when next is not one. next must be a path (no scheme, host or
// backslash) whose dot segments, resolved after percent-decoding as a
// browser resolves them (%2e%2e is ..), leave it under /console/ of this
// server. The answer is that resolved path, percent-encoded again, with
// next's query and without its fragment: nothing a browser or
// http.Redirect does to it afterwards can take it elsewhere.
func returnPath(next string) string {
	if next == "" || len(next) > maxNextBytes || next[0] != '/' || strings.HasPrefix(next, "//") {
		return ""
	}
	for i := 0; i < len(next); i++ {
		// A browser drops tabs and newlines from a URL and reads \ as /.
		if b := next[i]; b < 0x21 || b == 0x7f || b == '\\' {
			return ""
		}
	}
	u, err := url.Parse(next)
	if err != nil || u.Scheme != "" || u.Host != "" || u.User != nil || u.Opaque != "" {
		return ""
	}
	p := u.Path // percent-decoded
	for i := 0; i < len(p); i++ {
		// A % left after decoding was encoded twice: no console path is.
		if b := p[i]; b < 0x20 || b == 0x7f || b == '\\' || b == '%' {
			return ""
		}
	}
	clean := path.Clean(p)
	if strings.HasSuffix(p, "/") && clean != "/" {
		clean += "/"
	}
	if !strings.HasPrefix(clean, "/console/") {
		return ""
	}
	out := (&url.URL{Path: clean, RawQuery: u.RawQuery}).String()
	if !strings.HasPrefix(out, "/console/") {
		return ""
	}
	return out
}

// rememberNext keeps next for the sign-in that follows (nextCookie).
func (c *Console) rememberNext(w http.ResponseWriter, r *http.Request, next string) {
	if next == "" {
		return
	}
	c.setCookie(w, r, nextCookie, base64.RawURLEncoding.EncodeToString([]byte(next)), c.svc.Clock.Now().Add(nextLifetime))
}

// rememberedNext is the deep link rememberNext kept, checked again, or "".
func rememberedNext(r *http.Request) string {
	ck, err := r.Cookie(nextCookie)
	if err != nil {
		return ""
	}
	raw, err := base64.RawURLEncoding.DecodeString(ck.Value)
	if err != nil {
		return ""
	}
	return returnPath(string(raw))
}

// notSignedIn answers a tenant page the browser holds no session of its
// tenant for. A browser without any session gets the sign-in form in the
// page's place (401), which lands on the page once signed in; a GET of a
// tenant that does not exist looks the same. A browser signed in to other
// tenants only gets 404, as for a tenant that does not exist: a deep link
// shows nothing of a tenant to someone who is not in it.
func (c *Console) notSignedIn(w http.ResponseWriter, r *http.Request, all []*signedIn) {
	if len(all) == 0 && (r.Method == http.MethodGet || r.Method == http.MethodHead) && !isRefresh(r) {
		next := returnPath(r.URL.RequestURI())
		c.rememberNext(w, r, next)
		c.renderPublic(w, r, http.StatusUnauthorized, "signin", "Sign in", signInView{Next: next, DeepLink: next != ""},
			notice("Sign in to open this page."))
		return
	}
	c.fail(w, r, &req{c: c, w: w, r: r, all: all}, http.StatusNotFound,
		"There is no such page, or you are not signed in to this tenant.")
}

func (c *Console) signInForm(w http.ResponseWriter, r *http.Request) {
	next := returnPath(r.URL.Query().Get("next"))
	c.rememberNext(w, r, next)
	c.renderPublic(w, r, http.StatusOK, "signin", "Sign in", signInView{Next: next}, nil)
}

func (c *Console) signIn(w http.ResponseWriter, r *http.Request) {
	if !c.publicFormOK(w, r, "signin", "Sign in", "The form's security token is missing or stale; try again.") {
		return
	}
	next := returnPath(r.PostForm.Get("next"))
	s, err := c.svc.Access.SignIn(r.Context(), strings.TrimSpace(r.PostForm.Get("token")))
	if err != nil {
		c.renderPublic(w, r, c.status(r, err), "signin", "Sign in", signInView{Next: next}, errorView(err))
		return
	}
	c.startSession(w, r, s, next)
}

// publicFormOK checks a form posted before any session (the sign-in
// page's, a login link's): its CSRF token, then its text. When one fails it
// shows page name again with why (stale, for the token) and reports false.
func (c *Console) publicFormOK(w http.ResponseWriter, r *http.Request, name, title, stale string) bool {
	if !c.checkPreCSRF(r) {
		c.renderPublic(w, r, http.StatusForbidden, name, title, signInView{}, notice(stale))
		return false
	}
	if field, ok := formText(r); !ok {
		c.renderPublic(w, r, http.StatusBadRequest, name, title, signInView{}, notTextNotice(field))
		return false
	}
	return true
}

// startSession sets the new session's cookie, signing out the session the
// browser had in that tenant, forgets the remembered deep link, and goes to
// next (a returnPath) or the tenant's Needs attention. A next in another
// tenant is followed too: that page is then 404, as for any tenant the
// browser is not signed in to.
func (c *Console) startSession(w http.ResponseWriter, r *http.Request, s *access.Session, next string) {
	tenant := s.Principal.Membership.TenantName
	for _, old := range c.sessions(r, "") {
		if old.Tenant == tenant {
			_ = c.svc.Access.SignOut(r.Context(), old.Session)
		}
	}
	c.setCookie(w, r, sessionCookiePrefix+tenant, s.Secret, s.Record.ExpiresAt)
	if _, err := r.Cookie(nextCookie); err == nil {
		c.setCookie(w, r, nextCookie, "", time.Time{})
	}
	if next = returnPath(next); next == "" {
		next = "/console/t/" + url.PathEscape(tenant) + "/attention"
	}
	http.Redirect(w, r, next, http.StatusSeeOther)
}

func (c *Console) linkForm(w http.ResponseWriter, r *http.Request) {
	code := r.URL.Query().Get("code")
	p, err := c.svc.Access.InspectLoginLink(r.Context(), code)
	if err != nil {
		c.renderPublic(w, r, c.status(r, err), "link", "Sign in with a link", signInView{},
			notice("This login link is unknown, used or expired. Ask for a new one."))
		return
	}
	next := returnPath(r.URL.Query().Get("next"))
	if next == "" {
		next = rememberedNext(r)
	}
	c.renderPublic(w, r, http.StatusOK, "link", "Sign in with a link",
		signInView{Code: code, Operator: p.Operator.Name, LinkTenant: p.Membership.TenantName, Next: next}, nil)
}

func (c *Console) link(w http.ResponseWriter, r *http.Request) {
	if !c.publicFormOK(w, r, "link", "Sign in with a link", "The form's security token is missing or stale; open the link again.") {
		return
	}
	s, err := c.svc.Access.SignInWithLink(r.Context(), r.PostForm.Get("code"))
	if err != nil {
		c.renderPublic(w, r, c.status(r, err), "link", "Sign in with a link", signInView{},
			notice("This login link is unknown, used or expired. Ask for a new one."))
		return
	}
	next := returnPath(r.PostForm.Get("next"))
	if next == "" {
		next = rememberedNext(r)
	}
	c.startSession(w, r, s, next)
}

func (c *Console) signOut(q *req) error {
	if err := c.svc.Access.SignOut(q.r.Context(), q.me.Session); err != nil {
		return err
	}
	c.setCookie(q.w, q.r, sessionCookiePrefix+q.tenant, "", time.Time{})
	http.Redirect(q.w, q.r, "/console/", http.StatusSeeOther)
	return nil
}
