package console

import (
	"bytes"
	"encoding/json"
	"fmt"
	"html/template"
	"net/http"
	"strings"
	"time"

	"github.com/agentowl/agentowl"
	"github.com/agentowl/agentowl/internal/approval"
	"github.com/agentowl/agentowl/internal/inbox"
	"github.com/agentowl/agentowl/internal/work"
)

// The pages' view models: the use-cases' results, arranged for the
// templates. Text that agents, runtimes or senders wrote stays a string
// here; html/template escapes it where it is shown.

// page is what the layout shows around every page.
type page struct {
	Title, Nav string
	// Tenant and Operator are the session's; empty on public pages.
	Tenant, Operator, Role string
	// Tenants are the other tenants this browser is signed in to.
	Tenants   []string
	Unread    int
	CSRF      string
	RefreshMS int64
	// Done names a finished action (?done=…) whose confirmation to show.
	Done  string
	Error *errorViewData
	// SignInNext, on an error page, is where signing in returns to: the
	// deep link that was opened without a session.
	SignInNext string
	Data       any
}

type errorViewData struct {
	Code, Message string
}

// errorView is err as a page shows it: its code and the message meant for
// the caller (a generic one for anything else).
func errorView(err error) *errorViewData {
	return &errorViewData{Code: agentowl.ErrorCode(err), Message: agentowl.ErrorMessage(err)}
}

// notice is a message of the console's own to show on a page.
func notice(message string) *errorViewData { return &errorViewData{Message: message} }

// doneMessages are the confirmations of ?done=: a fixed set, so nothing
// from the URL is shown.
var doneMessages = map[string]string{
	"acknowledged": "Acknowledged and assigned. Nothing was decided.",
	"resolved":     "Resolved.",
	"decided":      "Decision submitted.",
	"saved":        "Preferences saved.",
	"reset":        "Conversation reset: its next event starts a new conversation.",
	"link":         "Event moved.",
	"paused":       "Endpoint paused: its events are still recorded, and their handoffs wait until it is resumed.",
	"resumed":      "Endpoint resumed: its held handoffs are handed off in the order they were queued.",
}

// render shows a tenant page.
func (c *Console) render(q *req, status int, name, title, nav string, data any) error {
	p := page{Title: title, Nav: nav, Tenant: q.tenant, Operator: q.p().Operator.Name, Role: string(q.p().Membership.Role),
		CSRF: csrfToken(q.me.secret), RefreshMS: c.cfg.RefreshInterval.Milliseconds(), Done: doneMessages[q.r.URL.Query().Get("done")],
		Data: data}
	for _, s := range q.all {
		if s.Tenant != q.tenant {
			p.Tenants = append(p.Tenants, s.Tenant)
		}
	}
	n, err := c.svc.Notify.Unread(q.r.Context(), q.p(), q.tenant)
	if err != nil {
		return err
	}
	p.Unread = n
	return c.write(q.w, status, name, p)
}

// renderPublic shows a page outside any tenant (sign-in) with message,
// if any.
func (c *Console) renderPublic(w http.ResponseWriter, r *http.Request, status int, name, title string, data any, message *errorViewData) {
	p := page{Title: title, CSRF: c.preCSRF(w, r), Data: data, Error: message}
	if werr := c.write(w, status, name, p); werr != nil {
		c.svc.Log.Error("console render", "page", name, "err", werr)
	}
}

func (c *Console) write(w http.ResponseWriter, status int, name string, p page) error {
	var buf bytes.Buffer
	if err := c.pages[name].ExecuteTemplate(&buf, "layout", p); err != nil {
		return err
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, err := w.Write(buf.Bytes())
	return err
}

// fail shows an error page with status and message.
func (c *Console) fail(w http.ResponseWriter, r *http.Request, q *req, status int, message string) {
	p := page{Title: http.StatusText(status), Error: &errorViewData{Message: message}, Data: status}
	if q != nil && q.me != nil {
		p.Tenant, p.Operator, p.Role, p.CSRF = q.tenant, q.p().Operator.Name, string(q.p().Membership.Role), csrfToken(q.me.secret)
		// The header's unread count, as on every other page (0 if it
		// cannot be read: the error is what this page is about).
		p.Unread, _ = c.svc.Notify.Unread(r.Context(), q.p(), q.tenant)
	} else if r.Method == http.MethodGet {
		if next := safeNext(r.URL.RequestURI()); next != "/console/" {
			p.SignInNext = next
		}
	}
	if q != nil {
		for _, s := range q.all {
			if s.Tenant != p.Tenant {
				p.Tenants = append(p.Tenants, s.Tenant)
			}
		}
	}
	if err := c.write(w, status, "error", p); err != nil {
		c.svc.Log.Error("console render", "page", "error", "err", err)
	}
}

// failErr shows err as an error page: its status and, for errors the
// use-cases meant for the caller, its message; anything else is logged and
// shown as a generic failure.
func (c *Console) failErr(w http.ResponseWriter, r *http.Request, q *req, err error) {
	c.fail(w, r, q, c.status(r, err), agentowl.ErrorMessage(err))
}

// status is err's HTTP status; a server-side failure is logged once here
// (the page shows only a generic message).
func (c *Console) status(r *http.Request, err error) int {
	status := c.svc.StatusOf(err)
	if status >= 500 {
		c.svc.Log.Error("console", "path", r.URL.Path, "err", err)
	}
	return status
}

var funcs = template.FuncMap{
	"when": func(t any) string {
		switch v := t.(type) {
		case time.Time:
			if v.IsZero() {
				return "—"
			}
			return v.UTC().Format("2006-01-02 15:04:05 UTC")
		case *time.Time:
			if v == nil {
				return "—"
			}
			return v.UTC().Format("2006-01-02 15:04:05 UTC")
		}
		return "—"
	},
	"iso": func(t time.Time) string { return t.UTC().Format(time.RFC3339) },
	"json": func(raw json.RawMessage) string {
		if len(raw) == 0 {
			return ""
		}
		return indentJSON(raw)
	},
	"add": func(a, b int) int { return a + b },
}

// itemView is an inbox item of either kind, as the pages show it.
type itemView struct {
	ID, Kind, Status, Resolution string
	Prompt, Summary              string
	RequestID                    string
	Revision                     int64
	AllowedDecisions             []string
	ActionDescription            string
	ActionDigest                 string
	ExpiresAt                    *time.Time
	Expired                      bool
	// TimeLeft says how urgent an unexpired request is ("in 12 min").
	TimeLeft           string
	Assignee           string
	WorkID, EndpointID string
	WorkStatus         string
	CreatedAt          time.Time
	ResolvedAt         *time.Time
	// Decision, Push and Receipt: the winning decision of a work item, its
	// push delivery and the runtime's receipt.
	Decision *agentowl.WorkDecision
	Push     *agentowl.OutboxMessage
	// Files are the retained files of the work's event (the item page's).
	Files []fileView
	// Approval is the AAP request of an approval item.
	Approval *approvalView
	Error    *errorViewData
}

// Open reports whether the item still waits for someone.
func (v itemView) Open() bool { return v.Status != string(agentowl.AttentionResolved) }

// Decidable reports whether a decision can be submitted now.
func (v itemView) Decidable() bool {
	return v.Open() && v.Kind != work.KindIncident && v.Decision == nil && !v.Expired
}

// Allows reports whether decision d is among the allowed ones.
func (v itemView) Allows(d string) bool {
	for _, a := range v.AllowedDecisions {
		if a == d {
			return true
		}
	}
	return false
}

func (c *Console) itemView(it *inbox.Item) itemView {
	v := c.itemViewOf(it)
	if v.ExpiresAt != nil && !v.Expired {
		v.TimeLeft = timeLeft(v.ExpiresAt.Sub(c.svc.Clock.Now()))
	}
	return v
}

// timeLeft is a wait as a person reads it at a glance: "in 40 s", "in 12
// min", "in 3 h 5 min", "in 2 days".
func timeLeft(d time.Duration) string {
	switch {
	case d < time.Minute:
		return fmt.Sprintf("in %d s", max(int(d/time.Second), 0))
	case d < time.Hour:
		return fmt.Sprintf("in %d min", int(d/time.Minute))
	case d < 48*time.Hour:
		h, m := int(d/time.Hour), int(d%time.Hour/time.Minute)
		if m == 0 {
			return fmt.Sprintf("in %d h", h)
		}
		return fmt.Sprintf("in %d h %d min", h, m)
	}
	return fmt.Sprintf("in %d days", int(d/(24*time.Hour)))
}

func (c *Console) itemViewOf(it *inbox.Item) itemView {
	if a := it.Approval; a != nil {
		av := approvalViewOf(a.Request)
		return itemView{ID: a.ID, Kind: work.KindApproval, Status: string(a.Status), Resolution: a.Resolution, Prompt: a.Prompt,
			RequestID: a.Request.ID, Revision: 1, AllowedDecisions: a.AllowedDecisions, ActionDescription: a.ActionDescription,
			ActionDigest: a.ActionDigest, ExpiresAt: &a.ExpiresAt, Expired: a.Expired, Assignee: a.Assignee,
			CreatedAt: a.CreatedAt, ResolvedAt: a.ResolvedAt, Approval: &av}
	}
	v := it.Work
	i := v.Item
	return itemView{ID: i.ID, Kind: i.Kind, Status: string(i.Status), Resolution: i.Resolution, Prompt: i.Prompt, Summary: i.Summary,
		RequestID: i.RequestID, Revision: i.Revision, AllowedDecisions: i.AllowedDecisions, ActionDescription: i.ActionDescription,
		ActionDigest: i.ActionDigest, ExpiresAt: i.ExpiresAt, Expired: v.Expired, Assignee: i.Assignee, WorkID: i.WorkID,
		EndpointID: i.EndpointID, WorkStatus: string(v.WorkStatus), CreatedAt: i.CreatedAt, ResolvedAt: i.ResolvedAt,
		Decision: v.Decision, Push: v.Push}
}

// approvalView is an AAP approval request.
type approvalView struct {
	R         *agentowl.ApprovalRequest
	Arguments string
	Reasoning string
	Digest    string
	Error     *errorViewData
}

// Pending reports whether the request still waits for a decision.
func (v approvalView) Pending() bool { return v.R.Status == agentowl.StatusPending }

func approvalViewOf(r *agentowl.ApprovalRequest) approvalView {
	v := approvalView{R: r, Arguments: indentJSON(r.Arguments), Digest: approval.ActionDigest(r)}
	if r.AgentReasoning != nil {
		v.Reasoning = *r.AgentReasoning
	}
	return v
}

// workView is work with its three statuses side by side: the handoff's
// delivery, the runtime's progress or outcome, and the human decisions
// with their receipts.
type workView struct {
	W         *agentowl.Work
	Delivery  string
	Attempts  int
	Decision  string
	Decisions []*agentowl.WorkDecision
}

func workViewOf(s *work.Summary) workView {
	v := workView{W: s.Work, Delivery: "purged", Decision: "none", Decisions: s.Decisions}
	if m := s.Handoff; m != nil {
		v.Delivery, v.Attempts = string(m.State), m.Attempts
	}
	if s.Work.Status == agentowl.WorkNeedsInput {
		v.Decision = "requested"
	}
	if len(s.Decisions) > 0 {
		v.Decision = "decided"
		received := true
		for _, d := range s.Decisions {
			received = received && d.ReceiptAt != nil
		}
		if received {
			v.Decision = "received"
		}
	}
	return v
}

type workDetailView struct {
	workView
	Timeline []timelineView
	Omitted  int
	Items    []itemView
	// Files are the retained attachments of the work's event.
	Files []fileView
}

type timelineView struct {
	At    time.Time
	Kind  string
	Quiet bool
	A     *agentowl.Attempt
	C     *agentowl.Callback
	Body  string
}

func timelineViewOf(e work.TimelineEntry) timelineView {
	v := timelineView{At: e.At, Kind: e.Kind, Quiet: e.Quiet, A: e.Attempt, C: e.Callback}
	if e.Callback != nil {
		v.Body = indentJSON(e.Callback.Body)
	}
	return v
}

// noticeView is a notification with its deep link.
type noticeView struct {
	N    *agentowl.Notification
	Link string
}

// Kind names the notice's kind for people.
func (v noticeView) Kind() string {
	return strings.ToUpper(v.N.Kind[:1]) + v.N.Kind[1:]
}
