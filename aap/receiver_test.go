package aap_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/agentowl/agentowl/aap"
	"github.com/agentowl/agentowl/internal/clocktest"
	"github.com/agentowl/agentowl/internal/server/servertest"
	"github.com/agentowl/agentowl/webhook"
)

// recvEnv is a Receiver over a real SQLite store on a fake clock, with one
// registration bound to one instance by a verification.
type recvEnv struct {
	t        *testing.T
	clock    *clocktest.Fake
	store    aap.Store
	r        *aap.Receiver
	regID    string
	secret   string
	key      webhook.Key
	instance string
}

func newRecvEnv(t *testing.T) *recvEnv {
	t.Helper()
	e := &recvEnv{t: t, clock: clocktest.New(t0)}
	e.store = openStore(t, filepath.Join(t.TempDir(), "receiver.db"))
	t.Cleanup(func() { e.store.Close() })
	var err error
	e.r, err = aap.NewReceiver(aap.ReceiverConfig{Store: e.store, Clock: e.clock, MaxBodyBytes: 4096})
	must(t, err)
	e.regID, e.secret, e.instance = uuid.NewString(), webhook.NewSecret(), uuid.NewString()
	e.key, _ = webhook.ParseSecret(e.secret)
	must(t, e.r.Register(context.Background(), e.regID, e.secret))
	if rec := e.send(e.verification(e.regID, e.instance, "challenge-1")); rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), `"challenge-1"`) {
		t.Fatalf("verification: %d %s", rec.Code, rec.Body)
	}
	return e
}

// msg is one webhook as sent: headers and exact body bytes.
type msg struct {
	header http.Header
	body   []byte
}

func (e *recvEnv) signedWith(key webhook.Key, id string, ts time.Time, v any) msg {
	body, err := json.Marshal(v)
	must(e.t, err)
	h := http.Header{"Content-Type": {"application/json"}}
	key.SetHeaders(h, id, ts, body)
	return msg{h, body}
}

func (e *recvEnv) verification(regID, instanceID, challenge string) msg {
	id := uuid.NewString()
	return e.signedWith(e.key, id, e.clock.Now(), map[string]string{"id": id, "type": "webhook.verification",
		"registration_id": regID, "instance_id": instanceID, "created_at": e.clock.Now().Format(time.RFC3339), "challenge": challenge})
}

func resolved(id, instanceID, requestID string, created time.Time) map[string]string {
	return map[string]string{"id": id, "type": "request.resolved", "instance_id": instanceID, "request_id": requestID,
		"created_at": created.Format(time.RFC3339)}
}

// notification is a correctly signed request.resolved for e's instance.
func (e *recvEnv) notification() (msg, string) {
	id := uuid.NewString()
	return e.signedWith(e.key, id, e.clock.Now(), resolved(id, e.instance, uuid.NewString(), e.clock.Now())), id
}

func (e *recvEnv) send(m msg) *httptest.ResponseRecorder {
	return e.sendMethod(http.MethodPost, m)
}

func (e *recvEnv) sendMethod(method string, m msg) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, "/aap/events", bytes.NewReader(m.body))
	req.Header = m.header.Clone()
	rec := httptest.NewRecorder()
	e.r.ServeHTTP(rec, req)
	return rec
}

// wakeups leases every pending wake-up (for a minute).
func (e *recvEnv) wakeups() []aap.Wakeup {
	ws, err := e.r.Wakeups(context.Background(), time.Minute, 1000)
	must(e.t, err)
	return ws
}

func errorCode(rec *httptest.ResponseRecorder) string {
	var b struct{ Error struct{ Code string } }
	_ = json.Unmarshal(rec.Body.Bytes(), &b)
	return b.Error.Code
}

func TestReceiverAcceptsVerifiedNotificationOnce(t *testing.T) {
	t.Parallel()
	e := newRecvEnv(t)
	m, id := e.notification()
	changed := e.r.Changed()
	if rec := e.send(m); rec.Code != http.StatusNoContent {
		t.Fatalf("notification: %d %s", rec.Code, rec.Body)
	}
	select {
	case <-changed:
	default:
		t.Error("a new event did not signal Changed")
	}
	ws := e.wakeups()
	if len(ws) != 1 || ws[0].EventID != id || ws[0].InstanceID != e.instance {
		t.Fatalf("wake-ups = %+v, want the one event", ws)
	}
	if reg, _ := e.store.GetRegistration(context.Background(), e.regID); !reg.Confirmed {
		t.Error("an accepted notification did not confirm the registration's binding")
	}
	// The provider retries with a fresh timestamp and signature: 204, and no
	// second wake-up, before and after the first is acknowledged.
	var body map[string]string
	must(t, json.Unmarshal(m.body, &body))
	for _, ack := range []bool{false, true} {
		e.clock.Advance(time.Minute)
		if ack {
			must(t, e.r.Ack(context.Background(), id))
		}
		again := e.signedWith(e.key, id, e.clock.Now(), body)
		if rec := e.send(again); rec.Code != http.StatusNoContent {
			t.Fatalf("duplicate: %d %s", rec.Code, rec.Body)
		}
		e.clock.Advance(time.Minute) // past the lease of the first hand-out
		if ws := e.wakeups(); len(ws) != 1-boolInt(ack) {
			t.Fatalf("after a duplicate (acknowledged=%v): wake-ups = %+v", ack, ws)
		}
	}
	// Event IDs are kept at least eight days after created_at: a retry on
	// day 7 (the end of the provider's window) plus the grace period is
	// still a duplicate, even after a purge.
	e.clock.Advance(8*24*time.Hour - 10*time.Minute)
	_, err := e.r.Purge(context.Background())
	must(t, err)
	if rec := e.send(e.signedWith(e.key, id, e.clock.Now(), body)); rec.Code != http.StatusNoContent {
		t.Fatalf("duplicate on day 8: %d", rec.Code)
	}
	if ws := e.wakeups(); len(ws) != 0 {
		t.Fatalf("a duplicate on day 8 woke the harness again: %+v", ws)
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// Every message the receiver refuses gets a clear 4xx with a stable code,
// and nothing is recorded or queued: the same event, sent correctly
// afterwards, is still new.
func TestReceiverRefusesBadInput(t *testing.T) {
	t.Parallel()
	e := newRecvEnv(t)
	other := webhook.NewSecret()
	otherKey, _ := webhook.ParseSecret(other)
	// A second registration bound to a second instance.
	reg2, inst2 := uuid.NewString(), uuid.NewString()
	must(t, e.r.Register(context.Background(), reg2, other))
	id2 := uuid.NewString()
	v2 := e.signedWith(otherKey, id2, e.clock.Now(), map[string]string{"id": id2, "type": "webhook.verification",
		"registration_id": reg2, "instance_id": inst2, "created_at": e.clock.Now().Format(time.RFC3339), "challenge": "c2"})
	if rec := e.send(v2); rec.Code != http.StatusOK {
		t.Fatalf("second verification: %d", rec.Code)
	}

	now := e.clock.Now()
	// signed is the good notification id with its body changed by edit
	// before signing; resigned is the good one changed by edit after.
	signed := func(edit func(b map[string]string)) func(id string) msg {
		return func(id string) msg {
			b := resolved(id, e.instance, uuid.NewString(), now)
			edit(b)
			return e.signedWith(e.key, id, now, b)
		}
	}
	resigned := func(edit func(id string, m *msg)) func(id string) msg {
		return func(id string) msg {
			m := e.signedWith(e.key, id, now, resolved(id, e.instance, uuid.NewString(), now))
			edit(id, &m)
			return m
		}
	}
	unchanged := func(map[string]string) {}
	withField := func(name, value string) func(id string) msg {
		return signed(func(b map[string]string) { b[name] = value })
	}
	withoutHeader := func(name string) func(id string) msg {
		return resigned(func(_ string, m *msg) { m.header.Del(name) })
	}
	cases := []struct {
		name   string
		build  func(id string) msg
		method string
		status int
		code   string
	}{
		{"GET", signed(unchanged), http.MethodGet, 405, "method_not_allowed"},
		{"content type text/plain", resigned(func(_ string, m *msg) {
			m.header.Set("Content-Type", "text/plain")
		}), "", 415, "invalid_content_type"},
		{"oversized body", withField("padding", strings.Repeat("x", 5000)), "", 413, "body_too_large"},
		{"missing webhook-signature", withoutHeader(webhook.HeaderSignature), "", 401, "missing_signature_headers"},
		{"missing webhook-id", withoutHeader(webhook.HeaderID), "", 401, "missing_signature_headers"},
		{"missing webhook-timestamp", withoutHeader(webhook.HeaderTimestamp), "", 401, "missing_signature_headers"},
		{"bad signature", resigned(func(_ string, m *msg) {
			m.header.Set(webhook.HeaderSignature, "v1,"+strings.Repeat("A", 43)+"=")
		}), "", 401, "invalid_signature"},
		{"signature over other bytes", resigned(func(_ string, m *msg) {
			m.body = append(m.body, ' ')
		}), "", 401, "invalid_signature"},
		{"v2 signature only", resigned(func(_ string, m *msg) {
			m.header.Set(webhook.HeaderSignature, strings.Replace(m.header.Get(webhook.HeaderSignature), "v1,", "v2,", 1))
		}), "", 401, "invalid_signature"},
		{"timestamp 5m1s old", func(id string) msg {
			return e.signedWith(e.key, id, now.Add(-5*time.Minute-time.Second), resolved(id, e.instance, uuid.NewString(), now))
		}, "", 401, "timestamp_out_of_tolerance"},
		{"timestamp 5m1s ahead", func(id string) msg {
			return e.signedWith(e.key, id, now.Add(5*time.Minute+time.Second), resolved(id, e.instance, uuid.NewString(), now))
		}, "", 401, "timestamp_out_of_tolerance"},
		{"timestamp not a number", resigned(func(_ string, m *msg) {
			m.header.Set(webhook.HeaderTimestamp, "yesterday")
		}), "", 401, "invalid_timestamp"},
		{"body id differs from webhook-id", func(id string) msg {
			return e.signedWith(e.key, "other-"+id, now, resolved(id, e.instance, uuid.NewString(), now))
		}, "", 400, "id_mismatch"},
		{"instance bound to another registration", func(id string) msg {
			// Signed with the first registration's secret, for the second
			// registration's instance.
			return e.signedWith(e.key, id, now, resolved(id, inst2, uuid.NewString(), now))
		}, "", 401, "invalid_signature"},
		{"instance not bound to any registration", func(id string) msg {
			return e.signedWith(e.key, id, now, resolved(id, uuid.NewString(), uuid.NewString(), now))
		}, "", 403, "unknown_instance"},
		{"not JSON", resigned(func(id string, m *msg) {
			m.body = []byte("id=" + id)
			e.key.SetHeaders(m.header, id, now, m.body)
		}), "", 400, "invalid_json"},
		{"JSON array", func(id string) msg { return e.signedWith(e.key, id, now, []string{id}) }, "", 400, "invalid_json"},
		{"unknown type", withField("type", "request.created"), "", 400, "unknown_type"},
		{"unknown field", withField("status", "approved"), "", 400, "invalid_message"},
		{"missing request_id", signed(func(b map[string]string) {
			delete(b, "request_id")
		}), "", 400, "invalid_message"},
		{"request_id not a UUID", withField("request_id", "../admin"), "", 400, "invalid_message"},
		{"created_at not RFC 3339", withField("created_at", "16/09/2026"), "", 400, "invalid_message"},
		{"trailing data", resigned(func(id string, m *msg) {
			m.body = append(m.body, []byte(`{}`)...)
			e.key.SetHeaders(m.header, id, now, m.body)
		}), "", 400, "invalid_json"},
	}
	for _, c := range cases {
		id := uuid.NewString()
		m := c.build(id)
		method := c.method
		if method == "" {
			method = http.MethodPost
		}
		rec := e.sendMethod(method, m)
		if rec.Code != c.status || errorCode(rec) != c.code {
			t.Errorf("%s: %d %s, want %d %s", c.name, rec.Code, rec.Body, c.status, c.code)
		}
		if ws := e.wakeups(); len(ws) != 0 {
			t.Errorf("%s: refused, but queued %+v", c.name, ws)
		}
		// Nothing was recorded: the event ID is unknown.
		if err := e.r.Ack(context.Background(), id); !errors.Is(err, aap.ErrNotFound) {
			t.Errorf("%s: the refused event was recorded (ack: %v)", c.name, err)
		}
	}
	// Exactly five minutes off is within tolerance.
	id := uuid.NewString()
	if rec := e.send(e.signedWith(e.key, id, now.Add(-5*time.Minute), resolved(id, e.instance, uuid.NewString(), now))); rec.Code != 204 {
		t.Errorf("timestamp exactly 5m old: %d %s, want 204", rec.Code, rec.Body)
	}
	// A signature list with a bad one first still verifies by the good one.
	id = uuid.NewString()
	m := e.signedWith(e.key, id, now, resolved(id, e.instance, uuid.NewString(), now))
	m.header.Set(webhook.HeaderSignature, "v1,bm9wZQ== "+m.header.Get(webhook.HeaderSignature))
	if rec := e.send(m); rec.Code != 204 {
		t.Errorf("two signatures, second valid: %d %s", rec.Code, rec.Body)
	}
}

// A verification is answered only for an expected registration, only after
// its signature checks, and never re-binds a confirmed registration.
func TestReceiverVerification(t *testing.T) {
	t.Parallel()
	e := newRecvEnv(t)
	ctx := context.Background()
	// Unknown registration: refused, even though correctly signed.
	rec := e.send(e.verification(uuid.NewString(), uuid.NewString(), "c"))
	if rec.Code != http.StatusForbidden || errorCode(rec) != "unknown_registration" || strings.Contains(rec.Body.String(), `"challenge"`) {
		t.Fatalf("unknown registration: %d %s", rec.Code, rec.Body)
	}
	// Known registration, wrong secret: refused and not bound.
	reg := uuid.NewString()
	secret := webhook.NewSecret()
	must(t, e.r.Register(ctx, reg, secret))
	inst := uuid.NewString()
	rec = e.send(e.verification(reg, inst, "c")) // signed with e.key, not secret
	if rec.Code != http.StatusUnauthorized {
		t.Fatalf("wrong secret: %d %s", rec.Code, rec.Body)
	}
	if r, _ := e.store.GetRegistration(ctx, reg); r.InstanceID != "" {
		t.Fatalf("a refused verification bound instance %s", r.InstanceID)
	}
	key, _ := webhook.ParseSecret(secret)
	verify := func(instanceID string) *httptest.ResponseRecorder {
		id := uuid.NewString()
		return e.send(e.signedWith(key, id, e.clock.Now(), map[string]string{"id": id, "type": "webhook.verification",
			"registration_id": reg, "instance_id": instanceID, "created_at": e.clock.Now().Format(time.RFC3339), "challenge": "ch-" + instanceID}))
	}
	// A retried creation proposes a new instance ID: re-bound while not
	// confirmed.
	for _, i := range []string{inst, uuid.NewString()} {
		if rec := verify(i); rec.Code != 200 || strings.TrimSpace(rec.Body.String()) != `{"challenge":"ch-`+i+`"}` {
			t.Fatalf("verification for %s: %d %s", i, rec.Code, rec.Body)
		}
		if r, _ := e.store.GetRegistration(ctx, reg); r.InstanceID != i {
			t.Fatalf("bound to %s, want %s", r.InstanceID, i)
		}
	}
	r, _ := e.store.GetRegistration(ctx, reg)
	must(t, e.store.BindRegistration(ctx, reg, r.InstanceID, true)) // the provisioner saw it created
	if rec := verify(uuid.NewString()); rec.Code != http.StatusForbidden || errorCode(rec) != "registration_bound" {
		t.Fatalf("verification re-binding a confirmed registration: %d %s", rec.Code, rec.Body)
	}
	if rec := verify(r.InstanceID); rec.Code != 200 {
		t.Fatalf("verification of the confirmed instance again: %d %s", rec.Code, rec.Body)
	}
	// Registration input is checked.
	if err := e.r.Register(ctx, "not-a-uuid", secret); err == nil {
		t.Error("Register accepted a registration ID that is not a UUID")
	}
	if err := e.r.Register(ctx, uuid.NewString(), "secret"); err == nil {
		t.Error("Register accepted a secret that is not whsec_")
	}
}

// The long-poll API hands out pending wake-ups, waits for new ones, hands
// unacknowledged ones out again after their lease, and forgets acknowledged
// ones.
func TestWakeupAPI(t *testing.T) {
	t.Parallel()
	e := newRecvEnv(t)
	srv := httptest.NewServer(e.r.WakeupAPI(30 * time.Second))
	defer srv.Close()
	get := func(query string) []aap.Wakeup {
		resp, err := http.Get(srv.URL + "/wakeups" + query)
		must(t, err)
		defer resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("GET /wakeups%s: %d", query, resp.StatusCode)
		}
		var out struct{ Wakeups []aap.Wakeup }
		must(t, json.NewDecoder(resp.Body).Decode(&out))
		return out.Wakeups
	}
	if ws := get(""); len(ws) != 0 {
		t.Fatalf("empty receiver: %+v", ws)
	}
	// A waiting GET returns when a notification arrives.
	got := make(chan []aap.Wakeup)
	go func() { got <- get("?wait=30s") }()
	m, id := e.notification()
	time.Sleep(20 * time.Millisecond) // let the poll start waiting; correctness does not depend on it
	if rec := e.send(m); rec.Code != 204 {
		t.Fatal(rec.Code)
	}
	select {
	case ws := <-got:
		if len(ws) != 1 || ws[0].EventID != id || ws[0].Attempts != 1 {
			t.Fatalf("long poll returned %+v", ws)
		}
	case <-time.After(servertest.SyncLimit):
		t.Fatal("the long poll did not return after a notification")
	}
	if ws := get(""); len(ws) != 0 {
		t.Fatalf("a leased wake-up was handed out twice: %+v", ws)
	}
	e.clock.Advance(31 * time.Second)
	ws := get("")
	if len(ws) != 1 || ws[0].Attempts != 2 {
		t.Fatalf("after the lease: %+v", ws)
	}
	ack := func(id string) int {
		resp, err := http.Post(srv.URL+"/wakeups/"+id+"/ack", "", nil)
		must(t, err)
		resp.Body.Close()
		return resp.StatusCode
	}
	if s := ack(id); s != 204 {
		t.Fatalf("ack: %d", s)
	}
	if s := ack(uuid.NewString()); s != 404 {
		t.Fatalf("ack of an unknown event: %d", s)
	}
	e.clock.Advance(time.Minute)
	if ws := get(""); len(ws) != 0 {
		t.Fatalf("an acknowledged wake-up came back: %+v", ws)
	}
	for _, q := range []string{"?wait=soon", "?limit=0"} {
		resp, err := http.Get(srv.URL + "/wakeups" + q)
		must(t, err)
		resp.Body.Close()
		if resp.StatusCode != 400 {
			t.Errorf("GET /wakeups%s: %d, want 400", q, resp.StatusCode)
		}
	}
}

// Dispatch acknowledges what its handler accepts and retries the rest after
// the lease, so a wake-up that arrives before the harness saved its
// suspension is not lost.
func TestDispatchRetriesUnhandled(t *testing.T) {
	t.Parallel()
	e := newRecvEnv(t)
	m, id := e.notification()
	if rec := e.send(m); rec.Code != 204 {
		t.Fatal(rec.Code)
	}
	calls := make(chan aap.Wakeup, 10)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = e.r.Dispatch(ctx, aap.DispatchConfig{Lease: 10 * time.Second, Handle: func(_ context.Context, w aap.Wakeup) error {
			calls <- w
			if w.Attempts == 1 {
				return aap.ErrUnknownRequest
			}
			return nil
		}})
	}()
	defer func() { cancel(); <-done }()
	if w := <-calls; w.EventID != id || w.Attempts != 1 {
		t.Fatalf("first hand-out %+v", w)
	}
	e.clock.Advance(11 * time.Second)
	select {
	case w := <-calls:
		if w.Attempts != 2 {
			t.Fatalf("second hand-out %+v", w)
		}
	case <-time.After(servertest.SyncLimit):
		t.Fatal("an unhandled wake-up was not handed out again after its lease")
	}
	servertest.Eventually(t, "the handled wake-up to be acknowledged", func() bool {
		return e.r.Ack(context.Background(), id) == nil && len(e.wakeups()) == 0
	})
}

// FuzzReceiver sends arbitrary bodies and headers, signed correctly or not.
// The receiver never panics, answers only 200, 204 or a 4xx, never accepts
// a bad signature, and queues a wake-up only for a 204.
func FuzzReceiver(f *testing.F) {
	inst, reg, req := "b29a43a7-1949-4b9f-9d61-b7ae66f85d31", "8246931c-4ce0-4c15-a94a-e9c078ad06e2", "7ab8c8ec-7b2d-4fd6-9b52-752f9515eb71"
	f.Add([]byte(`{"id":"f4b96ac4-404d-4f6a-9a03-a0565edc4922","type":"request.resolved","instance_id":"`+inst+`","request_id":"`+req+`","created_at":"2026-09-16T12:02:00Z"}`),
		"f4b96ac4-404d-4f6a-9a03-a0565edc4922", int64(0), true)
	f.Add([]byte(`{"id":"c9bb5281","type":"webhook.verification","registration_id":"`+reg+`","instance_id":"`+inst+`","created_at":"2026-09-16T11:59:00Z","challenge":"2edc34d7"}`),
		"c9bb5281", int64(0), true)
	f.Add([]byte(`{"id":"x","type":"request.resolved","instance_id":"`+inst+`","request_id":"`+req+`","created_at":"2026-09-16T12:02:00Z"}`), "y", int64(0), true)
	f.Add([]byte(`{"type":"request.resolved"}`), "a", int64(-301), true)
	f.Add([]byte(`[]`), "a", int64(0), false)
	f.Add([]byte(`{"id":"a","type":"webhook.verification","registration_id":"`+reg+`","instance_id":"`+inst+`","created_at":"x","challenge":"c","extra":1}`), "a", int64(400), true)
	f.Add([]byte("\x00\xff{"), "", int64(0), true)
	clock := clocktest.New(t0)
	st := openStore(f, filepath.Join(f.TempDir(), "fuzz.db"))
	f.Cleanup(func() { st.Close() })
	r, err := aap.NewReceiver(aap.ReceiverConfig{Store: st, Clock: clock, MaxBodyBytes: 2048})
	must(f, err)
	secret := "whsec_AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="
	key, _ := webhook.ParseSecret(secret)
	must(f, r.Register(context.Background(), reg, secret))
	must(f, st.BindRegistration(context.Background(), reg, inst, true))
	f.Fuzz(func(t *testing.T, body []byte, id string, skew int64, sign bool) {
		h := http.Header{"Content-Type": {"application/json"}}
		ts := clock.Now().Add(time.Duration(skew) * time.Second)
		if sign {
			key.SetHeaders(h, id, ts, body)
		} else {
			h.Set(webhook.HeaderID, id)
			h.Set(webhook.HeaderTimestamp, strconv.FormatInt(ts.Unix(), 10))
			h.Set(webhook.HeaderSignature, "v1,"+strings.Repeat("A", 43)+"=")
		}
		req := httptest.NewRequest(http.MethodPost, "/aap/events", bytes.NewReader(body))
		for k, v := range h {
			req.Header[k] = v
		}
		rec := httptest.NewRecorder()
		mustLease(t, r)
		r.ServeHTTP(rec, req)
		switch {
		case rec.Code == 200 || rec.Code == 204:
			if !sign || skew > 300 || skew < -300 {
				t.Fatalf("accepted (%d) a message with a bad signature or timestamp", rec.Code)
			}
		case rec.Code >= 400 && rec.Code < 500:
		default:
			t.Fatalf("status %d: %s", rec.Code, rec.Body)
		}
		if after := mustLease(t, r); rec.Code != 204 && len(after) != 0 {
			t.Fatalf("refused with %d but queued %+v", rec.Code, after)
		}
		if rec.Code == 204 {
			var m struct{ ID string }
			if json.Unmarshal(body, &m) != nil || m.ID != id {
				t.Fatalf("accepted a notification whose body id is not webhook-id %q", id)
			}
		}
	})
}

// mustLease leases and acknowledges every pending wake-up.
func mustLease(t *testing.T, r *aap.Receiver) []aap.Wakeup {
	ws, err := r.Wakeups(context.Background(), time.Hour, 1000)
	must(t, err)
	for _, w := range ws {
		must(t, r.Ack(context.Background(), w.EventID))
	}
	return ws
}
