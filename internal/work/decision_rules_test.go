package work

import (
	"strings"
	"testing"
	"time"

	"github.com/agentowl/agentowl"
)

// TestCheckDecision pins the refusals of a decision on a request item, in
// the order they apply: an incident has nothing to decide; a decision
// must name the current revision; an expired or resolved item takes none;
// then the decision must be one the request allows, with the field its
// kind needs (an approval the reviewed action's digest, a question an
// answer). The decision file's format is internal/inbox's ParseDecision.
func TestCheckDecision(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 10, 6, 12, 0, 0, 0, time.UTC)
	expires := now.Add(time.Hour)
	approval := func() *agentowl.AttentionItem {
		return &agentowl.AttentionItem{ID: "att_a2", Kind: KindApproval, Status: agentowl.AttentionOpen, RequestID: "a1", Revision: 2,
			AllowedDecisions: []string{DecisionApprove, DecisionReject}, ActionDigest: digest, ExpiresAt: &expires}
	}
	questionItem := func() *agentowl.AttentionItem {
		return &agentowl.AttentionItem{ID: "att_q1", Kind: KindQuestion, Status: agentowl.AttentionOpen, RequestID: "q1", Revision: 1,
			AllowedDecisions: []string{DecisionAnswer}, ExpiresAt: &expires}
	}
	approve := agentowl.DecisionFile{DecisionID: "dec-1", RequestRevision: 2, Decision: DecisionApprove,
		ExpectedActionDigest: digest, HasDigest: true}
	answer := agentowl.DecisionFile{DecisionID: "dec-2", RequestRevision: 1, Decision: DecisionAnswer,
		Answer: "The savings account.", HasAnswer: true}
	with := func(f agentowl.DecisionFile, change func(*agentowl.DecisionFile)) agentowl.DecisionFile {
		change(&f)
		return f
	}
	reject := with(approve, func(f *agentowl.DecisionFile) { f.Decision = DecisionReject })
	for _, c := range []struct {
		name   string
		base   func() *agentowl.AttentionItem
		item   func(*agentowl.AttentionItem)
		latest int64 // the request's latest revision (0: the item's)
		file   agentowl.DecisionFile
		now    time.Time // zero: now
		code   string
		param  string
	}{
		{name: "approve", base: approval, file: approve},
		{name: "reject an acknowledged item", base: approval, file: reject,
			item: func(it *agentowl.AttentionItem) { it.Status = agentowl.AttentionAcknowledged }},
		{name: "answer", base: questionItem, file: answer},
		{name: "incident", base: approval, file: approve, code: agentowl.ECodeNotARequest,
			item: func(it *agentowl.AttentionItem) { it.Kind = KindIncident }},
		{name: "a newer revision exists", base: approval, file: approve, latest: 3,
			code: agentowl.ECodeStaleRevision, param: "request_revision"},
		{name: "the decision names an older revision", base: approval,
			file: with(approve, func(f *agentowl.DecisionFile) { f.RequestRevision = 1 }),
			code: agentowl.ECodeStaleRevision, param: "request_revision"},
		{name: "superseded", base: approval, file: approve, code: agentowl.ECodeStaleRevision, param: "request_revision",
			item: func(it *agentowl.AttentionItem) {
				it.Status, it.Resolution = agentowl.AttentionResolved, ResolvedSuperseded
			}},
		{name: "1ns before expiry", base: approval, file: approve, now: expires.Add(-time.Nanosecond)},
		{name: "at the expiry instant", base: approval, file: approve, now: expires, code: agentowl.ECodeRequestExpired},
		{name: "resolved expired by the sweep", base: approval, file: approve, code: agentowl.ECodeRequestExpired,
			item: func(it *agentowl.AttentionItem) {
				it.Status, it.Resolution = agentowl.AttentionResolved, ResolvedExpired
			}},
		{name: "resolved as the work ended", base: approval, file: approve, code: agentowl.ECodeAlreadyTerminal,
			item: func(it *agentowl.AttentionItem) {
				it.Status, it.Resolution = agentowl.AttentionResolved, ResolvedWorkEnded
			}},
		{name: "resolved by a receipt", base: approval, file: approve, code: agentowl.ECodeAlreadyTerminal,
			item: func(it *agentowl.AttentionItem) {
				it.Status, it.Resolution = agentowl.AttentionResolved, ResolvedReceipt
			}},
		{name: "not allowed", base: approval, file: reject, code: agentowl.ECodeDecisionNotAllowed, param: "decision",
			item: func(it *agentowl.AttentionItem) { it.AllowedDecisions = []string{DecisionApprove} }},
		{name: "answer on an approval", base: approval,
			file: with(answer, func(f *agentowl.DecisionFile) { f.RequestRevision = 2 }),
			code: agentowl.ECodeDecisionNotAllowed, param: "decision"},
		{name: "approval with an answer", base: approval, code: agentowl.ECodeInvalidField, param: "answer",
			file: with(approve, func(f *agentowl.DecisionFile) { f.Answer, f.HasAnswer = "yes", true })},
		{name: "approval without digest", base: approval, code: agentowl.ECodeMissingField, param: "expected_action_digest",
			file: with(approve, func(f *agentowl.DecisionFile) { f.ExpectedActionDigest, f.HasDigest = "", false })},
		{name: "approval of another action", base: approval, code: agentowl.ECodeDigestMismatch, param: "expected_action_digest",
			file: with(approve, func(f *agentowl.DecisionFile) { f.ExpectedActionDigest = strings.Repeat("a", 64) })},
		{name: "question with a digest", base: questionItem, code: agentowl.ECodeInvalidField, param: "expected_action_digest",
			file: with(answer, func(f *agentowl.DecisionFile) { f.ExpectedActionDigest, f.HasDigest = digest, true })},
		{name: "question without answer", base: questionItem, code: agentowl.ECodeMissingField, param: "answer",
			file: with(answer, func(f *agentowl.DecisionFile) { f.Answer, f.HasAnswer = "", false })},
	} {
		it := c.base()
		if c.item != nil {
			c.item(it)
		}
		latest := *it
		if c.latest != 0 {
			latest.Revision = c.latest
		}
		at := now
		if !c.now.IsZero() {
			at = c.now
		}
		checkCode(t, c.name, checkDecision(it, &latest, &c.file, at), c.code, c.param)
	}
}
