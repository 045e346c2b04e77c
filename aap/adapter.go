package aap

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/google/uuid"
)

// ToolFunc runs an approved call. It receives the saved execution, whose
// Call is exactly what was approved, and is called at most once per
// execution. Key may serve as an idempotency key towards the tool's own
// service. Its result (or error text) is saved on the execution.
type ToolFunc func(ctx context.Context, e *Execution) (json.RawMessage, error)

// AdapterConfig configures an Adapter.
type AdapterConfig struct {
	// Provider is the AAP provider, usually a *Client with the instance
	// credential. Required.
	Provider Provider
	// Store durably keeps executions. Required.
	Store ExecutionStore
	// Run runs approved calls. Required.
	Run ToolFunc
	// Clock decides whether an approval has expired. Defaults to the system
	// clock.
	Clock Clock
	// Logger receives one line per outcome. Defaults to discarding.
	Logger *slog.Logger
	// Attestations, if set, makes the adapter verify the provider's signed
	// attestation of each approval (AgentOwl, docs/attestations.md) before
	// the call runs; a call whose attestation is missing or does not match
	// never runs. Nil: the approval read back from the provider is enough,
	// as with any AAP provider.
	Attestations *AttestationCheck
}

// Adapter is the execution boundary of an asynchronous harness: a tool call
// runs only through it, at most once, and only while a request read back
// from the provider is approved and its decision.expires_at has not passed.
// Every step is saved before the next one starts, so any process may die at
// any point and a new Adapter over the same store carries on (Recover).
// With AdapterConfig.Attestations it also verifies the provider's signed
// attestation of the approval against the exact call before it runs.
type Adapter struct {
	provider Provider
	store    ExecutionStore
	run      ToolFunc
	clock    Clock
	log      *slog.Logger
	attest   *attestations // nil: approvals are not verified
}

// NewAdapter returns an Adapter for cfg.
func NewAdapter(cfg AdapterConfig) (*Adapter, error) {
	if cfg.Provider == nil || cfg.Store == nil || cfg.Run == nil {
		return nil, errors.New("aap: AdapterConfig needs Provider, Store and Run")
	}
	a := &Adapter{provider: cfg.Provider, store: cfg.Store, run: cfg.Run, clock: clockOr(cfg.Clock), log: cfg.Logger}
	if a.log == nil {
		a.log = slog.New(slog.DiscardHandler)
	}
	if cfg.Attestations != nil {
		var err error
		if a.attest, err = newAttestations(cfg.Attestations, cfg.Provider, a.clock); err != nil {
			return nil, err
		}
	}
	return a, nil
}

// Submit intercepts a call. It durably saves key and the exact call, then
// submits it with key as the Idempotency-Key, then saves the request ID. If
// the request is already terminal it is applied at once (an approved call
// runs before Submit returns); otherwise the execution is suspended
// (ExecWaiting) and Submit returns: the process may exit, and a wake-up
// (Resume) or Recover carries on.
//
// key identifies this execution attempt; "" generates a fresh one. Derive it
// from the agent's own tool-call ID to make re-running an interrupted agent
// step safe: submitting the same key and call again continues the saved
// execution instead of creating another (a different call with the same key
// is ErrConflict). On a transient failure the execution stays saved as
// ExecSubmitting and the error is returned; Submit again or Recover retries
// with the same key.
func (a *Adapter) Submit(ctx context.Context, key string, call Call) (*Execution, error) {
	if err := call.normalize(); err != nil {
		return nil, err
	}
	if key == "" {
		key = uuid.NewString()
	}
	now := a.clock.Now()
	e := &Execution{Key: key, Call: call, State: ExecSubmitting, CreatedAt: now, UpdatedAt: now}
	err := a.store.CreateExecution(ctx, e)
	if errors.Is(err, ErrConflict) {
		if e, err = a.store.GetExecution(ctx, key); err != nil {
			return nil, err
		}
		if e.Call.Tool != call.Tool || !sameJSON(e.Call.Arguments, call.Arguments) || e.Call.Timeout != call.Timeout {
			return nil, fmt.Errorf("%w: key %s was used for another call", ErrConflict, key)
		}
		switch e.State {
		case ExecSubmitting:
		case ExecWaiting:
			return a.resume(ctx, e)
		default:
			return e, nil
		}
	} else if err != nil {
		return nil, err
	}
	return a.submit(ctx, e)
}

// submit posts a saved ExecSubmitting execution and saves its request ID.
func (a *Adapter) submit(ctx context.Context, e *Execution) (*Execution, error) {
	req, err := a.provider.CreateRequest(ctx, e.Key, &e.Call)
	if err != nil {
		if permanent(err) {
			return a.end(ctx, e, []ExecState{ExecSubmitting}, ExecNotRun, "the provider refused the submission: "+err.Error())
		}
		return e, err
	}
	if !sameCall(&e.Call, req) {
		return a.end(ctx, e, []ExecState{ExecSubmitting}, ExecNotRun,
			fmt.Sprintf("the provider's request %s does not carry the submitted call", req.ID))
	}
	if req.Status == StatusApproved && a.clock.Now().Before(*req.Decision.ExpiresAt) {
		// Approved at creation (a policy decided): save the request ID and
		// the started mark in one durable write.
		return a.startFrom(ctx, e, ExecSubmitting, req.ID, *req.Decision.ExpiresAt)
	}
	ok, err := a.store.Transition(ctx, e.Key, []ExecState{ExecSubmitting},
		Change{State: ExecWaiting, RequestID: req.ID, At: a.clock.Now()})
	if err != nil {
		return e, err
	}
	if !ok {
		// Another process moved it on (or abandoned it) meanwhile.
		return a.store.GetExecution(ctx, e.Key)
	}
	e.State, e.RequestID = ExecWaiting, req.ID
	a.log.Info("aap: submitted", "key", e.Key, "request_id", req.ID, "status", req.Status)
	if req.Status == StatusPending {
		// A decision (and its wake-up) may have come between the answer and
		// the save above; one read after the save sees it. Later decisions
		// find the saved execution.
		return a.resume(ctx, e)
	}
	return a.apply(ctx, e, req)
}

// Resume applies the current decision of requestID to its saved execution:
// it reads the request from the provider and, only if it is approved and the
// clock is before decision.expires_at, durably marks the execution started
// and runs the tool once. A denied, expired or cancelled request, or an
// expired approval, ends it as ExecNotRun. A pending request leaves it
// suspended. An execution that is no longer waiting (started, finished, not
// run, abandoned) is returned unchanged: a repeated or late wake-up is
// discarded.
//
// ErrUnknownRequest means no saved execution carries requestID yet: keep
// the wake-up and retry it. Any other error leaves the execution suspended
// and the tool not run.
func (a *Adapter) Resume(ctx context.Context, requestID string) (*Execution, error) {
	e, err := a.store.ExecutionByRequest(ctx, requestID)
	if errors.Is(err, ErrNotFound) {
		return nil, fmt.Errorf("%w: %s", ErrUnknownRequest, requestID)
	}
	if err != nil {
		return nil, err
	}
	return a.resume(ctx, e)
}

// HandleWakeup resumes the execution a wake-up is about; it fits
// DispatchConfig.Handle. It returns nil when the wake-up may be acknowledged:
// the execution was resumed, is still pending, or is no longer waiting.
func (a *Adapter) HandleWakeup(ctx context.Context, w Wakeup) error {
	_, err := a.Resume(ctx, w.RequestID)
	return err
}

func (a *Adapter) resume(ctx context.Context, e *Execution) (*Execution, error) {
	if e.State != ExecWaiting {
		return e, nil
	}
	req, err := a.provider.GetRequest(ctx, e.RequestID)
	if err != nil {
		var ae *APIError
		if errors.As(err, &ae) && ae.StatusCode == 404 {
			return a.end(ctx, e, []ExecState{ExecWaiting}, ExecNotRun, "the provider no longer has request "+e.RequestID)
		}
		return e, err
	}
	if req.ID != e.RequestID {
		return e, fmt.Errorf("%w: asked for request %s, got %s", ErrInvalidResponse, e.RequestID, req.ID)
	}
	if !sameCall(&e.Call, req) {
		return a.end(ctx, e, []ExecState{ExecWaiting}, ExecNotRun,
			fmt.Sprintf("the provider's request %s does not carry the submitted call", req.ID))
	}
	return a.apply(ctx, e, req)
}

// apply enforces a request read back from the provider on a waiting
// execution.
func (a *Adapter) apply(ctx context.Context, e *Execution, req *Request) (*Execution, error) {
	switch req.Status {
	case StatusPending:
		return e, nil
	case StatusDenied, StatusCancelled:
		reason := string(req.Status)
		if req.Decision.Note != "" {
			reason += ": " + req.Decision.Note
		}
		return a.end(ctx, e, []ExecState{ExecWaiting}, ExecNotRun, reason)
	case StatusExpired:
		return a.end(ctx, e, []ExecState{ExecWaiting}, ExecNotRun, "expired: no decision before "+req.DeadlineAt.Format(time.RFC3339))
	case StatusApproved:
		return a.start(ctx, e, *req.Decision.ExpiresAt)
	}
	return e, fmt.Errorf("%w: status %q", ErrInvalidResponse, req.Status)
}

// start runs an approved call once, if its approval is still valid.
func (a *Adapter) start(ctx context.Context, e *Execution, expires time.Time) (*Execution, error) {
	return a.startFrom(ctx, e, ExecWaiting, "", expires)
}

// startFrom marks e started (from state from, saving requestID if not
// empty) and runs it once, if its approval is still valid (and, with an
// AttestationCheck, its attestation verifies).
func (a *Adapter) startFrom(ctx context.Context, e *Execution, from ExecState, requestID string, expires time.Time) (*Execution, error) {
	expired := "approval expired at " + expires.Format(time.RFC3339) + " before the call could start"
	if !a.clock.Now().Before(expires) {
		return a.end(ctx, e, []ExecState{from}, ExecNotRun, expired)
	}
	var proof *verified
	if a.attest != nil {
		id := requestID
		if id == "" {
			id = e.RequestID
		}
		var err error
		proof, err = a.attest.verify(ctx, e, id)
		var r *attestRefusal
		if errors.As(err, &r) {
			return a.endChange(ctx, e, []ExecState{from}, Change{State: ExecNotRun, RequestID: requestID, Reason: r.reason, At: a.clock.Now()})
		}
		if err != nil {
			a.log.Warn("aap: the approval's attestation could not be checked yet; the call waits", "key", e.Key, "request_id", id, "err", err)
			return e, err
		}
		// The attestation's expiry binds too (it is the approval's).
		if proof.doc.ExpiresAt.Before(expires) {
			expires = proof.doc.ExpiresAt
			expired = "attested approval expired at " + expires.Format(time.RFC3339) + " before the call could start"
		}
		ctx = context.WithValue(ctx, verifiedKey{}, *proof)
	}
	ok, err := a.store.Transition(ctx, e.Key, []ExecState{from}, Change{State: ExecStarted, RequestID: requestID, At: a.clock.Now()})
	if err != nil || !ok {
		if err == nil {
			return a.store.GetExecution(ctx, e.Key) // another process got here first
		}
		return e, err
	}
	if requestID != "" {
		e.RequestID = requestID
	}
	e.State = ExecStarted
	// The check immediately before the call starts: saving the mark took
	// time.
	if !a.clock.Now().Before(expires) {
		return a.end(ctx, e, []ExecState{ExecStarted}, ExecNotRun, expired)
	}
	if proof != nil {
		a.log.Info("aap: running approved call", "key", e.Key, "request_id", e.RequestID, "tool", e.Call.Tool, "attestation", proof.doc.ID)
	} else {
		a.log.Info("aap: running approved call", "key", e.Key, "request_id", e.RequestID, "tool", e.Call.Tool)
	}
	result, runErr := a.run(ctx, e)
	c := Change{State: ExecFinished, Result: result, At: a.clock.Now()}
	if runErr != nil {
		c.Error = runErr.Error()
		if c.Error == "" {
			c.Error = "error"
		}
		c.Result = nil
	}
	if _, err := a.store.Transition(context.WithoutCancel(ctx), e.Key, []ExecState{ExecStarted}, c); err != nil {
		return e, fmt.Errorf("aap: the call ran but its result was not saved: %w", err)
	}
	e.State, e.Result, e.Error, e.UpdatedAt = ExecFinished, c.Result, c.Error, c.At
	return e, nil
}

// end moves e from one of from to a final state with reason.
func (a *Adapter) end(ctx context.Context, e *Execution, from []ExecState, state ExecState, reason string) (*Execution, error) {
	return a.endChange(ctx, e, from, Change{State: state, Reason: reason, At: a.clock.Now()})
}

// endChange moves e from one of from to the final state of c.
func (a *Adapter) endChange(ctx context.Context, e *Execution, from []ExecState, c Change) (*Execution, error) {
	ok, err := a.store.Transition(ctx, e.Key, from, c)
	if err != nil {
		return e, err
	}
	if !ok {
		return a.store.GetExecution(ctx, e.Key)
	}
	if c.RequestID != "" {
		e.RequestID = c.RequestID
	}
	a.log.Info("aap: call will not run", "key", e.Key, "request_id", e.RequestID, "reason", c.Reason)
	e.State, e.Reason = c.State, c.Reason
	return e, nil
}

// Abandon gives up an execution that has not started: it is durably marked
// abandoned (so a later approval never runs it) and its request is
// cancelled. If the submission never returned a request ID, the call is
// re-submitted with the same key to learn it. A failed cancellation is
// retried by Recover. Finished, started and not-run executions are returned
// unchanged. Suspending (letting the process exit) is not abandoning and
// never cancels anything.
func (a *Adapter) Abandon(ctx context.Context, key, reason string) (*Execution, error) {
	e, err := a.store.GetExecution(ctx, key)
	if err != nil {
		return nil, err
	}
	if e.State == ExecSubmitting || e.State == ExecWaiting {
		if reason == "" {
			reason = "abandoned by the harness"
		}
		ok, err := a.store.Transition(ctx, key, []ExecState{ExecSubmitting, ExecWaiting},
			Change{State: ExecAbandoned, Reason: reason, At: a.clock.Now()})
		if err != nil {
			return e, err
		}
		if e, err = a.store.GetExecution(ctx, key); err != nil || !ok {
			return e, err
		}
	}
	if e.State != ExecAbandoned || e.CancelDone {
		return e, nil
	}
	return a.cancel(ctx, e)
}

// cancel withdraws an abandoned execution's request.
func (a *Adapter) cancel(ctx context.Context, e *Execution) (*Execution, error) {
	id := e.RequestID
	if id == "" {
		req, err := a.provider.CreateRequest(ctx, e.Key, &e.Call)
		if err != nil && !permanent(err) {
			return e, err
		}
		if err == nil {
			id = req.ID
		}
	}
	if id != "" {
		_, err := a.provider.CancelRequest(ctx, id)
		var ae *APIError
		if err != nil && !(errors.As(err, &ae) && (ae.Code == "already_terminal" || ae.StatusCode == 404)) {
			return e, err
		}
	}
	c := Change{State: ExecAbandoned, RequestID: id, Reason: e.Reason, CancelDone: true, At: a.clock.Now()}
	if _, err := a.store.Transition(ctx, e.Key, []ExecState{ExecAbandoned}, c); err != nil {
		return e, err
	}
	e.RequestID, e.CancelDone = id, true
	return e, nil
}

// Recover carries on every saved execution that is not done: submissions
// whose answer was lost are re-submitted with their key, suspended
// executions are resumed by their request ID (the remedy for lost
// notifications), and abandoned ones whose cancellation was not confirmed
// are cancelled again. Run it at start and from time to time. It returns
// the executions it looked at and the errors it met; one failure does not
// stop the others.
func (a *Adapter) Recover(ctx context.Context) ([]*Execution, error) {
	list, err := a.store.ListExecutions(ctx, ExecSubmitting, ExecWaiting, ExecAbandoned)
	if err != nil {
		return nil, err
	}
	var errs []error
	out := make([]*Execution, 0, len(list))
	for _, e := range list {
		var next *Execution
		switch {
		case e.State == ExecSubmitting:
			next, err = a.submit(ctx, e)
		case e.State == ExecWaiting:
			next, err = a.resume(ctx, e)
		case !e.CancelDone:
			next, err = a.cancel(ctx, e)
		default:
			continue
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("execution %s: %w", e.Key, err))
		}
		if next != nil {
			out = append(out, next)
		}
	}
	return out, errors.Join(errs...)
}

// Execution returns a saved execution by key; ErrNotFound.
func (a *Adapter) Execution(ctx context.Context, key string) (*Execution, error) {
	return a.store.GetExecution(ctx, key)
}
