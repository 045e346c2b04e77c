package work

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/agentowl/agentowl"
)

// incidentBatch bounds the failed messages one sweep step looks at.
const incidentBatch = 100

// RecordDeliveryIncidents opens one incident attention item for each work
// handoff or decision push message that ended failed (its retry window ended
// without acknowledgement) and has none yet (the maintenance sweep); it
// returns how many it opened. The item carries the message ID, which is
// unique among items, so concurrent sweeps on several replicas and repeated
// sweeps open exactly one incident per failed message.
func (s *Service) RecordDeliveryIncidents(ctx context.Context) (int, error) {
	var failed []*agentowl.OutboxMessage
	if err := s.store.Read(ctx, func(tx agentowl.Tx) (err error) {
		failed, err = tx.MessagesFailedWithoutIncident(ctx, []string{MessageKindHandoff, MessageKindDecision}, incidentBatch)
		return err
	}); err != nil {
		return 0, err
	}
	n := 0
	for _, m := range failed {
		created := false
		err := s.store.Write(ctx, func(tx agentowl.Tx) error {
			created = false
			w, err := tx.WorkGet(ctx, m.Subject)
			if errors.Is(err, agentowl.ErrNotFound) {
				return nil // the work is gone: nothing to attach an incident to
			}
			if err != nil {
				return err
			}
			attempts, err := tx.AttemptList(ctx, m.ID)
			if err != nil {
				return err
			}
			now := s.clock.Now()
			it := &agentowl.AttentionItem{ID: agentowl.NewID("att"), TenantID: w.TenantID, Kind: KindIncident,
				Status: agentowl.AttentionOpen, WorkID: w.ID, EndpointID: w.EndpointID, Summary: deliveryIncidentSummary(m, w, attempts),
				MessageID: m.ID, CreatedAt: now, UpdatedAt: now}
			if err := tx.AttentionCreate(ctx, it); err != nil {
				return err
			}
			created = true
			return notifyItemTx(ctx, tx, it)
		})
		switch {
		case errors.Is(err, agentowl.ErrConflict): // another sweep opened it first
		case err != nil:
			return n, err
		case created:
			n++
		}
	}
	return n, nil
}

// deliveryIncidentSummary names the delivery, how long it was retried and
// its last error: that of its last attempt, and why it ended.
func deliveryIncidentSummary(m *agentowl.OutboxMessage, w *agentowl.Work, attempts []*agentowl.Attempt) string {
	what := fmt.Sprintf("Handoff delivery %s of work %s to endpoint %s", m.ID, w.ID, w.EndpointID)
	if m.Kind == MessageKindDecision {
		decision := m.ID
		if parts := strings.Split(strings.TrimPrefix(m.Destination, "decision:"), "/"); len(parts) == 3 {
			decision = parts[2]
		}
		what = fmt.Sprintf("Decision push of decision %s (message %s) of work %s to endpoint %s", decision, m.ID, w.ID, w.EndpointID)
	}
	// The attempt that found the window ended only says so; report the last
	// real failure with it.
	last := describeFailure(m.LastStatus, m.LastError)
	for _, a := range slices.Backward(attempts) {
		if d := describeFailure(a.StatusCode, a.Error); d != "" && d != last {
			if last == "" {
				last = d
			} else {
				last = d + " (then: " + last + ")"
			}
			break
		}
	}
	if last == "" {
		last = "none recorded"
	}
	return fmt.Sprintf("%s failed: it exhausted its retries (%d attempts until %s); last error: %s",
		what, len(attempts), rfc3339(m.DeadlineAt), truncate(last, 1024))
}

func describeFailure(status int, msg string) string {
	switch {
	case status != 0 && msg != "":
		return fmt.Sprintf("HTTP %d: %s", status, msg)
	case status != 0:
		return fmt.Sprintf("HTTP %d", status)
	}
	return msg
}
