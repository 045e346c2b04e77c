package work

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/agentowl/agentowl"
	"github.com/agentowl/agentowl/agentwork"
	"github.com/agentowl/agentowl/internal/access"
	"github.com/agentowl/agentowl/internal/attestation"
	"github.com/agentowl/agentowl/internal/notify"
	"github.com/agentowl/agentowl/internal/outbox"
)

// Questions and approvals (docs/attention.md): the attention items of
// runtime requests and incidents, the decisions on them, their push to the
// runtime and the receipts that confirm acceptance.

// MessageKindDecision pushes a decision to an endpoint's decision URL.
const MessageKindDecision = "work.decision"

// Receipt sources.
const (
	ReceiptViaPush     = "push"
	ReceiptViaRecovery = "recovery"
)

// Resolutions of attention items.
const (
	ResolvedReceipt    = "receipt"
	ResolvedOutcome    = "outcome"
	ResolvedSuperseded = "superseded"
	ResolvedExpired    = "expired"
	ResolvedWorkEnded  = "work_ended"
	ResolvedReviewed   = "reviewed"
	// ResolvedCallback: an overdue incident (internal/maintenance) that a
	// later applied callback answered.
	ResolvedCallback = "callback"
	// ResolvedRedriven: an operator redrove the failed delivery the
	// incident reported (work-outbox redrive).
	ResolvedRedriven = "redriven"
)

// applyAttentionTx records what an applied (not stale) callback means for
// the inbox: the requests of needs_input become items (a higher revision
// supersedes the item of the lower one; the same revision with other
// content is request_conflict), decided items resolve on any later
// callback, every request item resolves when the work ends, and failed
// work opens an incident.
func (s *Service) applyAttentionTx(ctx context.Context, tx agentowl.Tx, chk *agentowl.CallbackCheck, in *CallbackInput, now time.Time) error {
	w := chk.Work // as the callback left it
	for _, it := range chk.Items {
		if it.Status == agentowl.AttentionResolved || it.Kind == KindIncident {
			continue
		}
		resolution := ""
		if chk.Decided[it.ID] {
			resolution = ResolvedOutcome
		} else if w.Status.Terminal() {
			resolution = ResolvedWorkEnded
		}
		if resolution != "" {
			if err := resolveItem(ctx, tx, it, resolution, now); err != nil {
				return err
			}
		}
	}
	for _, r := range in.ParsedRequests {
		latest := latestRevision(chk.Items, r.ID)
		switch {
		case latest == nil:
		case latest.Revision == r.Revision:
			if bytes.Equal(latest.ContentHash, r.Hash) {
				continue
			}
			return agentowl.FieldError(agentowl.ECodeRequestConflict, "requests",
				"Request %q revision %d was already recorded with other content; changed content needs a higher revision.",
				r.ID, r.Revision)
		case latest.Revision > r.Revision:
			return agentowl.FieldError(agentowl.ECodeRequestConflict, "requests",
				"Request %q is already at revision %d; revision %d cannot replace it.", r.ID, latest.Revision, r.Revision)
		default:
			if latest.Status != agentowl.AttentionResolved {
				if err := resolveItem(ctx, tx, latest, ResolvedSuperseded, now); err != nil {
					return err
				}
			}
		}
		it := &agentowl.AttentionItem{ID: agentowl.NewID("att"), TenantID: w.TenantID, Kind: r.Kind, Status: agentowl.AttentionOpen,
			WorkID: w.ID, EndpointID: w.EndpointID, RequestID: r.ID, Revision: r.Revision, Prompt: r.Prompt,
			AllowedDecisions: r.AllowedDecisions, ExpiresAt: &r.ExpiresAt, ContentHash: r.Hash, Request: r.Canonical,
			CreatedAt: now, UpdatedAt: now}
		if r.Action != nil {
			it.ActionDescription, it.ActionDigest = r.Action.Description, r.Action.Digest
		}
		if err := tx.AttentionCreate(ctx, it); err != nil {
			return err
		}
		if err := notifyItemTx(ctx, tx, it); err != nil {
			return err
		}
	}
	if in.Status == agentowl.WorkFailed {
		summary := "The runtime reported the work failed."
		var e struct {
			Message string `json:"message"`
		}
		if json.Unmarshal(in.Error, &e) == nil && e.Message != "" {
			summary = "The runtime reported the work failed: " + truncate(e.Message, 1024)
		}
		it := &agentowl.AttentionItem{ID: agentowl.NewID("att"), TenantID: w.TenantID, Kind: KindIncident,
			Status: agentowl.AttentionOpen, WorkID: w.ID, EndpointID: w.EndpointID, Summary: summary, CreatedAt: now, UpdatedAt: now}
		if err := tx.AttentionCreate(ctx, it); err != nil {
			return err
		}
		return notifyItemTx(ctx, tx, it)
	}
	return nil
}

// latestRevision is the item of request id's highest revision among items,
// or nil (the store keeps one item per revision).
func latestRevision(items []*agentowl.AttentionItem, id string) *agentowl.AttentionItem {
	var latest *agentowl.AttentionItem
	for _, it := range items {
		if it.RequestID == id && (latest == nil || it.Revision > latest.Revision) {
			latest = it
		}
	}
	return latest
}

// notifyItemTx records the notice of a new attention item: an input
// request for a question or approval, a failure for an incident.
func notifyItemTx(ctx context.Context, tx agentowl.Tx, it *agentowl.AttentionItem) error {
	c := notify.Cause{TenantID: it.TenantID, Cause: notify.CauseNeedsInput, SubjectKind: notify.SubjectAttention,
		SubjectID: it.ID, EndpointID: it.EndpointID, At: it.CreatedAt}
	switch it.Kind {
	case KindIncident:
		c.Cause, c.Title = notify.CauseIncident, it.Summary
	case KindApproval:
		c.Title = "Approval requested: " + it.Prompt
	default:
		c.Title = "Question: " + it.Prompt
	}
	return notify.RecordTx(ctx, tx, c)
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

func resolveItem(ctx context.Context, tx agentowl.Tx, it *agentowl.AttentionItem, resolution string, now time.Time) error {
	it.Status, it.Resolution, it.ResolvedAt, it.UpdatedAt = agentowl.AttentionResolved, resolution, &now, now
	return tx.AttentionUpdate(ctx, it)
}

// ---- operator views

// AttentionView is an item with its decision and the state of its work.
type AttentionView struct {
	Item     *agentowl.AttentionItem
	Decision *agentowl.WorkDecision
	// Expired is true when the request's expiry has passed (whether or not
	// the maintenance sweep has resolved the item yet).
	Expired    bool
	WorkStatus agentowl.WorkStatus
	// Push is the outbox message of the decision push, if any.
	Push *agentowl.OutboxMessage
}

// ParseAttentionStatus validates a status filter: a status, or unresolved
// (open and acknowledged).
func ParseAttentionStatus(v string) (agentowl.AttentionStatus, error) {
	st := agentowl.AttentionStatus(v)
	switch st {
	case "", agentowl.AttentionOpen, agentowl.AttentionAcknowledged, agentowl.AttentionResolved, agentowl.AttentionUnresolved:
		return st, nil
	}
	return "", agentowl.FieldError(agentowl.ECodeInvalidField, "status", "status must be open, acknowledged, resolved or unresolved.")
}

func (s *Service) view(ctx context.Context, tx agentowl.Tx, it *agentowl.AttentionItem) (*AttentionView, error) {
	v := &AttentionView{Item: it, Expired: it.ExpiresAt != nil && !s.clock.Now().Before(*it.ExpiresAt)}
	d, err := tx.WorkDecisionGetByAttention(ctx, it.ID)
	if err == nil {
		v.Decision = d
		if d.MessageID != "" {
			if v.Push, err = tx.MessageGet(ctx, d.MessageID); errors.Is(err, agentowl.ErrNotFound) {
				v.Push, err = nil, nil
			}
		}
	} else if errors.Is(err, agentowl.ErrNotFound) {
		err = nil
	}
	if err != nil {
		return nil, err
	}
	w, err := tx.WorkGet(ctx, it.WorkID)
	if err != nil {
		return nil, err
	}
	v.WorkStatus = w.Status
	return v, nil
}

// ListAttention lists a tenant's attention items, newest first. Members may.
func (s *Service) ListAttention(ctx context.Context, p *access.Principal, tenant string, params agentowl.AttentionListParams) ([]*AttentionView, error) {
	return s.listAttention(ctx, p, tenant, params, agentowl.Tx.AttentionList)
}

// attentionLister is one of the store's lists of a tenant's attention
// items (agentowl.Tx.AttentionList, AttentionListDated, …).
type attentionLister = func(agentowl.Tx, context.Context, agentowl.AttentionListParams) ([]*agentowl.AttentionItem, error)

// listAttention lists the tenant's items with list, as views. Members may.
func (s *Service) listAttention(ctx context.Context, p *access.Principal, tenant string, params agentowl.AttentionListParams, list attentionLister) ([]*AttentionView, error) {
	return access.ReadAs(ctx, s.store, p, tenant, agentowl.RoleMember, func(tx agentowl.Tx, m *agentowl.Membership) ([]*AttentionView, error) {
		params.TenantID = m.TenantID
		items, err := list(tx, ctx, params)
		if err != nil {
			return nil, err
		}
		return s.views(ctx, tx, items)
	})
}

// views is view for a listed page of items, in three reads whatever the
// page's length (the items' decisions, their work's statuses, then the push
// of each decided item), not two or three per item.
func (s *Service) views(ctx context.Context, tx agentowl.Tx, items []*agentowl.AttentionItem) ([]*AttentionView, error) {
	if len(items) == 0 {
		return nil, nil
	}
	itemIDs, workIDs := make([]string, len(items)), make([]string, len(items))
	for i, it := range items {
		itemIDs[i], workIDs[i] = it.ID, it.WorkID
	}
	decisions, err := tx.WorkDecisionsByAttention(ctx, itemIDs)
	if err != nil {
		return nil, err
	}
	byItem := make(map[string]*agentowl.WorkDecision, len(decisions))
	for _, d := range decisions {
		byItem[d.AttentionID] = d
	}
	statuses, err := tx.WorkStatuses(ctx, workIDs)
	if err != nil {
		return nil, err
	}
	now := s.clock.Now()
	out := make([]*AttentionView, len(items))
	for i, it := range items {
		st, ok := statuses[it.WorkID]
		if !ok {
			return nil, fmt.Errorf("attention item %s: its work %s: %w", it.ID, it.WorkID, agentowl.ErrNotFound)
		}
		v := &AttentionView{Item: it, Expired: it.ExpiresAt != nil && !now.Before(*it.ExpiresAt), WorkStatus: st, Decision: byItem[it.ID]}
		if v.Decision != nil && v.Decision.MessageID != "" {
			if v.Push, err = tx.MessageGet(ctx, v.Decision.MessageID); errors.Is(err, agentowl.ErrNotFound) {
				v.Push, err = nil, nil
			}
			if err != nil {
				return nil, err
			}
		}
		out[i] = v
	}
	return out, nil
}

// tenantItem reads an attention item of membership m, or not_found.
func tenantItem(ctx context.Context, tx agentowl.Tx, m *agentowl.Membership, id string) (*agentowl.AttentionItem, error) {
	return ofTenant(ctx, m, "attention item", id, tx.AttentionGet, func(it *agentowl.AttentionItem) bool { return it.TenantID == m.TenantID })
}

// changeItem runs change on the item id of m in a write transaction and
// returns the item's view after it.
func (s *Service) changeItem(ctx context.Context, m *agentowl.Membership, id string, change func(tx agentowl.Tx, it *agentowl.AttentionItem) error) (*AttentionView, error) {
	var out *AttentionView
	err := s.store.Write(ctx, func(tx agentowl.Tx) error {
		it, err := tenantItem(ctx, tx, m, id)
		if err != nil {
			return err
		}
		if err := change(tx, it); err != nil {
			return err
		}
		out, err = s.view(ctx, tx, it)
		return err
	})
	return out, err
}

// InspectAttention returns one item. Members may.
func (s *Service) InspectAttention(ctx context.Context, p *access.Principal, tenant, id string) (*AttentionView, error) {
	return access.ReadAs(ctx, s.store, p, tenant, agentowl.RoleMember, func(tx agentowl.Tx, m *agentowl.Membership) (*AttentionView, error) {
		it, err := tenantItem(ctx, tx, m, id)
		if err != nil {
			return nil, err
		}
		return s.view(ctx, tx, it)
	})
}

// AckAttention acknowledges an open item and assigns it (to assignee, or
// to the caller): it never decides, executes or resolves anything.
// Acknowledging again reassigns. Members may.
func (s *Service) AckAttention(ctx context.Context, p *access.Principal, tenant, id, assignee string) (*AttentionView, error) {
	m, err := p.Tenant(tenant, agentowl.RoleMember)
	if err != nil {
		return nil, err
	}
	if assignee == "" {
		assignee = p.Actor()
	}
	if len(assignee) > 256 || !utf8.ValidString(assignee) || strings.ContainsFunc(assignee, func(r rune) bool { return r < ' ' }) {
		return nil, agentowl.FieldError(agentowl.ECodeInvalidField, "assignee", "assignee must be 1-256 bytes of text.")
	}
	return s.changeItem(ctx, m, id, func(tx agentowl.Tx, it *agentowl.AttentionItem) error {
		if it.Status == agentowl.AttentionResolved {
			return agentowl.Errorf(agentowl.ECodeAlreadyTerminal, "Attention item %q is already resolved (%s).", id, it.Resolution)
		}
		now := s.clock.Now()
		it.Status, it.Assignee, it.UpdatedAt = agentowl.AttentionAcknowledged, assignee, now
		if it.AcknowledgedAt == nil {
			it.AcknowledgedAt = &now
		}
		if err := tx.AttentionUpdate(ctx, it); err != nil {
			return err
		}
		return access.Audit(ctx, tx, now, m.TenantID, p, "attention.ack", "attention:"+id,
			map[string]any{"assignee": assignee})
	})
}

// ResolveAttention resolves an incident after review. Request items
// resolve only through a receipt, a later outcome, supersession or expiry:
// resolving one by hand is not_a_request. Members may.
func (s *Service) ResolveAttention(ctx context.Context, p *access.Principal, tenant, id string) (*AttentionView, error) {
	m, err := p.Tenant(tenant, agentowl.RoleMember)
	if err != nil {
		return nil, err
	}
	return s.changeItem(ctx, m, id, func(tx agentowl.Tx, it *agentowl.AttentionItem) error {
		if it.Kind != KindIncident {
			return agentowl.Errorf(agentowl.ECodeNotARequest,
				"Attention item %q is a %s request; it resolves through the runtime's receipt or outcome, not by hand.", id, it.Kind)
		}
		if it.Status == agentowl.AttentionResolved {
			return nil
		}
		now := s.clock.Now()
		if err := resolveItem(ctx, tx, it, ResolvedReviewed, now); err != nil {
			return err
		}
		return access.Audit(ctx, tx, now, m.TenantID, p, "attention.resolve", "attention:"+id, nil)
	})
}

// ---- deciding

// hash is the decision's content identity: a resubmission with the same
// decision ID must match it.
func decisionHash(in *agentowl.DecisionFile, attentionID string) []byte {
	b, _ := json.Marshal([]any{attentionID, in.RequestRevision, in.Decision, in.ExpectedActionDigest, in.Answer})
	sum := sha256.Sum256(b)
	return sum[:]
}

// DecideResult is the outcome of Decide.
type DecideResult struct {
	View *AttentionView
	// Replay is true when the same decision was already recorded.
	Replay bool
	// Preview is true when nothing was submitted.
	Preview bool
	// Body is the decision document that is (or would be) pushed.
	Body []byte
}

// checkDecision applies every refusal to in against item it at now.
func checkDecision(it *agentowl.AttentionItem, latest *agentowl.AttentionItem, in *agentowl.DecisionFile, now time.Time) error {
	if it.Kind == KindIncident {
		return agentowl.Errorf(agentowl.ECodeNotARequest, "Attention item %q is an incident; there is nothing to decide.", it.ID)
	}
	if latest.Revision != it.Revision || in.RequestRevision != it.Revision || it.Resolution == ResolvedSuperseded {
		return agentowl.FieldError(agentowl.ECodeStaleRevision, "request_revision",
			"Request %q is at revision %d (item %s); a decision on revision %d cannot authorize it. Review the current revision.",
			it.RequestID, latest.Revision, latest.ID, in.RequestRevision)
	}
	if it.ExpiresAt != nil && !now.Before(*it.ExpiresAt) || it.Resolution == ResolvedExpired {
		return agentowl.Errorf(agentowl.ECodeRequestExpired, "Request %q expired at %s.", it.RequestID, rfc3339(*it.ExpiresAt))
	}
	if it.Status == agentowl.AttentionResolved {
		return agentowl.Errorf(agentowl.ECodeAlreadyTerminal, "Attention item %q is already resolved (%s).", it.ID, it.Resolution)
	}
	if !slices.Contains(it.AllowedDecisions, in.Decision) {
		return agentowl.FieldError(agentowl.ECodeDecisionNotAllowed, "decision",
			"Decision %q is not allowed; this request allows %s.", in.Decision, strings.Join(it.AllowedDecisions, ", "))
	}
	switch it.Kind {
	case KindApproval:
		if in.HasAnswer {
			return invalid("answer", "An approval decision carries expected_action_digest, not answer.")
		}
		if !in.HasDigest {
			return agentowl.FieldError(agentowl.ECodeMissingField, "expected_action_digest",
				"An approval decision must carry expected_action_digest, the digest of the action you reviewed.")
		}
		if in.ExpectedActionDigest != it.ActionDigest {
			return agentowl.FieldError(agentowl.ECodeDigestMismatch, "expected_action_digest",
				"The expected action digest does not match the current action's digest %s; review the action again.", it.ActionDigest)
		}
	case KindQuestion:
		if in.HasDigest {
			return invalid("expected_action_digest", "A question's decision carries answer, not expected_action_digest.")
		}
		if !in.HasAnswer {
			return agentowl.FieldError(agentowl.ECodeMissingField, "answer", "An answer decision must carry answer.")
		}
	}
	return nil
}

// Decide submits (or, with submit false, previews) a decision on a request
// item. The refusals, in order: not_a_request, decision_conflict (the
// decision ID is taken with other content), already_decided,
// stale_revision, request_expired, decision_not_allowed, digest_mismatch.
// Resubmitting the same decision ID with the same content replays the
// recorded decision. Exactly one decision wins per item: the work row is
// locked, and the store's uniqueness backs it. Members may.
func (s *Service) Decide(ctx context.Context, p *access.Principal, tenant, id string, in *agentowl.DecisionFile, submit bool) (*DecideResult, error) {
	m, err := p.Tenant(tenant, agentowl.RoleMember)
	if err != nil {
		return nil, err
	}
	var out DecideResult
	push := false
	var creating *agentowl.AttentionItem // the item whose decision the write inserts
	run := s.store.Write
	if !submit {
		run = s.store.Read
	}
	// The decision's time is fixed before its transaction, so its
	// attestation can be signed before it too (prepareDecision); whether
	// the request has expired is still checked at the transaction's time.
	decidedAt := s.clock.Now().Truncate(time.Microsecond) // as stored, so the view below is what a read returns
	var pre *attestation.Prepared
	if submit {
		pre = s.prepareDecision(ctx, p, m, id, in, decidedAt)
	}
	err = run(ctx, func(tx agentowl.Tx) error {
		creating = nil
		// Everything the decision is checked against comes in one read
		// (one round trip on PostgreSQL), the work locked for a submission.
		chk, err := tx.AttentionForDecision(ctx, m.TenantID, id, in.DecisionID, submit)
		if err != nil {
			return err
		}
		it, w := chk.Item, chk.Work
		if it == nil || it.TenantID != m.TenantID {
			return notFound(m, "attention item", id)
		}
		// now is the decision's time; checkAt, when the request's expiry
		// is checked, the transaction's (not earlier).
		now, checkAt := decidedAt, decidedAt
		if later := s.clock.Now().Truncate(time.Microsecond); later.After(checkAt) {
			checkAt = later
		}
		if it.Kind == KindIncident {
			return checkDecision(it, it, in, checkAt)
		}
		if w == nil || chk.Endpoint == nil {
			return fmt.Errorf("attention item %s: its work or endpoint is missing", it.ID)
		}
		view := &AttentionView{Item: it, Expired: it.ExpiresAt != nil && !checkAt.Before(*it.ExpiresAt), WorkStatus: w.Status,
			Decision: chk.Decided, Push: chk.Push}
		sum := decisionHash(in, it.ID)
		if prev := chk.ByID; prev != nil {
			if !bytes.Equal(prev.ContentHash, sum) {
				return agentowl.FieldError(agentowl.ECodeDecisionConflict, "decision_id",
					"Decision %q was already recorded with other content; a new decision needs a new decision_id.", in.DecisionID)
			}
			out.Replay, out.Body, out.View = true, prev.Body, view
			return nil
		}
		if won := chk.Decided; won != nil {
			return agentowl.Errorf(agentowl.ECodeAlreadyDecided, "Request %q revision %d was already decided (%s, decision %q).",
				it.RequestID, it.Revision, won.Decision, won.ID)
		}
		latest := latestRevision(chk.Revisions, it.RequestID)
		if latest == nil { // the item went between the reads (its work was purged)
			return notFound(m, "attention item", id)
		}
		if err := checkDecision(it, latest, in, checkAt); err != nil {
			return err
		}
		doc := agentwork.Decision{Version: agentwork.Version, Type: agentwork.DecisionType, DecisionID: in.DecisionID, WorkID: w.ID,
			RequestID: it.RequestID, RequestRevision: it.Revision, Decision: in.Decision, Answer: in.Answer,
			ExpectedActionDigest: in.ExpectedActionDigest, DecidedAt: now.UTC().Format(time.RFC3339Nano),
			RequestExpiresAt: it.ExpiresAt.UTC().Format(time.RFC3339Nano)}
		if submit {
			// The attestation is signed before the document is rendered: the
			// pushed and recovered document carries it.
			a, err := s.attest.SignWorkTx(ctx, tx, pre, workDecision(p, m, w.ID, it, in, now))
			if err != nil {
				return err
			}
			if a != nil {
				doc.Attestation = a.Token
			}
		}
		if out.Body, err = json.Marshal(doc); err != nil {
			return err
		}
		if !submit {
			out.Preview, out.View = true, view
			return nil
		}
		d := &agentowl.WorkDecision{WorkID: w.ID, ID: in.DecisionID, TenantID: m.TenantID, AttentionID: it.ID, RequestID: it.RequestID,
			Revision: it.Revision, Decision: in.Decision, Answer: in.Answer, ExpectedActionDigest: in.ExpectedActionDigest,
			ContentHash: sum, Body: out.Body, DecidedBy: p.Actor(), DecidedAt: now}
		view.Decision = d
		if ep := chk.Endpoint; ep.DeletedAt == nil && ep.DecisionURL != "" && checkAt.Before(*it.ExpiresAt) {
			d.MessageID = agentowl.NewID("")
			msg, err := outbox.Enqueue(ctx, tx, now, outbox.Message{ID: d.MessageID, TenantID: m.TenantID, Kind: MessageKindDecision,
				Destination: DecisionDestination(ep.ID, w.ID, d.ID), Subject: w.ID, Body: out.Body, Deadline: *it.ExpiresAt})
			if err != nil {
				return err
			}
			view.Push, push = msg, true
		}
		// A conflict of this insert may surface only at the commit (the
		// PostgreSQL store sends it with the COMMIT): it is told below.
		creating = it
		if err := tx.WorkDecisionCreate(ctx, d); err != nil {
			return err
		}
		out.View = view
		return access.Audit(ctx, tx, now, m.TenantID, p, "attention.decide", "attention:"+it.ID,
			map[string]any{"work": w.ID, "request": it.RequestID, "revision": it.Revision, "decision": in.Decision,
				"decision_id": in.DecisionID})
	})
	switch {
	case errors.Is(err, agentowl.ErrConflict) && creating != nil:
		err = agentowl.Errorf(agentowl.ECodeAlreadyDecided, "Request %q revision %d was decided concurrently.", creating.RequestID, creating.Revision)
	case errors.Is(err, agentowl.ErrConflict):
		err = agentowl.Errorf(agentowl.ECodeAlreadyDecided, "The request was decided concurrently.")
	}
	if err != nil {
		return nil, err
	}
	if push {
		s.wake()
	}
	return &out, nil
}

// workDecision is what the attestation of p's decision in on item it of
// work workID, at now, attests.
func workDecision(p *access.Principal, m *agentowl.Membership, workID string, it *agentowl.AttentionItem, in *agentowl.DecisionFile, now time.Time) attestation.WorkDecision {
	return attestation.WorkDecision{TenantID: m.TenantID, WorkID: workID, RequestID: it.RequestID, DecisionID: in.DecisionID,
		Revision: it.Revision, Decision: in.Decision, ActionDigest: it.ActionDigest, Answer: in.Answer, DecidedBy: p.Actor(),
		DecidedAt: now, ExpiresAt: *it.ExpiresAt}
}

// prepareDecision signs the attestation of p's decision in on item id at
// now before the decision's transaction, when the Signer presigns
// (attestation.Signer.PrepareWork): from the item as a read outside the
// transaction finds it, which does not wait for SQLite's writer. The
// transaction records it only if the decision it makes is exactly the one
// signed; nil when there is nothing to prepare.
func (s *Service) prepareDecision(ctx context.Context, p *access.Principal, m *agentowl.Membership, id string, in *agentowl.DecisionFile, now time.Time) *attestation.Prepared {
	if !s.attest.Presigns() {
		return nil
	}
	var it *agentowl.AttentionItem
	var workID string
	err := s.store.Read(ctx, func(tx agentowl.Tx) error {
		chk, err := tx.AttentionForDecision(ctx, m.TenantID, id, in.DecisionID, false)
		if err != nil {
			return err
		}
		if chk.Item == nil || chk.Work == nil || chk.Decided != nil || chk.ByID != nil {
			return agentowl.ErrNotFound
		}
		it, workID = chk.Item, chk.Work.ID
		return nil
	})
	if err != nil || it.TenantID != m.TenantID || it.Kind == KindIncident || it.ExpiresAt == nil {
		return nil
	}
	return s.attest.PrepareWork(ctx, workDecision(p, m, workID, it, in, now))
}

// ---- pushes and receipts

// DecisionDestination names the push of one decision as an outbox
// destination: "decision:<endpoint>/<work>/<decision>".
func DecisionDestination(endpointID, workID, decisionID string) string {
	return "decision:" + endpointID + "/" + workID + "/" + decisionID
}

// ResolveDecisionDestination is the outbox.Resolver of "decision:"
// destinations: the endpoint's decision URL, its signing secret, the bearer
// decision secret and the answer check that records the receipt; no target
// once the endpoint is deleted or has no decision URL any more.
func (s *Service) ResolveDecisionDestination(ctx context.Context, tx agentowl.Tx, destination string) (*outbox.Target, error) {
	rest, found := strings.CutPrefix(destination, "decision:")
	if !found {
		return nil, nil
	}
	parts := strings.SplitN(rest, "/", 3)
	if len(parts) != 3 {
		return nil, nil
	}
	epID, workID, decisionID := parts[0], parts[1], parts[2]
	ep, err := tx.EndpointGet(ctx, epID)
	if errors.Is(err, agentowl.ErrNotFound) {
		return nil, nil
	}
	if err != nil || ep.DeletedAt != nil || ep.DecisionURL == "" {
		return nil, err
	}
	bg := context.WithoutCancel(ctx)
	return &outbox.Target{URL: ep.DecisionURL, Secret: string(ep.SigningSecret),
		Header: http.Header{"Authorization": {"Bearer " + string(ep.DecisionSecret)}},
		Accept: func(status int, body []byte) error {
			if err := CheckAcceptance(body, decisionID); err != nil {
				return err
			}
			_, err := s.recordReceipt(bg, ep.ID, workID, decisionID, ReceiptViaPush)
			return err
		}}, nil
}

// CheckAcceptance checks a runtime's answer to a decision push: exactly
// {"accepted": true, "decision_id": id}.
func CheckAcceptance(body []byte, decisionID string) error {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(body, &fields); err != nil || fields == nil {
		return errors.New(`the answer is not {"accepted": true, "decision_id": …}`)
	}
	var accepted bool
	var id string
	if len(fields) != 2 || json.Unmarshal(fields["accepted"], &accepted) != nil || !accepted ||
		json.Unmarshal(fields["decision_id"], &id) != nil {
		return errors.New(`the answer is not {"accepted": true, "decision_id": …}`)
	}
	if id != decisionID {
		return errors.New("the answer names another decision_id")
	}
	return nil
}

// DecisionView is a decision with its work's state, as runtimes recover it.
type DecisionView struct {
	Decision   *agentowl.WorkDecision
	WorkStatus agentowl.WorkStatus
}

// recordReceipt records that the runtime accepted a decision: once (a
// repeat changes nothing), never on work that has ended (receipt recovery
// never reopens it), and it resolves the decided item. The work's own
// status is untouched: a later callback reports execution.
func (s *Service) recordReceipt(ctx context.Context, endpointID, workID, decisionID, via string) (*DecisionView, error) {
	var out *DecisionView
	err := s.store.Write(ctx, func(tx agentowl.Tx) error {
		// The decision and its item come with the work (one round trip).
		w, d, it, err := tx.DecisionForReceipt(ctx, workID, decisionID)
		if errors.Is(err, agentowl.ErrNotFound) || (err == nil && w.EndpointID != endpointID) {
			return agentowl.Errorf(agentowl.ECodeNotFound, "No work %q for this runtime credential's endpoint.", workID)
		}
		if err != nil {
			return err
		}
		if d == nil {
			return agentowl.Errorf(agentowl.ECodeNotFound, "No decision %q on work %q.", decisionID, workID)
		}
		out = &DecisionView{Decision: d, WorkStatus: w.Status}
		if d.ReceiptAt != nil || w.Status.Terminal() {
			return nil
		}
		now := s.clock.Now()
		if err := tx.DecisionSetReceipt(ctx, workID, decisionID, now, via); err != nil {
			return err
		}
		d.ReceiptAt, d.ReceiptVia = &now, via
		if it == nil {
			return fmt.Errorf("decision %s: its attention item %s is missing", d.ID, d.AttentionID)
		}
		if it.Status != agentowl.AttentionResolved {
			return resolveItem(ctx, tx, it, ResolvedReceipt, now)
		}
		return nil
	})
	return out, err
}

// RequireScope reports insufficient_scope unless runtime credential c
// holds scope. The runtime routes check it before reading a request; the
// use-cases check again.
func RequireScope(c *agentowl.RuntimeCredential, scope string) error {
	if !slices.Contains(c.Scopes, scope) {
		return agentowl.Errorf(agentowl.ECodeInsufficientScope, "This runtime credential lacks the %s scope.", scope)
	}
	return nil
}

func (s *Service) allowDecisions(c *agentowl.RuntimeCredential) error {
	return RequireScope(c, ScopeDecisions)
}

// RecordReceipt is the recovery route's receipt: credential c (with
// decisions:read) confirms that its runtime accepted a decision.
func (s *Service) RecordReceipt(ctx context.Context, c *agentowl.RuntimeCredential, workID, decisionID string) (*DecisionView, error) {
	if err := s.allowDecisions(c); err != nil {
		return nil, err
	}
	return s.recordReceipt(ctx, c.EndpointID, workID, decisionID, ReceiptViaRecovery)
}

// ListDecisions is the recovery route's list: the decisions of a work of
// c's endpoint, oldest first, with their receipt state.
func (s *Service) ListDecisions(ctx context.Context, c *agentowl.RuntimeCredential, workID string) ([]*agentowl.WorkDecision, agentowl.WorkStatus, error) {
	if err := s.allowDecisions(c); err != nil {
		return nil, "", err
	}
	var out []*agentowl.WorkDecision
	var st agentowl.WorkStatus
	err := s.store.Read(ctx, func(tx agentowl.Tx) error {
		w, err := tx.WorkGet(ctx, workID)
		if errors.Is(err, agentowl.ErrNotFound) || (err == nil && (w.EndpointID != c.EndpointID || w.TenantID != c.TenantID)) {
			return agentowl.Errorf(agentowl.ECodeNotFound, "No work %q for this runtime credential's endpoint.", workID)
		}
		if err != nil {
			return err
		}
		st = w.Status
		out, err = tx.WorkDecisionList(ctx, workID)
		return err
	})
	return out, st, err
}

// ExpireRequests resolves request items whose expiry has passed (the
// maintenance sweep); it returns how many.
func (s *Service) ExpireRequests(ctx context.Context) (int, error) {
	var n int
	err := s.store.Write(ctx, func(tx agentowl.Tx) (err error) {
		n, err = tx.AttentionExpire(ctx, s.clock.Now())
		return err
	})
	return n, err
}
