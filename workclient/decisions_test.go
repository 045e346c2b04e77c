package workclient

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/agentowl/agentowl/webhook"
)

func TestActionDigest(t *testing.T) {
	t.Parallel()
	a, err := ActionDigest(map[string]any{"tool": "refund", "arguments": map[string]any{"order": 1234, "amount": "20.00"}})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := ActionDigest(map[string]any{"arguments": map[string]any{"amount": "20.00", "order": 1234}, "tool": "refund"})
	c, _ := CanonicalJSON(map[string]any{"tool": "refund", "arguments": map[string]any{"order": 1234, "amount": "20.00"}})
	if a != b || len(a) != 64 || strings.ToLower(a) != a || string(c) != `{"arguments":{"amount":"20.00","order":1234},"tool":"refund"}` {
		t.Fatalf("digests %s %s, canonical %s", a, b, c)
	}
}

func TestDecisionReceiver(t *testing.T) {
	t.Parallel()
	secret := webhook.NewSecret()
	now := time.Date(2026, 10, 6, 12, 0, 0, 0, time.UTC)
	rcv := &DecisionReceiver{BearerSecret: "bearer-0123456789abcdef", Secrets: []string{secret}, Now: func() time.Time { return now }}
	push := func(bearer, body string) *http.Request {
		r := httptest.NewRequest(http.MethodPost, "/decisions", strings.NewReader(body))
		key, _ := webhook.ParseSecret(secret)
		key.SetHeaders(r.Header, "msg-1", now, []byte(body))
		r.Header.Set("Authorization", "Bearer "+bearer)
		return r
	}
	body := `{"version":"agent-work.v1","type":"decision","decision_id":"d1","work_id":"work_a","request_id":"r","request_revision":1,` +
		`"decision":"approve","expected_action_digest":"` + strings.Repeat("a", 64) + `","decided_at":"2026-10-06T11:59:00Z","request_expires_at":"2026-10-06T13:00:00Z"}`
	if _, err := rcv.Receive(push("wrong", body)); !errors.Is(err, ErrBadBearer) {
		t.Fatalf("wrong bearer: %v", err)
	}
	d, err := rcv.Receive(push("bearer-0123456789abcdef", body))
	if err != nil || d.DecisionID != "d1" || d.Decision != "approve" {
		t.Fatalf("receive: %v %v", d, err)
	}
	if _, err := rcv.Receive(push("bearer-0123456789abcdef", body)); !errors.Is(err, ErrDuplicateDecision) {
		t.Fatalf("duplicate: %v", err)
	}
	expired := strings.Replace(strings.Replace(body, `"d1"`, `"d2"`, 1), "13:00:00Z", "11:00:00Z", 1)
	if _, err := rcv.Receive(push("bearer-0123456789abcdef", expired)); !errors.Is(err, ErrDecisionExpired) {
		t.Fatalf("expired: %v", err)
	}
	w := httptest.NewRecorder()
	AcceptDecision(w, "d1")
	if w.Body.String() != `{"accepted":true,"decision_id":"d1"}` {
		t.Fatalf("answer %s", w.Body.String())
	}
}
