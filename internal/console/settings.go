package console

import (
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/agentowl/agentowl"
	"github.com/agentowl/agentowl/internal/work"
)

// tenantRoute is one tenant page: its pattern, "{t}" standing for the tenant's
// path prefix, and its handler.
type tenantRoute struct {
	pattern string
	h       func(q *req) error
}

// configPages are the audit and configuration views (…/audit, …/settings).
func (c *Console) configPages() []tenantRoute {
	return []tenantRoute{
		{"GET {t}/audit", c.auditList},
		{"GET {t}/settings", c.settingsPage},
		{"POST {t}/settings/runtime-credentials/{id}/revoke", c.revokeRuntimeCredential},
		{"POST {t}/settings/operator-tokens/{id}/revoke", c.revokeOperatorToken},
	}
}

// The settings view (…/settings): a read view of the tenant's
// configuration, each list through the use-case its API route and CLI
// command use, so the page shows what they show and leaves out what they
// refuse (a member sees no runtime credentials and only their own operator
// tokens, as on the API). Names first, IDs beside them to copy; never a
// secret. Admins can revoke a runtime credential or an operator token,
// each behind a confirmation page that changes nothing; only its Confirm
// does it, audited as the signed-in operator. Creating credentials stays
// with the CLI and the API: the page says how.

type settingsView struct {
	Admin     bool
	Endpoints []cfgEndpoint
	Bindings  []cfgBinding
	// NoIngress: this server has no channels, so no bindings either.
	NoIngress   bool
	Credentials []cfgCredential
	// CredentialsRefused says why the credentials are not shown (a member).
	CredentialsRefused *errorViewData
	Instances          []cfgInstance
	Policies           []cfgPolicy
	Operators          []*agentowl.Operator
	Tokens             []cfgToken
	// Revoked confirms a revocation (a fixed message, nothing from the URL).
	Revoked string
	Error   *errorViewData
}

type cfgEndpoint struct {
	ID, Name, URL          string
	AgentWork, DecisionURL bool
	PausedAt               *time.Time
}

type cfgBinding struct {
	ID, Channel, Name, Address string
	Endpoint, EndpointID       string
	Signed                     bool
	HandoffDelay               string
	CreatedAt                  time.Time
}

type cfgCredential struct {
	ID, Label              string
	Endpoint, EndpointID   string
	Scopes                 string
	Status                 string
	CreatedAt, ExpiresAt   time.Time
	ExpiresIn              string
	LastReport, RevokedAt  *time.Time
	LastReportAgo, Created string
}

type cfgInstance struct {
	ID, Name, Receiver, Validity string
	CreatedAt                    time.Time
}

type cfgPolicy struct {
	ID, Name, Tool, Condition, Effect, Note string
	Instance, InstanceID                    string
	Priority                                int
}

type cfgToken struct {
	ID, Label, Operator, Status string
	CreatedAt                   time.Time
	ExpiresAt, RevokedAt        *time.Time
	// Yours: the token this session signed in with.
	Yours bool
}

// revokedMessages are the confirmations of ?revoked=.
var revokedMessages = map[string]string{
	"runtime-credential": "Runtime credential revoked: the runtime's next request with it is refused (401).",
	"operator-token":     "Operator token revoked: its next API request is refused (401) and its console sessions have ended.",
}

func (c *Console) settingsPage(q *req) error {
	return c.renderSettings(q, http.StatusOK, nil)
}

// renderSettings shows the settings view and, when a revocation was
// refused, why.
func (c *Console) renderSettings(q *req, status int, failed error) error {
	ctx, p, now := q.r.Context(), q.p(), c.svc.Clock.Now()
	_, notAdmin := p.Tenant(q.tenant, agentowl.RoleAdmin)
	v := settingsView{Admin: notAdmin == nil, Revoked: revokedMessages[q.r.URL.Query().Get("revoked")]}
	if failed != nil {
		v.Error = errorView(failed)
	}
	epName, eps, err := c.endpointNames(q)
	if err != nil {
		return err
	}
	for _, e := range eps {
		v.Endpoints = append(v.Endpoints, cfgEndpoint{ID: e.ID, Name: e.Name, URL: e.URL, AgentWork: e.AgentWork,
			DecisionURL: e.DecisionURL != "", PausedAt: e.PausedAt})
	}
	if c.svc.Ingress == nil {
		v.NoIngress = true
	} else {
		bs, err := c.svc.Ingress.ListBindings(ctx, p, q.tenant)
		if err != nil {
			return err
		}
		for _, b := range bs {
			row := cfgBinding{ID: b.ID, Channel: b.Channel, Name: bindingName(b, nil), Address: b.Address,
				Endpoint: epName[b.EndpointID], EndpointID: b.EndpointID, Signed: b.SigningSecret != nil, CreatedAt: b.CreatedAt}
			if b.HandoffDelay > 0 {
				row.HandoffDelay = cfgDuration(b.HandoffDelay)
			}
			v.Bindings = append(v.Bindings, row)
		}
	}
	creds, err := c.svc.Work.TenantCredentials(ctx, p, q.tenant)
	switch {
	case isForbidden(err):
		v.CredentialsRefused = notice("Only the tenant's admins see its runtime credentials, as on the API.")
	case err != nil:
		return err
	}
	for _, cv := range creds {
		v.Credentials = append(v.Credentials, cfgCredentialOf(cv, now))
	}
	instName, insts, err := c.instanceNames(q)
	if err != nil {
		return err
	}
	for _, in := range insts {
		row := cfgInstance{ID: in.ID, Name: in.Name, Validity: "the server's default", CreatedAt: in.CreatedAt}
		if in.Receiver != nil {
			row.Receiver = in.Receiver.URL
		}
		if in.ApprovalValidity > 0 {
			row.Validity = cfgDuration(in.ApprovalValidity)
		}
		v.Instances = append(v.Instances, row)
	}
	pols, err := c.svc.Approval.ListPolicies(ctx, p, q.tenant)
	if err != nil {
		return err
	}
	for _, pol := range pols {
		v.Policies = append(v.Policies, cfgPolicy{ID: pol.ID, Name: pol.Name, Tool: pol.Tool, Condition: pol.Condition,
			Effect: string(pol.Effect), Note: pol.Note, Instance: instName[pol.InstanceID], InstanceID: pol.InstanceID,
			Priority: pol.Priority})
	}
	if v.Operators, err = c.svc.Access.ListOperators(ctx, p, q.tenant); err != nil {
		return err
	}
	opName := map[string]string{}
	for _, o := range v.Operators {
		opName[o.ID] = o.Name
	}
	toks, err := c.svc.Access.ListTokens(ctx, p, q.tenant, agentowl.TokenOperator)
	if err != nil {
		return err
	}
	for _, t := range toks {
		v.Tokens = append(v.Tokens, cfgToken{ID: t.ID, Label: t.Label, Operator: opName[t.OperatorID], Status: tokenStatus(t, now),
			CreatedAt: t.CreatedAt, ExpiresAt: t.ExpiresAt, RevokedAt: t.RevokedAt, Yours: t.ID == q.me.Session.Record.TokenID})
	}
	return c.render(q, status, "settings", "Settings", "settings", v)
}

// bindingName names a binding for people: its email address (smtp), else
// the name an admin gave it, else its channel and endpoint.
func bindingName(b *agentowl.Binding, epName map[string]string) string {
	switch {
	case b.Address != "":
		return b.Address
	case b.Name != "":
		return b.Name
	case epName[b.EndpointID] != "":
		return b.Channel + " → " + epName[b.EndpointID]
	}
	return b.Channel + " binding"
}

func cfgCredentialOf(cv *work.CredentialView, now time.Time) cfgCredential {
	cr := cv.Credential
	row := cfgCredential{ID: cr.ID, Label: cr.Label, Endpoint: cv.Endpoint.Name, EndpointID: cv.Endpoint.ID,
		Scopes: strings.Join(cr.Scopes, ", "), CreatedAt: cr.CreatedAt, ExpiresAt: cr.ExpiresAt, LastReport: cv.LastReport,
		RevokedAt: cr.RevokedAt, Created: ago(now.Sub(cr.CreatedAt))}
	switch {
	case cr.RevokedAt != nil:
		row.Status = "revoked"
	case !cr.Active(now):
		row.Status = "expired"
	default:
		row.Status = "active"
		row.ExpiresIn = timeLeft(cr.ExpiresAt.Sub(now))
	}
	if cv.LastReport != nil {
		row.LastReportAgo = ago(now.Sub(*cv.LastReport))
	}
	return row
}

func tokenStatus(t *agentowl.Token, now time.Time) string {
	switch {
	case t.RevokedAt != nil:
		return "revoked"
	case !t.Active(now):
		return "expired"
	}
	return "active"
}

// cfgDuration is a configured duration as people write it: "90 s",
// "15 min", "2 h 30 min".
func cfgDuration(d time.Duration) string {
	switch {
	case d < time.Minute || d%time.Minute != 0:
		return fmt.Sprintf("%d s", int(d/time.Second))
	case d < time.Hour:
		return fmt.Sprintf("%d min", int(d/time.Minute))
	case d%time.Hour == 0:
		return fmt.Sprintf("%d h", int(d/time.Hour))
	}
	return fmt.Sprintf("%d h %d min", int(d/time.Hour), int(d%time.Hour/time.Minute))
}

// settingsConfirmView is the review step of a revocation.
type settingsConfirmView struct {
	// Kind is "runtime-credential" or "operator-token"; What names it for
	// people.
	Kind, What string
	ID, Name   string
	// Owner is the credential's endpoint or the token's operator.
	Owner, OwnerKind string
	Status           string
	Scopes           string
	// Yours: revoking it ends this session.
	Yours bool
}

// revokeRuntimeCredential is `agentowl runtime-credentials revoke` as a
// form: the first post shows what will be revoked, the second
// (step=submit) revokes it (work.RevokeCredential: admin only, audited
// runtime_credential.revoke).
func (c *Console) revokeRuntimeCredential(q *req) error {
	ctx, id := q.r.Context(), q.r.PathValue("id")
	if _, err := q.p().Tenant(q.tenant, agentowl.RoleAdmin); err != nil {
		return c.renderSettings(q, c.status(q.r, err), err)
	}
	if q.r.PostForm.Get("step") == "submit" {
		if _, err := c.svc.Work.RevokeCredential(ctx, q.p(), q.tenant, id); err != nil {
			return c.renderSettings(q, c.status(q.r, err), err)
		}
		return q.redirect("/settings?revoked=runtime-credential#runtime-credentials")
	}
	creds, err := c.svc.Work.TenantCredentials(ctx, q.p(), q.tenant)
	if err != nil {
		return c.renderSettings(q, c.status(q.r, err), err)
	}
	for _, cv := range creds {
		if cv.Credential.ID == id {
			row := cfgCredentialOf(cv, c.svc.Clock.Now())
			return c.render(q, http.StatusOK, "settings_confirm", "Confirm revoke", "settings", settingsConfirmView{
				Kind: "runtime-credential", What: "runtime credential", ID: row.ID, Name: row.Label, Owner: row.Endpoint,
				OwnerKind: "endpoint", Status: row.Status, Scopes: row.Scopes})
		}
	}
	err = agentowl.Errorf(agentowl.ECodeNotFound, "No runtime credential %q in tenant %q.", id, q.tenant)
	return c.renderSettings(q, http.StatusNotFound, err)
}

// revokeOperatorToken is `agentowl operator-tokens revoke` as a form, for
// admins (access.RevokeToken, audited operator_token.revoke). Revoking the
// token this session signed in with ends the session: the browser then
// goes to the sign-in page.
func (c *Console) revokeOperatorToken(q *req) error {
	ctx, id := q.r.Context(), q.r.PathValue("id")
	if _, err := q.p().Tenant(q.tenant, agentowl.RoleAdmin); err != nil {
		return c.renderSettings(q, c.status(q.r, err), err)
	}
	yours := id == q.me.Session.Record.TokenID
	if q.r.PostForm.Get("step") == "submit" {
		if _, err := c.svc.Access.RevokeToken(ctx, q.p(), q.tenant, agentowl.TokenOperator, id); err != nil {
			return c.renderSettings(q, c.status(q.r, err), err)
		}
		if yours {
			c.setCookie(q.w, q.r, sessionCookiePrefix+q.tenant, "", time.Time{})
			http.Redirect(q.w, q.r, "/console/sign-in", http.StatusSeeOther)
			return nil
		}
		return q.redirect("/settings?revoked=operator-token#operator-tokens")
	}
	toks, err := c.svc.Access.ListTokens(ctx, q.p(), q.tenant, agentowl.TokenOperator)
	if err != nil {
		return c.renderSettings(q, c.status(q.r, err), err)
	}
	for _, t := range toks {
		if t.ID != id {
			continue
		}
		owner := ""
		if ops, err := c.svc.Access.ListOperators(ctx, q.p(), q.tenant); err == nil {
			for _, o := range ops {
				if o.ID == t.OperatorID {
					owner = o.Name
				}
			}
		}
		return c.render(q, http.StatusOK, "settings_confirm", "Confirm revoke", "settings", settingsConfirmView{
			Kind: "operator-token", What: "operator token", ID: t.ID, Name: t.Label, Owner: owner, OwnerKind: "operator",
			Status: tokenStatus(t, c.svc.Clock.Now()), Yours: yours})
	}
	err = agentowl.Errorf(agentowl.ECodeNotFound, "No operator token %q in tenant %q.", id, q.tenant)
	return c.renderSettings(q, http.StatusNotFound, err)
}
