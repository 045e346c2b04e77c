// Package agentowl holds the domain of the AgentOwl control plane: its
// objects, their states and transitions, and the one error type that every
// layer returns. It depends on the standard library only.
package agentowl

import (
	"errors"
	"fmt"
	"time"
)

// Error codes. Each is a stable snake_case machine reason; httpapi alone maps
// them to HTTP statuses and the contract's error types.
const (
	// 400: malformed or invalid input.
	ECodeInvalidRequest        = "invalid_request"
	ECodeInvalidJSON           = "invalid_json"
	ECodeInvalidContentType    = "invalid_content_type"
	ECodeInvalidField          = "invalid_field"
	ECodeMissingField          = "missing_field"
	ECodeUnknownField          = "unknown_field"
	ECodeMissingIdempotencyKey = "missing_idempotency_key"
	ECodeInvalidWebhookURL     = "invalid_webhook_url"
	ECodeUnsupportedDelivery   = "unsupported_delivery_type"
	ECodeInvalidPolicy         = "invalid_policy"
	// ECodeMalformedMessage (400): an email that is not a MIME message
	// (SMTP 554 5.6.0).
	ECodeMalformedMessage = "malformed_message"
	// 401 / 403 / 404.
	ECodeUnauthenticated = "unauthenticated"
	ECodeForbidden       = "forbidden"
	ECodeNotFound        = "not_found"
	ECodeMethod          = "method_not_allowed"
	// ECodeInvalidSignature (401): an inbound event whose binding has a
	// signing secret lacks a valid Standard Webhooks signature.
	ECodeInvalidSignature = "invalid_signature"
	// ECodeInsufficientScope (403): a runtime credential without the scope
	// the operation needs.
	ECodeInsufficientScope = "insufficient_scope"
	// ECodeInvalidProviderSignature (403): an SMS or voice webhook without
	// a valid X-Twilio-Signature for its binding's auth token.
	ECodeInvalidProviderSignature = "invalid_provider_signature"
	// 409: conflicts with existing state.
	ECodeIdempotencyConflict = "idempotency_conflict"
	ECodeAlreadyTerminal     = "already_terminal"
	ECodeInstanceDeleted     = "instance_deleted"
	ECodeAlreadyExists       = "already_exists"
	ECodeConflict            = "conflict"
	// Agent work (409): a callback ID reused with other content, a sequence
	// number already taken by another callback, the per-work callback cap,
	// an endpoint that bindings still route to, and replay of work whose
	// endpoint no longer takes agent work.
	ECodeCallbackConflict  = "callback_conflict"
	ECodeSequenceConflict  = "sequence_conflict"
	ECodeCallbackLimit     = "callback_limit_reached"
	ECodeEndpointInUse     = "endpoint_in_use"
	ECodeAgentWorkDisabled = "agent_work_disabled"
	// Questions and approvals (docs/attention.md). 400: edit_unsupported
	// (edit is not a v1 decision), decision_not_allowed (not in the
	// request's allowed_decisions). 409: request_conflict (a request ID and
	// revision reused with other content), stale_revision (the decision
	// names a revision that is not the current one), digest_mismatch (the
	// expected action digest is not the current action's), request_expired,
	// already_decided (another decision already won), decision_conflict (a
	// decision ID reused with other content), not_a_request (deciding an
	// incident, or resolving a request item by hand).
	ECodeEditUnsupported    = "edit_unsupported"
	ECodeDecisionNotAllowed = "decision_not_allowed"
	ECodeRequestConflict    = "request_conflict"
	ECodeStaleRevision      = "stale_revision"
	ECodeDigestMismatch     = "digest_mismatch"
	ECodeRequestExpired     = "request_expired"
	ECodeAlreadyDecided     = "already_decided"
	ECodeDecisionConflict   = "decision_conflict"
	ECodeNotARequest        = "not_a_request"
	// Retained attachments (docs/attachments.md). A download of an
	// attachment that was blocked at ingest is 409 attachment_blocked; of
	// one past its expiry (even while its bytes await deletion) 410
	// attachment_expired; of one whose bytes were lost 410
	// attachment_missing. A Range outside the file is 416
	// range_not_satisfiable.
	ECodeAttachmentBlocked = "attachment_blocked"
	ECodeAttachmentExpired = "attachment_expired"
	ECodeAttachmentMissing = "attachment_missing"
	ECodeRangeNotSatisfied = "range_not_satisfiable"
	// Redrive (docs/operating.md, 409): the message was delivered (or its
	// decision's receipt is in), or it is still being delivered.
	ECodeAlreadyDelivered = "already_delivered"
	ECodeDeliveryPending  = "delivery_pending"
	// Conversations (docs/channels.md, 409): event_handed_off (linking an
	// event whose handoff may have reached the runtime), conversation_ended
	// (linking into or resetting an ended conversation), binding_mismatch
	// (linking an event into a conversation of another binding), open_work
	// (resetting a conversation with work not ended, without force).
	ECodeEventHandedOff    = "event_handed_off"
	ECodeConversationEnded = "conversation_ended"
	ECodeBindingMismatch   = "binding_mismatch"
	ECodeOpenWork          = "open_work"
	// 413 / 422 / 429 / 500 / 503.
	ECodeTooLarge                  = "request_too_large"
	ECodeWebhookVerificationFailed = "webhook_verification_failed"
	ECodeRateLimited               = "rate_limited"
	ECodeInternal                  = "internal"
	ECodeUnavailable               = "unavailable"
	// ECodeOverloaded is 503: the write would have waited longer than the
	// admission queue allows (internal/admission); nothing of it was
	// stored, and a retry after Retry-After is safe.
	ECodeOverloaded = "overloaded"
)

// Error is the one error type the domain and use-case layers return for
// anything a caller can act on. Message is safe to show to the caller; Param
// names the offending input field when there is one.
type Error struct {
	Code    string
	Message string
	Param   string
	// RetryAfter, when set on rate_limited or unavailable, becomes the
	// Retry-After header.
	RetryAfter time.Duration
}

func (e *Error) Error() string {
	if e.Param != "" {
		return fmt.Sprintf("agentowl: %s (%s): %s", e.Code, e.Param, e.Message)
	}
	return fmt.Sprintf("agentowl: %s: %s", e.Code, e.Message)
}

// Errorf returns an *Error with a formatted message.
func Errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// FieldError returns an *Error about one input field.
func FieldError(code, param, format string, args ...any) *Error {
	return &Error{Code: code, Param: param, Message: fmt.Sprintf(format, args...)}
}

// ErrorCode returns the code of err if it is (or wraps) an *Error, and
// ECodeInternal otherwise.
func ErrorCode(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ECodeInternal
}

// ErrorMessage returns the caller-safe message of err, or a generic one for
// errors that are not an *Error.
func ErrorMessage(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Message
	}
	return "The server could not complete the operation."
}

// ErrUnavailable reports that the database cannot answer now (SQLite busy or
// locked past the busy timeout, a PostgreSQL connection lost, refused
// or terminated, or contention that outlasted the retries). Nothing of
// the failed transaction was committed, except that a lost connection
// during COMMIT leaves the outcome unknown; callers answer
// 503 unavailable and clients retry.
var ErrUnavailable = errors.New("store: database unavailable")
