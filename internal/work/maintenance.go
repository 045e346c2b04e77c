package work

import (
	"context"
	"time"
)

// SweepInterval is how often maintenance records the expiry of questions and
// approvals whose declared expiry has passed.
const SweepInterval = 5 * time.Second

// Run is the agent-work maintenance loop: until ctx ends it expires request
// items past their expiry (reads and decisions already refuse them; the sweep
// makes the inbox say so) and opens an incident for each handoff or decision
// push that exhausted its retries (RecordDeliveryIncidents). Every replica may run it: each change is a guarded
// write.
func (s *Service) Run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.clock.After(SweepInterval):
			if n, err := s.ExpireRequests(ctx); err != nil && ctx.Err() == nil {
				s.log.Error("attention expiry sweep failed", "err", err)
			} else if n > 0 {
				s.log.Info("attention expiry sweep", "expired", n)
			}
			if n, err := s.RecordDeliveryIncidents(ctx); err != nil && ctx.Err() == nil {
				s.log.Error("delivery incident sweep failed", "err", err)
			} else if n > 0 {
				s.log.Info("delivery incident sweep", "incidents", n)
			}
		}
	}
}
