package workclient_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentowl/agentowl/webhook"
	"github.com/agentowl/agentowl/workclient"
)

var now = time.Date(2026, 10, 6, 12, 0, 0, 0, time.UTC)

const handoffBody = `{"id":"9d2e6c1a-8f5b-4c1e-9d7a-3b2c1d0e9f8a","type":"event.received","created_at":"2026-10-06T12:00:00Z",` +
	`"event":{"id":"evt_a","channel":"webhook","binding_id":"bnd_a","conversation_id":"conv_a","follow_up":false,"sender":"",` +
	`"received_at":"2026-10-06T12:00:00Z","headers":{},"payload":{"text":"hi"},"attachments":[]},` +
	`"work":{"version":"agent-work.v1","work_id":"work_a","conversation_id":"conv_a","generation":1,` +
	`"callback_url":"https://agentowl.example/runtime/v1/work/work_a/callbacks","credential_id":"rtc_a"}}`

func signed(t *testing.T, secret, id string, at time.Time, body string) http.Header {
	t.Helper()
	key, err := webhook.ParseSecret(secret)
	if err != nil {
		t.Fatal(err)
	}
	h := http.Header{}
	key.SetHeaders(h, id, at, []byte(body))
	return h
}

func TestVerify(t *testing.T) {
	t.Parallel()
	oldSecret, newSecret := webhook.NewSecret(), webhook.NewSecret()
	id := "9d2e6c1a-8f5b-4c1e-9d7a-3b2c1d0e9f8a"
	v := &workclient.Verifier{Secrets: []string{newSecret, oldSecret}, Now: func() time.Time { return now }}
	for _, s := range []string{oldSecret, newSecret} {
		ho, err := v.Verify(signed(t, s, id, now, handoffBody), []byte(handoffBody))
		if err != nil {
			t.Fatalf("a handoff signed with a listed secret: %v", err)
		}
		if ho.Work == nil || ho.Work.WorkID != "work_a" || ho.Work.Generation != 1 || ho.Event.ConversationID != "conv_a" ||
			string(ho.Event.Payload) != `{"text":"hi"}` {
			t.Fatalf("handoff = %+v", ho)
		}
	}
	cases := []struct {
		what string
		h    http.Header
		body string
		want error
	}{
		{"another secret", signed(t, webhook.NewSecret(), id, now, handoffBody), handoffBody, webhook.ErrNoValidSignature},
		{"a stale timestamp", signed(t, newSecret, id, now.Add(-6*time.Minute), handoffBody), handoffBody, webhook.ErrTimestampSkew},
		{"no headers", http.Header{}, handoffBody, webhook.ErrMissingHeaders},
		{"another body", signed(t, newSecret, id, now, handoffBody), strings.Replace(handoffBody, "hi", "ho", 1), webhook.ErrNoValidSignature},
		{"webhook-id not the body id", signed(t, newSecret, "other", now, handoffBody), handoffBody, workclient.ErrIDMismatch},
		{"not a handoff", signed(t, newSecret, id, now, `{"a":1}`), `{"a":1}`, workclient.ErrNotHandoff},
	}
	for _, c := range cases {
		if _, err := v.Verify(c.h, []byte(c.body)); !errors.Is(err, c.want) {
			t.Errorf("%s: got %v, want %v", c.what, err, c.want)
		}
	}
	v2 := strings.Replace(handoffBody, `"version":"agent-work.v1"`, `"version":"agent-work.v2"`, 1)
	if _, err := v.Verify(signed(t, newSecret, id, now, v2), []byte(v2)); !errors.Is(err, workclient.ErrBadVersion) {
		t.Errorf("version 2: %v", err)
	}
	plain := `{"id":"x","type":"event.received","created_at":"2026-10-06T12:00:00Z","event":{"id":"evt_b","payload":{}}}`
	ho, err := v.Verify(signed(t, newSecret, "x", now, plain), []byte(plain))
	if err != nil || ho.Work != nil || ho.Event.ID != "evt_b" {
		t.Fatalf("original-format handoff: %+v, %v", ho, err)
	}
	if _, err := (&workclient.Verifier{}).Verify(http.Header{}, nil); !errors.Is(err, workclient.ErrNoSecret) {
		t.Errorf("no secrets: %v", err)
	}
	req := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(handoffBody))
	req.Header = signed(t, newSecret, id, now, handoffBody)
	if _, err := (&workclient.Verifier{Secrets: []string{newSecret}, Now: v.Now, MaxBodyBytes: 100}).VerifyRequest(req); !errors.Is(err, workclient.ErrBodyTooBig) {
		t.Errorf("body over the limit: %v", err)
	}
}

// server answers callbacks with a script of statuses (then 200 with a
// receipt), recording every request body.
type server struct {
	mu      sync.Mutex
	script  []func(w http.ResponseWriter)
	bodies  []string
	headers []http.Header
	srv     *httptest.Server
}

func newServer(t *testing.T, script ...func(w http.ResponseWriter)) *server {
	s := &server{script: script}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		s.bodies = append(s.bodies, string(body))
		s.headers = append(s.headers, r.Header.Clone())
		var next func(http.ResponseWriter)
		if len(s.script) > 0 {
			next, s.script = s.script[0], s.script[1:]
		}
		s.mu.Unlock()
		if next != nil {
			next(w)
			return
		}
		var cb workclient.Callback
		_ = json.Unmarshal(body, &cb)
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(workclient.Receipt{CallbackID: cb.CallbackID, WorkID: cb.WorkID, Sequence: cb.Sequence,
			Status: cb.Status, WorkStatus: string(cb.Status), RecordedAt: "2026-10-06T12:00:00Z"})
	}))
	t.Cleanup(s.srv.Close)
	return s
}

func status(code int, retryAfter, errCode string) func(w http.ResponseWriter) {
	return func(w http.ResponseWriter) {
		if retryAfter != "" {
			w.Header().Set("Retry-After", retryAfter)
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"type": "x", "code": errCode, "message": "m", "request_id": "r"}})
	}
}

func reset(w http.ResponseWriter) {
	conn, _, _ := w.(http.Hijacker).Hijack()
	conn.Close()
}

// recordingSleep records waits instead of sleeping.
type recordingSleep struct {
	mu    sync.Mutex
	waits []time.Duration
}

func (r *recordingSleep) sleep(_ context.Context, d time.Duration) error {
	r.mu.Lock()
	r.waits = append(r.waits, d)
	r.mu.Unlock()
	return nil
}

var work = &workclient.Work{Version: workclient.Version, WorkID: "work_a", CallbackURL: ""}

func TestPostRetries(t *testing.T) {
	t.Parallel()
	s := newServer(t, status(500, "", "internal"), reset, status(429, "7", "rate_limited"), status(503, "", "unavailable"))
	rec := &recordingSleep{}
	c := &workclient.Client{Token: "owl_rt_x", Sleep: rec.sleep, MinBackoff: 10 * time.Millisecond, MaxBackoff: 20 * time.Millisecond}
	cb := workclient.NewCallback(work, 3, workclient.Completed, now)
	cb.Result = &workclient.Result{Summary: "Report ready", URL: "https://runtime.example/r"}
	rc, err := c.Post(context.Background(), s.srv.URL, cb)
	if err != nil {
		t.Fatal(err)
	}
	if rc.CallbackID != "work_a:3" || rc.Sequence != 3 || rc.Status != workclient.Completed {
		t.Fatalf("receipt = %+v", rc)
	}
	if len(s.bodies) != 5 {
		t.Fatalf("%d attempts, want 5", len(s.bodies))
	}
	for i, b := range s.bodies {
		if b != s.bodies[0] {
			t.Errorf("attempt %d sent another body:\n%s\nvs\n%s", i+1, b, s.bodies[0])
		}
		if s.headers[i].Get("Authorization") != "Bearer owl_rt_x" || s.headers[i].Get("Content-Type") != "application/json" {
			t.Errorf("attempt %d headers %v", i+1, s.headers[i])
		}
	}
	if !strings.Contains(s.bodies[0], `"occurred_at":"2026-10-06T12:00:00.000Z"`) || !strings.Contains(s.bodies[0], `"callback_id":"work_a:3"`) {
		t.Errorf("body = %s", s.bodies[0])
	}
	if len(rec.waits) != 4 || rec.waits[2] != 7*time.Second || rec.waits[0] > 20*time.Millisecond {
		t.Errorf("waits = %v, want 4 with the third honouring Retry-After: 7", rec.waits)
	}
}

func TestPostDoesNotRetryOther4xx(t *testing.T) {
	t.Parallel()
	for _, code := range []int{400, 401, 403, 404, 409, 413} {
		s := newServer(t, status(code, "", "some_code"))
		rec := &recordingSleep{}
		c := &workclient.Client{Token: "t", Sleep: rec.sleep}
		_, err := c.Post(context.Background(), s.srv.URL, workclient.NewCallback(work, 1, workclient.Accepted, now))
		var ae *workclient.Error
		if !errors.As(err, &ae) || ae.StatusCode != code || ae.Code != "some_code" || ae.Retryable() {
			t.Errorf("%d: error %v", code, err)
		}
		if len(s.bodies) != 1 || len(rec.waits) != 0 {
			t.Errorf("%d: %d attempts, %d waits; want no retry", code, len(s.bodies), len(rec.waits))
		}
	}
}

func TestPostGivesUp(t *testing.T) {
	t.Parallel()
	s := newServer(t, status(503, "", "x"), status(503, "", "x"), status(503, "", "x"))
	rec := &recordingSleep{}
	c := &workclient.Client{Token: "t", Sleep: rec.sleep, MaxAttempts: 3}
	_, err := c.Post(context.Background(), s.srv.URL, workclient.NewCallback(work, 1, workclient.Running, now))
	var ae *workclient.Error
	if !errors.As(err, &ae) || ae.StatusCode != 503 || len(s.bodies) != 3 {
		t.Fatalf("error %v after %d attempts", err, len(s.bodies))
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	s2 := newServer(t, status(503, "", "x"))
	if _, err := (&workclient.Client{Token: "t"}).Post(ctx, s2.srv.URL, workclient.NewCallback(work, 1, workclient.Running, now)); err == nil {
		t.Fatal("a cancelled context did not stop the retries")
	}
}

func TestReporterNumbersReports(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	w := &workclient.Work{Version: workclient.Version, WorkID: "work_b", CallbackURL: s.srv.URL}
	r := (&workclient.Client{Token: "t"}).Reporter(w, 4)
	r.Now = func() time.Time { return now }
	for _, st := range []workclient.Status{workclient.Accepted, workclient.Completed} {
		if _, err := r.Report(context.Background(), st, nil); err != nil {
			t.Fatal(err)
		}
	}
	if r.Sequence() != 6 || !strings.Contains(s.bodies[0], `"callback_id":"work_b:5"`) || !strings.Contains(s.bodies[1], `"sequence":6`) {
		t.Fatalf("sequence %d, bodies %v", r.Sequence(), s.bodies)
	}
}
