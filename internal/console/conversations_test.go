package console_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/agentowl/agentowl"
	"github.com/agentowl/agentowl/internal/attachment/attachmenttest"
	"github.com/agentowl/agentowl/internal/server"
	"github.com/agentowl/agentowl/internal/store/storetest"
)

// convSite is a console server without a delivery engine, so handoffs stay
// queued and events can still be linked, with one webhook binding.
type convSite struct {
	*site
	endpoint, binding, ingress string
}

func startConversations(t *testing.T, b storetest.Backend) *convSite {
	s := &convSite{site: start(t, b, func(cfg *server.Config) { cfg.NoDelivery = true })}
	base := "/api/v1/tenants/default"
	s.endpoint = s.must(http.StatusCreated, http.MethodPost, base+"/endpoints", s.admin, map[string]any{"name": "support-agent",
		"url": "https://runtime.example.com/events", "config": map[string]any{"agent_work": true}})["id"].(string)
	in := s.must(http.StatusCreated, http.MethodPost, base+"/bindings", s.admin, map[string]any{"channel": "webhook", "endpoint_id": s.endpoint})
	s.binding, s.ingress = in["id"].(string), strings.TrimPrefix(in["ingress_url"].(string), s.url)
	return s
}

// event posts an event with conversation key and text; it returns its
// conversation and event IDs.
func (s *convSite) event(key, text string) (conv, ev string) {
	s.t.Helper()
	acc := s.must(http.StatusAccepted, http.MethodPost, s.ingress, "", map[string]any{"text": text}, "AgentOwl-Conversation-Key", key)
	return acc["conversation_id"].(string), acc["event_id"].(string)
}

func (s *convSite) conversation(id string) map[string]any {
	s.t.Helper()
	return s.must(http.StatusOK, http.MethodGet, "/api/v1/tenants/default/conversations/"+id, s.admin, nil)
}

const convPages = "/console/t/default/conversations"

// Conversations in the console: the list and a conversation's events (what
// senders wrote shown as text), link and reset each behind a confirmation
// that changes nothing, refusals shown with their code, members read only,
// and no change without the form's CSRF token.
func TestConsoleConversations(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		s := startConversations(t, b)
		convA, _ := s.event("a", "first "+hostile)
		convB, evB := s.event("b", "second")
		c := s.client()
		c.signIn(s.admin)

		list := c.get(convPages)
		if list.Status != http.StatusOK || !strings.Contains(list.Body, convA) || !strings.Contains(list.Body, convB) {
			t.Fatalf("list: %d %s", list.Status, list.Body)
		}
		if p := c.get(convPages + "?status=open&channel=webhook"); p.Status != http.StatusOK || !strings.Contains(p.Body, convA) {
			t.Fatalf("filtered list: %d", p.Status)
		}
		if p := c.get(convPages + "?channel=pigeon"); p.Status != http.StatusBadRequest || !strings.Contains(p.Body, "channel must be one of") {
			t.Fatalf("a bad filter: %d %s", p.Status, p.Body)
		}
		page := c.get(convPages + "/" + convA)
		if page.Status != http.StatusOK || strings.Contains(page.Body, "<script>window.__xss") || !strings.Contains(page.Body, "window.__xss=1") ||
			!strings.Contains(page.Body, `id="reset"`) {
			t.Fatalf("conversation page: %d %s", page.Status, page.Body)
		}
		if p := c.get(convPages + "/conv_nope"); p.Status != http.StatusNotFound {
			t.Fatalf("an unknown conversation: %d", p.Status)
		}
		csrf := page.CSRF()

		// Link: the first post only shows what would change.
		from := convPages + "/" + convB
		confirm := c.post(from+"/link", url.Values{"csrf": {csrf}, "event": {evB}, "to": {convA}})
		if confirm.Status != http.StatusOK || !strings.Contains(confirm.Body, "Nothing has changed yet") {
			t.Fatalf("link preview: %d %s", confirm.Status, confirm.Body)
		}
		if s.conversation(convB)["status"] != "open" {
			t.Fatal("the preview linked the event")
		}
		if p := c.post(from+"/link", url.Values{"event": {evB}, "to": {convA}, "step": {"submit"}}); p.Status != http.StatusForbidden ||
			s.conversation(convB)["status"] != "open" {
			t.Fatalf("a link without its CSRF token: %d", p.Status)
		}
		if p := c.post(from+"/link", url.Values{"csrf": {csrf}, "event": {evB}, "to": {"conv_nope"}, "step": {"submit"}}); p.Status != http.StatusNotFound ||
			!strings.Contains(p.Body, "not_found") {
			t.Fatalf("a link into an unknown conversation: %d %s", p.Status, p.Body)
		}
		done := c.post(from+"/link", url.Values{"csrf": {confirm.CSRF()}, "event": {evB}, "to": {convA}, "step": {"submit"}})
		if done.Status != http.StatusSeeOther || s.conversation(convB)["status"] != "ended" || s.conversation(convA)["events"] != float64(2) {
			t.Fatalf("link: %d %v %v", done.Status, s.conversation(convB), s.conversation(convA))
		}

		// Reset: refused while its work has not ended, unless forced.
		at := convPages + "/" + convA
		if p := c.post(at+"/reset", url.Values{"csrf": {csrf}}); p.Status != http.StatusOK || !strings.Contains(p.Body, "without forcing") {
			t.Fatalf("reset preview: %d %s", p.Status, p.Body)
		}
		if p := c.post(at+"/reset", url.Values{"csrf": {csrf}, "step": {"submit"}}); p.Status != http.StatusConflict ||
			!strings.Contains(p.Body, "open_work") || s.conversation(convA)["status"] != "open" {
			t.Fatalf("reset with open work: %d %s", p.Status, p.Body)
		}
		if p := c.post(at+"/reset", url.Values{"csrf": {csrf}, "step": {"submit"}, "force": {"1"}}); p.Status != http.StatusSeeOther ||
			s.conversation(convA)["status"] != "ended" {
			t.Fatalf("forced reset: %d %s", p.Status, p.Body)
		}
		if p := c.post(at+"/reset", url.Values{"csrf": {csrf}, "step": {"submit"}, "force": {"1"}}); p.Status != http.StatusConflict ||
			!strings.Contains(p.Body, "conversation_ended") {
			t.Fatalf("a second reset: %d %s", p.Status, p.Body)
		}

		// Members read; link and reset are an admin's.
		convC, _ := s.event("c", "third")
		m := s.client()
		m.signIn(s.operator("mia", "member"))
		mp := m.get(convPages + "/" + convC)
		if mp.Status != http.StatusOK || strings.Contains(mp.Body, `id="reset"`) || strings.Contains(mp.Body, "Link…") {
			t.Fatalf("a member's conversation page: %d", mp.Status)
		}
		if p := m.post(convPages+"/"+convC+"/reset", url.Values{"csrf": {mp.CSRF()}, "step": {"submit"}, "force": {"1"}}); p.Status != http.StatusForbidden ||
			!strings.Contains(p.Body, "forbidden") || s.conversation(convC)["status"] != "open" {
			t.Fatalf("a member's reset: %d %s", p.Status, p.Body)
		}
	})
}

// The work page lists the event's retained files; an available one
// downloads through the console with the API's inert headers, a blocked one
// has no link, and another tenant's session cannot reach it.
func TestConsoleWorkFiles(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		s := startConversations(t, b)
		ctx := context.Background()
		var bnd *agentowl.Binding
		var workID string
		st := s.srv.Store()
		if err := st.Read(ctx, func(tx agentowl.Tx) (err error) { bnd, err = tx.BindingGet(ctx, s.binding); return err }); err != nil {
			t.Fatal(err)
		}
		ev, err := attachmenttest.Accept(ctx, st, s.srv.Attachments(), bnd, attachmenttest.Message{Sender: "ann@example.com",
			Files: []attachmenttest.File{{Name: `"><img src=x onerror=alert(1)>.pdf`, ContentType: "application/pdf", Data: []byte("%PDF-1.7 report")},
				{Name: "huge.iso", ContentType: "application/octet-stream", Size: 10<<20 + 1}}}, time.Now(),
			func(ctx context.Context, tx agentowl.Tx, ev *agentowl.Event, conv *agentowl.Conversation) error {
				ep, err := tx.EndpointGet(ctx, s.endpoint)
				if err != nil {
					return err
				}
				w, err := s.srv.Work().HandoffTx(ctx, tx, ep, ev, conv)
				if w != nil {
					workID = w.ID
				}
				return err
			})
		if err != nil {
			t.Fatal(err)
		}
		c := s.client()
		c.signIn(s.admin)
		p := c.get("/console/t/default/work/" + workID)
		link := "/console/t/default/events/" + ev.ID + "/attachments/"
		if p.Status != http.StatusOK || strings.Count(p.Body, link) != 1 || !strings.Contains(p.Body, "huge.iso") ||
			!strings.Contains(p.Body, "file_too_large") || strings.Contains(p.Body, "<img src=x") {
			t.Fatalf("work page: %d %s", p.Status, p.Body)
		}
		i := strings.Index(p.Body, link)
		href := p.Body[i : i+len(link)+strings.IndexByte(p.Body[i+len(link):], '"')]
		got := c.get(href)
		if got.Status != http.StatusOK || got.Body != "%PDF-1.7 report" || got.Header.Get("Content-Type") != "application/octet-stream" ||
			got.Header.Get("X-Content-Type-Options") != "nosniff" || !strings.HasPrefix(got.Header.Get("Content-Disposition"), "attachment;") ||
			got.Header.Get("Content-Security-Policy") != "default-src 'none'; sandbox" {
			t.Fatalf("download: %d %q %v", got.Status, got.Body, got.Header)
		}
		// A question about the work links the same files: in the API's
		// inspect (with the operator download) and on the item's page.
		tok := s.must(http.StatusCreated, http.MethodPost, "/api/v1/tenants/default/endpoints/"+s.endpoint+"/runtime-credentials", s.admin,
			map[string]any{"scopes": []string{"callbacks:write"}})["token"].(string)
		s.must(http.StatusOK, http.MethodPost, "/runtime/v1/work/"+workID+"/callbacks", tok, map[string]any{"version": "agent-work.v1",
			"callback_id": workID + ":1", "work_id": workID, "sequence": 1, "status": "needs_input",
			"occurred_at": time.Now().UTC().Format(time.RFC3339), "requests": []any{map[string]any{"id": "ok", "revision": 1,
				"kind": "question", "prompt": "Is the report right?", "allowed_decisions": []any{"answer"},
				"expires_at": time.Now().Add(time.Hour).UTC().Format(time.RFC3339)}}})
		items := s.must(http.StatusOK, http.MethodGet, "/api/v1/tenants/default/attention?work="+workID, s.admin, nil)["items"].([]any)
		itemID := items[0].(map[string]any)["id"].(string)
		if _, listed := items[0].(map[string]any)["files"]; listed {
			t.Error("the list carries files; only inspect does")
		}
		item := s.must(http.StatusOK, http.MethodGet, "/api/v1/tenants/default/attention/"+itemID, s.admin, nil)
		files, _ := item["files"].([]any)
		if item["event_id"] != ev.ID || len(files) != 2 {
			t.Fatalf("inspect: %v", item)
		}
		apiURL := files[0].(map[string]any)["url"].(string)
		if !strings.HasSuffix(apiURL, "/api/v1/tenants/default/events/"+ev.ID+"/attachments/"+files[0].(map[string]any)["id"].(string)) {
			t.Fatalf("file url %s", apiURL)
		}
		req, _ := http.NewRequest(http.MethodGet, apiURL, nil)
		req.Header.Set("Authorization", "Bearer "+s.admin)
		if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("the API download: %v %v", resp, err)
		} else {
			resp.Body.Close()
		}
		if p := c.get("/console/t/default/attention/" + itemID); p.Status != http.StatusOK || !strings.Contains(p.Body, href) {
			t.Fatalf("item page: %d %s", p.Status, p.Body)
		}

		if p := s.client().get(href); p.Status != http.StatusNotFound && p.Status != http.StatusUnauthorized {
			t.Fatalf("a download without a session: %d", p.Status)
		}
		if p := c.get(link + "att_nope"); p.Status != http.StatusNotFound {
			t.Fatalf("an unknown file: %d", p.Status)
		}
	})
}
