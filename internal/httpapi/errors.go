package httpapi

import (
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/agentowl/agentowl"
)

// statusOf is the single place where error codes become HTTP statuses. The
// contract's error type follows from the status.
var statusOf = map[string]int{
	agentowl.ECodeInvalidRequest:            http.StatusBadRequest,
	agentowl.ECodeInvalidJSON:               http.StatusBadRequest,
	agentowl.ECodeInvalidContentType:        http.StatusBadRequest,
	agentowl.ECodeInvalidField:              http.StatusBadRequest,
	agentowl.ECodeMissingField:              http.StatusBadRequest,
	agentowl.ECodeUnknownField:              http.StatusBadRequest,
	agentowl.ECodeMissingIdempotencyKey:     http.StatusBadRequest,
	agentowl.ECodeInvalidWebhookURL:         http.StatusBadRequest,
	agentowl.ECodeUnsupportedDelivery:       http.StatusBadRequest,
	agentowl.ECodeInvalidPolicy:             http.StatusBadRequest,
	agentowl.ECodeMalformedMessage:          http.StatusBadRequest,
	agentowl.ECodeUnauthenticated:           http.StatusUnauthorized,
	agentowl.ECodeForbidden:                 http.StatusForbidden,
	agentowl.ECodeNotFound:                  http.StatusNotFound,
	agentowl.ECodeMethod:                    http.StatusMethodNotAllowed,
	agentowl.ECodeIdempotencyConflict:       http.StatusConflict,
	agentowl.ECodeAlreadyTerminal:           http.StatusConflict,
	agentowl.ECodeInstanceDeleted:           http.StatusConflict,
	agentowl.ECodeAlreadyExists:             http.StatusConflict,
	agentowl.ECodeConflict:                  http.StatusConflict,
	agentowl.ECodeTooLarge:                  http.StatusRequestEntityTooLarge,
	agentowl.ECodeWebhookVerificationFailed: http.StatusUnprocessableEntity,
	agentowl.ECodeRateLimited:               http.StatusTooManyRequests,
	agentowl.ECodeUnavailable:               http.StatusServiceUnavailable,
	agentowl.ECodeOverloaded:                http.StatusServiceUnavailable,
	agentowl.ECodeInternal:                  http.StatusInternalServerError,
	agentowl.ECodeInvalidSignature:          http.StatusUnauthorized,
	agentowl.ECodeInsufficientScope:         http.StatusForbidden,
	agentowl.ECodeCallbackConflict:          http.StatusConflict,
	agentowl.ECodeSequenceConflict:          http.StatusConflict,
	agentowl.ECodeCallbackLimit:             http.StatusConflict,
	agentowl.ECodeEndpointInUse:             http.StatusConflict,
	agentowl.ECodeAgentWorkDisabled:         http.StatusConflict,
	agentowl.ECodeEditUnsupported:           http.StatusBadRequest,
	agentowl.ECodeDecisionNotAllowed:        http.StatusBadRequest,
	agentowl.ECodeRequestConflict:           http.StatusConflict,
	agentowl.ECodeStaleRevision:             http.StatusConflict,
	agentowl.ECodeDigestMismatch:            http.StatusConflict,
	agentowl.ECodeRequestExpired:            http.StatusConflict,
	agentowl.ECodeAlreadyDecided:            http.StatusConflict,
	agentowl.ECodeDecisionConflict:          http.StatusConflict,
	agentowl.ECodeNotARequest:               http.StatusConflict,
	agentowl.ECodeAttachmentBlocked:         http.StatusConflict,
	agentowl.ECodeAttachmentExpired:         http.StatusGone,
	agentowl.ECodeAttachmentMissing:         http.StatusGone,
	agentowl.ECodeRangeNotSatisfied:         http.StatusRequestedRangeNotSatisfiable,
	agentowl.ECodeAlreadyDelivered:          http.StatusConflict,
	agentowl.ECodeDeliveryPending:           http.StatusConflict,
	agentowl.ECodeInvalidProviderSignature:  http.StatusForbidden,
	agentowl.ECodeEventHandedOff:            http.StatusConflict,
	agentowl.ECodeConversationEnded:         http.StatusConflict,
	agentowl.ECodeBindingMismatch:           http.StatusConflict,
	agentowl.ECodeOpenWork:                  http.StatusConflict,
}

// StatusOf is the HTTP status of err, as the API answers it: its code's
// status, 503 when the database cannot answer now, else 500. The web
// console shows errors with the same statuses.
func StatusOf(err error) int {
	var ae *agentowl.Error
	if errors.As(err, &ae) && statusOf[ae.Code] != 0 {
		return statusOf[ae.Code]
	}
	if errors.Is(err, agentowl.ErrUnavailable) {
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}

// typeOf maps a status to the contract's ErrorType.
func typeOf(status int) string {
	switch status {
	case http.StatusUnauthorized:
		return "authentication"
	case http.StatusForbidden:
		return "authorization"
	case http.StatusNotFound, http.StatusGone:
		return "not_found"
	case http.StatusConflict:
		return "conflict"
	case http.StatusTooManyRequests:
		return "rate_limit"
	case http.StatusServiceUnavailable:
		return "dependency"
	case http.StatusInternalServerError:
		return "internal"
	}
	return "invalid_request"
}

type errorBody struct {
	Error errorObject `json:"error"`
}

type errorObject struct {
	Type      string `json:"type"`
	Code      string `json:"code"`
	Message   string `json:"message"`
	Param     string `json:"param,omitempty"`
	RequestID string `json:"request_id"`
}

// unavailableRetryAfter is the Retry-After of 503 unavailable when the
// database cannot answer: long enough for a lock to clear or a connection
// to be made again, short enough that clients do not wait in vain.
const unavailableRetryAfter = time.Second

// writeError writes err as the contract's ErrorResponse. A database that
// cannot answer now (agentowl.ErrUnavailable) is 503 unavailable with
// Retry-After. Other errors that are not an *agentowl.Error are internal:
// logged once with the request ID, answered with a generic message. So is
// an *agentowl.Error whose code has no status: a defect here, never a 400
// that would blame the caller.
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	var ae *agentowl.Error
	status := 0
	if errors.As(err, &ae) {
		status = statusOf[ae.Code] // 0 for a code without a status: a defect here, not the caller's mistake
	}
	if status == 0 {
		if errors.Is(err, r.Context().Err()) && r.Context().Err() != nil {
			return // the client went away; nobody reads this response
		}
		if errors.Is(err, agentowl.ErrUnavailable) {
			s.log.Warn("database unavailable", "request_id", requestID(r), "method", r.Method, "path", r.URL.Path, "err", err)
			ae = &agentowl.Error{Code: agentowl.ECodeUnavailable, Message: "The database is temporarily unavailable; retry shortly.",
				RetryAfter: unavailableRetryAfter}
		} else {
			s.log.Error("internal error", "request_id", requestID(r), "method", r.Method, "path", r.URL.Path, "err", err)
			// Details only in the log: the generic message of an error that is no *agentowl.Error.
			ae = &agentowl.Error{Code: agentowl.ECodeInternal, Message: agentowl.ErrorMessage(nil)}
		}
		status = statusOf[ae.Code]
	}
	if ae.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(int((ae.RetryAfter+time.Second-1)/time.Second)))
	}
	writeJSON(w, status, errorBody{Error: errorObject{
		Type: typeOf(status), Code: ae.Code, Message: ae.Message, Param: ae.Param, RequestID: requestID(r),
	}})
}
