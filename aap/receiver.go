package aap

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"sync"
	"time"

	"github.com/agentowl/agentowl/webhook"
)

// Message types a receiver accepts.
const (
	TypeVerification    = "webhook.verification"
	TypeRequestResolved = "request.resolved"
)

// DefaultMaxBodyBytes bounds a webhook body. AAP messages are a few hundred
// bytes.
const DefaultMaxBodyBytes = 64 << 10

// ReceiverConfig configures a Receiver.
type ReceiverConfig struct {
	// Store keeps registrations and events. Required.
	Store ReceiverStore
	// Clock is checked against webhook-timestamp (five minutes either way)
	// and stamps events. Defaults to the system clock.
	Clock Clock
	// Logger receives one line per refused message, with its reason.
	// Defaults to discarding.
	Logger *slog.Logger
	// MaxBodyBytes bounds a message body; larger ones are refused with 413.
	// Defaults to DefaultMaxBodyBytes.
	MaxBodyBytes int64
	// Retention is how long an event ID is kept after its created_at (and
	// after it was received). Defaults to, and is never less than,
	// EventRetention (eight days).
	Retention time.Duration
}

// Receiver is the http.Handler that an AAP provider delivers webhooks to. It
// answers a webhook.verification only for a registration it expects (after
// checking the signature with that registration's secret), binding the
// proposed instance to it, and accepts a request.resolved notification only
// for an instance bound to one of its registrations, signed with that
// registration's secret, within five minutes of its clock, with body id =
// webhook-id. It records the event durably before answering 204; a duplicate
// gets 204 and no second wake-up. Everything else is a 4xx with the reason
// logged, and nothing is recorded.
type Receiver struct {
	store     ReceiverStore
	clock     Clock
	log       *slog.Logger
	maxBody   int64
	retention time.Duration

	mu      sync.Mutex
	changed chan struct{}
}

// NewReceiver returns a Receiver for cfg.
func NewReceiver(cfg ReceiverConfig) (*Receiver, error) {
	if cfg.Store == nil {
		return nil, errors.New("aap: ReceiverConfig.Store is required")
	}
	r := &Receiver{store: cfg.Store, clock: clockOr(cfg.Clock), log: cfg.Logger, maxBody: cfg.MaxBodyBytes,
		retention: max(cfg.Retention, EventRetention), changed: make(chan struct{})}
	if r.log == nil {
		r.log = slog.New(slog.DiscardHandler)
	}
	if r.maxBody <= 0 {
		r.maxBody = DefaultMaxBodyBytes
	}
	return r, nil
}

// Register stores an expected registration: the association of a
// registration ID (a UUID) with its whsec_ signing secret. The provisioner
// calls it before it submits the delivery configuration.
func (r *Receiver) Register(ctx context.Context, registrationID, secret string) error {
	if !validUUID(registrationID) {
		return fmt.Errorf("aap: registration ID %q is not a UUID", registrationID)
	}
	if _, err := webhook.ParseSecret(secret); err != nil {
		return err
	}
	return r.store.PutRegistration(ctx, &Registration{ID: registrationID, Secret: secret, CreatedAt: r.clock.Now()})
}

// Changed returns a channel that is closed when the next new event is
// recorded, so a waiter can look for wake-ups at once.
func (r *Receiver) Changed() <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.changed
}

func (r *Receiver) signal() {
	r.mu.Lock()
	close(r.changed)
	r.changed = make(chan struct{})
	r.mu.Unlock()
}

// Purge forgets events kept past their retention.
func (r *Receiver) Purge(ctx context.Context) (int64, error) {
	return r.store.PurgeEvents(ctx, r.clock.Now())
}

// refusal is a rejected message: its status, a stable code and the reason.
type refusal struct {
	status  int
	code    string
	message string
}

func refuse(status int, code, format string, args ...any) *refusal {
	return &refusal{status: status, code: code, message: fmt.Sprintf(format, args...)}
}

// envelope holds the fields that select a message's secret.
type envelope struct {
	Type           string `json:"type"`
	InstanceID     string `json:"instance_id"`
	RegistrationID string `json:"registration_id"`
}

type verificationMsg struct {
	ID             *string `json:"id"`
	Type           *string `json:"type"`
	RegistrationID *string `json:"registration_id"`
	InstanceID     *string `json:"instance_id"`
	CreatedAt      *string `json:"created_at"`
	Challenge      *string `json:"challenge"`
}

type resolvedMsg struct {
	ID         *string `json:"id"`
	Type       *string `json:"type"`
	InstanceID *string `json:"instance_id"`
	RequestID  *string `json:"request_id"`
	CreatedAt  *string `json:"created_at"`
}

// ServeHTTP receives one webhook.
func (r *Receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	status, body, ref := r.receive(req)
	if ref != nil {
		r.log.Warn("aap receiver refused a message", "status", ref.status, "code", ref.code, "reason", ref.message,
			"webhook_id", truncate(req.Header.Get(webhook.HeaderID), 80), "remote", req.RemoteAddr)
		if ref.status == http.StatusMethodNotAllowed {
			w.Header().Set("Allow", http.MethodPost)
		}
		if ref.status == http.StatusServiceUnavailable {
			w.Header().Set("Retry-After", "5")
		}
		writeJSON(w, ref.status, map[string]any{"error": map[string]string{"code": ref.code, "message": ref.message}})
		return
	}
	if body == nil {
		w.WriteHeader(status)
		return
	}
	writeJSON(w, status, body)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// receive checks and handles one message; it returns the success status and
// body, or a refusal.
func (r *Receiver) receive(req *http.Request) (int, any, *refusal) {
	if req.Method != http.MethodPost {
		return 0, nil, refuse(http.StatusMethodNotAllowed, "method_not_allowed", "only POST is accepted")
	}
	if mt, _, err := mime.ParseMediaType(req.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		return 0, nil, refuse(http.StatusUnsupportedMediaType, "invalid_content_type", "Content-Type must be application/json")
	}
	body, err := io.ReadAll(io.LimitReader(req.Body, r.maxBody+1))
	if err != nil {
		return 0, nil, refuse(http.StatusBadRequest, "unreadable_body", "the body could not be read: %v", err)
	}
	if int64(len(body)) > r.maxBody {
		return 0, nil, refuse(http.StatusRequestEntityTooLarge, "body_too_large", "the body exceeds %d bytes", r.maxBody)
	}
	h := req.Header
	if h.Get(webhook.HeaderID) == "" || h.Get(webhook.HeaderTimestamp) == "" || h.Get(webhook.HeaderSignature) == "" {
		return 0, nil, refuse(http.StatusUnauthorized, "missing_signature_headers",
			"webhook-id, webhook-timestamp and webhook-signature are required")
	}
	var env envelope
	if err := json.Unmarshal(body, &env); err != nil {
		return 0, nil, refuse(http.StatusBadRequest, "invalid_json", "the body is not a JSON object: %v", err)
	}
	switch env.Type {
	case TypeVerification:
		return r.verification(req.Context(), h, body)
	case TypeRequestResolved:
		return r.notification(req.Context(), h, body)
	}
	return 0, nil, refuse(http.StatusBadRequest, "unknown_type", "type %q is not a message this receiver accepts", truncate(env.Type, 64))
}

// verify checks the signature, timestamp and body ID with one of regs'
// secrets and returns the registration whose secret verified.
func (r *Receiver) verify(h http.Header, body []byte, bodyID string, regs []*Registration) (*Registration, *refusal) {
	var last error
	for _, reg := range regs {
		key, err := webhook.ParseSecret(reg.Secret)
		if err != nil {
			last = err
			continue
		}
		if _, err = key.Verify(h, body, r.clock.Now(), webhook.DefaultTolerance); err == nil {
			if h.Get(webhook.HeaderID) != bodyID {
				return nil, refuse(http.StatusBadRequest, "id_mismatch", "the body id does not equal webhook-id")
			}
			return reg, nil
		}
		last = err
		if !errors.Is(err, webhook.ErrNoValidSignature) {
			break // missing headers, bad or skewed timestamp: the same for every secret
		}
	}
	switch {
	case errors.Is(last, webhook.ErrTimestampSkew):
		return nil, refuse(http.StatusUnauthorized, "timestamp_out_of_tolerance", "webhook-timestamp is more than 5 minutes from the receiver's clock")
	case errors.Is(last, webhook.ErrInvalidTimestamp):
		return nil, refuse(http.StatusUnauthorized, "invalid_timestamp", "webhook-timestamp is not a Unix time in seconds")
	}
	return nil, refuse(http.StatusUnauthorized, "invalid_signature", "no valid v1 signature for this registration's secret")
}

func (r *Receiver) verification(ctx context.Context, h http.Header, body []byte) (int, any, *refusal) {
	var m verificationMsg
	if err := strictDecode(body, &m); err != nil {
		return 0, nil, refuse(http.StatusBadRequest, "invalid_message", "malformed webhook.verification: %v", err)
	}
	if m.ID == nil || m.RegistrationID == nil || m.InstanceID == nil || m.CreatedAt == nil || m.Challenge == nil {
		return 0, nil, refuse(http.StatusBadRequest, "invalid_message", "webhook.verification lacks a required field")
	}
	if !validUUID(*m.RegistrationID) || !validUUID(*m.InstanceID) || *m.ID == "" || *m.Challenge == "" || len(*m.Challenge) > 256 {
		return 0, nil, refuse(http.StatusBadRequest, "invalid_message", "webhook.verification has an invalid id, registration_id, instance_id or challenge")
	}
	if _, err := parseTime(*m.CreatedAt); err != nil {
		return 0, nil, refuse(http.StatusBadRequest, "invalid_message", "created_at is not an RFC 3339 time")
	}
	reg, err := r.store.GetRegistration(ctx, *m.RegistrationID)
	if errors.Is(err, ErrNotFound) {
		return 0, nil, refuse(http.StatusForbidden, "unknown_registration", "registration %s is not expected here", *m.RegistrationID)
	}
	if err != nil {
		return 0, nil, r.storeFailure(err)
	}
	if _, ref := r.verify(h, body, *m.ID, []*Registration{reg}); ref != nil {
		return 0, nil, ref
	}
	err = r.store.BindRegistration(ctx, reg.ID, *m.InstanceID, false)
	if errors.Is(err, ErrConflict) {
		return 0, nil, refuse(http.StatusForbidden, "registration_bound",
			"registration %s is already bound to another instance", reg.ID)
	}
	if err != nil {
		return 0, nil, r.storeFailure(err)
	}
	r.log.Info("aap receiver verified a registration", "registration_id", reg.ID, "instance_id", *m.InstanceID)
	return http.StatusOK, map[string]string{"challenge": *m.Challenge}, nil
}

func (r *Receiver) notification(ctx context.Context, h http.Header, body []byte) (int, any, *refusal) {
	var m resolvedMsg
	if err := strictDecode(body, &m); err != nil {
		return 0, nil, refuse(http.StatusBadRequest, "invalid_message", "malformed request.resolved: %v", err)
	}
	if m.ID == nil || m.InstanceID == nil || m.RequestID == nil || m.CreatedAt == nil {
		return 0, nil, refuse(http.StatusBadRequest, "invalid_message", "request.resolved lacks a required field")
	}
	if !validUUID(*m.InstanceID) || !validUUID(*m.RequestID) || *m.ID == "" || len(*m.ID) > 256 {
		return 0, nil, refuse(http.StatusBadRequest, "invalid_message", "request.resolved has an invalid id, instance_id or request_id")
	}
	created, err := parseTime(*m.CreatedAt)
	if err != nil {
		return 0, nil, refuse(http.StatusBadRequest, "invalid_message", "created_at is not an RFC 3339 time")
	}
	regs, err := r.store.InstanceRegistrations(ctx, *m.InstanceID)
	if err != nil {
		return 0, nil, r.storeFailure(err)
	}
	if len(regs) == 0 {
		return 0, nil, refuse(http.StatusForbidden, "unknown_instance", "instance %s is not bound to a registration here", *m.InstanceID)
	}
	reg, ref := r.verify(h, body, *m.ID, regs)
	if ref != nil {
		return 0, nil, ref
	}
	now := r.clock.Now()
	keep := created
	if now.After(keep) {
		keep = now
	}
	isNew, err := r.store.RecordEvent(ctx, &Event{ID: *m.ID, InstanceID: *m.InstanceID, RequestID: *m.RequestID,
		RegistrationID: reg.ID, CreatedAt: created, ReceivedAt: now, KeepUntil: keep.Add(r.retention), Body: body})
	if err != nil {
		return 0, nil, r.storeFailure(err)
	}
	if isNew {
		r.signal()
	}
	return http.StatusNoContent, nil, nil
}

// storeFailure answers 503 so that the provider retries; nothing was
// acknowledged.
func (r *Receiver) storeFailure(err error) *refusal {
	r.log.Error("aap receiver store failed", "err", err)
	return refuse(http.StatusServiceUnavailable, "unavailable", "the receiver could not record the message; retry later")
}
