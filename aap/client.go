package aap

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
)

// Call is one intercepted tool call exactly as it is submitted for approval
// (the contract's CreateApprovalRequest). Arguments and Context are JSON
// objects; the adapter saves and runs the bytes it submitted.
type Call struct {
	Tool           string          `json:"tool"`
	Arguments      json.RawMessage `json:"arguments"`
	Timeout        string          `json:"timeout"`
	AgentReasoning string          `json:"agent_reasoning,omitempty"`
	Context        json.RawMessage `json:"context,omitempty"`
}

// normalize checks c and compacts its objects, so the bytes saved are the
// bytes sent.
func (c *Call) normalize() error {
	if c.Tool == "" {
		return errors.New("aap: call has no tool name")
	}
	if c.Timeout == "" {
		return errors.New("aap: call has no timeout (such as 30m)")
	}
	var err error
	if c.Arguments, err = compactObject(c.Arguments, "arguments"); err != nil {
		return err
	}
	if len(c.Context) > 0 {
		if c.Context, err = compactObject(c.Context, "context"); err != nil {
			return err
		}
	}
	return nil
}

func compactObject(raw json.RawMessage, name string) (json.RawMessage, error) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil || obj == nil {
		return nil, fmt.Errorf("aap: %s must be a JSON object", name)
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return nil, fmt.Errorf("aap: %s: %w", name, err)
	}
	return buf.Bytes(), nil
}

// Request is an approval request as the provider returns it.
type Request struct {
	ID             string
	Tool           string
	Arguments      json.RawMessage
	Timeout        string
	AgentReasoning *string
	Context        json.RawMessage
	Status         Status
	CreatedAt      time.Time
	DeadlineAt     time.Time
	// Decision is set exactly when Status is terminal.
	Decision *Decision
}

// Decision is the recorded outcome of a terminal request.
type Decision struct {
	Status    Status
	Note      string
	DecidedAt time.Time
	// ExpiresAt is set exactly for approvals: the call must start before it.
	ExpiresAt *time.Time
}

type wireDecision struct {
	Status    *Status `json:"status"`
	Note      string  `json:"note"`
	DecidedAt *string `json:"decided_at"`
	ExpiresAt *string `json:"expires_at"`
}

type wireRequest struct {
	ID             *string         `json:"id"`
	Tool           *string         `json:"tool"`
	Arguments      json.RawMessage `json:"arguments"`
	Timeout        *string         `json:"timeout"`
	AgentReasoning *string         `json:"agent_reasoning"`
	Context        json.RawMessage `json:"context"`
	Status         *Status         `json:"status"`
	CreatedAt      *string         `json:"created_at"`
	DeadlineAt     *string         `json:"deadline_at"`
	Decision       *wireDecision   `json:"decision"`
}

// ParseRequest parses an ApprovalRequest strictly: unknown fields, missing
// required fields, unknown states, a decision that contradicts the state, and
// an approval without an expires_at later than decided_at are all
// ErrInvalidResponse.
func ParseRequest(data []byte) (*Request, error) {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalidResponse, fmt.Sprintf(format, args...))
	}
	var w wireRequest
	if err := strictDecode(data, &w); err != nil {
		return nil, bad("approval request: %v", err)
	}
	if w.ID == nil || w.Tool == nil || w.Arguments == nil || w.Timeout == nil || w.Status == nil || w.CreatedAt == nil || w.DeadlineAt == nil {
		return nil, bad("approval request lacks a required field")
	}
	if !validUUID(*w.ID) {
		return nil, bad("request id %q is not a UUID", *w.ID)
	}
	if !w.Status.valid() {
		return nil, bad("unknown status %q", *w.Status)
	}
	r := &Request{ID: *w.ID, Tool: *w.Tool, Arguments: w.Arguments, Timeout: *w.Timeout, AgentReasoning: w.AgentReasoning,
		Context: w.Context, Status: *w.Status}
	var err error
	if r.CreatedAt, err = parseTime(*w.CreatedAt); err != nil {
		return nil, bad("created_at: %v", err)
	}
	if r.DeadlineAt, err = parseTime(*w.DeadlineAt); err != nil {
		return nil, bad("deadline_at: %v", err)
	}
	if _, err := compactObject(r.Arguments, "arguments"); err != nil {
		return nil, bad("%v", err)
	}
	switch {
	case r.Status == StatusPending && w.Decision != nil:
		return nil, bad("a pending request carries a decision")
	case r.Status.Terminal() && w.Decision == nil:
		return nil, bad("a %s request carries no decision", r.Status)
	}
	if d := w.Decision; d != nil {
		if d.Status == nil || *d.Status != r.Status || d.DecidedAt == nil {
			return nil, bad("decision status or decided_at does not match the request")
		}
		r.Decision = &Decision{Status: *d.Status, Note: d.Note}
		if r.Decision.DecidedAt, err = parseTime(*d.DecidedAt); err != nil {
			return nil, bad("decision.decided_at: %v", err)
		}
		switch {
		case r.Status == StatusApproved && d.ExpiresAt == nil:
			return nil, bad("an approval carries no expires_at")
		case r.Status != StatusApproved && d.ExpiresAt != nil:
			return nil, bad("a %s decision carries expires_at", r.Status)
		}
		if d.ExpiresAt != nil {
			exp, err := parseTime(*d.ExpiresAt)
			if err != nil {
				return nil, bad("decision.expires_at: %v", err)
			}
			if !exp.After(r.Decision.DecidedAt) {
				return nil, bad("decision.expires_at is not later than decided_at")
			}
			r.Decision.ExpiresAt = &exp
		}
	}
	return r, nil
}

// strictDecode decodes one JSON value into v, refusing unknown fields and
// trailing data.
func strictDecode(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("trailing data after the JSON value")
	}
	return nil
}

func parseTime(s string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, err
	}
	return t.UTC(), nil
}

func validUUID(s string) bool {
	_, err := uuid.Parse(s)
	return err == nil && len(s) == 36
}

// sameCall reports whether the provider's request carries the submitted call:
// the same tool and the same arguments as parsed JSON values (numbers
// compared by their literal text).
func sameCall(c *Call, r *Request) bool {
	return c.Tool == r.Tool && sameJSON(c.Arguments, r.Arguments)
}

func sameJSON(a, b json.RawMessage) bool {
	va, err1 := decodeNumbers(a)
	vb, err2 := decodeNumbers(b)
	return err1 == nil && err2 == nil && reflect.DeepEqual(va, vb)
}

func decodeNumbers(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	err := dec.Decode(&v)
	return v, err
}

// APIError is an error answer of the provider API.
type APIError struct {
	StatusCode int
	Type       string
	Code       string
	Message    string
	// RequestID identifies the HTTP exchange (X-Request-ID), for the
	// provider's logs.
	RequestID string
	// RetryAfter is the provider's Retry-After (429, 503) in seconds, or 0:
	// AAP requires a retry to wait at least this long, or to stop waiting.
	RetryAfter time.Duration
}

// Error describes the answer without credentials.
func (e *APIError) Error() string {
	return fmt.Sprintf("aap: provider answered %d %s: %s (request %s)", e.StatusCode, e.Code, e.Message, e.RequestID)
}

// Temporary reports whether retrying the same call later may succeed: rate
// limits, server errors and unavailability (a provider whose database is
// briefly unavailable answers 503 with Retry-After). The adapter leaves
// the execution as it was; Submit, Resume or Recover again retries it.
func (e *APIError) Temporary() bool {
	return e.StatusCode == http.StatusTooManyRequests || e.StatusCode == http.StatusRequestTimeout || e.StatusCode >= 500
}

// permanent reports whether err is a provider answer that retrying the same
// call cannot change.
func permanent(err error) bool {
	var ae *APIError
	return errors.As(err, &ae) && !ae.Temporary()
}

// Provider is the part of the AAP /v1 API the adapter uses. *Client
// implements it against a real provider.
type Provider interface {
	// CreateRequest submits call with the idempotency key (POST /v1/requests).
	CreateRequest(ctx context.Context, key string, call *Call) (*Request, error)
	// GetRequest reads a request's current state (GET /v1/requests/{id}).
	GetRequest(ctx context.Context, id string) (*Request, error)
	// CancelRequest cancels a pending request (DELETE /v1/requests/{id}); an
	// already terminal one is an *APIError with Code already_terminal.
	CancelRequest(ctx context.Context, id string) (*Request, error)
}

// maxResponseBytes bounds a provider answer.
const maxResponseBytes = 4 << 20

// Client calls a provider's /v1 API with an instance credential or a
// provisioner token.
type Client struct {
	// BaseURL is the provider's AAP base URL, such as
	// https://approvals.example.com (the paths /v1/... are appended).
	BaseURL string
	// Token is the bearer credential: an instance credential for requests, a
	// provisioner token for instances.
	Token string
	// HTTP sends the requests. Defaults to a client with a 60-second
	// timeout.
	HTTP *http.Client
}

var defaultHTTP = &http.Client{Timeout: 60 * time.Second}

// do sends one request and returns the response body of a 2xx answer.
func (c *Client) do(ctx context.Context, method, path string, body any, header map[string]string) ([]byte, int, error) {
	var rd io.Reader
	if body != nil {
		data, err := json.Marshal(body)
		if err != nil {
			return nil, 0, err
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimRight(c.BaseURL, "/")+path, rd)
	if err != nil {
		return nil, 0, err
	}
	req.Header.Set("Authorization", "Bearer "+c.Token)
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	hc := c.HTTP
	if hc == nil {
		hc = defaultHTTP
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, 0, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes+1))
	if err != nil {
		return nil, resp.StatusCode, err
	}
	if len(data) > maxResponseBytes {
		return nil, resp.StatusCode, fmt.Errorf("%w: answer larger than %d bytes", ErrInvalidResponse, maxResponseBytes)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		ae := &APIError{StatusCode: resp.StatusCode, RequestID: resp.Header.Get("X-Request-ID")}
		if n, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && n > 0 {
			ae.RetryAfter = time.Duration(n) * time.Second
		}
		var eb struct {
			Error struct {
				Type, Code, Message string
			} `json:"error"`
		}
		if json.Unmarshal(data, &eb) == nil {
			ae.Type, ae.Code, ae.Message = eb.Error.Type, eb.Error.Code, eb.Error.Message
		}
		if ae.Message == "" {
			ae.Message = http.StatusText(resp.StatusCode)
		}
		return nil, resp.StatusCode, ae
	}
	return data, resp.StatusCode, nil
}

// CreateRequest submits call (POST /v1/requests) with an Idempotency-Key.
// The same key and call return the same request, so a lost answer is
// recovered by calling again with the same key.
func (c *Client) CreateRequest(ctx context.Context, key string, call *Call) (*Request, error) {
	data, _, err := c.do(ctx, http.MethodPost, "/v1/requests", call, map[string]string{"Idempotency-Key": key})
	if err != nil {
		return nil, err
	}
	return ParseRequest(data)
}

// GetRequest reads a request (GET /v1/requests/{id}) and checks that the
// answer is that request.
func (c *Client) GetRequest(ctx context.Context, id string) (*Request, error) {
	return c.request(ctx, http.MethodGet, id, "")
}

// WaitRequest reads a request like GetRequest, but long-polls: the provider
// holds the answer until the request is terminal or wait (at most 30s by
// the contract) has passed. A pending answer after the wait is not an error.
func (c *Client) WaitRequest(ctx context.Context, id string, wait time.Duration) (*Request, error) {
	secs := max(int(wait/time.Second), 1)
	return c.request(ctx, http.MethodGet, id, "?wait="+strconv.Itoa(secs)+"s")
}

// CancelRequest cancels a pending request (DELETE /v1/requests/{id}).
func (c *Client) CancelRequest(ctx context.Context, id string) (*Request, error) {
	return c.request(ctx, http.MethodDelete, id, "")
}

// request calls /v1/requests/{id} plus suffix and checks that the answer is
// request id.
func (c *Client) request(ctx context.Context, method, id, suffix string) (*Request, error) {
	data, err := c.onRequest(ctx, method, id, suffix)
	if err != nil {
		return nil, err
	}
	r, err := ParseRequest(data)
	if err != nil {
		return nil, err
	}
	if r.ID != id {
		return nil, fmt.Errorf("%w: asked for request %s, got %s", ErrInvalidResponse, id, r.ID)
	}
	return r, nil
}

// onRequest sends a call about request id (/v1/requests/{id} plus suffix),
// refusing an ID that is not a UUID before anything is sent.
func (c *Client) onRequest(ctx context.Context, method, id, suffix string) ([]byte, error) {
	if !validUUID(id) {
		return nil, fmt.Errorf("aap: request ID %q is not a UUID", id)
	}
	data, _, err := c.do(ctx, method, "/v1/requests/"+url.PathEscape(id)+suffix, nil, nil)
	return data, err
}

// RequestAttestation reads the attestation of a decided request: AgentOwl's
// extension route GET /v1/requests/{id}/attestation (instance credential,
// docs/attestations.md), outside AAP's /v1 contract. It returns the compact
// JWS, to verify with package attest before acting on it. A request without
// one (pending, expired, cancelled, or a provider that signs none) is an
// *APIError with StatusCode 404.
func (c *Client) RequestAttestation(ctx context.Context, id string) (string, error) {
	data, err := c.onRequest(ctx, http.MethodGet, id, "/attestation")
	if err != nil {
		return "", err
	}
	// An extension answer, not the strict contract: the provider may add
	// members (AgentOwl adds the key ID, the times and the JWKS URL); only
	// the token is used, and it is verified, not trusted.
	var out struct {
		Attestation *string `json:"attestation"`
	}
	if err := json.Unmarshal(data, &out); err != nil || out.Attestation == nil || *out.Attestation == "" {
		return "", fmt.Errorf("%w: the attestation answer carries no attestation", ErrInvalidResponse)
	}
	return *out.Attestation, nil
}
