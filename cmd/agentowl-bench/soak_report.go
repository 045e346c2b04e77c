package main

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
)

// soakResult is what a soak found; failures lists the assertions that
// failed, empty when it passed.
type soakResult struct {
	cfg      soakConfig
	loadTime time.Duration

	ops                         [numMsgKinds]int
	opFailures, skipped         int
	firstOpErrs                 []string
	refused, resent             int64
	expected, delivered         [numMsgKinds]int
	lost                        [numMsgKinds]int
	lostExamples                []string
	duplicates                  [numMsgKinds]int
	explainedDuplicates         int // answered 2xx near a kill or a freeze
	overlaps, explainedOverlaps int // an attempt began while another of its message was in flight
	split                       int // a subject delivered under two webhook-ids
	unexpected                  int // messages about nothing the load expects
	chaos                       bool
	windows                     []chaosWindow // the kills and freezes that happened
	perRecv                     [numBehaviours]recvStats
	baselineFast                []time.Duration
	termExits                   []time.Duration // replicas SIGTERMed under load: how long each took to exit
	replicas                    []replicaMetrics
	pending                     []string // outbox messages left pending, when the drain gave up
	verdict
}

// recvStats is one receiver's share of the expected messages.
type recvStats struct {
	messages, attempts, lost int
	latency                  []time.Duration // cause answered → first 2xx, mix phase
}

// replicaMetrics is what a replica's /metrics said after the drain, and
// how its SIGTERM went.
type replicaMetrics struct {
	name                            string
	err                             string
	depth, slots, inFlight          float64
	hasDepth, hasSlots, hasInFlight bool
	exit                            time.Duration
	exitErr                         string
}

// assess compares what the receivers got with what the load expects.
func (s *soakRun) assess(res *soakResult) {
	msgs, problems := s.rec.snapshot()
	res.problems = problems
	s.mu.Lock()
	windows := slices.Clone(s.windows)
	chaosErrs := slices.Clone(s.chaosErrs)
	res.skipped = int(s.skipped.Load())
	res.termExits = slices.Clone(s.termExits)
	s.mu.Unlock()
	s.ledger.mu.Lock()
	want := make(map[subject]expectation, len(s.ledger.want))
	for k, v := range s.ledger.want {
		want[k] = v
	}
	res.ops, res.opFailures, res.firstOpErrs = s.ledger.ops, s.ledger.nFail, slices.Clone(s.ledger.failed)
	s.ledger.mu.Unlock()
	res.refused, res.resent = s.fleet.refused.Load(), s.fleet.lost.Load()
	res.chaos = s.cfg.Kill || s.cfg.Freeze
	res.windows = windows

	nearChaos := func(t time.Time) bool {
		for _, w := range windows {
			if !t.Before(w.from.Add(-chaosMargin)) && !t.After(w.to.Add(chaosMargin)) {
				return true
			}
		}
		return false
	}
	bySubj := map[subject][]string{}
	for id, m := range msgs {
		bySubj[m.subj] = append(bySubj[m.subj], id)
		if acks := m.acks(); len(acks) > 1 {
			res.duplicates[m.subj.kind]++
			if slices.ContainsFunc(acks, nearChaos) {
				res.explainedDuplicates++
			}
		}
		for _, o := range m.overlaps {
			res.overlaps++
			if nearChaos(o) {
				res.explainedOverlaps++
			}
		}
	}
	for subj, ids := range bySubj {
		if _, ok := want[subj]; !ok {
			res.unexpected += len(ids)
		} else if len(ids) > 1 {
			res.split++
		}
	}
	for subj, e := range want {
		k := subj.kind
		res.expected[k]++
		var first time.Time
		st := &res.perRecv[e.recv]
		st.messages++
		attemptsBefore := st.attempts
		for _, id := range bySubj[subj] {
			m := msgs[id]
			st.attempts += len(m.attempts)
			if acks := m.acks(); len(acks) > 0 && (first.IsZero() || acks[0].Before(first)) {
				first = acks[0]
			}
		}
		if first.IsZero() {
			res.lost[k]++
			st.lost++
			if len(res.lostExamples) < 3 {
				res.lostExamples = append(res.lostExamples, fmt.Sprintf("%s %s to %s (%d attempts reached it)", k, subj.id, e.recv, st.attempts-attemptsBefore))
			}
			continue
		}
		res.delivered[k]++
		lat := max(first.Sub(e.at), 0)
		switch {
		case e.phase == phaseBaseline:
			res.baselineFast = append(res.baselineFast, lat)
		default:
			st.latency = append(st.latency, lat)
		}
	}

	// The assertions.
	for k := range numMsgKinds {
		if res.expected[k] == 0 {
			res.fail("no %s was expected: the load did not exercise that path", k)
		}
	}
	var byKind, byRecv []string
	for k := range numMsgKinds {
		if res.lost[k] > 0 {
			byKind = append(byKind, fmt.Sprintf("%s %d", k, res.lost[k]))
		}
	}
	for b := range numBehaviours {
		if res.perRecv[b].messages == 0 {
			res.fail("receiver %s got no load", b)
		}
		if n := res.perRecv[b].lost; n > 0 {
			byRecv = append(byRecv, fmt.Sprintf("%s %d", b, n))
		}
	}
	if lost := sum(res.lost[:]); lost > 0 {
		res.fail("%d messages lost, never answered 2xx (%s; at %s), e.g. %s",
			lost, strings.Join(byKind, ", "), strings.Join(byRecv, ", "), strings.Join(res.lostExamples, "; "))
	}
	if res.opFailures > 0 {
		res.fail("%d operations failed (their calls were refused until they gave up), e.g. %s", res.opFailures, strings.Join(res.firstOpErrs, "; "))
	}
	dups := sum(res.duplicates[:])
	if unexplained := dups - res.explainedDuplicates; unexplained > 0 {
		res.fail("%d messages answered 2xx more than once away from any kill or freeze", unexplained)
	}
	if unexplained := res.overlaps - res.explainedOverlaps; unexplained > 0 {
		res.fail("%d times an attempt began while another attempt of its message was in flight, away from any kill or freeze", unexplained)
	}
	if res.split > 0 {
		res.fail("%d requests, events or decisions were delivered under more than one webhook-id", res.split)
	}
	if len(res.problems) > 0 {
		res.fail("the receivers saw %d problems, e.g. %s", len(res.problems), strings.Join(res.problems[:min(3, len(res.problems))], "; "))
	}
	for _, e := range chaosErrs {
		res.fail("%s", e)
	}
	stuck, depthKnown := 0.0, false
	for _, rm := range res.replicas {
		switch {
		case rm.err != "":
			res.fail("%s: metrics: %s", rm.name, rm.err)
		case !rm.hasDepth:
			res.fail("%s: /metrics has no agentowl_delivery_queue_depth", rm.name)
		default:
			// The outbox is shared: every replica reports the same depth.
			stuck, depthKnown = max(stuck, rm.depth), true
		}
		if rm.hasSlots && rm.hasInFlight && rm.slots != rm.inFlight {
			res.fail("%s: %g delivery slots held but %g attempts in flight after the drain", rm.name, rm.slots, rm.inFlight)
		}
		if rm.exitErr != "" {
			res.fail("%s: %s", rm.name, rm.exitErr)
		} else if rm.exit > exitLimit {
			res.fail("%s took %s to exit after SIGTERM, limit %s", rm.name, rm.exit.Round(10*time.Millisecond), exitLimit)
		}
	}
	for _, took := range res.termExits {
		if took > exitLimit {
			res.fail("a replica SIGTERMed under load took %s to exit, limit %s", took.Round(10*time.Millisecond), exitLimit)
		}
	}
	if !depthKnown {
		res.fail("no replica reported the outbox's depth: stuck messages unknown")
	} else if stuck > 0 {
		res.fail("%g messages stuck, pending in the outbox (agentowl_delivery_queue_depth) after the drain", stuck)
	}
	if s.cfg.AssertIsolation {
		base, mix := percentile(res.baselineFast, 0.99), percentile(res.perRecv[recvFast].latency, 0.99)
		switch {
		case len(res.baselineFast) == 0 || len(res.perRecv[recvFast].latency) == 0:
			res.fail("isolation: no fast-receiver latency in the baseline or the mix")
		case mix > 2*base:
			res.fail("isolation: the fast receiver's p99 in the mix, %s, is over twice its baseline p99, %s", ms2(mix), ms2(base))
		}
	}
}

func sum(xs []int) int {
	n := 0
	for _, x := range xs {
		n += x
	}
	return n
}

// percentile returns the p-th percentile of ds (which it sorts), 0 for none.
func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	return ds[int(float64(len(ds)-1)*p)]
}

func ms2(d time.Duration) string {
	if d >= 10*time.Second {
		return d.Round(100 * time.Millisecond).String()
	}
	return fmt.Sprintf("%.1fms", ms(d))
}

// print writes the report.
func (r *soakResult) print(w io.Writer) {
	p := func(format string, args ...any) { fmt.Fprintf(w, format+"\n", args...) }
	p("")
	p("operations: %d started in %s (notification %d, handoff %d, push %d); %d failed; %d not started (%d in flight already)",
		sum(r.ops[:]), r.loadTime.Round(time.Second), r.ops[msgNotification], r.ops[msgHandoff], r.ops[msgPush], r.opFailures, r.skipped, maxOpsInFlight)
	p("calls sent again: %d after a 503 refusal, %d after a lost connection or another 5xx", r.refused, r.resent)
	p("%-13s %9s %10s %6s %11s", "message", "expected", "delivered", "lost", "duplicates")
	for k := range numMsgKinds {
		p("%-13s %9d %10d %6d %11d", k, r.expected[k], r.delivered[k], r.lost[k], r.duplicates[k])
	}
	dups := sum(r.duplicates[:])
	switch {
	case dups == 0:
		p("duplicates: none")
	case r.chaos:
		p("duplicates: %d, %d of them from killed/frozen attempts (answered 2xx within %s of a kill or freeze)", dups, r.explainedDuplicates, chaosMargin)
	default:
		p("duplicates: %d, with no kill or freeze", dups)
	}
	p("overlapping attempts of one message: %d (%d near a kill or freeze); split across webhook-ids: %d; unexpected messages: %d",
		r.overlaps, r.explainedOverlaps, r.split, r.unexpected)
	p("latency from the causing call's answer to the first 2xx, mix phase:")
	p("  %-12s %8s %9s %6s %10s %10s", "receiver", "messages", "attempts", "lost", "p50", "p99")
	for b := range numBehaviours {
		st := r.perRecv[b]
		p("  %-12s %8d %9d %6d %10s %10s", b, st.messages, st.attempts, st.lost, ms2(percentile(st.latency, 0.5)), ms2(percentile(st.latency, 0.99)))
	}
	if r.cfg.AssertIsolation {
		base, mix := percentile(r.baselineFast, 0.99), percentile(r.perRecv[recvFast].latency, 0.99)
		ratio := 0.0
		if base > 0 {
			ratio = float64(mix) / float64(base)
		}
		p("isolation: fast receiver p99 baseline %s (%d messages), mix %s: ratio %.2f, limit 2", ms2(base), len(r.baselineFast), ms2(mix), ratio)
	}
	for _, rm := range r.replicas {
		opt := func(v float64, ok bool) string {
			if !ok {
				return "n/a"
			}
			return fmt.Sprintf("%g", v)
		}
		exit := rm.exit.Round(10 * time.Millisecond).String()
		if rm.exitErr != "" {
			exit += " (" + rm.exitErr + ")"
		}
		p("%s: stuck (queue depth) %s, slots held %s, attempts in flight %s; exited %s after SIGTERM",
			rm.name, opt(rm.depth, rm.hasDepth), opt(rm.slots, rm.hasSlots), opt(rm.inFlight, rm.hasInFlight), exit)
	}
	for _, took := range r.termExits {
		p("SIGTERM under load: exited in %s (limit %s)", took.Round(10*time.Millisecond), exitLimit)
	}
	for _, m := range r.pending {
		p("pending: %s", m)
	}
	r.printVerdict(p)
}
