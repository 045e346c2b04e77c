package maintenance

import (
	"context"
	"time"

	"github.com/agentowl/agentowl"
)

// expire records the expiry of AAP requests and of agent work's request
// items past their deadline.
func (s *Scheduler) expire(ctx context.Context) (int64, string, error) {
	aap, err := s.svc.Approval.ExpireDue(ctx)
	if err != nil {
		return int64(aap), "", err
	}
	items, err := s.svc.Work.ExpireRequests(ctx)
	return int64(aap + items), outcomeOK, err
}

// deliveryIncidents opens the incidents of failed handoffs and pushes.
func (s *Scheduler) deliveryIncidents(ctx context.Context) (int64, string, error) {
	n, err := s.svc.Work.RecordDeliveryIncidents(ctx)
	return int64(n), outcomeOK, err
}

// endConversationWindows ends the SMS conversations whose window passed.
func (s *Scheduler) endConversationWindows(ctx context.Context) (int64, string, error) {
	if s.svc.Ingress == nil {
		return 0, outcomeSkipped, nil
	}
	n, err := s.svc.Ingress.EndIdleConversations(ctx)
	return int64(n), outcomeOK, err
}

// recoverBatch bounds the leases one recovery transaction frees.
const recoverBatch = 1000

// RecoveryGrace is how long past its end a lease must be before recovery
// frees it. A live holder has recorded its outcome well before (an attempt
// ends LeaseMargin before its lease); only a dead one's lease lasts that
// long, so recovery never drops a live attempt's outcome.
const RecoveryGrace = time.Minute

// recoverLeases frees the leases of outbox messages and destination slots
// that lapsed RecoveryGrace ago: their holder died mid-attempt. The
// delivery engine would claim such a message again anyway; freeing it here
// counts it, so an operator sees that a process died holding work.
func (s *Scheduler) recoverLeases(ctx context.Context) (int64, string, error) {
	var total int64
	for _, free := range []func(tx agentowl.Tx, now time.Time) (int, error){
		func(tx agentowl.Tx, now time.Time) (int, error) {
			return tx.MessageRecoverLapsed(ctx, now, recoverBatch)
		},
		func(tx agentowl.Tx, now time.Time) (int, error) { return tx.SlotRecoverLapsed(ctx, now, recoverBatch) },
	} {
		for {
			var n int
			err := s.store.Write(ctx, func(tx agentowl.Tx) (err error) {
				n, err = free(tx, s.clock.Now().Add(-RecoveryGrace))
				return err
			})
			total += int64(n)
			if err != nil {
				return total, "", err
			}
			if n < recoverBatch {
				break
			}
		}
	}
	if total > 0 {
		s.m.recovered.Add(float64(total))
	}
	return total, outcomeOK, nil
}

// purgeStep is one class of retention and where its retention ends.
type purgeStep struct {
	class  agentowl.PurgeClass
	before func(now time.Time) time.Time
}

// purgeSteps are retention's classes in the order they run: what refers
// to a record goes before the record (deliveries before the AAP requests
// they are about; callbacks and attention items before their work; work
// before its event; events before their conversation).
func (s *Scheduler) purgeSteps() []purgeStep {
	at := func(now time.Time) time.Time { return now }
	ago := func(d time.Duration) func(time.Time) time.Time {
		return func(now time.Time) time.Time { return now.Add(-d) }
	}
	r := s.cfg.Retention
	return []purgeStep{
		// The AAP's own windows are recorded on each row (retain_until).
		{agentowl.PurgeDeliveries, at},
		{agentowl.PurgeApprovalRequests, at},
		{agentowl.PurgeIdempotencyKeys, at},
		// Counter windows are at most an hour and slot leases seconds: a
		// day later nobody reads them.
		{agentowl.PurgeRateCounters, ago(day)},
		{agentowl.PurgeDeliverySlots, ago(day)},
		// A deleted instance's record is kept as long as a decision would be.
		{agentowl.PurgeInstances, ago(agentowl.RetentionAfterDecision)},
		{agentowl.PurgeCallbacks, ago(r.Callbacks)},
		{agentowl.PurgeAttention, ago(r.Attention)},
		{agentowl.PurgeWork, ago(r.Work)},
		{agentowl.PurgeEvents, ago(r.Events)},
		{agentowl.PurgeConversations, ago(r.Conversations)},
		{agentowl.PurgeAudit, ago(r.Audit)},
	}
}

// retain purges every class past its retention, one bounded transaction
// at a time: live writes interleave between the batches, and a batch
// never holds more than PurgeBatch rows of a table.
func (s *Scheduler) retain(ctx context.Context) (int64, string, error) {
	var total int64
	for _, step := range s.purgeSteps() {
		p := agentowl.PurgeParams{Class: step.class, Before: step.before(s.clock.Now()), Limit: s.cfg.PurgeBatch}
		for {
			var r agentowl.PurgeResult
			err := s.store.Write(ctx, func(tx agentowl.Tx) (err error) {
				r, err = tx.PurgeBatch(ctx, p)
				return err
			})
			total += r.Deleted
			s.m.purged.WithLabelValues(string(step.class)).Add(float64(r.Deleted))
			if err != nil {
				return total, "", err
			}
			if r.Deleted == 0 || ctx.Err() != nil {
				break
			}
			p.After = r.After
		}
	}
	return total, outcomeOK, ctx.Err()
}

// deleteRetainedBytes runs the retained-bytes hook until it has nothing
// more to delete; without one, the job is skipped.
func (s *Scheduler) deleteRetainedBytes(ctx context.Context) (int64, string, error) {
	if s.cfg.RetainedBytes == nil {
		return 0, outcomeSkipped, nil
	}
	var total int64
	for {
		n, err := s.cfg.RetainedBytes.DeleteExpired(ctx, s.clock.Now(), s.cfg.PurgeBatch)
		total += int64(n)
		if err != nil || n < s.cfg.PurgeBatch || ctx.Err() != nil {
			return total, outcomeOK, err
		}
	}
}
