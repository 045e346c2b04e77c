package workclient

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/agentowl/agentowl/agentwork"
	"github.com/agentowl/agentowl/webhook"
)

// Decisions (docs/attention.md): receiving pushed decisions, recovering
// them, and computing action digests.

// Decision is a decision document, as pushed and as recovered.
type Decision = agentwork.Decision

// Errors of DecisionReceiver.Receive.
var (
	ErrBadBearer       = errors.New("workclient: the decision push lacks the decision bearer secret")
	ErrNotDecision     = errors.New("workclient: the body is not a decision")
	ErrDecisionExpired = errors.New("workclient: the decision arrived after its request expired; do not act on it")
	// ErrDuplicateDecision reports a decision ID already received: answer
	// AcceptDecision again, but do not act twice.
	ErrDuplicateDecision = errors.New("workclient: decision already received")
)

// CanonicalJSON renders v as canonical JSON: object keys sorted, no
// insignificant whitespace, no HTML escaping, numbers kept as written. It is
// agentwork.CanonicalJSON.
func CanonicalJSON(v any) ([]byte, error) { return agentwork.CanonicalJSON(v) }

// ActionDigest is the SHA-256, in lowercase hex, of the canonical JSON of
// an action: what an approval request's action.digest carries and what a
// decision's expected_action_digest must equal. It is
// agentwork.ActionDigest.
func ActionDigest(action any) (string, error) { return agentwork.ActionDigest(action) }

// DecisionReceiver checks decision pushes: the bearer decision secret, the
// signature, the declared expiry, and duplicate decision IDs.
type DecisionReceiver struct {
	// BearerSecret is the endpoint's decision secret.
	BearerSecret string
	// Secrets are the endpoint's whsec_ signing secrets (new and old during
	// a rotation).
	Secrets []string
	// Now is the clock. Defaults to time.Now.
	Now func() time.Time
	// Attestations, when set, makes Receive refuse a decision whose
	// attestation is missing or does not verify against the document
	// itself (its expected_action_digest as the action). Before acting on
	// an approval, compare it with the action about to run: Attestations.Verify
	// with the runtime's own action digest does both.
	Attestations *DecisionVerifier

	mu   sync.Mutex
	seen map[string]bool
}

// Receive verifies a push and returns its decision. On ErrDuplicateDecision
// the decision is returned too: answer AcceptDecision, but do not act again. Call
// AcceptDecision only after the decision is durably recorded.
func (d *DecisionReceiver) Receive(r *http.Request) (*Decision, error) {
	got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || d.BearerSecret == "" || subtle.ConstantTimeCompare([]byte(got), []byte(d.BearerSecret)) != 1 {
		return nil, ErrBadBearer
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		return nil, err
	}
	now := time.Now()
	if d.Now != nil {
		now = d.Now()
	}
	if len(d.Secrets) == 0 {
		return nil, ErrNoSecret
	}
	err = errNoSignature
	for _, s := range d.Secrets {
		key, kerr := webhook.ParseSecret(s)
		if kerr != nil {
			return nil, kerr
		}
		if _, err = key.Verify(r.Header, body, now, webhook.DefaultTolerance); err == nil {
			break
		}
	}
	if err != nil {
		return nil, err
	}
	var dec Decision
	if err := json.Unmarshal(body, &dec); err != nil || dec.Type != agentwork.DecisionType || dec.DecisionID == "" {
		return nil, ErrNotDecision
	}
	if dec.Version != Version {
		return nil, fmt.Errorf("%w: %q", ErrBadVersion, dec.Version)
	}
	exp, err := time.Parse(time.RFC3339Nano, dec.RequestExpiresAt)
	if err != nil {
		return nil, ErrNotDecision
	}
	if v := d.Attestations; v != nil {
		if _, err := v.Verify(r.Context(), &dec, dec.ExpectedActionDigest); err != nil {
			return &dec, fmt.Errorf("workclient: decision %s: %w", dec.DecisionID, err)
		}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.seen[dec.DecisionID] {
		return &dec, ErrDuplicateDecision
	}
	if !now.Before(exp) {
		return &dec, ErrDecisionExpired
	}
	if d.seen == nil {
		d.seen = map[string]bool{}
	}
	d.seen[dec.DecisionID] = true
	return &dec, nil
}

// AcceptDecision writes the only answer that records a receipt.
func AcceptDecision(w http.ResponseWriter, decisionID string) {
	w.Header().Set("Content-Type", "application/json")
	b, _ := json.Marshal(agentwork.Acceptance{Accepted: true, DecisionID: decisionID})
	_, _ = w.Write(b)
}

// RecoveredDecision is one decision listed by the recovery route.
type RecoveredDecision struct {
	DecisionID string   `json:"decision_id"`
	Body       Decision `json:"body"`
	Receipt    struct {
		Status     string `json:"status"`
		ReceivedAt string `json:"received_at,omitempty"`
		Via        string `json:"via,omitempty"`
	} `json:"receipt"`
}

func workBase(w *Work) string { return strings.TrimSuffix(w.CallbackURL, "/callbacks") }

func (c *Client) runtimeCall(ctx context.Context, method, url string, out any) error {
	req, err := http.NewRequestWithContext(ctx, method, url, nil)
	if err != nil {
		return &Error{Code: "invalid_url", Message: err.Error()}
	}
	req.Header.Set("Authorization", "Bearer "+c.Token)
	req.Header.Set("User-Agent", "agentowl-workclient/1")
	resp, err := c.httpClient().Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		e := &Error{StatusCode: resp.StatusCode, RequestID: resp.Header.Get("X-Request-ID")}
		var eb struct {
			Error struct{ Code, Message, Param string } `json:"error"`
		}
		if json.Unmarshal(data, &eb) == nil {
			e.Code, e.Message, e.Param = eb.Error.Code, eb.Error.Message, eb.Error.Param
		}
		return e
	}
	return json.Unmarshal(data, out)
}

// Decisions lists the decisions on w (the credential needs decisions:read).
func (c *Client) Decisions(ctx context.Context, w *Work) ([]RecoveredDecision, error) {
	var out struct {
		Items []RecoveredDecision `json:"items"`
	}
	err := c.runtimeCall(ctx, http.MethodGet, workBase(w)+"/decisions", &out)
	return out.Items, err
}

// Receipt confirms that the runtime accepted a decision (idempotent).
func (c *Client) Receipt(ctx context.Context, w *Work, decisionID string) error {
	var out map[string]any
	return c.runtimeCall(ctx, http.MethodPost, workBase(w)+"/decisions/"+decisionID+"/receipt", &out)
}
