package console

import (
	"net/http"
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
	Next string
	Code string
	// Operator and LinkTenant name who a valid login link signs in as.
	Operator, LinkTenant string
}

func (c *Console) signInForm(w http.ResponseWriter, r *http.Request) {
	c.renderPublic(w, r, http.StatusOK, "signin", "Sign in", signInView{Next: safeNext(r.URL.Query().Get("next"))}, nil)
}

func (c *Console) signIn(w http.ResponseWriter, r *http.Request) {
	if !c.checkPreCSRF(r) {
		c.renderPublic(w, r, http.StatusForbidden, "signin", "Sign in", signInView{},
			notice("The form's security token is missing or stale; try again."))
		return
	}
	if field, ok := formText(r); !ok {
		c.renderPublic(w, r, http.StatusBadRequest, "signin", "Sign in", signInView{}, notTextNotice(field))
		return
	}
	next := safeNext(r.PostForm.Get("next"))
	s, err := c.svc.Access.SignIn(r.Context(), strings.TrimSpace(r.PostForm.Get("token")))
	if err != nil {
		c.renderPublic(w, r, c.status(r, err), "signin", "Sign in", signInView{Next: next}, errorView(err))
		return
	}
	c.startSession(w, r, s, next)
}

// startSession sets the new session's cookie, signing out the session the
// browser had in that tenant, and goes to next (in that tenant) or its
// Needs attention.
func (c *Console) startSession(w http.ResponseWriter, r *http.Request, s *access.Session, next string) {
	tenant := s.Principal.Membership.TenantName
	for _, old := range c.sessions(r, "") {
		if old.Tenant == tenant {
			_ = c.svc.Access.SignOut(r.Context(), old.Session)
		}
	}
	c.setCookie(w, r, sessionCookiePrefix+tenant, s.Secret, s.Record.ExpiresAt)
	if !strings.HasPrefix(next, "/console/t/"+tenant+"/") {
		next = "/console/t/" + tenant + "/attention"
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
	c.renderPublic(w, r, http.StatusOK, "link", "Sign in with a link",
		signInView{Code: code, Operator: p.Operator.Name, LinkTenant: p.Membership.TenantName}, nil)
}

func (c *Console) link(w http.ResponseWriter, r *http.Request) {
	if !c.checkPreCSRF(r) {
		c.renderPublic(w, r, http.StatusForbidden, "link", "Sign in with a link", signInView{},
			notice("The form's security token is missing or stale; open the link again."))
		return
	}
	if field, ok := formText(r); !ok {
		c.renderPublic(w, r, http.StatusBadRequest, "link", "Sign in with a link", signInView{}, notTextNotice(field))
		return
	}
	s, err := c.svc.Access.SignInWithLink(r.Context(), r.PostForm.Get("code"))
	if err != nil {
		c.renderPublic(w, r, c.status(r, err), "link", "Sign in with a link", signInView{},
			notice("This login link is unknown, used or expired. Ask for a new one."))
		return
	}
	c.startSession(w, r, s, "")
}

func (c *Console) signOut(q *req) error {
	if err := c.svc.Access.SignOut(q.r.Context(), q.me.Session); err != nil {
		return err
	}
	c.setCookie(q.w, q.r, sessionCookiePrefix+q.tenant, "", time.Time{})
	http.Redirect(q.w, q.r, "/console/", http.StatusSeeOther)
	return nil
}
