// Package approval holds the AAP provider use-cases: instances, their
// credentials, approval requests, human and policy decisions, expiry and
// retention. It holds business rules only: no SQL, no HTTP.
package approval

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/agentowl/agentowl"
	"github.com/agentowl/agentowl/internal/access"
	"github.com/agentowl/agentowl/internal/attestation"
	"github.com/agentowl/agentowl/internal/notify"
	"github.com/agentowl/agentowl/internal/ratelimit"
)

// Config holds the provider's policy limits.
type Config struct {
	// MaxTimeout caps a request's approval window; longer timeouts are
	// shortened (never lengthened). Defaults to 24h.
	MaxTimeout time.Duration
	// DefaultApprovalValidity is how long an approval permits the call to
	// start, for new instances. Defaults to 5m.
	DefaultApprovalValidity time.Duration
	// MaxApprovalValidity caps per-instance and per-decision validity.
	// Defaults to 24h.
	MaxApprovalValidity time.Duration
	// MaxWait caps GET ?wait=. Defaults to 30s (the contract's cap).
	MaxWait time.Duration
	// RecheckInterval is how often a long poll re-reads the store, so that
	// decisions made by another replica end it. Defaults to 1s.
	RecheckInterval time.Duration
	// InstanceCredentialTTL sets expires_at on issued instance credentials.
	// Defaults to 0: no scheduled expiry (revoked by instance deletion).
	InstanceCredentialTTL time.Duration
	// CreateLimit bounds approval request creation per tenant. Defaults to
	// 100,000 per minute.
	CreateLimit ratelimit.Limit
	// RegisterLimit bounds receiver verifications per tenant. Defaults to 30
	// per minute. (Per destination, the verifier limits them; see
	// delivery.Verifier.LimitDestinations.)
	RegisterLimit ratelimit.Limit
}

func (c Config) withDefaults() Config {
	def := func(v *time.Duration, d time.Duration) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&c.MaxTimeout, 24*time.Hour)
	def(&c.DefaultApprovalValidity, 5*time.Minute)
	def(&c.MaxApprovalValidity, 24*time.Hour)
	def(&c.MaxWait, 30*time.Second)
	def(&c.RecheckInterval, time.Second)
	if c.CreateLimit.Per == 0 {
		c.CreateLimit = ratelimit.Limit{Events: 100_000, Per: time.Minute}
	}
	if c.RegisterLimit.Per == 0 {
		c.RegisterLimit = ratelimit.Limit{Events: 30, Per: time.Minute}
	}
	if c.MaxWait > 30*time.Second {
		c.MaxWait = 30 * time.Second
	}
	return c
}

// Service implements the provider use-cases.
type Service struct {
	store  agentowl.Store
	access *access.Service
	clock  agentowl.Clock
	cfg    Config
	log    *slog.Logger
	hub    *hub
	// draining closes when the server stops: waiting reads answer at once.
	draining  chan struct{}
	drainOnce sync.Once
	policies  *policyEngine
	async     *Receivers // nil: synchronous mode only
	// submissions keeps keyed instance submissions alone per key.
	submissions submissions
	// Abuse limits, per process.
	createLimit, registerTenant *ratelimit.Limiter
	// attest signs every approval and denial (nil: none are signed).
	attest *attestation.Signer
}

// UseAttestations makes every approval and denial (an operator's or a
// policy's) carry an attestation signed by a: a policy's recorded in the
// decision's transaction, an operator's too or, when a defers, signed
// after it (docs/attestations.md). Call it before serving.
func (s *Service) UseAttestations(a *attestation.Signer) { s.attest = a }

// Attestation returns the attestation of the decision on request r, for
// readers who already may read r, signed now if its signing after the
// decision has not happened yet; not_found when it has none (pending,
// expired or cancelled, decided before attestations were first on).
func (s *Service) Attestation(ctx context.Context, r *agentowl.ApprovalRequest) (*agentowl.Attestation, error) {
	if s.attest != nil {
		a, err := s.attest.RequestAttestation(ctx, r)
		if err == nil || !errors.Is(err, agentowl.ErrNotFound) {
			return a, err
		}
	}
	return nil, agentowl.Errorf(agentowl.ECodeNotFound, "Approval request %q has no attestation: only an approval or a denial has one.", r.ID)
}

// New returns a Service; receivers turns on asynchronous mode (nil: the
// provider is synchronous-only).
func New(s agentowl.Store, acc *access.Service, clock agentowl.Clock, cfg Config, receivers *Receivers, log *slog.Logger) *Service {
	cfg = cfg.withDefaults()
	return &Service{store: s, access: acc, clock: clock, cfg: cfg, log: log, hub: newHub(), policies: newPolicyEngine(), async: receivers,
		draining:       make(chan struct{}),
		createLimit:    ratelimit.New("create", cfg.CreateLimit, s, clock),
		registerTenant: ratelimit.New("register-tenant", cfg.RegisterLimit, s, clock),
	}
}

// now is the clock truncated to whole seconds: every recorded timestamp is
// whole seconds, as the contract's examples are, and deadlines computed from
// it can only shorten windows, never lengthen them.
func (s *Service) now() time.Time { return s.clock.Now().UTC().Truncate(time.Second) }

func notFound(what, id string) error {
	return agentowl.Errorf(agentowl.ECodeNotFound, "No %s %q is available to this credential.", what, id)
}

// notFoundIn is not_found for an operator's look-up: it names the tenant
// searched, so an operator who meant another tenant sees where the search
// went (the name is the caller's own tenant, so it leaks nothing).
func notFoundIn(m *agentowl.Membership, what, id string) error {
	return agentowl.Errorf(agentowl.ECodeNotFound, "No %s %q in tenant %q.", what, id, m.TenantName)
}

// ---- approval requests

// CreateResult is a created or replayed request.
type CreateResult struct {
	Request *agentowl.ApprovalRequest
	// Replayed is true when an earlier request with the same key and input
	// was returned.
	Replayed bool
}

// CreateRequest submits one intercepted tool call for instance p, keyed by
// idemKey. A matching policy rule decides it at once.
func (s *Service) CreateRequest(ctx context.Context, p *access.Principal, idemKey string, in *agentowl.CreateRequestInput) (*CreateResult, error) {
	if ok, wait := s.createLimit.Allow(ctx, p.Token.TenantID); !ok {
		return nil, ratelimit.Error("approval requests for this account", wait)
	}
	hash := in.Hash()
	for attempt := 0; ; attempt++ {
		var res CreateResult
		err := s.store.Write(ctx, func(tx agentowl.Tx) error {
			now := s.now()
			// The key, the instance and its rules in one read (one round
			// trip on PostgreSQL).
			chk, err := tx.RequestForCreate(ctx, p.Token.InstanceID, idemKey)
			if err != nil {
				return err
			}
			if existing := chk.Existing; existing != nil {
				if string(existing.InputHash) != string(hash) {
					return agentowl.Errorf(agentowl.ECodeIdempotencyConflict, "The idempotency key was already used for a different request.")
				}
				res = CreateResult{Request: existing, Replayed: true}
				return s.expireIfDue(ctx, tx, existing, now)
			}
			inst := chk.Instance
			if inst == nil {
				return agentowl.ErrNotFound
			}
			if inst.DeletedAt != nil {
				return agentowl.Errorf(agentowl.ECodeUnauthenticated, "The credential is missing, expired, revoked or otherwise invalid.")
			}
			window := min(in.TimeoutDur, s.cfg.MaxTimeout)
			r := &agentowl.ApprovalRequest{
				ID: agentowl.NewID(""), TenantID: inst.TenantID, InstanceID: inst.ID, IdempotencyKey: idemKey, InputHash: hash,
				Tool: in.Tool, Arguments: in.Arguments, Timeout: in.Timeout, AgentReasoning: in.AgentReasoning, Context: in.Context,
				Status: agentowl.StatusPending, CreatedAt: now, DeadlineAt: now.Add(window),
			}
			if rule, _ := s.policies.match(chk.Policies, in); rule != nil {
				r.Decision = &agentowl.Decision{DecidedAt: now, Note: rule.Note, DecidedBy: "policy:" + rule.ID, Status: agentowl.StatusDenied}
				if rule.Effect == agentowl.EffectApprove {
					r.Decision.Status, r.Decision.ExpiresAt = agentowl.StatusApproved, now.Add(inst.ApprovalValidity)
				}
				r.Status = r.Decision.Status
			}
			res = CreateResult{Request: r}
			if err := tx.RequestCreate(ctx, r); err != nil {
				return err
			}
			if r.Decision != nil {
				if _, err := s.attest.SignRequestTx(ctx, tx, nil, r, r.Decision, inst.ApprovalValidity); err != nil {
					return err
				}
			}
			if r.Decision == nil {
				return notify.RecordTx(ctx, tx, notify.Cause{TenantID: r.TenantID, Cause: notify.CauseApprovalPending,
					SubjectKind: notify.SubjectAttention, SubjectID: AttentionID(r.ID), Title: "Approval requested: " + AttentionPrompt(r),
					At: now})
			}
			_, err = s.recordNotification(ctx, tx, inst, r)
			return err
		})
		// Two replicas racing on one key: the loser replays the winner.
		if errors.Is(err, agentowl.ErrConflict) && attempt == 0 {
			continue
		}
		if err != nil {
			return nil, err
		}
		if !res.Replayed && res.Request.Status.Terminal() {
			s.wakeDelivery()
		}
		return &res, nil
	}
}

// writeRequest runs a write that reads a request and then moves it with a
// guarded update. Under PostgreSQL's read committed isolation another
// replica or goroutine may move it in between; the guarded update then
// reports ErrConflict, and running fn again reads the outcome that won.
func (s *Service) writeRequest(ctx context.Context, fn func(agentowl.Tx) error) error {
	for attempt := 0; ; attempt++ {
		err := s.store.Write(ctx, fn)
		if !errors.Is(err, agentowl.ErrConflict) || attempt == 2 {
			return err
		}
	}
}

// expireIfDue records expiry on a pending request past its deadline, so a
// read never shows such a request as pending. r is updated in place.
func (s *Service) expireIfDue(ctx context.Context, tx agentowl.Tx, r *agentowl.ApprovalRequest, now time.Time) error {
	if r.EffectiveStatus(now) != agentowl.StatusExpired || !r.Status.CanBecome(agentowl.StatusExpired) {
		return nil
	}
	d := &agentowl.Decision{Status: agentowl.StatusExpired, DecidedAt: r.DeadlineAt, DecidedBy: "deadline"}
	return s.resolve(ctx, tx, nil, r, d, nil)
}

// resolve records d on pending request r in tx, together with its
// request.resolved notification when the instance has a receiver, and
// updates r. The decision and its notification commit or fail together.
// inst is r's instance when the caller has already read it, else nil;
// pre is d's attestation signed before the transaction, or nil
// (attestation.Signer.SignRequestTx).
func (s *Service) resolve(ctx context.Context, tx agentowl.Tx, inst *agentowl.Instance, r *agentowl.ApprovalRequest, d *agentowl.Decision, pre *attestation.Prepared) error {
	if err := tx.RequestResolve(ctx, r.ID, d, d.DecidedAt.Add(agentowl.RetentionAfterDecision)); err != nil {
		return err
	}
	r.Status, r.Decision = d.Status, d
	if inst == nil {
		var err error
		if inst, err = tx.InstanceGet(ctx, r.InstanceID); err != nil {
			return err
		}
	}
	// An operator's decision is signed after the transaction when the
	// Signer defers (Decide, DecideAttention: attestation.Signer.After).
	if !s.attest.Defers() {
		if _, err := s.attest.SignRequestTx(ctx, tx, pre, r, d, inst.ApprovalValidity); err != nil {
			return err
		}
	}
	_, err := s.recordNotification(ctx, tx, inst, r)
	return err
}

// Drain ends every waiting read now, with the request as it is, and makes
// later ones answer at once: the server is stopping, and a client polls
// again (another replica, or this one restarted).
func (s *Service) Drain() { s.drainOnce.Do(func() { close(s.draining) }) }

// GetRequest returns an instance's request. With wait > 0 it holds until the
// request is terminal, the wait (capped at MaxWait) ends or the server
// drains (Drain).
func (s *Service) GetRequest(ctx context.Context, p *access.Principal, id string, wait time.Duration) (*agentowl.ApprovalRequest, error) {
	if wait <= 0 {
		return s.readRequest(ctx, p.Token.InstanceID, id)
	}
	wait = min(wait, s.cfg.MaxWait)
	var done <-chan time.Time
	for {
		// Subscribe before reading: a decision committed between a read
		// and the subscription would otherwise wake nobody, and the poll
		// would sleep until its next recheck.
		woken, cancel := s.hub.subscribe(id)
		r, err := s.readRequest(ctx, p.Token.InstanceID, id)
		if err != nil || r.Status.Terminal() {
			cancel()
			return r, err
		}
		if done == nil {
			done = s.clock.After(wait)
		}
		untilDeadline := r.DeadlineAt.Sub(s.clock.Now())
		select {
		case <-woken:
		case <-s.clock.After(max(untilDeadline, 0)):
		case <-s.clock.After(s.cfg.RecheckInterval):
		case <-done:
			cancel()
			return s.readRequest(ctx, p.Token.InstanceID, id)
		case <-s.draining:
			cancel()
			return s.readRequest(ctx, p.Token.InstanceID, id)
		case <-ctx.Done():
			cancel()
			return nil, ctx.Err()
		}
		cancel()
	}
}

// readRequest reads a request of instanceID (any instance if ""), recording
// expiry first if it is due.
func (s *Service) readRequest(ctx context.Context, instanceID, id string) (*agentowl.ApprovalRequest, error) {
	if !agentowl.ValidUUID(id) {
		return nil, notFound("approval request", id)
	}
	var r *agentowl.ApprovalRequest
	err := s.store.Read(ctx, func(tx agentowl.Tx) (err error) {
		r, err = tx.RequestGet(ctx, id)
		return err
	})
	if errors.Is(err, agentowl.ErrNotFound) || (err == nil && instanceID != "" && r.InstanceID != instanceID) {
		return nil, notFound("approval request", id)
	}
	if err != nil {
		return nil, err
	}
	if r.EffectiveStatus(s.clock.Now()) == agentowl.StatusExpired && r.Status == agentowl.StatusPending {
		return s.expire(ctx, id)
	}
	return r, nil
}

// expire records expiry of one request if it is still pending and due, and
// returns it in its resulting state.
func (s *Service) expire(ctx context.Context, id string) (*agentowl.ApprovalRequest, error) {
	var r *agentowl.ApprovalRequest
	err := s.writeRequest(ctx, func(tx agentowl.Tx) (err error) {
		if r, err = tx.RequestGet(ctx, id); err != nil {
			return err
		}
		return s.expireIfDue(ctx, tx, r, s.clock.Now())
	})
	if err == nil && r.Status == agentowl.StatusExpired {
		s.hub.notify(id)
		s.wakeDelivery()
	}
	return r, err
}

// CancelRequest withdraws an instance's pending request. Cancelling again
// returns the same cancelled request; other terminal states are a conflict.
func (s *Service) CancelRequest(ctx context.Context, p *access.Principal, id string) (*agentowl.ApprovalRequest, error) {
	if !agentowl.ValidUUID(id) {
		return nil, notFound("approval request", id)
	}
	var r *agentowl.ApprovalRequest
	err := s.writeRequest(ctx, func(tx agentowl.Tx) (err error) {
		r, err = tx.RequestGet(ctx, id)
		if errors.Is(err, agentowl.ErrNotFound) || (err == nil && r.InstanceID != p.Token.InstanceID) {
			return notFound("approval request", id)
		}
		if err != nil {
			return err
		}
		now := s.now()
		if err := s.expireIfDue(ctx, tx, r, s.clock.Now()); err != nil {
			return err
		}
		switch r.Status {
		case agentowl.StatusCancelled:
			return nil
		case agentowl.StatusPending:
			return s.resolve(ctx, tx, nil, r, &agentowl.Decision{Status: agentowl.StatusCancelled, DecidedAt: now, DecidedBy: "instance"}, nil)
		}
		return alreadyTerminal(r)
	})
	if err == nil || agentowl.ErrorCode(err) == agentowl.ECodeAlreadyTerminal {
		s.hub.notify(id)
		s.wakeDelivery()
	}
	if err != nil {
		return nil, err
	}
	return r, nil
}

func alreadyTerminal(r *agentowl.ApprovalRequest) error {
	return agentowl.Errorf(agentowl.ECodeAlreadyTerminal, "The request is already %s; its outcome is unchanged.", r.Status)
}

// DecideParams is a person's decision on a pending request.
type DecideParams struct {
	Approve bool
	Note    string
	// ValidFor overrides the instance's approval validity when > 0.
	ValidFor time.Duration
}

// Decide records an operator's decision on a request of the tenant named
// tenant, for its members. Exactly one outcome wins: deciding a request that
// is no longer pending (decided, cancelled, expired, or whose instance was
// deleted) is already_terminal.
func (s *Service) Decide(ctx context.Context, p *access.Principal, tenant, id string, dp DecideParams) (*agentowl.ApprovalRequest, error) {
	m, err := p.Tenant(tenant, agentowl.RoleMember)
	if err != nil {
		return nil, err
	}
	tenantID := m.TenantID
	if !agentowl.ValidUUID(id) {
		return nil, notFoundIn(m, "approval request", id)
	}
	if dp.ValidFor < 0 || dp.ValidFor > s.cfg.MaxApprovalValidity {
		return nil, agentowl.FieldError(agentowl.ECodeInvalidField, "valid_for", "valid_for must be between 1s and %s.", s.cfg.MaxApprovalValidity)
	}
	if len(dp.Note) > 4096 {
		return nil, agentowl.FieldError(agentowl.ECodeInvalidField, "note", "The note is longer than 4096 bytes.")
	}
	// The decision's time is fixed before its transaction, so its
	// attestation can be signed before it too (prepareDecision).
	at := s.now()
	pre := s.prepareDecision(ctx, tenantID, id, p, dp, at)
	var r *agentowl.ApprovalRequest
	err = s.writeRequest(ctx, func(tx agentowl.Tx) (err error) {
		var inst *agentowl.Instance
		r, inst, err = tx.RequestGetShared(ctx, id)
		if errors.Is(err, agentowl.ErrNotFound) || (err == nil && r.TenantID != tenantID) {
			return notFoundIn(m, "approval request", id)
		}
		if err != nil {
			return err
		}
		if err := s.expireIfDue(ctx, tx, r, s.clock.Now()); err != nil {
			return err
		}
		next := agentowl.StatusDenied
		if dp.Approve {
			next = agentowl.StatusApproved
		}
		if !r.Status.CanBecome(next) {
			return alreadyTerminal(r)
		}
		_, err = s.decideTx(ctx, tx, p, tenantID, r, inst, dp, nil, at, pre)
		return err
	})
	if errors.Is(err, agentowl.ErrConflict) {
		return nil, agentowl.Errorf(agentowl.ECodeAlreadyTerminal, "The request was decided concurrently; its outcome is unchanged.")
	}
	if r != nil && r.Status.Terminal() {
		s.hub.notify(id)
		s.wakeDelivery()
	}
	if err != nil {
		return nil, err
	}
	s.attest.After(r.ID)
	return r, nil
}

// mcpAgent returns context.mcp.agent of a request submitted by an MCP
// gateway (docs/mcp-gateway.md), or "".
func mcpAgent(ctx json.RawMessage) string {
	var c struct {
		MCP struct {
			Agent string `json:"agent"`
		} `json:"mcp"`
	}
	if len(ctx) == 0 || json.Unmarshal(ctx, &c) != nil {
		return ""
	}
	return c.MCP.Agent
}

// decideTx records a person's decision on pending request r of tenantID in
// tx: the decision, its request.resolved notification and the audit entry
// (approval.decide, with extra details) commit together. It returns the
// time of the decision. inst is r's instance read as InstanceGetShared
// reads it, or nil to read it here.
func (s *Service) decideTx(ctx context.Context, tx agentowl.Tx, p *access.Principal, tenantID string, r *agentowl.ApprovalRequest, inst *agentowl.Instance, dp DecideParams, extra map[string]any, now time.Time, pre *attestation.Prepared) (time.Time, error) {
	if inst == nil {
		var err error
		if inst, err = tx.InstanceGetShared(ctx, r.InstanceID); err != nil {
			return time.Time{}, err
		}
	}
	d := operatorDecision(p, inst, dp, now)
	if err := s.resolve(ctx, tx, inst, r, d, pre); err != nil {
		return now, err
	}
	details := map[string]any{"decision": string(d.Status)}
	if agent := mcpAgent(r.Context); agent != "" {
		// A call gated by an MCP gateway: the audit entry names the agent
		// behind the gateway's instance, and the MCP server and tool.
		details["mcp_agent"], details["tool"] = agent, r.Tool
	}
	for k, v := range extra {
		details[k] = v
	}
	return now, access.Audit(ctx, tx, now, tenantID, p, "approval.decide", "approval-request:"+r.ID, details)
}

// operatorDecision is p's decision dp on a request of inst, at now.
func operatorDecision(p *access.Principal, inst *agentowl.Instance, dp DecideParams, now time.Time) *agentowl.Decision {
	d := &agentowl.Decision{Status: agentowl.StatusDenied, Note: dp.Note, DecidedAt: now, DecidedBy: p.Actor()}
	if dp.Approve {
		validity := inst.ApprovalValidity
		if dp.ValidFor > 0 {
			validity = dp.ValidFor
		}
		d.Status, d.ExpiresAt = agentowl.StatusApproved, now.Add(max(validity.Truncate(time.Second), time.Second))
	}
	return d
}

// prepareDecision signs the attestation of p's decision dp at now on
// request id before the decision's transaction, when the Signer presigns
// (attestation.Signer.PrepareRequest): from the request and its instance
// as a read outside the transaction finds them, which does not wait for
// SQLite's writer. The transaction records it only if the decision it
// makes is exactly the one signed; nil when there is nothing to prepare.
func (s *Service) prepareDecision(ctx context.Context, tenantID, id string, p *access.Principal, dp DecideParams, now time.Time) *attestation.Prepared {
	if !s.attest.Presigns() || s.attest.Defers() {
		return nil
	}
	var r *agentowl.ApprovalRequest
	var inst *agentowl.Instance
	err := s.store.Read(ctx, func(tx agentowl.Tx) (err error) {
		r, inst, err = tx.RequestGetShared(ctx, id)
		return err
	})
	if err != nil || r.TenantID != tenantID || r.Status != agentowl.StatusPending {
		return nil
	}
	return s.attest.PrepareRequest(ctx, r, operatorDecision(p, inst, dp, now), inst.ApprovalValidity)
}

// ListFilter narrows ListRequests; the zero value lists every request.
type ListFilter struct {
	InstanceID string                  // optional
	Status     agentowl.ApprovalStatus // optional; effective status (a pending request past its deadline is expired)
	After      *agentowl.Cursor        // optional: the next page
	Limit      int
}

// ListRequests lists the requests of the tenant named tenant, newest first,
// as readers see them, for its members.
func (s *Service) ListRequests(ctx context.Context, p *access.Principal, tenant string, f ListFilter) ([]*agentowl.ApprovalRequest, error) {
	m, err := p.Tenant(tenant, agentowl.RoleMember)
	if err != nil {
		return nil, err
	}
	now := s.clock.Now()
	params := agentowl.RequestListParams{TenantID: m.TenantID, InstanceID: f.InstanceID, Status: f.Status,
		Now: now, After: f.After, Limit: f.Limit}
	var out []*agentowl.ApprovalRequest
	err = s.store.Read(ctx, func(tx agentowl.Tx) (err error) {
		out, err = tx.RequestList(ctx, params)
		return err
	})
	for _, r := range out {
		if r.EffectiveStatus(now) == agentowl.StatusExpired && r.Status == agentowl.StatusPending {
			r.Status = agentowl.StatusExpired
			r.Decision = &agentowl.Decision{Status: agentowl.StatusExpired, DecidedAt: r.DeadlineAt, DecidedBy: "deadline"}
		}
	}
	return out, err
}

// TenantRequest returns one request of the tenant named tenant, for its
// members.
func (s *Service) TenantRequest(ctx context.Context, p *access.Principal, tenant, id string) (*agentowl.ApprovalRequest, error) {
	m, err := p.Tenant(tenant, agentowl.RoleMember)
	if err != nil {
		return nil, err
	}
	r, err := s.readRequest(ctx, "", id)
	if agentowl.ErrorCode(err) == agentowl.ECodeNotFound || (err == nil && r.TenantID != m.TenantID) {
		return nil, notFoundIn(m, "approval request", id)
	}
	return r, err
}

// ---- maintenance

// ExpireDue records expiry for every pending request past its deadline and
// returns how many it expired.
func (s *Service) ExpireDue(ctx context.Context) (int, error) {
	total := 0
	for {
		var ids []string
		err := s.store.Read(ctx, func(tx agentowl.Tx) (err error) {
			ids, err = tx.RequestDueForExpiry(ctx, s.clock.Now(), 500)
			return err
		})
		if err != nil || len(ids) == 0 {
			return total, err
		}
		var expired []string
		err = s.writeRequest(ctx, func(tx agentowl.Tx) error {
			expired = expired[:0]
			for _, id := range ids {
				r, err := tx.RequestGet(ctx, id)
				if err != nil {
					return err
				}
				if err := s.expireIfDue(ctx, tx, r, s.clock.Now()); err != nil {
					return err
				}
				if r.Status == agentowl.StatusExpired {
					expired = append(expired, id)
				}
			}
			return nil
		})
		if err != nil {
			return total, fmt.Errorf("expire: %w", err)
		}
		s.hub.notify(expired...)
		if len(expired) > 0 {
			s.wakeDelivery()
		}
		total += len(expired)
		if len(ids) < 500 {
			return total, nil
		}
	}
}

// Attestations is the signer of the provider's decisions (nil when
// attestations are off): its JWK Set is what the server publishes.
func (s *Service) Attestations() *attestation.Signer { return s.attest }
