package console

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/agentowl/agentowl"
	"github.com/agentowl/agentowl/internal/access"
)

// The audit view (…/audit): the tenant's audit log newest first, who did
// what to which object and when, under which request ID, with filters by
// actor, action and object and keyset pages (?before=ID). It is the data of
// GET /api/v1/tenants/{tenant}/audit and `agentowl audit list`, through the
// same admin-only use-case gate (access.QueryAudit); a member is told so
// (403), as the API refuses them.

type auditView struct {
	Actor, Action, Object string
	Items                 []auditRow
	// Older is the before= of the next (older) page; Newest links back to
	// the first page when this one is not.
	Older  string
	Newest bool
	// Forbidden: the person may not read the log (a member).
	Forbidden *errorViewData
}

// auditRow is one entry as the page shows it: the object by name where
// the tenant's configuration names it, with a link where the console has a
// page for it.
type auditRow struct {
	E *agentowl.AuditEntry
	// Kind and ID split the object ("endpoint", "ep_…"); Name names it.
	Kind, ID, Name string
	Link           string
	Details        string
}

func (c *Console) auditList(q *req) error {
	qs := q.r.URL.Query()
	f := access.AuditFilter{Actor: strings.TrimSpace(qs.Get("actor")), Action: strings.TrimSpace(qs.Get("action")),
		Target: strings.TrimSpace(qs.Get("object")), Limit: c.cfg.PageSize}
	v := auditView{Actor: f.Actor, Action: f.Action, Object: f.Target}
	if b := qs.Get("before"); b != "" {
		n, err := strconv.ParseInt(b, 10, 64)
		if err != nil || n <= 0 {
			return agentowl.FieldError(agentowl.ECodeInvalidField, "before", "The page link is not valid.")
		}
		f.Before, v.Newest = n, true
	}
	entries, err := c.svc.Access.QueryAudit(q.r.Context(), q.p(), q.tenant, f)
	if isForbidden(err) {
		v.Forbidden = errorView(err)
		return c.render(q, http.StatusForbidden, "audit", "Audit", "audit", v)
	}
	if err != nil {
		return err
	}
	names := c.objectNames(q)
	for _, e := range entries {
		v.Items = append(v.Items, auditRowOf(q, e, names))
	}
	if len(entries) == c.cfg.PageSize {
		v.Older = strconv.FormatInt(entries[len(entries)-1].ID, 10)
	}
	return c.render(q, http.StatusOK, "audit", "Audit", "audit", v)
}

// objectNames maps "kind:ID" audit objects to the names the tenant's
// configuration gives them. A list that cannot be read leaves its objects
// unnamed: the page still shows their IDs.
func (c *Console) objectNames(q *req) map[string]string {
	ctx, p := q.r.Context(), q.p()
	names := map[string]string{}
	eps, _ := c.svc.Work.ListEndpoints(ctx, p, q.tenant)
	epName := map[string]string{}
	for _, e := range eps {
		names["endpoint:"+e.ID], epName[e.ID] = e.Name, e.Name
	}
	if c.svc.Ingress != nil {
		bs, _ := c.svc.Ingress.ListBindings(ctx, p, q.tenant)
		for _, b := range bs {
			names["binding:"+b.ID] = bindingName(b, epName)
		}
	}
	insts, _ := c.svc.Approval.TenantInstances(ctx, p, q.tenant)
	for _, in := range insts {
		if in.Name != "" {
			names["instance:"+in.ID] = in.Name
		}
	}
	pols, _ := c.svc.Approval.ListPolicies(ctx, p, q.tenant)
	for _, pol := range pols {
		if pol.Name != "" {
			names["policy:"+pol.ID] = pol.Name
		}
	}
	for _, e := range eps {
		creds, _ := c.svc.Work.ListCredentials(ctx, p, q.tenant, e.ID)
		for _, cr := range creds {
			names["runtime-credential:"+cr.ID] = credentialName(cr.Label, e.Name)
		}
	}
	ops, _ := c.svc.Access.ListOperators(ctx, p, q.tenant)
	opName := map[string]string{}
	for _, o := range ops {
		opName[o.ID] = o.Name
	}
	toks, _ := c.svc.Access.ListTokens(ctx, p, q.tenant, agentowl.TokenOperator)
	for _, t := range toks {
		names["operator-token:"+t.ID] = credentialName(t.Label, opName[t.OperatorID])
	}
	return names
}

// credentialName names a credential by its label and owner: "ci
// (support-agent)", or the owner alone.
func credentialName(label, owner string) string {
	switch {
	case label == "":
		return owner
	case owner == "":
		return label
	}
	return label + " (" + owner + ")"
}

// objectPages are the console pages of audit objects, by kind.
var objectPages = map[string]string{
	"work": "/work/", "attention": "/attention/", "approval-request": "/approvals/", "conversation": "/conversations/",
}

func auditRowOf(q *req, e *agentowl.AuditEntry, names map[string]string) auditRow {
	r := auditRow{E: e, Name: names[e.Target]}
	if kind, id, ok := strings.Cut(e.Target, ":"); ok {
		r.Kind, r.ID = kind, id
		if page, ok := objectPages[kind]; ok && id != "" {
			r.Link = q.path(page + url.PathEscape(id))
		} else if kind == "endpoint" && r.Name != "" {
			r.Link = q.path("/work?endpoint=" + url.QueryEscape(id))
		}
	}
	if len(e.Details) > 0 {
		if b, err := json.MarshalIndent(e.Details, "", "  "); err == nil {
			r.Details = string(b)
		}
	}
	return r
}

// isForbidden reports whether err is the use-cases' refusal for a role.
func isForbidden(err error) bool {
	return err != nil && agentowl.ErrorCode(err) == agentowl.ECodeForbidden
}
