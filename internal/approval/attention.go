package approval

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/agentowl/agentowl"
	"github.com/agentowl/agentowl/agentwork"
	"github.com/agentowl/agentowl/internal/access"
	"github.com/agentowl/agentowl/internal/attestation"
)

// AAP approval requests in the Needs-attention inbox (docs/attention.md,
// "AAP approval requests"): every pending request of a tenant is an
// approval item, derived at read time from the request itself. Deciding it
// there is approval.decide, exactly as `agentowl approvals decide`.

// AttentionPrefix starts the attention ID of an AAP request:
// "att_aap_<request UUID>".
const AttentionPrefix = "att_aap_"

// opAttentionDecide is the idempotency operation that remembers the
// decision_id of a decision made from the inbox (scope: the request ID).
const opAttentionDecide = "attention.decide"

// AttentionID is the stable attention ID of AAP request id.
func AttentionID(requestID string) string { return AttentionPrefix + requestID }

// AttentionRequestID returns the request ID of an AAP attention ID; ok is
// false for other IDs.
func AttentionRequestID(attentionID string) (id string, ok bool) {
	id, ok = strings.CutPrefix(attentionID, AttentionPrefix)
	return id, ok
}

func requestAction(r *agentowl.ApprovalRequest) map[string]any {
	args := r.Arguments
	if len(args) == 0 {
		args = json.RawMessage("null")
	}
	return map[string]any{"tool": r.Tool, "arguments": args}
}

// ActionDigest is the action digest of an AAP request
// (agentwork.ActionDigest of {"tool": …, "arguments": …}), the digest a
// runtime or operator computes with the same package.
func ActionDigest(r *agentowl.ApprovalRequest) string {
	d, err := agentwork.ActionDigest(requestAction(r))
	if err != nil { // arguments came from a JSON object; this cannot happen
		sum := sha256.Sum256([]byte(r.Tool))
		d = hex.EncodeToString(sum[:])
	}
	return d
}

// ActionDescription describes an AAP request's action: the tool and its
// arguments in compact canonical JSON, at most 4096 bytes.
func ActionDescription(r *agentowl.ApprovalRequest) string {
	args, err := agentwork.CanonicalJSON(json.RawMessage(r.Arguments))
	if err != nil || len(r.Arguments) == 0 {
		args = []byte("{}")
	}
	return agentowl.Clip(r.Tool+" "+string(args), 4096)
}

// AttentionPrompt is the prompt of an AAP request's item: the tool, and
// the agent's reasoning shown as the agent's claim, at most 4096 bytes.
func AttentionPrompt(r *agentowl.ApprovalRequest) string {
	p := fmt.Sprintf("Allow the agent to call the tool %q?", r.Tool)
	if r.AgentReasoning != nil && *r.AgentReasoning != "" {
		p += fmt.Sprintf(" The agent claims (unverified): %q", *r.AgentReasoning)
	}
	return agentowl.Clip(p, 4096)
}

// decisionHash is a decision file's content identity on request
// requestID: a resubmission with the same decision ID must match it.
func decisionHash(in *agentowl.DecisionFile, requestID string) []byte {
	b, _ := json.Marshal([]any{AttentionID(requestID), in.RequestRevision, in.Decision, in.ExpectedActionDigest})
	sum := sha256.Sum256(b)
	return sum[:]
}

// AttentionDecideResult is the outcome of DecideAttention.
type AttentionDecideResult struct {
	Request *agentowl.ApprovalRequest
	// Replay is true when this decision_id already won with this content.
	Replay bool
	// Preview is true when nothing was submitted.
	Preview bool
	// DecisionID is the decision_id that won, when it was decided from the
	// inbox.
	DecisionID string
}

// DecideAttention decides (or, with submit false, previews) AAP request id
// of the tenant named tenant from the inbox, for its members. The refusals, in order, are those of agent
// work items: decision_conflict, already_decided, stale_revision (the
// revision is always 1), request_expired, decision_not_allowed,
// digest_mismatch. The same decision_id with the same content after it won
// is a replay. approve records approved and reject denied, with the
// notification of the instance's receiver, as Decide does.
func (s *Service) DecideAttention(ctx context.Context, p *access.Principal, tenant, id string, in *agentowl.DecisionFile, submit bool) (*AttentionDecideResult, error) {
	m, err := p.Tenant(tenant, agentowl.RoleMember)
	if err != nil {
		return nil, err
	}
	tenantID := m.TenantID
	attID := AttentionID(id)
	if !agentowl.ValidUUID(id) {
		return nil, notFoundIn(m, "attention item", attID)
	}
	sum := decisionHash(in, id)
	dp := DecideParams{Approve: in.Decision == "approve"}
	at := s.now()
	var pre *attestation.Prepared
	if submit && (in.Decision == "approve" || in.Decision == "reject") {
		pre = s.prepareDecision(ctx, tenantID, id, p, dp, at)
	}
	var out AttentionDecideResult
	err = s.writeRequest(ctx, func(tx agentowl.Tx) error {
		out = AttentionDecideResult{}
		// The request, its instance and the decision_id's record in one
		// read (one round trip on PostgreSQL).
		r, inst, rec, err := tx.RequestGetSharedRecord(ctx, id, opAttentionDecide, in.DecisionID)
		if errors.Is(err, agentowl.ErrNotFound) || (err == nil && r.TenantID != tenantID) {
			return notFoundIn(m, "attention item", attID)
		}
		if err != nil {
			return err
		}
		out.Request = r
		if rec != nil {
			if !bytes.Equal(rec.InputHash, sum) {
				return agentowl.FieldError(agentowl.ECodeDecisionConflict, "decision_id",
					"Decision %q was already recorded with other content; a new decision needs a new decision_id.", in.DecisionID)
			}
			out.Replay, out.DecisionID = true, in.DecisionID
			return nil
		}
		if err := s.expireIfDue(ctx, tx, r, s.clock.Now()); err != nil {
			return err
		}
		switch r.Status {
		case agentowl.StatusPending:
		case agentowl.StatusExpired:
			return agentowl.Errorf(agentowl.ECodeRequestExpired, "Approval request %q expired at %s.", id,
				r.DeadlineAt.UTC().Format(time.RFC3339))
		default:
			return agentowl.Errorf(agentowl.ECodeAlreadyDecided, "Approval request %q was already decided (%s).", id, r.Status)
		}
		if in.RequestRevision != 1 {
			return agentowl.FieldError(agentowl.ECodeStaleRevision, "request_revision",
				"Approval request %q is at revision 1; a decision on revision %d cannot authorize it.", id, in.RequestRevision)
		}
		if in.Decision != "approve" && in.Decision != "reject" {
			return agentowl.FieldError(agentowl.ECodeDecisionNotAllowed, "decision",
				"Decision %q is not allowed; this request allows approve, reject.", in.Decision)
		}
		if in.HasAnswer {
			return agentowl.FieldError(agentowl.ECodeInvalidField, "answer", "An approval decision carries expected_action_digest, not answer.")
		}
		if in.ExpectedActionDigest == "" {
			return agentowl.FieldError(agentowl.ECodeMissingField, "expected_action_digest",
				"An approval decision must carry expected_action_digest, the digest of the action you reviewed.")
		}
		if digest := ActionDigest(r); in.ExpectedActionDigest != digest {
			return agentowl.FieldError(agentowl.ECodeDigestMismatch, "expected_action_digest",
				"The expected action digest does not match the current action's digest %s; review the action again.", digest)
		}
		if !submit {
			out.Preview = true
			return nil
		}
		now, err := s.decideTx(ctx, tx, p, tenantID, r, inst, dp,
			map[string]any{"via": "attention", "attention": attID, "decision_id": in.DecisionID}, at, pre)
		if err != nil {
			return err
		}
		out.DecisionID = in.DecisionID
		keep := now.Add(agentowl.RetentionAfterDecision)
		// The decision_id is remembered with the request, for replays.
		return tx.IdempotencyCreate(ctx, &agentowl.Idempotency{Owner: id, Operation: opAttentionDecide, Key: in.DecisionID,
			InputHash: sum, ResourceID: in.DecisionID, Response: []byte("{}"), CreatedAt: now, RetainUntil: keep})
	})
	if errors.Is(err, agentowl.ErrConflict) {
		return nil, agentowl.Errorf(agentowl.ECodeAlreadyDecided, "The request was decided concurrently.")
	}
	if err != nil {
		return nil, err
	}
	if !out.Replay && !out.Preview {
		s.hub.notify(id)
		s.wakeDelivery()
		s.attest.After(id)
	}
	return &out, nil
}

// AckAttention acknowledges (assigns) the pending AAP request id of the
// tenant named tenant in the inbox, for its members: it never decides it. assignee defaults to the
// caller. A request that is no longer pending is a conflict.
func (s *Service) AckAttention(ctx context.Context, p *access.Principal, tenant, id, assignee string) (*agentowl.ApprovalRequest, *agentowl.AAPAck, error) {
	m, err := p.Tenant(tenant, agentowl.RoleMember)
	if err != nil {
		return nil, nil, err
	}
	tenantID := m.TenantID
	if assignee == "" {
		assignee = p.Actor()
	}
	if len(assignee) > 256 || !utf8.ValidString(assignee) || strings.ContainsFunc(assignee, func(r rune) bool { return r < ' ' }) {
		return nil, nil, agentowl.FieldError(agentowl.ECodeInvalidField, "assignee", "assignee must be 1-256 bytes of text.")
	}
	if !agentowl.ValidUUID(id) {
		return nil, nil, notFoundIn(m, "attention item", AttentionID(id))
	}
	var r *agentowl.ApprovalRequest
	var ack *agentowl.AAPAck
	err = s.writeRequest(ctx, func(tx agentowl.Tx) (err error) {
		r, err = tx.RequestGet(ctx, id)
		if errors.Is(err, agentowl.ErrNotFound) || (err == nil && r.TenantID != tenantID) {
			return notFoundIn(m, "attention item", AttentionID(id))
		}
		if err != nil {
			return err
		}
		if err := s.expireIfDue(ctx, tx, r, s.clock.Now()); err != nil {
			return err
		}
		if r.Status != agentowl.StatusPending {
			return agentowl.Errorf(agentowl.ECodeConflict, "The AAP request is already %s; its item is resolved.", r.Status)
		}
		ack = &agentowl.AAPAck{RequestID: id, TenantID: tenantID, Assignee: assignee, At: s.now()}
		if err := tx.AAPAckSet(ctx, ack); err != nil {
			return err
		}
		return access.Audit(ctx, tx, ack.At, tenantID, p, "attention.ack", AttentionID(id), map[string]any{"assignee": assignee})
	})
	if err != nil {
		return nil, nil, err
	}
	return r, ack, nil
}

// Acks returns the acknowledgements of the given requests that have one.
func (s *Service) Acks(ctx context.Context, ids []string) (map[string]*agentowl.AAPAck, error) {
	out := map[string]*agentowl.AAPAck{}
	err := s.store.Read(ctx, func(tx agentowl.Tx) error {
		for _, id := range ids {
			a, err := tx.AAPAckGet(ctx, id)
			if errors.Is(err, agentowl.ErrNotFound) {
				continue
			}
			if err != nil {
				return err
			}
			out[id] = a
		}
		return nil
	})
	return out, err
}
