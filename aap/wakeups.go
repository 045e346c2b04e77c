package aap

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"time"
)

// Wake-up defaults.
const (
	// DefaultLease is how long a handed-out wake-up is reserved for its
	// handler before it is handed out again.
	DefaultLease = 30 * time.Second
	// MaxWait caps the long poll of the wake-up API.
	MaxWait = 60 * time.Second
	// recheck is how often a waiter looks for wake-ups whose lease lapsed.
	recheck = time.Second
)

// Wakeups leases up to limit unacknowledged wake-ups for lease and returns
// them, oldest first. A wake-up not acknowledged within its lease is handed
// out again, so a harness that dies while resuming loses nothing.
func (r *Receiver) Wakeups(ctx context.Context, lease time.Duration, limit int) ([]Wakeup, error) {
	if lease <= 0 {
		lease = DefaultLease
	}
	if limit <= 0 {
		limit = 100
	}
	now := r.clock.Now()
	return r.store.LeaseWakeups(ctx, now, now.Add(lease), limit)
}

// Ack acknowledges a wake-up once the harness has handled it: resumed the
// execution, or found it finished or abandoned. It is never handed out
// again. ErrNotFound for an unknown event ID.
func (r *Receiver) Ack(ctx context.Context, eventID string) error {
	return r.store.AckWakeup(ctx, eventID, r.clock.Now())
}

// wait returns as soon as wake-ups are available (leasing them) or maxWait
// has passed.
func (r *Receiver) wait(ctx context.Context, maxWait, lease time.Duration, limit int) ([]Wakeup, error) {
	deadline := time.Now().Add(maxWait)
	for {
		changed := r.Changed()
		ws, err := r.Wakeups(ctx, lease, limit)
		if err != nil || len(ws) > 0 {
			return ws, err
		}
		left := time.Until(deadline)
		if left <= 0 {
			return nil, nil
		}
		t := time.NewTimer(min(left, recheck))
		select {
		case <-changed:
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		}
		t.Stop()
	}
}

// DispatchConfig configures Dispatch.
type DispatchConfig struct {
	// Handle resumes the harness for one wake-up. Returning nil acknowledges
	// the wake-up; an error leaves it to be handed out again after Lease
	// (for example ErrUnknownRequest, when the submission has not saved its
	// request ID yet). Required.
	Handle func(ctx context.Context, w Wakeup) error
	// Lease is how long a wake-up waits before it is retried after a failed
	// or interrupted Handle. Defaults to DefaultLease.
	Lease time.Duration
	// Batch is how many wake-ups are leased at once. Defaults to 16.
	Batch int
}

// Dispatch hands wake-ups to cfg.Handle until ctx ends, acknowledging each
// one Handle accepts. Several Dispatch loops (in one process or several)
// never get the same wake-up while its lease holds.
func (r *Receiver) Dispatch(ctx context.Context, cfg DispatchConfig) error {
	if cfg.Handle == nil {
		return errors.New("aap: DispatchConfig.Handle is required")
	}
	if cfg.Batch <= 0 {
		cfg.Batch = 16
	}
	for ctx.Err() == nil {
		ws, err := r.wait(ctx, MaxWait, cfg.Lease, cfg.Batch)
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			r.log.Error("aap wake-ups: lease failed", "err", err)
			sleep(ctx, recheck)
			continue
		}
		for _, w := range ws {
			if err := cfg.Handle(ctx, w); err != nil {
				r.log.Warn("aap wake-up not handled; it will be retried", "event_id", w.EventID, "request_id", w.RequestID,
					"attempts", w.Attempts, "err", err)
				continue
			}
			if err := r.Ack(ctx, w.EventID); err != nil && !errors.Is(err, ErrNotFound) {
				r.log.Error("aap wake-up: acknowledgement failed; it will be handed out again", "event_id", w.EventID, "err", err)
			}
		}
	}
	return ctx.Err()
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// WakeupAPI returns the local long-poll API over the receiver's wake-ups,
// for harnesses in other processes. Serve it on a local address only; it has
// no authentication.
//
//	GET  /wakeups?wait=30s[&limit=N]  → 200 {"wakeups": [Wakeup...]}, leased for lease
//	POST /wakeups/{event-id}/ack      → 204, or 404 for an unknown event
//
// A GET returns at once when wake-ups are pending, and otherwise waits up to
// wait (at most MaxWait) for one. Acknowledge each wake-up once the harness
// has handled it; an unacknowledged one is returned again after lease.
func (r *Receiver) WakeupAPI(lease time.Duration) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /wakeups", func(w http.ResponseWriter, req *http.Request) {
		var wait time.Duration
		if v := req.URL.Query().Get("wait"); v != "" {
			d, err := time.ParseDuration(v)
			if err != nil || d < 0 {
				writeJSON(w, http.StatusBadRequest, map[string]any{"error": map[string]string{"code": "invalid_wait", "message": "wait must be a duration such as 30s"}})
				return
			}
			wait = min(d, MaxWait)
		}
		limit := 100
		if v := req.URL.Query().Get("limit"); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 || n > 1000 {
				writeJSON(w, http.StatusBadRequest, map[string]any{"error": map[string]string{"code": "invalid_limit", "message": "limit must be 1-1000"}})
				return
			}
			limit = n
		}
		ws, err := r.wait(req.Context(), wait, lease, limit)
		if err != nil {
			if req.Context().Err() != nil {
				return
			}
			r.log.Error("aap wake-up API: lease failed", "err", err)
			writeJSON(w, http.StatusServiceUnavailable, map[string]any{"error": map[string]string{"code": "unavailable", "message": "the wake-up store failed"}})
			return
		}
		if ws == nil {
			ws = []Wakeup{}
		}
		writeJSON(w, http.StatusOK, map[string]any{"wakeups": ws})
	})
	mux.HandleFunc("POST /wakeups/{id}/ack", func(w http.ResponseWriter, req *http.Request) {
		err := r.Ack(req.Context(), req.PathValue("id"))
		switch {
		case errors.Is(err, ErrNotFound):
			writeJSON(w, http.StatusNotFound, map[string]any{"error": map[string]string{"code": "not_found", "message": "no such wake-up"}})
		case err != nil:
			r.log.Error("aap wake-up API: ack failed", "err", err)
			writeJSON(w, http.StatusServiceUnavailable, map[string]any{"error": map[string]string{"code": "unavailable", "message": "the wake-up store failed"}})
		default:
			w.WriteHeader(http.StatusNoContent)
		}
	})
	return mux
}
