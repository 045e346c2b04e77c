package maintenance

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/agentowl/agentowl"
	"github.com/agentowl/agentowl/internal/work"
)

// Overdue rules: the expectation a work broke, as its work_overdue
// incident names it.
const (
	// RuleAcceptWithin: no callback within the endpoint's accept_within of
	// the handoff's delivery.
	RuleAcceptWithin = "accept_within"
	// RuleReportInterval: accepted or running, and no callback for the
	// endpoint's report_interval.
	RuleReportInterval = "report_interval"
	// RuleInputExpiry: needs_input, and a question or approval expired
	// unanswered.
	RuleInputExpiry = "input_expiry"
)

// CauseOverdue is the cause of overdue incidents in Needs attention.
const CauseOverdue = "work_overdue"

// overduePage is how many open work items one scan step reads.
const overduePage = 500

// Effective returns the expectations that hold for an endpoint: its own
// where set, the defaults elsewhere. A zero duration means the rule is off.
func (s *Scheduler) Effective(o agentowl.EndpointOverdue) Expectations {
	e := s.cfg.Overdue
	if o.AcceptWithin != nil {
		e.AcceptWithin = *o.AcceptWithin
	}
	if o.ReportInterval != nil {
		e.ReportInterval = *o.ReportInterval
	}
	if o.InputExpiry != nil {
		e.InputExpiryOff = !*o.InputExpiry
	}
	return e
}

// Defaults returns the server's default expectations (zero: off).
func (s *Scheduler) Defaults() Expectations { return s.cfg.Overdue }

// breach is a broken expectation.
type breach struct {
	rule string
	due  time.Time // when the work became overdue
	what string    // what was expected and did not happen
}

// check applies the rules of e to one open work at now. Each status has
// one rule; a work in pending without a delivered handoff has none (a
// failing handoff is a delivery incident, not an overdue runtime).
func check(ow *agentowl.OpenWork, e Expectations, now time.Time) (breach, bool) {
	switch ow.Status {
	case agentowl.WorkPending:
		if e.AcceptWithin > 0 && ow.HandoffDeliveredAt != nil {
			due := ow.HandoffDeliveredAt.Add(e.AcceptWithin)
			if !now.Before(due) {
				return breach{RuleAcceptWithin, due, fmt.Sprintf("no callback came within %s of its handoff's delivery at %s",
					e.AcceptWithin, rfc3339(*ow.HandoffDeliveredAt))}, true
			}
		}
	case agentowl.WorkAccepted, agentowl.WorkRunning:
		if e.ReportInterval > 0 {
			due := ow.UpdatedAt.Add(e.ReportInterval)
			if !now.Before(due) {
				return breach{RuleReportInterval, due, fmt.Sprintf("it is %s and no callback came since %s (one is due at least every %s)",
					ow.Status, rfc3339(ow.UpdatedAt), e.ReportInterval)}, true
			}
		}
	case agentowl.WorkNeedsInput:
		if !e.InputExpiryOff && ow.InputExpiredAt != nil {
			return breach{RuleInputExpiry, *ow.InputExpiredAt, fmt.Sprintf("it needs input and a question or approval expired unanswered at %s",
				rfc3339(*ow.InputExpiredAt))}, true
		}
	}
	return breach{}, false
}

// overdue scans every open work and opens one work_overdue incident per
// work, rule and sequence that broke an expectation. It never changes the
// work: a later callback resolves the incident (internal/work).
func (s *Scheduler) overdue(ctx context.Context) (int64, string, error) {
	now := s.clock.Now()
	var opened int64
	after := ""
	for {
		var page []*agentowl.OpenWork
		if err := s.store.Read(ctx, func(tx agentowl.Tx) (err error) {
			page, err = tx.OpenWorkScan(ctx, agentowl.OpenWorkScanParams{AfterID: after, Now: now, Limit: overduePage})
			return err
		}); err != nil {
			return opened, "", err
		}
		for _, ow := range page {
			b, ok := check(ow, s.Effective(ow.Overdue), now)
			if !ok || ow.OverdueRule == b.rule {
				continue
			}
			created, err := s.openOverdue(ctx, ow, b, now)
			if err != nil {
				return opened, "", err
			}
			if created {
				opened++
			}
		}
		if len(page) < overduePage {
			return opened, outcomeOK, nil
		}
		after = page[len(page)-1].WorkID
	}
}

// openOverdue opens the incident of b for the scanned work unless it moved
// on since the scan read it (a callback came) or the incident exists.
func (s *Scheduler) openOverdue(ctx context.Context, scanned *agentowl.OpenWork, b breach, now time.Time) (bool, error) {
	created := false
	err := s.store.Write(ctx, func(tx agentowl.Tx) error {
		created = false
		w, err := tx.WorkGetForUpdate(ctx, scanned.WorkID)
		if errors.Is(err, agentowl.ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		if w.Status != scanned.Status || w.Sequence != scanned.Sequence || !w.UpdatedAt.Equal(scanned.UpdatedAt) {
			return nil // a callback came meanwhile; the next scan judges it afresh
		}
		last, err := tx.CallbackList(ctx, w.ID, 1)
		if err != nil {
			return err
		}
		summary := fmt.Sprintf("Work %s is overdue (%s): %s. Last report: %s. Its status stays %s; a later callback resolves this incident.",
			w.ID, b.rule, b.what, describeLast(last), w.Status)
		err = tx.AttentionCreate(ctx, &agentowl.AttentionItem{ID: agentowl.NewID("att"), TenantID: w.TenantID, Kind: work.KindIncident,
			Status: agentowl.AttentionOpen, WorkID: w.ID, EndpointID: w.EndpointID, Summary: summary,
			OverdueRule: b.rule, OverdueSequence: w.Sequence, CreatedAt: now, UpdatedAt: now})
		created = err == nil
		return err
	})
	if errors.Is(err, agentowl.ErrConflict) {
		return false, nil // another replica opened it first
	}
	return created, err
}

// describeLast names the latest callback, if any.
func describeLast(cbs []*agentowl.Callback) string {
	if len(cbs) == 0 {
		return "none"
	}
	c := cbs[len(cbs)-1]
	return fmt.Sprintf("callback %q, sequence %d, status %s, occurred at %s, recorded at %s",
		c.CallbackID, c.Sequence, c.Status, c.OccurredAt, rfc3339(c.RecordedAt))
}

func rfc3339(t time.Time) string { return t.UTC().Format(time.RFC3339) }
