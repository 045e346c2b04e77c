package workclient_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentowl/agentowl/agentwork"
	"github.com/agentowl/agentowl/agentwork/agentworktest"
	"github.com/agentowl/agentowl/webhook"
	"github.com/agentowl/agentowl/workclient"
)

// The SDK's side of the agent-work golden vectors
// (agentwork/testdata/vectors.json, also checked by the server's tests):
// what the SDK parses and sends has the golden canonical bytes and digests.

func canonical(t *testing.T, b []byte) string {
	t.Helper()
	c, err := agentwork.Canonicalize(b)
	if err != nil {
		t.Fatalf("canonicalize %s: %v", b, err)
	}
	return string(c)
}

func TestGoldenCanonicalJSON(t *testing.T) {
	t.Parallel()
	for _, v := range agentworktest.Vectors(t) {
		if got, err := workclient.CanonicalJSON(json.RawMessage(v.Input)); err != nil || string(got) != v.Canonical {
			t.Errorf("%s: CanonicalJSON = %s, %v; want %s", v.Name, got, err, v.Canonical)
		}
		if d, err := workclient.ActionDigest(json.RawMessage(v.Input)); err != nil || d != v.SHA256 {
			t.Errorf("%s: ActionDigest = %s, %v; want %s", v.Name, d, err, v.SHA256)
		}
	}
	for _, v := range agentworktest.Typed(t, agentworktest.Action) {
		var a struct {
			Tool      string         `json:"tool"`
			Arguments map[string]any `json:"arguments"`
		}
		agentworktest.DecodeStrict(t, v, &a)
		if d, err := workclient.ActionDigest(map[string]any{"tool": a.Tool, "arguments": a.Arguments}); err != nil || d != v.SHA256 {
			t.Errorf("%s: ActionDigest = %s, %v; want %s", v.Name, d, err, v.SHA256)
		}
	}
}

// TestGoldenHandoffs verifies each golden handoff as a runtime receives it.
func TestGoldenHandoffs(t *testing.T) {
	t.Parallel()
	secret := webhook.NewSecret()
	verifier := &workclient.Verifier{Secrets: []string{secret}, Now: func() time.Time { return now }}
	for v, doc := range agentworktest.Decoded[agentwork.Handoff](t, agentworktest.Handoff) {
		ho, err := verifier.Verify(signed(t, secret, doc.ID, now, v.Input), []byte(v.Input))
		if err != nil {
			t.Fatalf("%s: %v", v.Name, err)
		}
		b, _ := json.Marshal(ho)
		if got := canonical(t, b); got != v.Canonical {
			t.Errorf("%s: verified handoff = %s, want %s", v.Name, got, v.Canonical)
		}
	}
}

// TestGoldenCallbacks posts each golden callback with Client and checks
// the body that reaches the server.
func TestGoldenCallbacks(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var got []byte
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got, _ = io.ReadAll(r.Body)
		mu.Unlock()
		_, _ = io.WriteString(w, `{"callback_id":"x","work_id":"w","sequence":1,"status":"accepted","work_status":"accepted","stale":false,"duplicate":false,"recorded_at":"2026-10-06T12:00:00Z"}`)
	}))
	defer srv.Close()
	c := &workclient.Client{Token: "owl_rt_test", HTTPClient: srv.Client()}
	for v, cb := range agentworktest.Decoded[workclient.Callback](t, agentworktest.Callback) {
		if _, err := c.Post(t.Context(), srv.URL, &cb); err != nil {
			t.Fatalf("%s: %v", v.Name, err)
		}
		mu.Lock()
		body := got
		mu.Unlock()
		if s := canonical(t, body); s != v.Canonical {
			t.Errorf("%s: posted %s, want %s", v.Name, s, v.Canonical)
		}
	}
	for v, r := range agentworktest.Decoded[workclient.Request](t, agentworktest.Request) {
		if b, err := workclient.CanonicalJSON(r); err != nil || string(b) != v.Canonical {
			t.Errorf("%s: request = %s, %v; want %s", v.Name, b, err, v.Canonical)
		}
	}
}

// TestGoldenDecisions receives each golden decision as a pushed decision
// and answers it.
func TestGoldenDecisions(t *testing.T) {
	t.Parallel()
	secret := webhook.NewSecret()
	const bearer = "bearer-0123456789abcdef"
	// Each decision is pushed when it is decided (the vectors are decided
	// at different times).
	var at time.Time
	rcv := &workclient.DecisionReceiver{BearerSecret: bearer, Secrets: []string{secret}, Now: func() time.Time { return at }}
	for v, decided := range agentworktest.Decoded[workclient.Decision](t, agentworktest.Decision) {
		var err error
		if at, err = time.Parse(time.RFC3339Nano, decided.DecidedAt); err != nil {
			t.Fatalf("%s: decided_at: %v", v.Name, err)
		}
		r := httptest.NewRequest(http.MethodPost, "/decisions", strings.NewReader(v.Input))
		r.Header = signed(t, secret, "msg-"+v.Name, at, v.Input)
		r.Header.Set("Authorization", "Bearer "+bearer)
		d, err := rcv.Receive(r)
		if err != nil {
			t.Fatalf("%s: %v", v.Name, err)
		}
		b, _ := json.Marshal(d)
		if got := canonical(t, b); got != v.Canonical {
			t.Errorf("%s: received %s, want %s", v.Name, got, v.Canonical)
		}
	}
	for v, a := range agentworktest.Decoded[agentwork.Acceptance](t, agentworktest.Acceptance) {
		w := httptest.NewRecorder()
		workclient.AcceptDecision(w, a.DecisionID)
		if got := canonical(t, w.Body.Bytes()); got != v.Canonical {
			t.Errorf("%s: AcceptDecision wrote %s, want %s", v.Name, got, v.Canonical)
		}
	}
}
