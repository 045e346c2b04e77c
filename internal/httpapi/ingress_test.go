package httpapi_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentowl/agentowl"
	"github.com/agentowl/agentowl/internal/ingress"
	"github.com/agentowl/agentowl/internal/ratelimit"
	"github.com/agentowl/agentowl/internal/server"
	"github.com/agentowl/agentowl/internal/store/storetest"
	"github.com/agentowl/agentowl/internal/work"
	"github.com/agentowl/agentowl/webhook"
)

// TestOriginalEventFormat checks what an endpoint without agent work
// receives: the documented original event format, signed with its own
// secret, and no work.
func TestOriginalEventFormat(t *testing.T) {
	parallelWork(t, func(t *testing.T, e *workEnv) {
		rt := newRuntime(t, e)
		ep := e.endpoint(t, rt, false)
		bid, in := e.binding(t, ep["id"].(string), nil)
		acc := e.send(t, in, `{"text": "hello", "n": 4900.0}`, "AgentOwl-Sender", "crm", "X-Trace", "t-1",
			"Authorization", "Bearer must-not-travel")
		d := rt.wait(t, 1)[0]
		doc := d.Doc
		if doc["type"] != "event.received" || doc["id"] != d.Header.Get(webhook.HeaderID) || doc["work"] != nil {
			t.Fatalf("delivery = %s", d.Body)
		}
		ev := doc["event"].(map[string]any)
		if ev["id"] != acc["event_id"] || ev["conversation_id"] != acc["conversation_id"] || ev["binding_id"] != bid ||
			ev["channel"] != "webhook" || ev["sender"] != "crm" || ev["follow_up"] != false ||
			ev["received_at"] != "2026-09-16T12:00:00Z" || jsonAt(ev, "payload", "text") != "hello" ||
			len(ev["attachments"].([]any)) != 0 {
			t.Fatalf("event = %v", ev)
		}
		if !strings.Contains(string(d.Body), `"n":4900.0`) {
			t.Errorf("the payload's number literals were not kept: %s", d.Body)
		}
		hdr := ev["headers"].(map[string]any)
		if jsonAt(hdr, "X-Trace") == nil || hdr["Authorization"] != nil {
			t.Errorf("forwarded headers = %v", hdr)
		}
		if keys := len(doc); keys != 4 {
			t.Errorf("original format has %d top-level keys, want id, type, created_at, event: %s", keys, d.Body)
		}
		if items := e.listWork(t, ""); len(items) != 0 {
			t.Fatalf("an endpoint without agent work got work: %v", items)
		}
		eventually(t, syncLimit, "the delivery recorded as delivered", func() bool {
			r := e.do(http.MethodGet, tenantPath+"/deliveries?state=delivered", e.operatorToken, nil)
			return strings.Contains(string(r.Body), doc["id"].(string))
		})
	})
}

// TestHandoffWorkBlock checks the agent-work handoff: the same event
// format plus the work block, with the newest live credential.
func TestHandoffWorkBlock(t *testing.T) {
	parallelWork(t, func(t *testing.T, e *workEnv) {
		rt := newRuntime(t, e)
		id := e.endpoint(t, rt, true)["id"].(string)
		_, in := e.binding(t, id, nil)
		e.send(t, in, map[string]any{"text": "no credential yet"})
		old := e.credential(t, id, nil)
		e.clock.Advance(time.Second)
		newer := e.credential(t, id, nil)
		e.credential(t, id, map[string]any{"scopes": []string{"decisions:read"}}) // cannot post callbacks
		acc := e.send(t, in, map[string]any{"text": "hello"})
		ds := rt.wait(t, 2)
		var d *delivered
		for _, x := range ds {
			if jsonAt(x.Doc, "event", "id") == acc["event_id"] {
				d = x
			}
		}
		if d == nil {
			t.Fatal("the event was not delivered")
		}
		wb := d.Doc["work"].(map[string]any)
		w := e.listWork(t, "")[0]
		if wb["version"] != "agent-work.v1" || wb["work_id"] != w["id"] || wb["conversation_id"] != acc["conversation_id"] ||
			wb["generation"] != float64(1) || wb["callback_url"] != e.srv.URL+"/runtime/v1/work/"+w["id"].(string)+"/callbacks" ||
			wb["credential_id"] != newer["id"] || wb["runtime_session_id"] != nil {
			t.Fatalf("work block = %v (credentials %v, %v)", wb, old["id"], newer["id"])
		}
		if strings.Contains(string(d.Body), "owl_rt_") {
			t.Fatal("a delivery carried a runtime token")
		}
		if jsonAt(d.Doc, "event", "payload", "text") != "hello" || d.Doc["type"] != "event.received" {
			t.Fatalf("delivery = %s", d.Body)
		}
		// The first event went out before any credential existed.
		for _, x := range ds {
			if jsonAt(x.Doc, "event", "payload", "text") == "no credential yet" && jsonAt(x.Doc, "work", "credential_id") != nil {
				t.Errorf("work block names a credential that did not exist: %s", x.Body)
			}
		}
		// The callback URL works with the named credential.
		wantJSON(t, "callback to callback_url", e.do(http.MethodPost, strings.TrimPrefix(wb["callback_url"].(string), e.srv.URL),
			newer["token"].(string), callback(wb["work_id"].(string), "a", 1, "accepted")), http.StatusOK)
	})
}

// TestHandoffRetryKeepsWorkIdentity: a runtime that fails twice and then
// accepts sees the same work, delivery ID and body three times.
func TestHandoffRetryKeepsWorkIdentity(t *testing.T) {
	parallelWork(t, func(t *testing.T, e *workEnv) {
		rt := newRuntime(t, e)
		rt.answer(http.StatusInternalServerError, http.StatusServiceUnavailable)
		id := e.endpoint(t, rt, true)["id"].(string)
		_, in := e.binding(t, id, nil)
		e.send(t, in, map[string]any{"text": "retry me"})
		rt.wait(t, 1)
		workID := rt.deliveries()[0].WorkID()
		for n := 2; n <= 3; n++ {
			eventually(t, syncLimit, "the next attempt", func() bool {
				// The clock moves only once the attempt before is recorded:
				// moved while it is in flight, it would outlast its lease,
				// and the engine would drop its outcome and try again.
				if timelineAttempts(e.getWork(t, workID)) < n-1 {
					return false
				}
				e.clock.Advance(time.Second)
				e.engine.Wake()
				return len(rt.deliveries()) >= n
			})
		}
		ds := rt.deliveries()
		if len(ds) != 3 {
			t.Fatalf("%d deliveries, want 3", len(ds))
		}
		for i, d := range ds {
			if d.WorkID() == "" || d.WorkID() != ds[0].WorkID() || d.Header.Get(webhook.HeaderID) != ds[0].Header.Get(webhook.HeaderID) ||
				string(d.Body) != string(ds[0].Body) {
				t.Errorf("attempt %d: work %q, webhook-id %q; want the first attempt's %q, %q and body", i+1, d.WorkID(),
					d.Header.Get(webhook.HeaderID), ds[0].WorkID(), ds[0].Header.Get(webhook.HeaderID))
			}
		}
		items := e.listWork(t, "")
		if len(items) != 1 || items[0]["id"] != ds[0].WorkID() {
			t.Fatalf("work list = %v", items)
		}
		var w map[string]any
		eventually(t, syncLimit, "the delivery recorded", func() bool {
			w = e.getWork(t, ds[0].WorkID())
			return jsonAt(w, "delivery", "state") == "delivered"
		})
		if jsonAt(w, "delivery", "attempts") != float64(3) || jsonAt(w, "runtime", "status") != "pending" {
			t.Fatalf("work = %v", w)
		}
		if attempts := timelineAttempts(w); attempts != 3 {
			t.Errorf("timeline has %d delivery attempts, want 3", attempts)
		}
	})
}

// timelineAttempts is how many delivery attempts of a work have their
// outcome recorded (its timeline's delivery_attempt entries).
func timelineAttempts(w map[string]any) int {
	n := 0
	timeline, _ := w["timeline"].([]any)
	for _, it := range timeline {
		if it.(map[string]any)["kind"] == "delivery_attempt" {
			n++
		}
	}
	return n
}

func TestConversationsAndReplay(t *testing.T) {
	parallelWork(t, func(t *testing.T, e *workEnv) {
		rt := newRuntime(t, e)
		id := e.endpoint(t, rt, true)["id"].(string)
		cred := e.credential(t, id, nil)["token"].(string)
		_, in := e.binding(t, id, nil)
		_, in2 := e.binding(t, id, nil)

		first := e.send(t, in, map[string]any{"text": "new ticket"}, "AgentOwl-Conversation-Key", "ticket-7")
		if first["follow_up"] != false {
			t.Fatalf("first event = %v", first)
		}
		w1 := e.listWork(t, "")[0]["id"].(string)
		// The runtime establishes a session.
		cb := callback(w1, w1+":1", 1, "accepted")
		cb["runtime_session_id"] = "sess-42"
		wantJSON(t, "accepted with session", e.do(http.MethodPost, "/runtime/v1/work/"+w1+"/callbacks", cred, cb), http.StatusOK)

		// The key in the header, then in the body: follow-ups of the same conversation.
		fu := e.send(t, in, map[string]any{"text": "more"}, "AgentOwl-Conversation-Key", "ticket-7")
		fu2 := e.send(t, in, map[string]any{"text": "and more", "conversation_key": "ticket-7"})
		for _, f := range []map[string]any{fu, fu2} {
			if f["follow_up"] != true || f["conversation_id"] != first["conversation_id"] {
				t.Fatalf("follow-up = %v, want conversation %v", f, first["conversation_id"])
			}
		}
		// No key, another key, or the key on another binding: new conversations.
		for _, acc := range []map[string]any{
			e.send(t, in, map[string]any{"text": "unkeyed"}),
			e.send(t, in, map[string]any{"text": "other"}, "AgentOwl-Conversation-Key", "ticket-8"),
			e.send(t, in2, map[string]any{"text": "same key elsewhere"}, "AgentOwl-Conversation-Key", "ticket-7"),
		} {
			if acc["follow_up"] != false || acc["conversation_id"] == first["conversation_id"] {
				t.Fatalf("event = %v, want a new conversation", acc)
			}
		}
		expectRefused(t, "a non-string conversation_key", e.do(http.MethodPost, in, "", map[string]any{"conversation_key": 7}),
			http.StatusBadRequest, "invalid_field")

		ds := rt.wait(t, 6)
		bySession := 0
		for _, d := range ds {
			if jsonAt(d.Doc, "event", "conversation_id") == first["conversation_id"] && jsonAt(d.Doc, "event", "follow_up") == true {
				if jsonAt(d.Doc, "work", "runtime_session_id") != "sess-42" {
					t.Errorf("follow-up work block lacks the session: %s", d.Body)
				}
				bySession++
			} else if jsonAt(d.Doc, "work", "runtime_session_id") != nil {
				t.Errorf("a delivery outside the conversation carries a session: %s", d.Body)
			}
		}
		if bySession != 2 {
			t.Fatalf("%d follow-up deliveries, want 2", bySession)
		}
		conv := e.listWork(t, "?conversation="+first["conversation_id"].(string))
		if len(conv) != 3 {
			t.Fatalf("conversation has %d work, want 3", len(conv))
		}

		// Replay: new work, generation + 1, same conversation and event.
		rp := wantJSON(t, "replay", e.do(http.MethodPost, tenantPath+"/work/"+w1+"/replay", e.operatorToken, nil), http.StatusCreated)
		orig := e.getWork(t, w1)
		if rp["id"] == w1 || rp["generation"] != float64(2) || rp["replay_of"] != w1 || rp["conversation_id"] != orig["conversation_id"] ||
			rp["event_id"] != orig["event_id"] || jsonAt(rp, "runtime", "status") != "pending" {
			t.Fatalf("replay = %v", rp)
		}
		rp2 := wantJSON(t, "replay again", e.do(http.MethodPost, tenantPath+"/work/"+w1+"/replay", e.operatorToken, nil), http.StatusCreated)
		if rp2["generation"] != float64(3) {
			t.Fatalf("second replay generation %v, want 3", rp2["generation"])
		}
		if jsonAt(orig, "runtime", "status") != "accepted" {
			t.Fatalf("replay changed the original: %v", orig["runtime"])
		}
		ds = rt.wait(t, 8)
		found := false
		for _, d := range ds {
			if d.WorkID() == rp["id"] {
				found = true
				if jsonAt(d.Doc, "work", "generation") != float64(2) || jsonAt(d.Doc, "event", "id") != orig["event_id"] ||
					jsonAt(d.Doc, "work", "runtime_session_id") != "sess-42" {
					t.Errorf("replayed delivery = %s", d.Body)
				}
			}
		}
		if !found {
			t.Fatal("the replay was not delivered")
		}
		refusedReplay := e.do(http.MethodPost, tenantPath+"/work/"+w1+"/replay", e.member(t), nil)
		expectRefused(t, "a member replaying", refusedReplay, http.StatusForbidden, "forbidden")
		wantJSON(t, "agent work off", e.do(http.MethodPatch, tenantPath+"/endpoints/"+id, e.operatorToken,
			map[string]any{"config": map[string]any{"agent_work": false}}), http.StatusOK)
		expectRefused(t, "replay without agent work", e.do(http.MethodPost, tenantPath+"/work/"+w1+"/replay", e.operatorToken, nil),
			http.StatusConflict, "agent_work_disabled")
		expectRefused(t, "replay unknown work", e.do(http.MethodPost, tenantPath+"/work/work_nope/replay", e.operatorToken, nil),
			http.StatusNotFound, "not_found")
		// Audit of the replays.
		if n := strings.Count(strings.Join(e.auditActions(t), " "), "work.replay"); n != 2 {
			t.Errorf("%d work.replay audit entries, want 2", n)
		}
	})
}

func TestIngressRefusalsAndDuplicates(t *testing.T) {
	parallelWork(t, func(t *testing.T, e *workEnv) {
		rt := newRuntime(t, e)
		id := e.endpoint(t, rt, true)["id"].(string)
		bid, in := e.binding(t, id, nil)

		a := e.send(t, in, map[string]any{"text": "once"}, "Idempotency-Key", "msg-1")
		b := wantJSON(t, "retry", e.do(http.MethodPost, in, "", map[string]any{"text": "once"}, "Idempotency-Key", "msg-1"), http.StatusOK)
		if b["duplicate"] != true || b["event_id"] != a["event_id"] || b["conversation_id"] != a["conversation_id"] {
			t.Fatalf("retry = %v, first = %v", b, a)
		}
		if n := len(e.listWork(t, "")); n != 1 {
			t.Fatalf("%d work after a retried event, want 1", n)
		}
		expectRefused(t, "unknown token", e.do(http.MethodPost, "/in/webhook/in_nope", "", map[string]any{}), http.StatusNotFound, "not_found")
		expectRefused(t, "not an object", e.do(http.MethodPost, in, "", "[1,2]"), http.StatusBadRequest, "invalid_json")
		expectRefused(t, "not JSON", e.do(http.MethodPost, in, "", "hello"), http.StatusBadRequest, "invalid_json")
		expectRefused(t, "text/plain", e.do(http.MethodPost, in, "", "{}", "Content-Type", "text/plain"), http.StatusBadRequest,
			"invalid_content_type")
		big := `{"text":"` + strings.Repeat("x", 256<<10) + `"}`
		expectRefused(t, "over 256 KiB", e.do(http.MethodPost, in, "", big), http.StatusRequestEntityTooLarge, "request_too_large")
		expectRefused(t, "an overlong conversation key", e.do(http.MethodPost, in, "", map[string]any{},
			"AgentOwl-Conversation-Key", strings.Repeat("k", 257)), http.StatusBadRequest, "invalid_field")

		wantJSON(t, "delete binding", e.do(http.MethodDelete, tenantPath+"/bindings/"+bid, e.operatorToken, nil), http.StatusNoContent)
		expectRefused(t, "deleted binding", e.do(http.MethodPost, in, "", map[string]any{}), http.StatusNotFound, "not_found")
		expectRefused(t, "binding to an unknown endpoint", e.do(http.MethodPost, tenantPath+"/bindings", e.operatorToken,
			map[string]any{"channel": "webhook", "endpoint_id": "ep_nope"}), http.StatusNotFound, "not_found")
		expectRefused(t, "an unsupported channel", e.do(http.MethodPost, tenantPath+"/bindings", e.operatorToken,
			map[string]any{"channel": "fax", "endpoint_id": id}), http.StatusBadRequest, "invalid_field")
	})
}

func TestSignedBinding(t *testing.T) {
	parallelWork(t, func(t *testing.T, e *workEnv) {
		rt := newRuntime(t, e)
		id := e.endpoint(t, rt, false)["id"].(string)
		secret := webhook.NewSecret()
		expectRefused(t, "a malformed secret", e.do(http.MethodPost, tenantPath+"/bindings", e.operatorToken,
			map[string]any{"channel": "webhook", "endpoint_id": id, "signing_secret": "nope"}), http.StatusBadRequest, "invalid_field")
		bid, in := e.binding(t, id, map[string]any{"signing_secret": secret})
		if b := wantJSON(t, "inspect binding", e.do(http.MethodGet, tenantPath+"/bindings/"+bid, e.operatorToken, nil), http.StatusOK); b["signed"] != true {
			t.Fatalf("binding = %v", b)
		}
		body := `{"text":"signed"}`
		key, _ := webhook.ParseSecret(secret)
		sign := func(msgID string, at time.Time, body string) []string {
			h := http.Header{}
			key.SetHeaders(h, msgID, at, []byte(body))
			return []string{"webhook-id", h.Get("webhook-id"), "webhook-timestamp", h.Get("webhook-timestamp"),
				"webhook-signature", h.Get("webhook-signature")}
		}
		expectRefused(t, "unsigned", e.do(http.MethodPost, in, "", body), http.StatusUnauthorized, "invalid_signature")
		expectRefused(t, "signed with another secret", e.do(http.MethodPost, in, "", body, func() []string {
			k, _ := webhook.ParseSecret(webhook.NewSecret())
			h := http.Header{}
			k.SetHeaders(h, "m1", e.clock.Now(), []byte(body))
			return []string{"webhook-id", "m1", "webhook-timestamp", h.Get("webhook-timestamp"), "webhook-signature", h.Get("webhook-signature")}
		}()...), http.StatusUnauthorized, "invalid_signature")
		expectRefused(t, "a stale timestamp", e.do(http.MethodPost, in, "", body, sign("m1", e.clock.Now().Add(-10*time.Minute), body)...),
			http.StatusUnauthorized, "invalid_signature")
		expectRefused(t, "another body", e.do(http.MethodPost, in, "", `{"text":"tampered"}`, sign("m1", e.clock.Now(), body)...),
			http.StatusUnauthorized, "invalid_signature")
		acc := wantJSON(t, "signed", e.do(http.MethodPost, in, "", body, sign("m1", e.clock.Now(), body)...), http.StatusAccepted)
		// The sender's retry: same webhook-id, new timestamp and signature.
		e.clock.Advance(time.Minute)
		dup := wantJSON(t, "signed retry", e.do(http.MethodPost, in, "", body, sign("m1", e.clock.Now(), body)...), http.StatusOK)
		if dup["duplicate"] != true || dup["event_id"] != acc["event_id"] {
			t.Fatalf("retry = %v, first = %v", dup, acc)
		}
		d := rt.wait(t, 1)[0]
		if jsonAt(d.Doc, "event", "headers", "Webhook-Signature") != nil {
			t.Errorf("the sender's signature was forwarded: %s", d.Body)
		}
	})
}

// TestIngressRateLimit: events beyond the per-binding limit are 429 with
// Retry-After, other bindings are unaffected, and the next window admits.
func TestIngressRateLimit(t *testing.T) {
	t.Parallel()
	for _, b := range storetest.Backends(t) {
		t.Run(b.Name, func(t *testing.T) {
			t.Parallel()
			e := setupWorkWith(t, b, work.Config{}, ingress.Config{Limit: ratelimit.Limit{Events: 5, Per: time.Minute}})
			rt := newRuntime(t, e)
			id := e.endpoint(t, rt, false)["id"].(string)
			_, in := e.binding(t, id, nil)
			_, other := e.binding(t, id, nil)
			for range 5 {
				e.send(t, in, map[string]any{"text": "x"})
			}
			r := e.do(http.MethodPost, in, "", map[string]any{"text": "one too many"})
			expectRefused(t, "the 6th event in the minute", r, http.StatusTooManyRequests, "rate_limited")
			if ra, err := strconv.Atoi(r.Header.Get("Retry-After")); err != nil || ra < 1 || ra > 61 {
				t.Errorf("Retry-After %q", r.Header.Get("Retry-After"))
			}
			e.send(t, other, map[string]any{"text": "another binding"})
			e.clock.Advance(time.Minute)
			e.send(t, in, map[string]any{"text": "the next minute"})
		})
	}
}

// A binding deleted while an event's body was still arriving (after the
// address was admitted) takes no event.
func TestIngressBindingDeletedDuringUpload(t *testing.T) {
	forEachWorkBackend(t, work.Config{}, func(t *testing.T, e *workEnv) {
		rt := newRuntime(t, e)
		id := e.endpoint(t, rt, true)["id"].(string)
		bid, in := e.binding(t, id, nil)
		token := in[strings.LastIndex(in, "/")+1:]
		b, err := e.server.Ingress().Admit(t.Context(), ingress.ChannelWebhook, token)
		if err != nil {
			t.Fatal(err)
		}
		wantJSON(t, "delete binding", e.do(http.MethodDelete, tenantPath+"/bindings/"+bid, e.operatorToken, nil), http.StatusNoContent)
		_, err = e.server.Ingress().AcceptWebhook(t.Context(), b, http.Header{}, []byte(`{"text":"late"}`))
		if agentowl.ErrorCode(err) != agentowl.ECodeNotFound {
			t.Fatalf("event for a deleted binding: %v, want not_found", err)
		}
		if got := e.listWork(t, "?endpoint="+id); len(got) != 0 {
			t.Fatalf("work for a deleted binding: %v", got)
		}
	})
}

// TestIngressWriteRoundTrips: on PostgreSQL an inbound event's write is
// pipelined (sqlstore/pgx.go). Its binding, its endpoint and the runtime
// credential its work block names come in one statement, with the open
// conversation of its key in the same round trip; a repeated dedupe key is
// found by the insert rather than looked up first, and the inserts go with
// COMMIT: two round trips. Each figure is the least of three events, since
// the server's own writes (its scheduler) may land in between.
func TestIngressWriteRoundTrips(t *testing.T) {
	onPostgres(t, func(t *testing.T, b storetest.Backend) { // SQLite has no round trips to count
		we := setupWorkServer(t, b, func(c *server.Config) { c.NoDelivery = true })
		id := we.endpoint(t, newRuntime(t, we), true)["id"].(string)
		we.credential(t, id, nil)
		bid, _ := we.binding(t, id, nil)
		ctx := context.Background()
		st := we.server.Store()
		var bnd *agentowl.Binding
		if err := st.Read(ctx, func(tx agentowl.Tx) (err error) { bnd, err = tx.BindingGet(ctx, bid); return err }); err != nil {
			t.Fatal(err)
		}
		trips := writeTrips(t, st)
		for _, c := range []struct {
			what   string
			thread func(i int) ingress.Thread
			most   int64
		}{
			{"an event with a dedupe key", func(int) ingress.Thread { return nil }, 2},
			{"an event starting a conversation", func(i int) ingress.Thread { return ingress.KeyThread("c" + strconv.Itoa(i)) }, 2},
			{"an event continuing one", func(int) ingress.Thread { return ingress.KeyThread("c0") }, 2},
			{"an SMS continuing one", func(int) ingress.Thread { return ingress.WindowThread{Key: "+15550001", Window: time.Hour} }, 2},
		} {
			least := int64(-1)
			for i := range 3 {
				before := trips()
				out, err := we.server.Ingress().Accept(ctx, bnd, ingress.Inbound{Payload: json.RawMessage(`{"text":"hi"}`),
					DedupeKey: c.what + strconv.Itoa(i), Thread: c.thread(i)})
				if err != nil || out.WorkID == "" {
					t.Fatalf("%s: %+v, %v; want work", c.what, out, err)
				}
				after := trips()
				if n := after - before; least < 0 || n < least {
					least = n
				}
			}
			if least > c.most {
				t.Errorf("%s took %d round trips, want at most %d", c.what, least, c.most)
			}
		}
	})
}
