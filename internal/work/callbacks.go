package work

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"math"
	"net/url"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/agentowl/agentowl"
	"github.com/agentowl/agentowl/agentwork"
	"github.com/agentowl/agentowl/internal/notify"
	"github.com/agentowl/agentowl/internal/ratelimit"
)

// Callback field limits (docs/limits.md).
const (
	maxCallbackIDBytes = 256
	maxSessionIDBytes  = 256
	maxSummaryBytes    = 4096
)

func unauthenticated() error {
	return agentowl.Errorf(agentowl.ECodeUnauthenticated, "The runtime credential is missing, expired, revoked or otherwise invalid.")
}

// AuthenticateRuntime resolves a runtime token to its credential. Anything
// but a live runtime credential of a live endpoint is unauthenticated: an
// expired or revoked token is refused at once, and tokens of other kinds
// never work here (nor do runtime tokens anywhere else).
func (s *Service) AuthenticateRuntime(ctx context.Context, secret string) (*agentowl.RuntimeCredential, error) {
	if secret == "" || len(secret) > 256 {
		return nil, unauthenticated()
	}
	if k, ok := agentowl.TokenKindOf(secret); !ok || k != agentowl.TokenRuntime {
		return nil, unauthenticated()
	}
	var c *agentowl.RuntimeCredential
	err := s.store.Read(ctx, func(tx agentowl.Tx) error {
		var err error
		if c, err = tx.RuntimeCredentialGetByHash(ctx, agentowl.HashToken(secret)); err != nil {
			return err
		}
		if !agentowl.TokenMatches(secret, c.Hash) || !c.Active(s.clock.Now()) {
			return agentowl.ErrNotFound
		}
		ep, err := tx.EndpointGet(ctx, c.EndpointID)
		if err == nil && ep.DeletedAt != nil {
			return agentowl.ErrNotFound
		}
		return err
	})
	if errors.Is(err, agentowl.ErrNotFound) {
		return nil, unauthenticated()
	}
	return c, err
}

// AllowCallback checks that c may post callbacks now: it needs the
// callbacks:write scope, and its endpoint must be under the callback rate
// limit, which counts requests across all the endpoint's credentials.
func (s *Service) AllowCallback(ctx context.Context, c *agentowl.RuntimeCredential) error {
	if !slices.Contains(c.Scopes, ScopeCallbacks) {
		return agentowl.Errorf(agentowl.ECodeInsufficientScope, "This runtime credential lacks the %s scope.", ScopeCallbacks)
	}
	if ok, wait := s.callbackLimit.Allow(ctx, c.EndpointID); !ok {
		return ratelimit.Error("callbacks for this endpoint", wait)
	}
	return nil
}

// MaxCallbackBytes is the largest callback body accepted.
func (s *Service) MaxCallbackBytes() int64 { return s.cfg.MaxCallbackBytes }

// CallbackInput is a parsed, valid callback.
type CallbackInput struct {
	CallbackID       string
	WorkID           string
	Sequence         int64
	Status           agentowl.WorkStatus
	OccurredAt       string
	RuntimeSessionID string
	ResultSummary    string
	ResultURL        string
	Requests         json.RawMessage
	// ParsedRequests are the validated requests of a needs_input callback.
	ParsedRequests []Request
	Error          json.RawMessage
}

var callbackFields = []string{"version", "callback_id", "work_id", "sequence", "status", "occurred_at",
	"runtime_session_id", "result", "requests", "error"}

var reportable = []agentowl.WorkStatus{agentowl.WorkAccepted, agentowl.WorkRunning, agentowl.WorkNeedsInput, agentowl.WorkCompleted,
	agentowl.WorkFailed, agentowl.WorkCancelled}

func invalid(param, format string, args ...any) error {
	return agentowl.FieldError(agentowl.ECodeInvalidField, param, format, args...)
}

// StringField reads the string field name of a JSON object's fields:
// missing_field when required and absent, invalid_field unless it is 1 to
// maxBytes bytes of UTF-8 text without control characters. The runtime's
// documents and the inbox's decision file read their text fields with it.
func StringField(fields map[string]json.RawMessage, name string, required bool, maxBytes int) (string, error) {
	raw, ok := fields[name]
	if !ok {
		if required {
			return "", agentowl.FieldError(agentowl.ECodeMissingField, name, "%s is required.", name)
		}
		return "", nil
	}
	var v string
	if err := json.Unmarshal(raw, &v); err != nil {
		return "", invalid(name, "%s must be a string.", name)
	}
	if v == "" || len(v) > maxBytes || !utf8.ValidString(v) || strings.ContainsFunc(v, func(r rune) bool { return r < ' ' || r == 0x7f }) {
		return "", invalid(name, "%s must be 1-%d bytes of text without control characters.", name, maxBytes)
	}
	return v, nil
}

// ParseCallback checks a callback body against the agent-work.v1 format
// for work workID. Unknown fields, wrong types and fields that do not fit
// the status are invalid.
func ParseCallback(body []byte, workID string) (*CallbackInput, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var fields map[string]json.RawMessage
	if err := dec.Decode(&fields); err != nil || fields == nil {
		return nil, agentowl.Errorf(agentowl.ECodeInvalidJSON, "The callback must be one JSON object.")
	}
	if len(bytes.TrimSpace(body[dec.InputOffset():])) != 0 {
		return nil, agentowl.Errorf(agentowl.ECodeInvalidJSON, "The callback must contain one JSON object and nothing after it.")
	}
	for k := range fields {
		if !slices.Contains(callbackFields, k) {
			return nil, agentowl.FieldError(agentowl.ECodeUnknownField, k, "Unknown field %q.", k)
		}
	}
	var in CallbackInput
	version, err := StringField(fields, "version", true, 64)
	if err != nil {
		return nil, err
	}
	if version != agentwork.Version {
		return nil, invalid("version", "version must be %q.", agentwork.Version)
	}
	if in.CallbackID, err = StringField(fields, "callback_id", true, maxCallbackIDBytes); err != nil {
		return nil, err
	}
	if in.WorkID, err = StringField(fields, "work_id", true, 256); err != nil {
		return nil, err
	}
	if in.WorkID != workID {
		return nil, invalid("work_id", "work_id %q does not match the work in the URL.", in.WorkID)
	}
	rawSeq, ok := fields["sequence"]
	if !ok {
		return nil, agentowl.FieldError(agentowl.ECodeMissingField, "sequence", "sequence is required.")
	}
	var seq json.Number
	// json.Number also accepts a quoted number; the protocol wants a number.
	if err := json.Unmarshal(rawSeq, &seq); err != nil || bytes.HasPrefix(bytes.TrimSpace(rawSeq), []byte(`"`)) {
		return nil, invalid("sequence", "sequence must be a positive integer.")
	}
	if in.Sequence, err = seq.Int64(); err != nil || in.Sequence < 1 || in.Sequence > math.MaxInt64/2 {
		return nil, invalid("sequence", "sequence must be a positive integer.")
	}
	status, err := StringField(fields, "status", true, 64)
	if err != nil {
		return nil, err
	}
	in.Status = agentowl.WorkStatus(status)
	if !slices.Contains(reportable, in.Status) {
		return nil, invalid("status", "status must be accepted, running, needs_input, completed, failed or cancelled.")
	}
	if in.OccurredAt, err = StringField(fields, "occurred_at", true, 64); err != nil {
		return nil, err
	}
	if _, err := time.Parse(time.RFC3339Nano, in.OccurredAt); err != nil {
		return nil, invalid("occurred_at", "occurred_at must be an RFC 3339 timestamp such as 2026-10-06T12:00:00.000Z.")
	}
	if in.RuntimeSessionID, err = StringField(fields, "runtime_session_id", false, maxSessionIDBytes); err != nil {
		return nil, err
	}
	if raw, ok := fields["result"]; ok {
		if in.Status != agentowl.WorkCompleted {
			return nil, invalid("result", "result is allowed with status completed only.")
		}
		if err := parseResult(raw, &in); err != nil {
			return nil, err
		}
	}
	raw, ok := fields["requests"]
	switch {
	case in.Status == agentowl.WorkNeedsInput && !ok:
		return nil, agentowl.FieldError(agentowl.ECodeMissingField, "requests", "A needs_input callback must carry requests.")
	case in.Status != agentowl.WorkNeedsInput && ok:
		return nil, invalid("requests", "requests are allowed with status needs_input only.")
	case ok:
		if in.ParsedRequests, err = parseRequests(raw); err != nil {
			return nil, err
		}
		if in.Requests, err = compact(raw); err != nil {
			return nil, err
		}
	}
	if raw, ok := fields["error"]; ok {
		if in.Status != agentowl.WorkFailed && in.Status != agentowl.WorkCancelled {
			return nil, invalid("error", "error is allowed with status failed or cancelled only.")
		}
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(raw, &obj); err != nil || obj == nil {
			return nil, invalid("error", "error must be an object.")
		}
		if in.Error, err = compact(raw); err != nil {
			return nil, err
		}
	}
	return &in, nil
}

func compact(raw []byte) ([]byte, error) {
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return nil, agentowl.Errorf(agentowl.ECodeInvalidJSON, "The callback is not valid JSON.")
	}
	return buf.Bytes(), nil
}

// canonicalJSON is body in the protocol's canonical JSON
// (agentwork.Canonicalize): two bodies that mean the same JSON compare
// equal, so a retry that re-serializes is still a duplicate.
func canonicalJSON(body []byte) ([]byte, error) {
	c, err := agentwork.Canonicalize(body)
	if err != nil {
		return nil, agentowl.Errorf(agentowl.ECodeInvalidJSON, "The callback is not valid JSON.")
	}
	return c, nil
}

func parseResult(raw json.RawMessage, in *CallbackInput) error {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil || fields == nil {
		return invalid("result", "result must be an object with summary and/or url.")
	}
	for k := range fields {
		if k != "summary" && k != "url" {
			return agentowl.FieldError(agentowl.ECodeUnknownField, "result."+k, "Unknown field %q in result.", k)
		}
	}
	if _, ok := fields["summary"]; ok {
		var v string
		if err := json.Unmarshal(fields["summary"], &v); err != nil || len(v) > maxSummaryBytes || !utf8.ValidString(v) {
			return invalid("result.summary", "result.summary must be text of at most %d bytes.", maxSummaryBytes)
		}
		in.ResultSummary = v
	}
	if _, ok := fields["url"]; ok {
		var v string
		if err := json.Unmarshal(fields["url"], &v); err != nil {
			return invalid("result.url", "result.url must be a string.")
		}
		if err := CheckResultURL(v); err != nil {
			return err
		}
		in.ResultURL = v
	}
	if in.ResultSummary == "" && in.ResultURL == "" {
		return invalid("result", "result needs a summary or a url.")
	}
	return nil
}

// CheckResultURL applies the result link rules: an absolute HTTPS URL with
// a host, without userinfo, at most 2048 bytes. AgentOwl never fetches it.
func CheckResultURL(raw string) error {
	bad := func(why string) error { return invalid("result.url", "result.url %s.", why) }
	if len(raw) > maxURLBytes {
		return bad("is longer than 2048 bytes")
	}
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return bad("is not a valid URL")
	case u.Scheme != "https":
		return bad("must use https")
	case u.User != nil || strings.Contains(u.Host, "@"):
		return bad("must not contain userinfo")
	case u.Hostname() == "" || u.Opaque != "":
		return bad("must name a host")
	case strings.ContainsAny(raw, " \t\r\n"):
		return bad("must not contain whitespace")
	}
	return nil
}

// Receipt is the answer to a callback: what was recorded.
type Receipt struct {
	CallbackID string
	WorkID     string
	Sequence   int64
	// Status is the status the callback reported.
	Status agentowl.WorkStatus
	// WorkStatus is the work's recorded state after the callback.
	WorkStatus agentowl.WorkStatus
	Stale      bool
	Duplicate  bool
	RecordedAt time.Time
}

func receiptOf(c *agentowl.Callback, duplicate bool) *Receipt {
	return &Receipt{CallbackID: c.CallbackID, WorkID: c.WorkID, Sequence: c.Sequence, Status: c.Status,
		WorkStatus: c.WorkStatus, Stale: c.Stale, Duplicate: duplicate, RecordedAt: c.RecordedAt}
}

// RecordCallback applies one callback from credential c to work workID.
// body is the raw request body. The rules (docs/agent-work.md):
//   - work of another endpoint (or tenant) is not_found, as is unknown work;
//   - an exact duplicate (callback ID, sequence, timestamp and body) returns
//     the original receipt, marked duplicate, and changes nothing;
//   - a known callback ID with other content is callback_conflict, and a
//     sequence already recorded under another ID is sequence_conflict;
//   - a sequence below the highest applied one is recorded as stale and
//     changes nothing; gaps are allowed;
//   - a newer callback on terminal work is already_terminal (never reopens);
//   - the work's callback cap is callback_limit_reached.
func (s *Service) RecordCallback(ctx context.Context, c *agentowl.RuntimeCredential, workID string, body []byte) (*Receipt, error) {
	in, err := ParseCallback(body, workID)
	if err != nil {
		return nil, err
	}
	canonical, err := canonicalJSON(body)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(canonical)
	var out *Receipt
	err = s.store.Write(ctx, func(tx agentowl.Tx) error {
		// The callbacks and items come with the work (one round trip);
		// those of another endpoint's work are never answered with.
		chk, err := tx.WorkForCallback(ctx, workID, in.CallbackID, in.Sequence, requestIDs(in.ParsedRequests))
		if errors.Is(err, agentowl.ErrNotFound) || (err == nil && (chk.Work.EndpointID != c.EndpointID || chk.Work.TenantID != c.TenantID)) {
			return agentowl.Errorf(agentowl.ECodeNotFound, "No work %q for this runtime credential's endpoint.", workID)
		}
		if err != nil {
			return err
		}
		w, prev, other := chk.Work, chk.ByID, chk.BySequence
		if prev != nil {
			if prev.Sequence == in.Sequence && prev.OccurredAt == in.OccurredAt && bytes.Equal(prev.BodyHash, sum[:]) {
				out = receiptOf(prev, true)
				return nil
			}
			return agentowl.FieldError(agentowl.ECodeCallbackConflict, "callback_id",
				"Callback %q was already recorded with other content; a retry must resend the same sequence, timestamp and body.",
				in.CallbackID)
		}
		if other != nil {
			return agentowl.FieldError(agentowl.ECodeSequenceConflict, "sequence",
				"Sequence %d was already recorded for callback %q.", in.Sequence, other.CallbackID)
		}
		if w.Callbacks >= s.cfg.MaxCallbacksPerWork {
			return agentowl.Errorf(agentowl.ECodeCallbackLimit,
				"Work %q already has %d recorded callbacks, the most allowed; report only its outcome once, or start new work.",
				w.ID, s.cfg.MaxCallbacksPerWork)
		}
		now := s.clock.Now()
		cb := &agentowl.Callback{WorkID: w.ID, CallbackID: in.CallbackID, Sequence: in.Sequence, Status: in.Status,
			OccurredAt: in.OccurredAt, RuntimeSessionID: in.RuntimeSessionID, Body: canonical, BodyHash: sum[:],
			CredentialID: c.ID, RecordedAt: now}
		sessionChanged := false
		if in.Sequence < w.Sequence {
			cb.Stale = true
		} else {
			if !w.Status.CanBecome(in.Status) { // in.Status is reportable: only terminal work refuses it
				return agentowl.Errorf(agentowl.ECodeAlreadyTerminal,
					"Work %q is already %s; a later callback cannot reopen it.", w.ID, w.Status)
			}
			applyCallback(w, in, now)
			if err := s.applyAttentionTx(ctx, tx, chk, in, now); err != nil {
				return err
			}
			// The runtime reported: the work is not overdue any more.
			if err := tx.AttentionResolveOverdue(ctx, w.ID, ResolvedCallback, now); err != nil {
				return err
			}
			if err := notifyCompletedTx(ctx, tx, w, now); err != nil {
				return err
			}
			if in.RuntimeSessionID != "" && in.RuntimeSessionID != w.RuntimeSessionID {
				w.RuntimeSessionID, sessionChanged = in.RuntimeSessionID, true
			}
		}
		cb.WorkStatus = w.Status
		w.Callbacks++
		w.UpdatedAt = now
		if err := tx.CallbackCreate(ctx, cb); err != nil {
			return err
		}
		if err := tx.WorkUpdate(ctx, w); err != nil {
			return err
		}
		if sessionChanged {
			// Follow-ups in this conversation carry the newest session.
			if err := tx.ConversationSetSession(ctx, w.ConversationID, w.RuntimeSessionID); err != nil {
				return err
			}
		}
		out = receiptOf(cb, false)
		return nil
	})
	return out, err
}

// requestIDs are the IDs of a callback's requests.
func requestIDs(rs []Request) []string {
	ids := make([]string, len(rs))
	for i, r := range rs {
		ids[i] = r.ID
	}
	return ids
}

// applyCallback moves work to the reported state.
func applyCallback(w *agentowl.Work, in *CallbackInput, now time.Time) {
	w.Status, w.Sequence = in.Status, in.Sequence
	if in.Status == agentowl.WorkNeedsInput {
		w.Requests = in.Requests
	} else {
		w.Requests = nil
	}
	if in.Status == agentowl.WorkCompleted {
		w.ResultSummary, w.ResultURL = in.ResultSummary, in.ResultURL
	}
	if in.Error != nil {
		w.Error = in.Error
	}
	if in.Status.Terminal() {
		w.EndedAt = &now
	}
}

// notifyCompletedTx records the result notice of work that just completed
// (routine progress, running included, notifies nobody).
func notifyCompletedTx(ctx context.Context, tx agentowl.Tx, w *agentowl.Work, now time.Time) error {
	if w.Status != agentowl.WorkCompleted {
		return nil
	}
	title := "Work " + w.ID + " completed"
	if w.ResultSummary != "" {
		title += ": " + w.ResultSummary
	}
	return notify.RecordTx(ctx, tx, notify.Cause{TenantID: w.TenantID, Cause: notify.CauseWorkCompleted,
		SubjectKind: notify.SubjectWork, SubjectID: w.ID, EndpointID: w.EndpointID, Title: title, At: now})
}
