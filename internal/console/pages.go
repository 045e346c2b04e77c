package console

import (
	"bytes"
	"encoding/json"
	"io/fs"
	"net/http"
	"net/url"
	"strings"

	"github.com/agentowl/agentowl"
	"github.com/agentowl/agentowl/internal/access"
	"github.com/agentowl/agentowl/internal/approval"
	"github.com/agentowl/agentowl/internal/inbox"
	"github.com/agentowl/agentowl/internal/notify"
	"github.com/agentowl/agentowl/internal/work"
)

// routes registers every console page. Pages under /console/t/{tenant}/
// need a session in that tenant; state-changing ones are POST forms with
// the session's CSRF token.
func (c *Console) routes() {
	m := http.NewServeMux()
	assets, _ := fs.Sub(assetFS, "assets")
	files := http.StripPrefix("/console/assets/", http.FileServer(http.FS(assets)))
	m.Handle("GET /console/assets/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-cache")
		files.ServeHTTP(w, r)
	}))
	m.HandleFunc("GET /console/{$}", c.start)
	m.HandleFunc("GET /console/sign-in", c.signInForm)
	m.HandleFunc("POST /console/sign-in", c.signIn)
	m.HandleFunc("GET /console/link", c.linkForm)
	m.HandleFunc("POST /console/link", c.link)

	const t = "/console/t/{tenant}"
	for _, rt := range []struct {
		pattern string
		h       func(q *req) error
	}{
		{"GET " + t + "/{$}", func(q *req) error { return q.redirect("/attention") }},
		{"GET " + t + "/attention", c.attentionList},
		{"GET " + t + "/attention/{id}", c.attentionItem},
		{"POST " + t + "/attention/{id}/ack", c.attentionAck},
		{"POST " + t + "/attention/{id}/resolve", c.attentionResolve},
		{"POST " + t + "/attention/{id}/decide", c.attentionDecide},
		{"GET " + t + "/approvals", c.approvalList},
		{"GET " + t + "/approvals/{id}", c.approvalItem},
		{"POST " + t + "/approvals/{id}/decide", c.approvalDecide},
		{"GET " + t + "/work", c.workList},
		{"GET " + t + "/work/{id}", c.workItem},
		{"GET " + t + "/conversations", c.conversationList},
		{"GET " + t + "/conversations/{id}", c.conversationItem},
		{"POST " + t + "/conversations/{id}/link", c.conversationLink},
		{"POST " + t + "/conversations/{id}/reset", c.conversationReset},
		{"GET " + t + "/events/{event}/attachments/{attachment}", c.attachmentDownload},
		{"GET " + t + "/endpoints", c.endpointList},
		{"POST " + t + "/endpoints/{id}/pause", c.endpointPause},
		{"POST " + t + "/endpoints/{id}/resume", c.endpointResume},
		{"GET " + t + "/notifications", c.notificationList},
		{"POST " + t + "/notifications/read-all", c.notificationsReadAll},
		{"POST " + t + "/notifications/preferences", c.notificationPrefs},
		{"POST " + t + "/notifications/{id}/read", c.notificationRead},
		{"POST " + t + "/sign-out", c.signOut},
	} {
		m.HandleFunc(rt.pattern, c.tenantPage(rt.h))
	}
	for _, rt := range c.configPages() {
		m.HandleFunc(strings.Replace(rt.pattern, "{t}", t, 1), c.tenantPage(rt.h))
	}
	m.HandleFunc("/console/", func(w http.ResponseWriter, r *http.Request) {
		c.fail(w, r, nil, http.StatusNotFound, "There is no such page.")
	})
	c.mux = m
}

// req is one request to a tenant page.
type req struct {
	c      *Console
	w      http.ResponseWriter
	r      *http.Request
	tenant string
	me     *signedIn
	all    []*signedIn
}

func (q *req) p() *access.Principal { return q.me.Session.Principal }

// path is the console path of this tenant's page rel ("/work/…").
func (q *req) path(rel string) string { return "/console/t/" + url.PathEscape(q.tenant) + rel }

func (q *req) redirect(rel string) error {
	http.Redirect(q.w, q.r, q.path(rel), http.StatusSeeOther)
	return nil
}

// tenantPage serves h for a browser signed in to the path's tenant. Without
// such a session, notSignedIn answers: the sign-in form for a browser with
// no session, else 404 as for a tenant that does not exist. A POST
// without its session's CSRF token is refused before h runs.
func (c *Console) tenantPage(h func(q *req) error) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		tenant := r.PathValue("tenant")
		all := c.sessions(r, tenant)
		var me *signedIn
		for _, s := range all {
			if s.Tenant == tenant {
				me = s
			}
		}
		if me == nil {
			c.notSignedIn(w, r, all) // signin.go: the sign-in form, or 404
			return
		}
		q := &req{c: c, w: w, r: r, tenant: tenant, me: me, all: all}
		if r.Method == http.MethodPost {
			if err := r.ParseForm(); err != nil {
				c.fail(w, r, q, http.StatusBadRequest, "The form could not be read.")
				return
			}
			if !validToken(r.PostForm.Get("csrf"), csrfToken(me.secret)) {
				c.fail(w, r, q, http.StatusForbidden, "The form's security token is missing or stale; reload the page and try again. Nothing was changed.")
				return
			}
			if field, ok := formText(r); !ok {
				c.fail(w, r, q, http.StatusBadRequest, notTextNotice(field).Message)
				return
			}
		}
		if err := h(q); err != nil {
			c.failErr(w, r, q, err)
		}
	}
}

// ---- Needs attention

// attentionFilters are the status filter's choices; "" is the default,
// unresolved.
var attentionFilters = []struct{ Value, Label string }{
	{"", "Open and acknowledged"}, {"open", "Open"}, {"acknowledged", "Acknowledged"}, {"resolved", "Resolved"}, {"all", "All"},
}

type attentionListView struct {
	Status, Work string
	// Sort is "urgency" (soonest expiry first, then newest) or "newest";
	// Urgency whether the filter allows the urgency order.
	Sort    string
	Urgency bool
	Filters []struct{ Value, Label string }
	Items   []itemView
	Next    string
	Counts  *inbox.Counts
	Docs    string
}

func (q *req) after() (*agentowl.Cursor, error) {
	v := q.r.URL.Query().Get("after")
	if v == "" {
		return nil, nil
	}
	c, ok := agentowl.ParseCursor(v)
	if !ok {
		return nil, agentowl.FieldError(agentowl.ECodeInvalidField, "after", "The page link is not valid.")
	}
	return c, nil
}

// attentionList is Needs attention: the counts per kind and status, and
// the items by urgency (open ones soonest expiry first, then those that
// never expire, newest first) or newest first.
func (c *Console) attentionList(q *req) error {
	qs := q.r.URL.Query()
	filter := qs.Get("status")
	st := agentowl.AttentionUnresolved
	switch filter {
	case "":
	case "all":
		st = ""
	default:
		var err error
		if st, err = work.ParseAttentionStatus(filter); err != nil {
			return err
		}
	}
	v := attentionListView{Status: filter, Work: qs.Get("work"), Filters: attentionFilters, Docs: docsBase,
		Urgency: qs.Get("work") == "" && (st == agentowl.AttentionUnresolved || st == agentowl.AttentionOpen || st == agentowl.AttentionAcknowledged)}
	v.Sort = qs.Get("sort")
	switch {
	case v.Sort == "" && v.Urgency:
		v.Sort = "urgency"
	case v.Sort == "" || (v.Sort == "urgency" && !v.Urgency):
		v.Sort = "newest"
	case v.Sort != "urgency" && v.Sort != "newest":
		return agentowl.FieldError(agentowl.ECodeInvalidField, "sort", "sort must be urgency or newest.")
	}
	ctx := q.r.Context()
	var items []*inbox.Item
	if v.Sort == "urgency" {
		var after *inbox.UrgentCursor
		if a := qs.Get("after"); a != "" {
			var ok bool
			if after, ok = inbox.ParseUrgentCursor(a); !ok {
				return agentowl.FieldError(agentowl.ECodeInvalidField, "after", "The page link is not valid.")
			}
		}
		var next *inbox.UrgentCursor
		var err error
		if items, next, err = c.inbox.ListUrgent(ctx, q.p(), q.tenant, st, after, c.cfg.PageSize); err != nil {
			return err
		}
		if next != nil {
			v.Next = next.String()
		}
	} else {
		after, err := q.after()
		if err != nil {
			return err
		}
		if items, err = c.inbox.List(ctx, q.p(), q.tenant, inbox.ListParams{Status: st, WorkID: qs.Get("work"), After: after,
			Limit: c.cfg.PageSize}); err != nil {
			return err
		}
		if len(items) == c.cfg.PageSize {
			v.Next = items[len(items)-1].Cursor().String()
		}
	}
	counts, err := c.inbox.Counts(ctx, q.p(), q.tenant)
	if err != nil {
		return err
	}
	v.Counts = counts
	if v.Items, err = c.itemViews(q, items); err != nil {
		return err
	}
	return c.render(q, http.StatusOK, "attention", "Needs attention", "attention", v)
}

// itemViews are items as a list shows them: with the endpoint's or
// instance's name and a line of the message that started each work.
func (c *Console) itemViews(q *req, items []*inbox.Item) ([]itemView, error) {
	var works []string
	aap := false
	for _, it := range items {
		if it.Work != nil {
			works = append(works, it.Work.Item.WorkID)
		} else {
			aap = true
		}
	}
	msgs, err := c.workMessages(q, works)
	if err != nil {
		return nil, err
	}
	names, _, err := c.endpointNames(q)
	if err != nil {
		return nil, err
	}
	var instances map[string]string
	if aap {
		if instances, _, err = c.instanceNames(q); err != nil {
			return nil, err
		}
	}
	out := make([]itemView, 0, len(items))
	for _, it := range items {
		v := c.itemView(it)
		v.Message, v.Endpoint = msgs[v.WorkID], names[v.EndpointID]
		if v.Approval != nil {
			v.Approval.Instance = instances[v.Approval.R.InstanceID]
		}
		out = append(out, v)
	}
	return out, nil
}

func (c *Console) attentionItem(q *req) error {
	v, err := c.itemPage(q)
	if err != nil {
		return err
	}
	return c.render(q, http.StatusOK, "item", "Attention item", "attention", v)
}

// itemPage is item {id} with its whole story: the message that started its
// work, the conversation's earlier messages and the agent's reports, or an
// AAP request with its instance's name.
func (c *Console) itemPage(q *req) (itemView, error) {
	it, err := c.inbox.Inspect(q.r.Context(), q.p(), q.tenant, q.r.PathValue("id"))
	if err != nil {
		return itemView{}, err
	}
	v := c.itemView(it)
	names, _, err := c.endpointNames(q)
	if err != nil {
		return v, err
	}
	v.Endpoint = names[v.EndpointID]
	if v.Approval != nil {
		in, err := c.svc.Approval.TenantInstance(q.r.Context(), q.p(), q.tenant, v.Approval.R.InstanceID)
		if err == nil {
			v.Approval.Instance = in.Name
		} else if agentowl.ErrorCode(err) != agentowl.ECodeNotFound {
			return v, err
		}
		return v, nil
	}
	if v.Story, err = c.story(q, v.WorkID, nil); err != nil {
		return v, err
	}
	if v.Story != nil {
		v.Files = v.Story.Files
	} else if v.Files, err = c.workFiles(q, v.WorkID); err != nil {
		return v, err
	}
	return v, nil
}

// renderItemError shows the item page again with err (a refused decision
// or acknowledgement), or fails the request when the item is gone.
func (c *Console) renderItemError(q *req, err error) error {
	v, verr := c.itemPage(q)
	if verr != nil {
		return err
	}
	v.Error = errorView(err)
	return c.render(q, c.svc.StatusOf(err), "item", "Attention item", "attention", v)
}

func (c *Console) attentionAck(q *req) error {
	_, err := c.inbox.Ack(q.r.Context(), q.p(), q.tenant, q.r.PathValue("id"), strings.TrimSpace(q.r.PostForm.Get("assignee")))
	if err != nil {
		return c.renderItemError(q, err)
	}
	return q.redirect("/attention/" + url.PathEscape(q.r.PathValue("id")) + "?done=acknowledged")
}

func (c *Console) attentionResolve(q *req) error {
	if _, err := c.inbox.Resolve(q.r.Context(), q.p(), q.tenant, q.r.PathValue("id")); err != nil {
		return c.renderItemError(q, err)
	}
	return q.redirect("/attention/" + url.PathEscape(q.r.PathValue("id")) + "?done=resolved")
}

// confirmView is the review step of a decision: what will be submitted.
type confirmView struct {
	Item       itemView
	DecisionID string
	Decision   string
	Revision   int64
	Digest     string
	Answer     string
	// Body is the decision document the runtime will receive (work items).
	Body string
}

// attentionDecide is the CLI's `attention decide` as a form: step preview
// checks the decision and shows what will be submitted (nothing changes);
// step submit submits it. The form carries the revision and action digest
// the person reviewed, so a request that changed in between is refused
// (stale_revision, digest_mismatch) rather than decided unseen. The
// decision ID is made at the preview, so submitting twice replays.
func (c *Console) attentionDecide(q *req) error {
	f := q.r.PostForm
	doc := map[string]any{"decision": f.Get("decision")}
	id := f.Get("decision_id")
	if id == "" {
		id = "console-" + randomToken()[:22]
	}
	doc["decision_id"] = id
	if rev, err := json.Number(f.Get("revision")).Int64(); err == nil {
		doc["request_revision"] = rev
	} else {
		doc["request_revision"] = f.Get("revision")
	}
	if f.Get("decision") == "answer" {
		doc["answer"] = f.Get("answer")
	} else {
		doc["expected_action_digest"] = f.Get("digest")
	}
	body, err := json.Marshal(doc)
	if err != nil {
		return err
	}
	in, err := inbox.ParseDecision(body)
	if err != nil {
		return c.renderItemError(q, err)
	}
	submit := f.Get("step") == "submit"
	decide := c.inbox.Preview
	if submit {
		decide = c.inbox.Decide
	}
	res, err := decide(q.r.Context(), q.p(), q.tenant, q.r.PathValue("id"), in)
	if err != nil {
		return c.renderItemError(q, err)
	}
	if submit {
		return q.redirect("/attention/" + url.PathEscape(q.r.PathValue("id")) + "?done=decided")
	}
	v := confirmView{Item: c.itemView(res.Item), DecisionID: in.DecisionID, Decision: in.Decision, Revision: in.RequestRevision,
		Digest: in.ExpectedActionDigest, Answer: in.Answer, Body: indentJSON(res.Body)}
	return c.render(q, http.StatusOK, "confirm", "Confirm decision", "attention", v)
}

func indentJSON(raw []byte) string {
	if len(raw) == 0 {
		return ""
	}
	var b bytes.Buffer
	if json.Indent(&b, raw, "", "  ") != nil {
		return string(raw)
	}
	return b.String()
}

// ---- approvals (AAP)

type approvalListView struct {
	Items []approvalView
	Next  string
	Docs  string
}

func (c *Console) approvalList(q *req) error {
	after, err := q.after()
	if err != nil {
		return err
	}
	reqs, err := c.svc.Approval.ListRequests(q.r.Context(), q.p(), q.tenant,
		approval.ListFilter{Status: agentowl.StatusPending, After: after, Limit: c.cfg.PageSize})
	if err != nil {
		return err
	}
	names, _, err := c.instanceNames(q)
	if err != nil {
		return err
	}
	v := approvalListView{Docs: docsBase}
	for _, r := range reqs {
		v.Items = append(v.Items, c.approvalView(r, names))
	}
	if len(reqs) == c.cfg.PageSize {
		last := reqs[len(reqs)-1]
		v.Next = agentowl.Cursor{At: last.CreatedAt, ID: last.ID}.String()
	}
	return c.render(q, http.StatusOK, "approvals", "Approvals", "approvals", v)
}

// approvalView is r as a page shows it, with its instance's name and
// whether its deadline is near.
func (c *Console) approvalView(r *agentowl.ApprovalRequest, instances map[string]string) approvalView {
	v := approvalViewOf(r)
	v.Instance = instances[r.InstanceID]
	left := r.DeadlineAt.Sub(c.svc.Clock.Now())
	v.Soon = v.Pending() && left > 0 && left <= inbox.SoonWindow
	return v
}

func (c *Console) approvalPage(q *req, id string) (approvalView, error) {
	r, err := c.svc.Approval.TenantRequest(q.r.Context(), q.p(), q.tenant, id)
	if err != nil {
		return approvalView{}, err
	}
	names, _, err := c.instanceNames(q)
	if err != nil {
		return approvalView{}, err
	}
	return c.approvalView(r, names), nil
}

func (c *Console) approvalItem(q *req) error {
	v, err := c.approvalPage(q, q.r.PathValue("id"))
	if err != nil {
		return err
	}
	return c.render(q, http.StatusOK, "approval", "Approval request", "approvals", v)
}

// approvalConfirmView is the review step of an AAP decision: exactly what
// will be submitted.
type approvalConfirmView struct {
	A        approvalView
	Decision string // approve or deny
	Note     string
	ValidFor string
}

// approvalDecide is `agentowl approvals decide`: approve with a note and a
// validity, or deny with a note, in two steps as every decision of the
// console: the first post checks the form and shows what will be
// submitted (nothing changes); the second (step=submit), carrying the
// action digest the person reviewed, submits it. No decision is one click.
func (c *Console) approvalDecide(q *req) error {
	f := q.r.PostForm
	id := q.r.PathValue("id")
	var dp approval.DecideParams
	var err error
	switch f.Get("decision") {
	case "approve":
		dp.Approve = true
	case "deny":
	default:
		err = agentowl.FieldError(agentowl.ECodeInvalidField, "decision", "decision must be approve or deny.")
	}
	dp.Note = strings.TrimSpace(f.Get("note"))
	validFor := strings.TrimSpace(f.Get("valid_for"))
	if validFor != "" && err == nil {
		d, ok := agentowl.ParseDuration(validFor)
		if !ok || !dp.Approve {
			err = agentowl.FieldError(agentowl.ECodeInvalidField, "valid_for", "valid_for is a duration such as 5m, for approvals only.")
		}
		dp.ValidFor = d
	}
	v, verr := c.approvalPage(q, id)
	if verr != nil {
		return verr
	}
	if err == nil && !v.Pending() {
		err = agentowl.Errorf(agentowl.ECodeConflict, "The request is %s; it takes no decision.", v.R.Status)
	}
	submit := f.Get("step") == "submit"
	if err == nil && submit && f.Get("digest") != v.Digest {
		err = agentowl.Errorf(agentowl.ECodeDigestMismatch, "The request is not the one reviewed; review it again.")
	}
	if err == nil && submit {
		_, err = c.svc.Approval.Decide(q.r.Context(), q.p(), q.tenant, id, dp)
	}
	if err != nil {
		if v, verr = c.approvalPage(q, id); verr != nil {
			return err
		}
		v.Error = errorView(err)
		return c.render(q, c.status(q.r, err), "approval", "Approval request", "approvals", v)
	}
	if submit {
		return q.redirect("/approvals/" + url.PathEscape(id) + "?done=decided")
	}
	return c.render(q, http.StatusOK, "approval_confirm", "Confirm decision", "approvals",
		approvalConfirmView{A: v, Decision: f.Get("decision"), Note: dp.Note, ValidFor: validFor})
}

// ---- agent work

var workStatuses = []string{"", "pending", "accepted", "running", "needs_input", "completed", "failed", "cancelled"}

type workListView struct {
	Status, Endpoint string
	Statuses         []string
	Items            []workView
	Next             string
	// Endpoints are the tenant's endpoints for the filter, by name; Names
	// maps an endpoint ID to its name, so rows show names, not IDs.
	Endpoints []*agentowl.Endpoint
	Names     map[string]string
	Docs      string
}

func (c *Console) workList(q *req) error {
	qs := q.r.URL.Query()
	st, err := work.ParseStatus(qs.Get("status"))
	if err != nil {
		return err
	}
	after, err := q.after()
	if err != nil {
		return err
	}
	ws, err := c.svc.Work.ListWork(q.r.Context(), q.p(), q.tenant, work.ListFilter{Status: st, EndpointID: qs.Get("endpoint"),
		After: after, Limit: c.cfg.PageSize})
	if err != nil {
		return err
	}
	eps, err := c.svc.Work.ListEndpoints(q.r.Context(), q.p(), q.tenant)
	if err != nil {
		return err
	}
	v := workListView{Status: string(st), Endpoint: qs.Get("endpoint"), Statuses: workStatuses, Endpoints: eps, Names: map[string]string{},
		Docs: docsBase}
	for _, ep := range eps {
		v.Names[ep.ID] = ep.Name
	}
	ids := make([]string, len(ws))
	for i, s := range ws {
		ids[i] = s.Work.ID
	}
	msgs, err := c.workMessages(q, ids)
	if err != nil {
		return err
	}
	for _, s := range ws {
		wv := workViewOf(s)
		wv.Message, wv.Endpoint = msgs[s.Work.ID], v.Names[s.Work.EndpointID]
		v.Items = append(v.Items, wv)
	}
	if len(ws) == c.cfg.PageSize {
		last := ws[len(ws)-1].Work
		v.Next = agentowl.Cursor{At: last.CreatedAt, ID: last.ID}.String()
	}
	return c.render(q, http.StatusOK, "work", "Agent work", "work", v)
}

func (c *Console) workItem(q *req) error {
	d, err := c.svc.Work.InspectWork(q.r.Context(), q.p(), q.tenant, q.r.PathValue("id"))
	if err != nil {
		return err
	}
	items, err := c.inbox.List(q.r.Context(), q.p(), q.tenant, inbox.ListParams{WorkID: d.Work.ID, Limit: 100})
	if err != nil {
		return err
	}
	st, err := c.story(q, d.Work.ID, d)
	if err != nil {
		return err
	}
	var files []fileView
	if st != nil {
		files = st.Files
	} else if files, err = c.workFiles(q, d.Work.ID); err != nil {
		return err
	}
	names, _, err := c.endpointNames(q)
	if err != nil {
		return err
	}
	v := workDetailView{workView: workViewOf(&d.Summary), Omitted: d.CallbacksOmitted, Files: files, Story: st}
	v.Endpoint = names[d.Work.EndpointID]
	if st != nil {
		v.Message = st.Message
	}
	for _, e := range d.Timeline {
		v.Timeline = append(v.Timeline, timelineViewOf(e))
	}
	for _, it := range items {
		v.Items = append(v.Items, c.itemView(it))
	}
	return c.render(q, http.StatusOK, "work_item", "Work "+d.Work.ID, "work", v)
}

// ---- notifications

type notificationsView struct {
	Unread     bool
	Items      []noticeView
	Next       string
	Kinds      []prefView
	Endpoints  []prefView
	PrefsError *errorViewData
}

type prefView struct {
	Value, Label string
	Muted        bool
}

var kindLabels = map[string]string{notify.KindResult: "Results (work completed)",
	notify.KindFailure: "Failures (failed work, deliveries and pushes that gave up, incidents)",
	notify.KindInput:   "Input requests (questions, approvals)"}

func (c *Console) notificationList(q *req) error {
	return c.renderNotifications(q, http.StatusOK, nil)
}

func (c *Console) renderNotifications(q *req, status int, prefsErr error) error {
	after, err := q.after()
	if err != nil {
		return err
	}
	unread := q.r.URL.Query().Get("unread") == "true"
	ctx := q.r.Context()
	ns, _, err := c.svc.Notify.List(ctx, q.p(), q.tenant, notify.ListParams{UnreadOnly: unread, After: after, Limit: c.cfg.PageSize})
	if err != nil {
		return err
	}
	prefs, err := c.svc.Notify.GetPrefs(ctx, q.p(), q.tenant)
	if err != nil {
		return err
	}
	eps, err := c.svc.Work.ListEndpoints(ctx, q.p(), q.tenant)
	if err != nil {
		return err
	}
	v := notificationsView{Unread: unread}
	for _, n := range ns {
		v.Items = append(v.Items, noticeView{N: n, Link: notify.Link(q.tenant, n)})
	}
	if len(ns) == c.cfg.PageSize {
		v.Next = agentowl.Cursor{At: ns[len(ns)-1].CreatedAt, ID: ns[len(ns)-1].ID}.String()
	}
	muted := map[string]bool{}
	for _, k := range prefs.MutedKinds {
		muted["kind:"+k] = true
	}
	for _, e := range prefs.MutedEndpoints {
		muted["endpoint:"+e] = true
	}
	for _, k := range notify.Kinds {
		v.Kinds = append(v.Kinds, prefView{Value: k, Label: kindLabels[k], Muted: muted["kind:"+k]})
	}
	for _, e := range eps {
		v.Endpoints = append(v.Endpoints, prefView{Value: e.ID, Label: e.Name, Muted: muted["endpoint:"+e.ID]})
	}
	if prefsErr != nil {
		v.PrefsError = errorView(prefsErr)
	}
	return c.render(q, status, "notifications", "Notifications", "notifications", v)
}

// notificationRead marks a notice read; with open=1 it then follows the
// notice's deep link.
func (c *Console) notificationRead(q *req) error {
	n, err := c.svc.Notify.MarkRead(q.r.Context(), q.p(), q.tenant, q.r.PathValue("id"))
	if err != nil {
		return err
	}
	if q.r.PostForm.Get("open") == "1" {
		http.Redirect(q.w, q.r, notify.Link(q.tenant, n), http.StatusSeeOther)
		return nil
	}
	return q.redirect("/notifications")
}

func (c *Console) notificationsReadAll(q *req) error {
	if _, err := c.svc.Notify.MarkAllRead(q.r.Context(), q.p(), q.tenant); err != nil {
		return err
	}
	return q.redirect("/notifications")
}

func (c *Console) notificationPrefs(q *req) error {
	f := q.r.PostForm
	in := notify.Prefs{MutedKinds: []string{}, MutedEndpoints: []string{}}
	for _, k := range notify.Kinds {
		if f.Get("notify_kind_"+k) == "" {
			in.MutedKinds = append(in.MutedKinds, k)
		}
	}
	eps, err := c.svc.Work.ListEndpoints(q.r.Context(), q.p(), q.tenant)
	if err != nil {
		return err
	}
	notified := map[string]bool{}
	for _, id := range f["notify_endpoint"] {
		notified[id] = true
	}
	for _, e := range eps {
		if !notified[e.ID] {
			in.MutedEndpoints = append(in.MutedEndpoints, e.ID)
		}
	}
	if _, err := c.svc.Notify.SetPrefs(q.r.Context(), q.p(), q.tenant, in); err != nil {
		return c.renderNotifications(q, c.svc.StatusOf(err), err)
	}
	return q.redirect("/notifications?done=saved")
}
