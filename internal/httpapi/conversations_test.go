package httpapi_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agentowl/agentowl"
	"github.com/agentowl/agentowl/agentwork"
	"github.com/agentowl/agentowl/internal/store/storetest"
)

// Tests of the conversation views (docs/channels.md): list, inspect,
// events, link and reset, on every backend.

// convEnv is a server without a delivery engine: handoffs stay queued, with
// no attempt, until a test claims them as the engine would.
type convEnv struct {
	*env
	endpoint, credential string
}

func setupConversations(t *testing.T, b storetest.Backend) *convEnv {
	t.Helper()
	e := &convEnv{env: setup(t, b)}
	e.endpoint = wantJSON(t, "create endpoint", e.do(http.MethodPost, tenantPath+"/endpoints", e.operatorToken,
		map[string]any{"name": "runtime", "url": "https://runtime.example.com/events", "config": map[string]any{"agent_work": true}}),
		http.StatusCreated)["id"].(string)
	e.credential = wantJSON(t, "create credential", e.do(http.MethodPost, tenantPath+"/endpoints/"+e.endpoint+"/runtime-credentials",
		e.operatorToken, map[string]any{}), http.StatusCreated)["token"].(string)
	return e
}

// forEachConversationsBackend runs fn as a parallel subtest per store
// backend, each on its own server.
func forEachConversationsBackend(t *testing.T, fn func(t *testing.T, e *convEnv)) {
	for _, b := range storetest.Backends(t) {
		t.Run(b.Name, func(t *testing.T) {
			t.Parallel()
			fn(t, setupConversations(t, b))
		})
	}
}

// webhook creates a webhook binding and returns its ID and ingress path.
func (e *convEnv) webhook(t *testing.T) (id, path string) {
	t.Helper()
	b := wantJSON(t, "create binding", e.do(http.MethodPost, tenantPath+"/bindings", e.operatorToken,
		map[string]any{"channel": "webhook", "endpoint_id": e.endpoint}), http.StatusCreated)
	return b["id"].(string), strings.TrimPrefix(b["ingress_url"].(string), e.srv.URL)
}

// event posts an event with a conversation key and returns its acceptance.
func (e *convEnv) event(t *testing.T, path, key string) map[string]any {
	t.Helper()
	return wantJSON(t, "event", e.do(http.MethodPost, path, "", map[string]any{"text": key}, "AgentOwl-Conversation-Key", key),
		http.StatusAccepted)
}

// withSession posts an event with a conversation key and reports its work
// as status with runtime session "sess-<key>"; it returns the event's
// acceptance and its work.
func (e *convEnv) withSession(t *testing.T, path, key, status string) (acc, w map[string]any) {
	t.Helper()
	acc = e.event(t, path, key)
	w = e.workOf(t, acc["conversation_id"].(string), acc["event_id"].(string))
	cb := callback(w["id"].(string), key+":1", 1, status)
	cb["runtime_session_id"] = "sess-" + key
	wantJSON(t, "callback with a session", e.do(http.MethodPost, "/runtime/v1/work/"+w["id"].(string)+"/callbacks", e.credential, cb),
		http.StatusOK)
	return acc, w
}

// workOf returns the one work of an event.
func (e *convEnv) workOf(t *testing.T, conv, eventID string) map[string]any {
	t.Helper()
	doc := wantJSON(t, "list work", e.do(http.MethodGet, tenantPath+"/work?conversation="+conv, e.operatorToken, nil), http.StatusOK)
	for _, it := range doc["items"].([]any) {
		if w := it.(map[string]any); w["event_id"] == eventID {
			return w
		}
	}
	t.Fatalf("no work of event %s in conversation %s", eventID, conv)
	return nil
}

// handoff reads the body of a work's handoff as it will be sent.
func (e *convEnv) handoff(t *testing.T, w map[string]any) agentwork.Handoff {
	t.Helper()
	var m *agentowl.OutboxMessage
	if err := e.store.Read(t.Context(), func(tx agentowl.Tx) (err error) {
		m, err = tx.MessageGet(t.Context(), jsonAt(w, "delivery", "id").(string))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	var d agentwork.Handoff
	if err := json.Unmarshal(m.Body, &d); err != nil {
		t.Fatal(err)
	}
	return d
}

func (e *convEnv) link(token, conv, eventID string) *response {
	return e.do(http.MethodPost, tenantPath+"/conversations/"+conv+"/link", token, map[string]any{"event_id": eventID})
}

func (e *convEnv) reset(token, conv string, body any) *response {
	return e.do(http.MethodPost, tenantPath+"/conversations/"+conv+"/reset", token, body)
}

func (e *convEnv) memberToken(t *testing.T) string {
	t.Helper()
	wantJSON(t, "create member", e.do(http.MethodPost, tenantPath+"/operators", e.operatorToken,
		map[string]any{"name": "mia", "role": "member"}), http.StatusCreated)
	return wantJSON(t, "member token", e.do(http.MethodPost, tenantPath+"/operator-tokens", e.operatorToken,
		map[string]any{"operator": "mia"}), http.StatusCreated)["token"].(string)
}

func ids(items []map[string]any) []string {
	out := []string{}
	for _, it := range items {
		out = append(out, it["id"].(string))
	}
	return out
}

// TestConversationViews: the list's filters and keyset pages, inspection
// and events, each refusal of bad parameters, and members' read access.
func TestConversationViews(t *testing.T) {
	t.Parallel()
	forEachConversationsBackend(t, func(t *testing.T, e *convEnv) {
		b1, in1 := e.webhook(t)
		_, in2 := e.webhook(t)
		a := e.event(t, in1, "a")
		e.clock.Advance(time.Second)
		e.event(t, in1, "a")
		e.clock.Advance(time.Second)
		bEv := e.event(t, in1, "b")
		e.clock.Advance(time.Second)
		c := e.event(t, in2, "a")
		convA, convB, convC := a["conversation_id"].(string), bEv["conversation_id"].(string), c["conversation_id"].(string)

		if got := ids(e.conversations(t, "")); strings.Join(got, " ") != strings.Join([]string{convC, convB, convA}, " ") {
			t.Fatalf("conversations = %v, want the latest first: %v %v %v", got, convC, convB, convA)
		}
		if got := ids(e.conversations(t, "binding="+b1)); len(got) != 2 || got[0] != convB {
			t.Fatalf("binding filter = %v", got)
		}
		if n := len(e.conversations(t, "channel=webhook")); n != 3 {
			t.Fatalf("channel filter: %d", n)
		}
		if n := len(e.conversations(t, "channel=sms")) + len(e.conversations(t, "status=ended")); n != 0 {
			t.Fatalf("sms or ended conversations: %d", n)
		}
		// Pages of one, by keyset: each once, in order; a new event meanwhile
		// does not shift the pages already in progress.
		var seen []string
		after := ""
		for range 5 {
			doc := wantJSON(t, "page", e.do(http.MethodGet, tenantPath+"/conversations?limit=1"+after, e.operatorToken, nil), http.StatusOK)
			items := doc["items"].([]any)
			if len(items) != 1 {
				t.Fatalf("page of %d items: %v", len(items), doc)
			}
			seen = append(seen, items[0].(map[string]any)["id"].(string))
			if len(seen) == 1 {
				e.clock.Advance(time.Second) // later than every listed one, whatever its random ID
				e.event(t, in2, "new")       // a fourth conversation, ahead of the pages
			}
			next, _ := doc["next"].(string)
			if next == "" {
				break
			}
			after = "&after=" + next
		}
		if strings.Join(seen, " ") != strings.Join([]string{convC, convB, convA}, " ") {
			t.Fatalf("pages = %v", seen)
		}

		insp := wantJSON(t, "inspect", e.do(http.MethodGet, tenantPath+"/conversations/"+convA, e.operatorToken, nil), http.StatusOK)
		if insp["events"] != float64(2) || insp["open_work"] != float64(2) || insp["key"] != "a" || insp["status"] != "open" ||
			insp["channel"] != "webhook" || insp["binding_id"] != b1 {
			t.Fatalf("inspect = %v", insp)
		}
		evs := e.conversationEvents(t, convA)
		if len(evs) != 2 || evs[0]["id"] != a["event_id"] || evs[0]["follow_up"] != false || evs[1]["follow_up"] != true ||
			evs[0]["handoff"] != "queued" || len(evs[0]["work"].([]any)) != 1 || jsonAt(evs[0], "payload", "text") != "a" {
			t.Fatalf("events = %v", evs)
		}
		page := wantJSON(t, "events page", e.do(http.MethodGet, tenantPath+"/conversations/"+convA+"/events?limit=1", e.operatorToken, nil),
			http.StatusOK)
		rest := wantJSON(t, "events page 2", e.do(http.MethodGet, tenantPath+"/conversations/"+convA+"/events?limit=1&after="+
			page["next"].(string), e.operatorToken, nil), http.StatusOK)
		if rest["next"] != nil || jsonAt(rest["items"].([]any)[0].(map[string]any), "id") != evs[1]["id"] {
			t.Fatalf("second page of events = %v", rest)
		}

		for name, q := range map[string]string{
			"limit 0": "limit=0", "limit 1001": "limit=1001", "limit x": "limit=x", "a foreign cursor": "after=bm9wZQ",
			"a cursor not base64": "after=%25%25", "an unknown channel": "channel=fax", "an unknown status": "status=closed",
		} {
			r := e.do(http.MethodGet, tenantPath+"/conversations?"+q, e.operatorToken, nil)
			expectRefused(t, name, r, http.StatusBadRequest, "invalid_field")
		}
		expectRefused(t, "101 events", e.do(http.MethodGet, tenantPath+"/conversations/"+convA+"/events?limit=101", e.operatorToken, nil),
			http.StatusBadRequest, "invalid_field")
		expectRefused(t, "an unknown conversation", e.do(http.MethodGet, tenantPath+"/conversations/conv_nope", e.operatorToken, nil),
			http.StatusNotFound, "not_found")
		expectRefused(t, "events of an unknown conversation", e.do(http.MethodGet, tenantPath+"/conversations/conv_nope/events",
			e.operatorToken, nil), http.StatusNotFound, "not_found")

		// Members read; link and reset are admin configuration.
		member := e.memberToken(t)
		wantJSON(t, "member lists", e.do(http.MethodGet, tenantPath+"/conversations", member, nil), http.StatusOK)
		wantJSON(t, "member reads events", e.do(http.MethodGet, tenantPath+"/conversations/"+convA+"/events", member, nil), http.StatusOK)
		expectRefused(t, "member links", e.link(member, convA, bEv["event_id"].(string)), http.StatusForbidden, "forbidden")
		expectRefused(t, "member resets", e.reset(member, convA, nil), http.StatusForbidden, "forbidden")

		// Another tenant sees none of it.
		other, err := e.access.Bootstrap(context.Background(), "other")
		if err != nil {
			t.Fatal(err)
		}
		op := "/api/v1/tenants/other/conversations"
		if doc := wantJSON(t, "other's list", e.do(http.MethodGet, op, other.Token, nil), http.StatusOK); len(doc["items"].([]any)) != 0 {
			t.Fatalf("another tenant lists %v", doc)
		}
		for what, r := range map[string]*response{
			"inspect": e.do(http.MethodGet, op+"/"+convA, other.Token, nil),
			"events":  e.do(http.MethodGet, op+"/"+convA+"/events", other.Token, nil),
			"link":    e.do(http.MethodPost, op+"/"+convA+"/link", other.Token, map[string]any{"event_id": bEv["event_id"]}),
			"reset":   e.do(http.MethodPost, op+"/"+convA+"/reset", other.Token, map[string]any{"force": true}),
		} {
			expectRefused(t, "another tenant's "+what, r, http.StatusNotFound, "not_found")
		}
		if insp := wantJSON(t, "inspect", e.do(http.MethodGet, tenantPath+"/conversations/"+convA, e.operatorToken, nil), http.StatusOK); insp["status"] != "open" {
			t.Fatalf("another tenant's reset changed %v", insp)
		}
	})
}

// TestConversationLink: an event not handed off yet moves, with its work
// and its queued handoff, into another open conversation of its binding;
// every other link is refused with its code and changes nothing.
func TestConversationLink(t *testing.T) {
	t.Parallel()
	forEachConversationsBackend(t, func(t *testing.T, e *convEnv) {
		_, in1 := e.webhook(t)
		_, in2 := e.webhook(t)
		a, _ := e.withSession(t, in1, "a", "accepted")
		convA := a["conversation_id"].(string)
		e.clock.Advance(time.Minute)
		bEv := e.event(t, in1, "b")
		convB, evB := bEv["conversation_id"].(string), bEv["event_id"].(string)
		other := e.event(t, in2, "a")

		linked := wantJSON(t, "link", e.link(e.operatorToken, convA, evB), http.StatusOK)
		if linked["event_id"] != evB || jsonAt(linked, "from", "id") != convB || jsonAt(linked, "from", "status") != "ended" ||
			jsonAt(linked, "to", "id") != convA || jsonAt(linked, "to", "last_event_at") != e.clock.Now().UTC().Format(time.RFC3339) {
			t.Fatalf("link = %v", linked)
		}
		evs := e.conversationEvents(t, convA)
		if len(evs) != 2 || evs[1]["id"] != evB || evs[1]["follow_up"] != true || evs[1]["conversation_id"] != convA {
			t.Fatalf("events after the link = %v", evs)
		}
		if n := len(e.conversationEvents(t, convB)); n != 0 {
			t.Fatalf("%d events left in the first conversation", n)
		}
		// The work and its queued handoff follow, with the session.
		w := e.workOf(t, convA, evB)
		d := e.handoff(t, w)
		if d.Event.ConversationID != convA || !d.Event.FollowUp || d.Work.ConversationID != convA || d.Work.RuntimeSessionID != "sess-a" ||
			d.Work.WorkID != w["id"] || d.Event.ID != evB {
			t.Fatalf("handoff after the link = %+v %+v", d.Event, d.Work)
		}
		if !strings.Contains(strings.Join(e.auditActions(t), " "), "conversation.link") {
			t.Error("the link was not audited")
		}
		// The key's next event starts a conversation: the one it had ended.
		if nb := e.event(t, in1, "b"); nb["conversation_id"] == convB || nb["follow_up"] != false {
			t.Fatalf("the key's next event = %v", nb)
		}
		// Linking it where it is changes nothing.
		if again := wantJSON(t, "link again", e.link(e.operatorToken, convA, evB), http.StatusOK); jsonAt(again, "from", "id") != convA {
			t.Fatalf("link again = %v", again)
		}

		expectRefused(t, "another binding's conversation", e.link(e.operatorToken, convA, other["event_id"].(string)),
			http.StatusConflict, "binding_mismatch")
		expectRefused(t, "an ended conversation", e.link(e.operatorToken, convB, a["event_id"].(string)),
			http.StatusConflict, "conversation_ended")
		expectRefused(t, "an unknown event", e.link(e.operatorToken, convA, "evt_nope"), http.StatusNotFound, "not_found")
		expectRefused(t, "an unknown conversation", e.link(e.operatorToken, "conv_nope", evB), http.StatusNotFound, "not_found")
		expectRefused(t, "no event_id", e.do(http.MethodPost, tenantPath+"/conversations/"+convA+"/link", e.operatorToken,
			map[string]any{}), http.StatusBadRequest, "missing_field")
		expectRefused(t, "an unknown field", e.do(http.MethodPost, tenantPath+"/conversations/"+convA+"/link", e.operatorToken,
			map[string]any{"event_id": evB, "force": true}), http.StatusBadRequest, "unknown_field")

		// Once an attempt has started (the engine claimed the handoff), the
		// event is handed off.
		c := e.event(t, in1, "c")
		if err := e.store.Write(t.Context(), func(tx agentowl.Tx) error {
			_, err := tx.MessageClaim(t.Context(), agentowl.ClaimParams{Now: e.clock.Now(), LeaseUntil: e.clock.Now().Add(time.Minute),
				Owner: "engine", Limit: 100})
			return err
		}); err != nil {
			t.Fatal(err)
		}
		expectRefused(t, "an event handed off", e.link(e.operatorToken, convA, c["event_id"].(string)), http.StatusConflict, "event_handed_off")
		if evs := e.conversationEvents(t, c["conversation_id"].(string)); len(evs) != 1 || evs[0]["handoff"] != "handed_off" {
			t.Fatalf("a refused link moved the event: %v", evs)
		}
		if n := strings.Count(strings.Join(e.auditActions(t), " "), "conversation.link"); n != 1 {
			t.Errorf("%d conversation.link audit entries, want 1", n)
		}
	})
}

// TestConversationLinkAfterHandoff: with the real delivery engine, an event
// the runtime received cannot be linked.
func TestConversationLinkAfterHandoff(t *testing.T) {
	parallelWork(t, func(t *testing.T, e *workEnv) {
		rt := newRuntime(t, e)
		ep := e.endpoint(t, rt, true)["id"].(string)
		_, in := e.binding(t, ep, nil)
		a := e.send(t, in, map[string]any{"text": "a"}, "AgentOwl-Conversation-Key", "a")
		b := e.send(t, in, map[string]any{"text": "b"}, "AgentOwl-Conversation-Key", "b")
		rt.wait(t, 2)
		r := e.do(http.MethodPost, tenantPath+"/conversations/"+a["conversation_id"].(string)+"/link", e.operatorToken,
			map[string]any{"event_id": b["event_id"]})
		expectRefused(t, "link after handoff", r, http.StatusConflict, "event_handed_off")
		if evs := e.conversationEvents(t, b["conversation_id"].(string)); len(evs) != 1 || evs[0]["handoff"] != "handed_off" {
			t.Fatalf("events = %v", evs)
		}
	})
}

// TestConversationReset: a conversation with open work is reset only with
// force; the next event of its key starts a new conversation without the
// runtime session; an ended conversation cannot be reset again.
func TestConversationReset(t *testing.T) {
	t.Parallel()
	forEachConversationsBackend(t, func(t *testing.T, e *convEnv) {
		_, in := e.webhook(t)
		a, w := e.withSession(t, in, "a", "running")
		convA := a["conversation_id"].(string)

		expectRefused(t, "reset with open work", e.reset(e.operatorToken, convA, nil), http.StatusConflict, "open_work")
		expectRefused(t, "reset with force false", e.reset(e.operatorToken, convA, map[string]any{"force": false}), http.StatusConflict, "open_work")
		expectRefused(t, "force not a boolean", e.reset(e.operatorToken, convA, map[string]any{"force": "yes"}), http.StatusBadRequest, "invalid_field")
		if fu := e.event(t, in, "a"); fu["conversation_id"] != convA {
			t.Fatalf("a refused reset ended the conversation: %v", fu)
		}
		got := wantJSON(t, "forced reset", e.reset(e.operatorToken, convA, map[string]any{"force": true}), http.StatusOK)
		if got["status"] != "ended" || got["open_work"] != float64(2) || got["events"] != float64(2) ||
			got["ended_at"] != e.clock.Now().UTC().Format(time.RFC3339) {
			t.Fatalf("reset = %v", got)
		}
		expectRefused(t, "reset again", e.reset(e.operatorToken, convA, map[string]any{"force": true}), http.StatusConflict,
			"conversation_ended")
		next := e.event(t, in, "a")
		if next["conversation_id"] == convA || next["follow_up"] != false {
			t.Fatalf("after the reset = %v", next)
		}
		if d := e.handoff(t, e.workOf(t, next["conversation_id"].(string), next["event_id"].(string))); d.Work.RuntimeSessionID != "" ||
			d.Work.ConversationID != next["conversation_id"] {
			t.Fatalf("the new conversation's handoff = %+v", d.Work)
		}
		// The work of the ended conversation still reports.
		wantJSON(t, "completed after the reset", e.do(http.MethodPost, "/runtime/v1/work/"+w["id"].(string)+"/callbacks", e.credential,
			callback(w["id"].(string), "a:2", 2, "completed")), http.StatusOK)

		// Without open work, no force is needed.
		convN := next["conversation_id"].(string)
		wn := e.workOf(t, convN, next["event_id"].(string))
		wantJSON(t, "completed", e.do(http.MethodPost, "/runtime/v1/work/"+wn["id"].(string)+"/callbacks", e.credential,
			callback(wn["id"].(string), "n:1", 1, "completed")), http.StatusOK)
		if got := wantJSON(t, "reset", e.reset(e.operatorToken, convN, nil), http.StatusOK); got["open_work"] != float64(0) {
			t.Fatalf("reset = %v", got)
		}
		if n := strings.Count(strings.Join(e.auditActions(t), " "), "conversation.reset"); n != 2 {
			t.Errorf("%d conversation.reset audit entries, want 2", n)
		}
		expectRefused(t, "reset an unknown conversation", e.reset(e.operatorToken, "conv_nope", nil), http.StatusNotFound, "not_found")
	})
}

// TestConversationLinkEmail: an email linked into another conversation
// takes its thread along: a reply to it continues that conversation, from
// one of its senders, who became a participant there.
func TestConversationLinkEmail(t *testing.T) {
	t.Parallel()
	forEachConversationsBackend(t, func(t *testing.T, e *convEnv) {
		b := wantJSON(t, "create binding", e.do(http.MethodPost, tenantPath+"/bindings", e.operatorToken,
			map[string]any{"channel": "cloudflare-email", "endpoint_id": e.endpoint}), http.StatusCreated)
		path, secret := strings.TrimPrefix(b["ingress_url"].(string), e.srv.URL), b["secret"].(string)
		mail := func(from, messageID, inReplyTo string) map[string]any {
			t.Helper()
			raw := "From: " + from + "\r\nTo: support@mail.example.com\r\nSubject: order 7\r\nMessage-ID: <" + messageID + ">\r\n"
			if inReplyTo != "" {
				raw += "In-Reply-To: <" + inReplyTo + ">\r\nReferences: <" + inReplyTo + ">\r\n"
			}
			raw += "Content-Type: text/plain\r\n\r\nWhere is order 7?\r\n"
			return wantJSON(t, "email "+messageID, e.do(http.MethodPost, path, "", raw, "Content-Type", "message/rfc822",
				"Authorization", "Bearer "+secret, "AgentOwl-Envelope-From", from, "AgentOwl-Envelope-To", "support@mail.example.com"),
				http.StatusAccepted)
		}
		first := mail("alice@example.org", "m1@example.org", "")
		second := mail("carol@example.org", "m2@example.org", "")
		if first["conversation_id"] == second["conversation_id"] {
			t.Fatal("two unrelated emails share a conversation")
		}
		wantJSON(t, "link", e.link(e.operatorToken, first["conversation_id"].(string), second["event_id"].(string)), http.StatusOK)
		reply := mail("carol@example.org", "m3@example.org", "m2@example.org")
		if reply["conversation_id"] != first["conversation_id"] || reply["follow_up"] != true {
			t.Fatalf("carol's reply to her linked email = %v, want conversation %v", reply, first["conversation_id"])
		}
	})
}
