package attestation

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/agentowl/agentowl"
)

// Signing after the transaction (the default; Config.InTransaction turns
// it off). An operator's approval or denial of an AAP request commits
// without its attestation, and is signed moments later from what was
// committed: by this replica's background signer (After), or first by
// whoever asks for it (RequestAttestation: the attestation routes, and so
// the gateway and the harness kit, which read it there), or by the sweep
// of decisions a stopped replica left unsigned (Sweep). The Ed25519
// signature, a third of a decision's CPU time, so leaves the decision's
// path; the document is the one the transaction would have signed, every
// field read from the committed request and decision (a denial's expiry
// from its instance's approval validity as it is when signed). Whoever
// signs first wins (AttestationPut); the others serve the winner.
// Decisions made before the first key was created (attestations off)
// are not signed.

const (
	// signBatch is how many decisions one signing transaction records.
	signBatch = 256
	// signQuiet is the pause in decisions the background signer waits for,
	// and signMaxDelay how long it waits at most: signing yields to
	// deciding during a burst.
	signQuiet    = 20 * time.Millisecond
	signMaxDelay = time.Second
	// sweepEvery is how often (on the Signer's clock) the background signer
	// also sweeps; sweepGrace how old a decision must be to be swept (the
	// replica that made it signs it before then).
	sweepEvery = time.Minute
	sweepGrace = time.Minute
)

// deferred is the background signer's queue.
type deferred struct {
	mu      sync.Mutex
	ids     []string
	running bool
	// idle is closed when the running background signer stops.
	idle  chan struct{}
	first time.Time // when the oldest queued ID was queued (real time)
	last  time.Time // when the newest was
	// swept: decisions before it were swept; zero: none yet.
	swept time.Time
	// sweptAt is when (the clock's) the last sweep ran.
	sweptAt time.Time
	// since is the oldest key's creation to the second (decisions are
	// timed to the second); zero until read.
	since time.Time
}

// Defers reports whether the use-cases leave AAP decisions to sign after
// their transactions (After). False for a nil Signer.
func (s *Signer) Defers() bool { return s != nil && !s.cfg.InTransaction }

// After queues the attestation of the decision committed on AAP request
// id for the background signer; nothing when the Signer does not defer.
func (s *Signer) After(id string) {
	if !s.Defers() {
		return
	}
	now := time.Now()
	s.def.mu.Lock()
	if len(s.def.ids) == 0 {
		s.def.first = now
	}
	s.def.ids, s.def.last = append(s.def.ids, id), now
	s.startLocked()
	s.def.mu.Unlock()
}

// log is the configured logger, or one that discards.
func (s *Signer) log() *slog.Logger {
	if s.cfg.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return s.cfg.Logger
}

// kick starts the background signer if it is idle: it sweeps, then stops
// when nothing is queued.
func (s *Signer) kick() {
	s.def.mu.Lock()
	s.startLocked()
	s.def.mu.Unlock()
}

// startLocked starts the background signer unless it runs.
func (s *Signer) startLocked() {
	if !s.def.running {
		s.def.running, s.def.idle = true, make(chan struct{})
		go s.signLoop()
	}
}

// signLoop signs the queued decisions in batches, and sweeps every
// sweepEvery, until the queue is empty. Failures are left to the sweep
// and to the readers (RequestAttestation).
func (s *Signer) signLoop() {
	ctx := context.Background()
	for {
		if now := s.clock.Now(); s.sweepDue(now) {
			if _, err := s.Sweep(ctx); err != nil {
				s.log().Warn("attestation sweep failed; it runs again", "err", err)
			}
		}
		ids := s.nextBatch()
		if ids == nil {
			return
		}
		if _, err := s.signRequests(ctx, ids); err != nil {
			s.log().Warn("signing decisions after their transactions failed; the sweep or their first reader signs them", "decisions", len(ids), "err", err)
		}
	}
}

func (s *Signer) sweepDue(now time.Time) bool {
	s.def.mu.Lock()
	defer s.def.mu.Unlock()
	return s.def.sweptAt.IsZero() || now.Sub(s.def.sweptAt) >= sweepEvery
}

// nextBatch waits for a pause in decisions (at most signMaxDelay after the
// oldest queued one) and takes up to signBatch queued IDs; nil, stopping
// the loop, when none are queued.
func (s *Signer) nextBatch() []string {
	for {
		s.def.mu.Lock()
		if len(s.def.ids) == 0 {
			s.def.running = false
			close(s.def.idle)
			s.def.mu.Unlock()
			return nil
		}
		now := time.Now()
		if now.Sub(s.def.last) >= signQuiet || now.Sub(s.def.first) >= signMaxDelay {
			n := min(len(s.def.ids), signBatch)
			ids := append([]string(nil), s.def.ids[:n]...)
			s.def.ids = append(s.def.ids[:0], s.def.ids[n:]...)
			s.def.first = now
			s.def.mu.Unlock()
			return ids
		}
		s.def.mu.Unlock()
		time.Sleep(signQuiet)
	}
}

// Flush signs every queued decision now, waiting for no pause, and
// returns once the background signer has stopped (tests and benchmarks).
func (s *Signer) Flush(ctx context.Context) error {
	if s == nil {
		return nil
	}
	for {
		s.def.mu.Lock()
		n := min(len(s.def.ids), signBatch)
		ids := append([]string(nil), s.def.ids[:n]...)
		s.def.ids = append(s.def.ids[:0], s.def.ids[n:]...)
		idle, running := s.def.idle, s.def.running
		s.def.mu.Unlock()
		if n == 0 {
			if running {
				select {
				case <-idle:
				case <-ctx.Done():
					return ctx.Err()
				}
			}
			return nil
		}
		if _, err := s.signRequests(ctx, ids); err != nil {
			return err
		}
	}
}

// signRequests signs the decisions committed on the AAP requests ids
// (approvals and denials since the first key was created; others are
// skipped) and records them unless signed already. It returns how many
// it signed.
func (s *Signer) signRequests(ctx context.Context, ids []string) (int, error) {
	since, err := s.since(ctx)
	if err != nil || since.IsZero() {
		return 0, err
	}
	type decided struct {
		r        *agentowl.ApprovalRequest
		validity time.Duration
	}
	var todo []decided
	err = s.store.Read(ctx, func(tx agentowl.Tx) error {
		todo = todo[:0]
		for _, id := range ids {
			r, inst, err := tx.RequestGetShared(ctx, id)
			if errors.Is(err, agentowl.ErrNotFound) {
				continue
			}
			if err != nil {
				return err
			}
			if d := r.Decision; d != nil && (d.Status == agentowl.StatusApproved || d.Status == agentowl.StatusDenied) &&
				!d.DecidedAt.Before(since) {
				todo = append(todo, decided{r, inst.ApprovalValidity})
			}
		}
		return nil
	})
	if err != nil || len(todo) == 0 {
		return 0, err
	}
	kid, priv, err := s.committedKey(ctx)
	if err != nil {
		return 0, err
	}
	as := make([]*agentowl.Attestation, 0, len(todo))
	for _, d := range todo {
		doc, err := requestDocument(d.r, d.r.Decision, d.validity, nil)
		if err != nil {
			continue // arguments that do not digest: nothing to attest them with
		}
		a, err := s.signWith(doc, kid, priv, agentowl.AttestationAAPRequest, d.r.ID)
		if err != nil {
			return 0, err
		}
		as = append(as, a)
	}
	return len(as), s.store.Write(ctx, func(tx agentowl.Tx) error {
		for _, a := range as {
			if err := tx.AttestationPut(ctx, a); err != nil {
				return err
			}
		}
		return nil
	})
}

// RequestAttestation returns the attestation of the decision on AAP
// request r, signing it now when it is still to be signed (the decision
// committed, as a read finds it, is an approval or denial made since the
// first key was created); ErrNotFound when it has none.
func (s *Signer) RequestAttestation(ctx context.Context, r *agentowl.ApprovalRequest) (*agentowl.Attestation, error) {
	a, err := s.Get(ctx, agentowl.AttestationAAPRequest, r.ID)
	if !errors.Is(err, agentowl.ErrNotFound) || r.Status == agentowl.StatusCancelled || r.Status == agentowl.StatusExpired {
		return a, err
	}
	n, err := s.signRequests(ctx, []string{r.ID})
	if err != nil {
		return nil, err
	}
	if n == 0 {
		return nil, agentowl.ErrNotFound
	}
	return s.Get(ctx, agentowl.AttestationAAPRequest, r.ID)
}

// since is the time from which decisions are attested: the first key's
// creation, to the second (decisions are timed to the second). Zero
// without a key.
func (s *Signer) since(ctx context.Context) (time.Time, error) {
	s.def.mu.Lock()
	since := s.def.since
	s.def.mu.Unlock()
	if !since.IsZero() {
		return since, nil
	}
	var ks []*agentowl.AttestationKey
	err := s.store.Read(ctx, func(tx agentowl.Tx) (err error) {
		ks, err = tx.AttestationKeyList(ctx)
		return err
	})
	if err != nil || len(ks) == 0 {
		return time.Time{}, err
	}
	since = ks[0].CreatedAt.Truncate(time.Second)
	s.def.mu.Lock()
	s.def.since = since
	s.def.mu.Unlock()
	return since, nil
}

// Sweep signs the approvals and denials of AAP requests decided since the
// last sweep (the first: since the first key was created) until a minute
// ago that have no attestation: those a replica stopped before signing.
// The background signer runs it every minute while it has decisions to
// sign, and once after Ensure. It returns how many it signed.
func (s *Signer) Sweep(ctx context.Context) (int, error) {
	now := s.clock.Now()
	s.def.mu.Lock()
	from := s.def.swept
	s.def.sweptAt = now
	s.def.mu.Unlock()
	if from.IsZero() {
		var err error
		if from, err = s.since(ctx); err != nil || from.IsZero() {
			return 0, err
		}
	}
	to := now.Add(-sweepGrace)
	signed := 0
	for to.After(from) {
		var ids []string
		err := s.store.Read(ctx, func(tx agentowl.Tx) (err error) {
			ids, err = tx.AttestationsUnsigned(ctx, from, to, signBatch)
			return err
		})
		n := 0
		if err == nil && len(ids) > 0 {
			n, err = s.signRequests(ctx, ids)
		}
		if err != nil {
			return signed, err
		}
		signed += n
		if len(ids) < signBatch || n == 0 { // n == 0: a page of nothing to sign
			break
		}
	}
	// A decision's time is fixed before its transaction: the next sweep
	// looks again at the last minute of this one.
	if next := to.Add(-sweepGrace); next.After(from) {
		s.def.mu.Lock()
		s.def.swept = next
		s.def.mu.Unlock()
	}
	return signed, nil
}
