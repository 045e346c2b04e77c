package console

import (
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/agentowl/agentowl"
	"github.com/agentowl/agentowl/internal/attachment"
	"github.com/agentowl/agentowl/internal/ingress"
	"github.com/agentowl/agentowl/internal/work"
)

// Conversations (the API's /conversations and the CLI's `conversations
// list|inspect|events|link|reset`) and the retained files of an event.
// Link and reset are forms with a confirmation step: the first post shows
// what will change, the second (step=submit) does it.

func (c *Console) ingressService() (*ingress.Service, error) {
	if c.svc.Ingress == nil {
		return nil, agentowl.Errorf(agentowl.ECodeNotFound, "Conversations are not served here.")
	}
	return c.svc.Ingress, nil
}

// ingressPage is what a paged conversation view starts from: the ingress
// service and the page's cursor (nil for the first page).
func (c *Console) ingressPage(q *req) (*ingress.Service, *agentowl.Cursor, error) {
	in, err := c.ingressService()
	if err != nil {
		return nil, nil, err
	}
	after, err := q.after()
	if err != nil {
		return nil, nil, err
	}
	return in, after, nil
}

var conversationStatuses = []string{"", agentowl.ConversationOpen, agentowl.ConversationEnded}

type conversationListView struct {
	Channel, Status string
	Channels        []string
	Statuses        []string
	Items           []conversationRow
	Next            string
	Docs            string
}

// conversationRow is a conversation as the list shows it: who it is with,
// its subject or first line, its binding and its open work.
type conversationRow struct {
	*agentowl.Conversation
	Summary *ingress.ConversationSummary
	Binding string
}

// Peer is who the conversation is with.
func (r conversationRow) Peer() string {
	if p := r.Summary.Peer(); p != "" {
		return p
	}
	return r.Key
}

// Line is its subject or its first message's first line.
func (r conversationRow) Line() string {
	if r.Summary == nil || r.Summary.First == nil {
		return ""
	}
	return r.Summary.First.Line()
}

// OpenWork counts its work not ended.
func (r conversationRow) OpenWork() int {
	if r.Summary == nil {
		return 0
	}
	return r.Summary.OpenWork
}

// bindingLabels maps the tenant's binding IDs to their names and addresses.
func (c *Console) bindingLabels(q *req, in *ingress.Service) (map[string]string, error) {
	bs, err := in.ListBindings(q.r.Context(), q.p(), q.tenant)
	if err != nil {
		return nil, err
	}
	out := make(map[string]string, len(bs))
	for _, b := range bs {
		out[b.ID] = bindingLabel(b)
	}
	return out, nil
}

func (c *Console) conversationList(q *req) error {
	in, after, err := c.ingressPage(q)
	if err != nil {
		return err
	}
	qs := q.r.URL.Query()
	pg, err := in.ListConversations(q.r.Context(), q.p(), q.tenant, ingress.ConversationFilter{Channel: qs.Get("channel"),
		Status: qs.Get("status"), After: after, Limit: c.cfg.PageSize})
	if err != nil {
		return err
	}
	v := conversationListView{Channel: qs.Get("channel"), Status: qs.Get("status"), Channels: append([]string{""}, ingress.Channels...),
		Statuses: conversationStatuses, Docs: docsBase}
	ids := make([]string, len(pg.Items))
	for i, cv := range pg.Items {
		ids[i] = cv.ID
	}
	sums, err := in.ConversationSummaries(q.r.Context(), q.p(), q.tenant, ids)
	if err != nil {
		return err
	}
	labels, err := c.bindingLabels(q, in)
	if err != nil {
		return err
	}
	for _, cv := range pg.Items {
		v.Items = append(v.Items, conversationRow{Conversation: cv, Summary: sums[cv.ID], Binding: labels[cv.BindingID]})
	}
	if pg.Next != nil {
		v.Next = pg.Next.String()
	}
	return c.render(q, http.StatusOK, "conversations", "Conversations", "conversations", v)
}

type conversationView struct {
	*ingress.ConversationDetail
	// Name is its subject or who it is with; Binding the binding's name.
	Name, Binding string
	// Page is a page of its events, oldest first.
	Page []eventView
	Next string
	// Admin may link and reset.
	Admin bool
	Error *errorViewData
}

// eventView is an event of a conversation page: a message of the thread.
type eventView struct {
	*ingress.EventView
	Payload string
	// Message is the event as a person reads it; Files its retained files.
	Message *ingress.Message
	Files   []fileView
	// Linkable: not handed off yet, so it can move to another conversation.
	Linkable bool
}

// Headers are the event's headers as text, one per line.
func (v eventView) Headers() string {
	var b strings.Builder
	keys := make([]string, 0, len(v.Event.Headers))
	for k := range v.Event.Headers {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		for _, val := range v.Event.Headers[k] {
			b.WriteString(k + ": " + val + "\n")
		}
	}
	return b.String()
}

func (c *Console) conversationItem(q *req) error { return c.renderConversation(q, http.StatusOK, nil) }

// renderConversation shows conversation {id} with a page of its events
// and, when a link or reset was refused, why.
func (c *Console) renderConversation(q *req, status int, failed error) error {
	in, after, err := c.ingressPage(q)
	if err != nil {
		return err
	}
	ctx, id := q.r.Context(), q.r.PathValue("id")
	d, err := in.InspectConversation(ctx, q.p(), q.tenant, id)
	if err != nil {
		return err
	}
	evs, err := in.ConversationEvents(ctx, q.p(), q.tenant, id, after, ingress.MaxEventPage)
	if err != nil {
		return err
	}
	_, notAdmin := q.p().Tenant(q.tenant, agentowl.RoleAdmin)
	v := conversationView{ConversationDetail: d, Admin: notAdmin == nil}
	labels, err := c.bindingLabels(q, in)
	if err != nil {
		return err
	}
	v.Binding = labels[d.BindingID]
	for _, e := range evs.Items {
		ev := eventView{EventView: e, Message: ingress.MessageOf(e.Event), Linkable: e.Handoff != work.HandoffSent}
		ev.Payload = ev.Message.Payload
		if ev.Message.Parts > 0 && c.svc.Attachments != nil {
			m, err := c.svc.Attachments.EventManifest(ctx, q.p(), q.tenant, e.ID)
			if err != nil {
				return err
			}
			ev.Files = c.fileViews(q, m)
		}
		v.Page = append(v.Page, ev)
	}
	var first *ingress.Message
	if len(v.Page) > 0 && after == nil {
		first = v.Page[0].Message
	} else if sums, err := in.ConversationSummaries(ctx, q.p(), q.tenant, []string{d.ID}); err != nil {
		return err
	} else if s := sums[d.ID]; s != nil {
		first = s.First
	}
	v.Name = conversationName(first, d.Conversation)
	if evs.Next != nil {
		v.Next = evs.Next.String()
	}
	if failed != nil {
		v.Error = errorView(failed)
	}
	return c.render(q, status, "conversation", "Conversation: "+agentowl.Clip(v.Name, 80), "conversations", v)
}

// conversationConfirmView is the review step of a link or reset.
type conversationConfirmView struct {
	C *ingress.ConversationDetail
	// Name is the conversation's subject or peer.
	Name   string
	Action string // "link" or "reset"
	// Event and To are a link's; Force a reset's.
	Event, To string
	Force     bool
}

// confirmOrDo shows the confirmation of a link or reset (nothing changes)
// unless the form is its submit step, where do runs and the page shows the
// outcome. A refusal shows the conversation again with its reason.
func (c *Console) confirmOrDo(q *req, v conversationConfirmView, do func(in *ingress.Service) error) error {
	in, err := c.ingressService()
	if err != nil {
		return err
	}
	if q.r.PostForm.Get("step") == "submit" {
		if err := do(in); err != nil {
			return c.renderConversation(q, c.svc.StatusOf(err), err)
		}
		return q.redirect("/conversations/" + url.PathEscape(q.r.PathValue("id")) + "?done=" + v.Action)
	}
	if v.C, err = in.InspectConversation(q.r.Context(), q.p(), q.tenant, q.r.PathValue("id")); err != nil {
		return err
	}
	sums, err := in.ConversationSummaries(q.r.Context(), q.p(), q.tenant, []string{v.C.ID})
	if err != nil {
		return err
	}
	var first *ingress.Message
	if s := sums[v.C.ID]; s != nil {
		first = s.First
	}
	v.Name = conversationName(first, v.C.Conversation)
	if _, err := q.p().Tenant(q.tenant, agentowl.RoleAdmin); err != nil {
		return c.renderConversation(q, c.svc.StatusOf(err), err)
	}
	return c.render(q, http.StatusOK, "conversation_confirm", "Confirm "+v.Action, "conversations", v)
}

func (c *Console) conversationReset(q *req) error {
	force := q.r.PostForm.Get("force") == "1"
	return c.confirmOrDo(q, conversationConfirmView{Action: "reset", Force: force}, func(in *ingress.Service) error {
		_, err := in.ResetConversation(q.r.Context(), q.p(), q.tenant, q.r.PathValue("id"), force)
		return err
	})
}

// conversationLink moves event (a form field) of conversation {id} into
// conversation to, as `conversations link`.
func (c *Console) conversationLink(q *req) error {
	f := q.r.PostForm
	ev, to := strings.TrimSpace(f.Get("event")), strings.TrimSpace(f.Get("to"))
	if to == "" {
		return c.renderConversation(q, http.StatusUnprocessableEntity,
			agentowl.FieldError(agentowl.ECodeInvalidField, "to", "Name the conversation to move the event into."))
	}
	return c.confirmOrDo(q, conversationConfirmView{Action: "link", Event: ev, To: to}, func(in *ingress.Service) error {
		_, err := in.LinkEvent(q.r.Context(), q.p(), q.tenant, ev, to)
		return err
	})
}

// fileView is a retained file of an event as a page lists it.
type fileView struct {
	attachment.Entry
	// URL is its console download, when its bytes can be downloaded.
	URL string
}

// workFiles lists the retained files of the event that work workID
// handles; none when there is no work or this server keeps no attachments.
func (c *Console) workFiles(q *req, workID string) ([]fileView, error) {
	if c.svc.Attachments == nil || workID == "" {
		return nil, nil
	}
	m, err := c.svc.Attachments.WorkFiles(q.r.Context(), q.p(), q.tenant, workID)
	if err != nil {
		return nil, err
	}
	return c.fileViews(q, m), nil
}

// fileViews are the files of manifest m with their console downloads.
func (c *Console) fileViews(q *req, m *attachment.Manifest) []fileView {
	var out []fileView
	for _, e := range m.Entries() {
		v := fileView{Entry: e}
		if e.Availability == string(agentowl.AttachmentAvailable) {
			v.URL = q.path("/events/" + url.PathEscape(m.EventID) + "/attachments/" + url.PathEscape(e.ID))
		}
		out = append(out, v)
	}
	return out
}

// attachmentDownload streams a retained file with the same inert headers
// as the API's download (whole files only; ranges are the API's).
func (c *Console) attachmentDownload(q *req) error {
	svc := c.svc.Attachments
	if svc == nil {
		return agentowl.Errorf(agentowl.ECodeNotFound, "Retained attachments are not served here.")
	}
	a, err := svc.EventAttachment(q.r.Context(), q.p(), q.tenant, q.r.PathValue("event"), q.r.PathValue("attachment"))
	if err != nil {
		return err
	}
	body, err := svc.Open(q.r.Context(), a, 0, -1)
	if err != nil {
		return err
	}
	defer body.Close()
	h := q.w.Header()
	for _, kv := range attachment.InertHeaders(a) {
		h.Set(kv.Name, kv.Value)
	}
	h.Set("Content-Length", strconv.FormatInt(a.Size, 10))
	q.w.WriteHeader(http.StatusOK)
	if n, err := io.Copy(q.w, io.LimitReader(body, a.Size)); err != nil || n != a.Size {
		c.svc.Log.Error("console attachment download cut short", "attachment", a.ID, "err", fmt.Sprint(err), "bytes", n)
		// The status is sent: end the connection so the browser sees a
		// body shorter than its Content-Length, never a complete-looking file.
		panic(http.ErrAbortHandler)
	}
	return nil
}
