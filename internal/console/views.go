package console

import (
	"bytes"
	"encoding/json"
	"fmt"
	"html/template"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/agentowl/agentowl"
	"github.com/agentowl/agentowl/internal/approval"
	"github.com/agentowl/agentowl/internal/inbox"
	"github.com/agentowl/agentowl/internal/ingress"
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
	// Now is when the page was made: relative times count from it.
	Now  time.Time
	Data any
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
		Now: c.svc.Clock.Now(), Data: data}
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
		p.SignInNext = returnPath(r.URL.RequestURI())
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
	// rel is t relative to now, as a <time> with the absolute UTC time in
	// its datetime and title: "2 h ago", "in 12 min".
	"rel": func(now time.Time, t any) template.HTML { return timeTag(now, t, "") },
	// expires is an expiry relative to now, marked when it is within
	// inbox.SoonWindow: "expires in 12 min", "expired 3 min ago".
	"expires": func(now time.Time, t any) template.HTML { return timeTag(now, t, "expires") },
	// who is a decided_by or actor ("operator:mia") as a person reads it.
	"who": func(s string) string {
		if name, ok := strings.CutPrefix(s, "operator:"); ok {
			return name
		}
		return s
	},
	"bytes": humanBytes,
	// dict makes a map of name, value pairs: the argument of a partial
	// template that needs more than one value.
	"dict": func(kv ...any) map[string]any {
		m := make(map[string]any, len(kv)/2)
		for i := 0; i+1 < len(kv); i += 2 {
			k, _ := kv[i].(string)
			m[k] = kv[i+1]
		}
		return m
	},
	// fields makes a form's hidden fields of name, value pairs, in order;
	// a pair whose value is false is left out (a flag not set).
	"fields": func(kv ...any) []formField {
		out := make([]formField, 0, len(kv)/2)
		for i := 0; i+1 < len(kv); i += 2 {
			if kv[i+1] == false {
				continue
			}
			name, _ := kv[i].(string)
			out = append(out, formField{Name: name, Value: kv[i+1]})
		}
		return out
	},
	// addrs is a list of email addresses as text: "Ann <ann@example.com>, …".
	"addrs": func(as []ingress.MailAddress) string {
		out := make([]string, 0, len(as))
		for _, a := range as {
			if a.Name != "" {
				out = append(out, a.Name+" <"+a.Address+">")
			} else {
				out = append(out, a.Address)
			}
		}
		return strings.Join(out, ", ")
	},
	"clip": func(n int, s string) string { return agentowl.Clip(s, n) },
	"pluralize": func(n int, one, many string) string {
		if n == 1 {
			return one
		}
		return many
	},
}

// formField is a hidden field of a form (the template func fields).
type formField struct {
	Name  string
	Value any
}

// timeOf reads a time of a template value; ok is false for none.
func timeOf(t any) (time.Time, bool) {
	switch v := t.(type) {
	case time.Time:
		return v, !v.IsZero()
	case *time.Time:
		if v != nil {
			return *v, !v.IsZero()
		}
	}
	return time.Time{}, false
}

// timeTag is the <time> element of t relative to now. The markup is made
// here from two times only: nothing anyone wrote.
func timeTag(now, t any, mode string) template.HTML {
	at, ok := timeOf(t)
	n, _ := timeOf(now)
	if !ok {
		return "—"
	}
	abs := at.UTC().Format("2006-01-02 15:04:05 UTC")
	d := at.Sub(n)
	text, class := relative(d), "rel"
	if mode == "expires" {
		class = "rel expiry"
		if d <= 0 {
			text, class = "expired "+relative(d), "rel expiry expired"
		} else {
			text = "expires " + timeLeft(d)
			if d <= inbox.SoonWindow {
				class = "rel expiry soon"
			}
		}
	}
	return template.HTML(fmt.Sprintf(`<time class="%s" datetime="%s" title="%s">%s</time>`, class,
		at.UTC().Format(time.RFC3339), abs, template.HTMLEscapeString(text)))
}

// relative is a duration from now as a person reads it: "in 12 min",
// "just now", "2 h ago", "3 days ago".
func relative(d time.Duration) string {
	switch {
	case d > time.Minute:
		return timeLeft(d)
	case d > -time.Minute:
		return "just now"
	}
	return ago(-d)
}

// humanBytes is a size as a person reads it.
func humanBytes(n int64) string {
	switch {
	case n < 1024:
		return fmt.Sprintf("%d bytes", n)
	case n < 1024*1024:
		return fmt.Sprintf("%.1f KiB", float64(n)/1024)
	}
	return fmt.Sprintf("%.1f MiB", float64(n)/(1024*1024))
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
	// TimeLeft says how urgent an unexpired request is ("in 12 min");
	// Soon marks one that expires within inbox.SoonWindow.
	TimeLeft           string
	Soon               bool
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
	// Message is a digest of the message that started the work (lists);
	// Endpoint the endpoint's name.
	Message  *ingress.Message
	Endpoint string
	// Story is the whole story of the item's work (the item page).
	Story *storyView
	Error *errorViewData
}

// Headline is the item in a line: what it asks or reports.
func (v itemView) Headline() string {
	s := v.Prompt
	switch {
	case v.Approval != nil:
		s = "Call " + v.Approval.R.Tool + "?"
	case s == "":
		s = v.Summary
	}
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return agentowl.Clip(s, 120)
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
		left := v.ExpiresAt.Sub(c.svc.Clock.Now())
		v.TimeLeft, v.Soon = timeLeft(left), left <= inbox.SoonWindow
	}
	return v
}

// timeLeft is a wait as a person reads it at a glance: "in 40 s", "in 12
// min", "in 3 h 5 min", "in 2 days".
func timeLeft(d time.Duration) string { return "in " + roughly(d, true) }

// ago is how long ago something was, as a person reads it: "40 s ago",
// "12 min ago", "3 h ago", "2 days ago".
func ago(d time.Duration) string { return roughly(d, false) + " ago" }

// roughly is a duration read at a glance: "40 s" (0 s when negative), "12
// min", "3 h" (or "3 h 5 min" with minutes set), "2 days".
func roughly(d time.Duration, minutes bool) string {
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%d s", max(int(d/time.Second), 0))
	case d < time.Hour:
		return fmt.Sprintf("%d min", int(d/time.Minute))
	case d < 48*time.Hour:
		h, m := int(d/time.Hour), int(d%time.Hour/time.Minute)
		if m == 0 || !minutes {
			return fmt.Sprintf("%d h", h)
		}
		return fmt.Sprintf("%d h %d min", h, m)
	}
	return fmt.Sprintf("%d days", int(d/(24*time.Hour)))
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
	R           *agentowl.ApprovalRequest
	Arguments   string
	Context     string
	Reasoning   string
	Digest      string
	Description string
	// Instance is the instance's name ("" when unknown).
	Instance string
	Soon     bool
	Error    *errorViewData
}

// Pending reports whether the request still waits for a decision.
func (v approvalView) Pending() bool { return v.R.Status == agentowl.StatusPending }

func approvalViewOf(r *agentowl.ApprovalRequest) approvalView {
	v := approvalView{R: r, Arguments: indentJSON(r.Arguments), Context: indentJSON(r.Context), Digest: approval.ActionDigest(r),
		Description: approval.ActionDescription(r)}
	if v.Context == "null" || v.Context == "{}" {
		v.Context = ""
	}
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
	// Message is a digest of the message that started it; Endpoint the
	// endpoint's name.
	Message  *ingress.Message
	Endpoint string
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
	// Story is the message that started it and its conversation.
	Story *storyView
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

// ---- the whole story of an item (docs/console.md, "Needs attention")

// storyEarlier is how many of the conversation's earlier messages an item
// shows.
const storyEarlier = 3

// docsBase is where the console's empty states link the documents that
// set things up.
const docsBase = "https://github.com/agentowl/agentowl/blob/main/docs/"

// storyView is what started a work, where it came from and what the
// agent reported since: the item page's first section.
type storyView struct {
	WorkID  string
	Message *ingress.Message
	// Earlier are the conversation's messages before it, oldest first;
	// More counts those of its messages not shown.
	Earlier []*ingress.Message
	More    int
	// Conversation and its name (subject or peer); Binding the binding's
	// name and address.
	Conversation     *agentowl.Conversation
	ConversationName string
	Binding          string
	// Files are the retained files of the message.
	Files []fileView
	// Calls is a call's status timeline, oldest first (voice).
	Calls []callStep
	// Reports are the agent's callbacks in order (routine progress quiet).
	Reports []reportView
	Omitted int
}

type callStep struct {
	At             time.Time
	Event, Status  string
	Transcription  string
	RecordingLinks []string
}

// reportView is one callback as the story tells it.
type reportView struct {
	timelineView
	// Said is what the report says in a line: its result summary, error
	// or how many requests it makes.
	Said string
}

// bindingLabel is a binding as a person reads it: its name, and its
// receiving address when it has one.
func bindingLabel(b *agentowl.Binding) string {
	if b == nil {
		return ""
	}
	name := b.Name
	if name == "" {
		name = b.Channel
	}
	if b.Address != "" {
		return name + " <" + b.Address + ">"
	}
	return name
}

// conversationName is a conversation as a person reads it: the subject of
// its message, else who it is with.
func conversationName(m *ingress.Message, c *agentowl.Conversation) string {
	if m != nil && strings.TrimSpace(m.Subject) != "" {
		return strings.TrimSpace(m.Subject)
	}
	if m != nil && m.Sender != "" {
		return m.Channel + " with " + m.Sender
	}
	if c != nil && c.Key != "" {
		return c.Channel + " " + c.Key
	}
	if c != nil {
		return c.Channel + " conversation"
	}
	return ""
}

// said is what a callback body says in a line.
func said(body []byte) string {
	var cb struct {
		Result *struct {
			Summary string `json:"summary"`
		} `json:"result"`
		Error *struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
		Requests []struct {
			Prompt string `json:"prompt"`
		} `json:"requests"`
	}
	if json.Unmarshal(body, &cb) != nil {
		return ""
	}
	switch {
	case cb.Result != nil && cb.Result.Summary != "":
		return cb.Result.Summary
	case cb.Error != nil && (cb.Error.Message != "" || cb.Error.Code != ""):
		return strings.TrimSpace(cb.Error.Code + " " + cb.Error.Message)
	case len(cb.Requests) == 1:
		return "Asks: " + cb.Requests[0].Prompt
	case len(cb.Requests) > 1:
		return fmt.Sprintf("Asks %d things, the first: %s", len(cb.Requests), cb.Requests[0].Prompt)
	}
	return ""
}

// story reads the story of work workID: nil when this server serves no
// conversations. files are the work's retained files when the caller has
// them already.
func (c *Console) story(q *req, workID string, detail *work.Detail) (*storyView, error) {
	if c.svc.Ingress == nil || workID == "" {
		return nil, nil
	}
	ctx := q.r.Context()
	st, err := c.svc.Ingress.WorkStory(ctx, q.p(), q.tenant, workID, storyEarlier)
	if err != nil {
		return nil, err
	}
	v := &storyView{WorkID: workID, Message: st.Message, Conversation: st.Conversation, Binding: bindingLabel(st.Binding)}
	first := st.Message
	for i := len(st.Earlier) - 1; i >= 0; i-- {
		v.Earlier = append(v.Earlier, st.Earlier[i])
	}
	if len(v.Earlier) > 0 {
		first = v.Earlier[0]
	}
	v.ConversationName = conversationName(first, st.Conversation)
	// Events after the message are not the story's; count only those before.
	v.More = max(st.Events-len(v.Earlier)-1, 0)
	if v.Files, err = c.workFiles(q, workID); err != nil {
		return nil, err
	}
	if st.Message.Channel == ingress.ChannelVoice {
		for _, m := range append(slices.Clone(v.Earlier), st.Message) {
			v.Calls = append(v.Calls, callStep{At: m.ReceivedAt, Event: m.CallEvent, Status: m.CallStatus, Transcription: m.Text,
				RecordingLinks: m.Links})
		}
	}
	if detail == nil {
		if detail, err = c.svc.Work.InspectWork(ctx, q.p(), q.tenant, workID); err != nil {
			return nil, err
		}
	}
	v.Omitted = detail.CallbacksOmitted
	for _, e := range detail.Timeline {
		if e.Callback != nil {
			v.Reports = append(v.Reports, reportView{timelineView: timelineViewOf(e), Said: said(e.Callback.Body)})
		}
	}
	return v, nil
}

// endpointNames maps the tenant's endpoint IDs to their names.
func (c *Console) endpointNames(q *req) (map[string]string, []*agentowl.Endpoint, error) {
	eps, err := c.svc.Work.ListEndpoints(q.r.Context(), q.p(), q.tenant)
	return namesOf(eps, err, func(e *agentowl.Endpoint) (string, string) { return e.ID, e.Name })
}

// instanceNames maps the tenant's AAP instance IDs to their names.
func (c *Console) instanceNames(q *req) (map[string]string, []*agentowl.Instance, error) {
	ins, err := c.svc.Approval.TenantInstances(q.r.Context(), q.p(), q.tenant)
	return namesOf(ins, err, func(in *agentowl.Instance) (string, string) { return in.ID, in.Name })
}

// namesOf maps the IDs of list, read with err, to their names (idName
// says both of one), and returns the list too.
func namesOf[T any](list []T, err error, idName func(T) (id, name string)) (map[string]string, []T, error) {
	if err != nil {
		return nil, nil, err
	}
	names := make(map[string]string, len(list))
	for _, x := range list {
		id, name := idName(x)
		names[id] = name
	}
	return names, list, nil
}

// workMessages are the digests of the messages of works, by work ID (none
// when this server serves no conversations).
func (c *Console) workMessages(q *req, works []string) (map[string]*ingress.Message, error) {
	if c.svc.Ingress == nil {
		return map[string]*ingress.Message{}, nil
	}
	return c.svc.Ingress.WorkMessages(q.r.Context(), q.p(), q.tenant, works)
}
