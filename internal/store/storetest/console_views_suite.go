package storetest

import (
	"fmt"
	"testing"
	"time"

	"github.com/agentowl/agentowl"
)

// The console's audit and settings reads (agentowl.ConsoleViewStore).
var consoleViewTests = []suiteCase[*env]{
	{"AuditQuery", testAuditQuery},
	{"RuntimeCredentialLastReports", testRuntimeCredentialLastReports},
}

func auditIDs(es []*agentowl.AuditEntry) []int64 {
	return mapped(es, func(a *agentowl.AuditEntry) int64 { return a.ID })
}

// testAuditQuery: a tenant's entries newest first, the same as AuditList
// without filters; each filter a substring of its field; keyset pages
// before an ID; another tenant's entries never.
func testAuditQuery(t *testing.T, e *env) {
	ten, other := e.tenant(t), e.tenant(t)
	add := func(tenantID, actor, action, target string) *agentowl.AuditEntry {
		v := &agentowl.AuditEntry{TenantID: tenantID, At: e.now, Actor: actor, Action: action, Target: target,
			RequestID: agentowl.NewID(""), Details: map[string]any{"n": 1.0}}
		e.write(t, func(tx agentowl.Tx) error { return tx.AuditAppend(e.ctx, v) })
		return v
	}
	a1 := add(ten.ID, "operator:ann", "endpoint.create", "endpoint:ep_1")
	a2 := add(ten.ID, "operator:bob", "endpoint.pause", "endpoint:ep_1")
	u1 := add(other.ID, "operator:ann", "endpoint.create", "endpoint:ep_1")
	a3 := add(ten.ID, "operator:ann", "runtime_credential.revoke", "runtime-credential:rtc_9")
	a4 := add(ten.ID, "system", "operator_token.revoke", "operator-token:tok_ep_1")
	query := func(p agentowl.AuditQueryParams) []int64 {
		t.Helper()
		if p.TenantID == "" {
			p.TenantID = ten.ID
		}
		return auditIDs(read(t, e, func(tx agentowl.Tx) ([]*agentowl.AuditEntry, error) { return tx.AuditQuery(e.ctx, p) }))
	}
	all := read(t, e, func(tx agentowl.Tx) ([]*agentowl.AuditEntry, error) {
		return tx.AuditList(e.ctx, agentowl.AuditListParams{TenantID: ten.ID, Limit: 10})
	})
	got := read(t, e, func(tx agentowl.Tx) ([]*agentowl.AuditEntry, error) {
		return tx.AuditQuery(e.ctx, agentowl.AuditQueryParams{TenantID: ten.ID, Limit: 10})
	})
	equal(t, "no filter: AuditList's entries", got, all)
	equal(t, "newest first", auditIDs(got), []int64{a4.ID, a3.ID, a2.ID, a1.ID})
	for _, c := range []struct {
		what string
		p    agentowl.AuditQueryParams
		want []int64
	}{
		{"actor", agentowl.AuditQueryParams{Actor: "operator:ann"}, []int64{a3.ID, a1.ID}},
		{"actor part", agentowl.AuditQueryParams{Actor: "bo"}, []int64{a2.ID}},
		{"action part", agentowl.AuditQueryParams{Action: "revoke"}, []int64{a4.ID, a3.ID}},
		{"object", agentowl.AuditQueryParams{Target: "ep_1"}, []int64{a4.ID, a2.ID, a1.ID}},
		{"all three", agentowl.AuditQueryParams{Actor: "ann", Action: "endpoint.", Target: "endpoint:ep_1"}, []int64{a1.ID}},
		{"case matters", agentowl.AuditQueryParams{Actor: "ANN"}, []int64{}},
		{"like wildcards are text", agentowl.AuditQueryParams{Action: "%"}, []int64{}},
		{"before", agentowl.AuditQueryParams{BeforeID: a3.ID}, []int64{a2.ID, a1.ID}},
		{"before and filter", agentowl.AuditQueryParams{BeforeID: a4.ID, Actor: "ann"}, []int64{a3.ID, a1.ID}},
		{"limit", agentowl.AuditQueryParams{Limit: 2}, []int64{a4.ID, a3.ID}},
		{"next page", agentowl.AuditQueryParams{Limit: 2, BeforeID: a3.ID}, []int64{a2.ID, a1.ID}},
		{"the other tenant", agentowl.AuditQueryParams{TenantID: other.ID}, []int64{u1.ID}},
	} {
		if g := query(c.p); fmt.Sprint(g) != fmt.Sprint(c.want) {
			t.Errorf("%s: %v, want %v", c.what, g, c.want)
		}
	}
}

// testRuntimeCredentialLastReports: per credential, the newest callback
// it authenticated, in its tenant only.
func testRuntimeCredentialLastReports(t *testing.T, e *env) {
	ten, other := e.tenant(t), e.tenant(t)
	ep, _, ev := e.thread(t, ten.ID)
	oep, _, oev := e.thread(t, other.ID)
	w := e.work(t, newWork(ep, ev, 1, e.now))
	ow := e.work(t, newWork(oep, oev, 1, e.now))
	seq := int64(0)
	report := func(w *agentowl.Work, cred string, at time.Time) {
		seq++
		body := []byte(fmt.Sprintf(`{"sequence":%d}`, seq))
		c := &agentowl.Callback{WorkID: w.ID, CallbackID: fmt.Sprintf("c:%d", seq), Sequence: seq, Status: agentowl.WorkRunning,
			OccurredAt: "2026-10-06T12:00:00.000Z", Body: body, BodyHash: hashOf(string(body)), WorkStatus: agentowl.WorkRunning,
			CredentialID: cred, RecordedAt: at}
		e.write(t, func(tx agentowl.Tx) error { return tx.CallbackCreate(e.ctx, c) })
	}
	report(w, "rtc_a", e.now.Add(time.Minute))
	report(w, "rtc_a", e.now.Add(3*time.Minute))
	report(w, "rtc_a", e.now.Add(2*time.Minute))
	report(w, "rtc_b", e.now)
	report(ow, "rtc_c", e.now)
	got := read(t, e, func(tx agentowl.Tx) (map[string]time.Time, error) {
		return tx.RuntimeCredentialLastReports(e.ctx, ten.ID)
	})
	equal(t, "last reports", got, map[string]time.Time{"rtc_a": e.now.Add(3 * time.Minute), "rtc_b": e.now})
	none := read(t, e, func(tx agentowl.Tx) (map[string]time.Time, error) {
		return tx.RuntimeCredentialLastReports(e.ctx, e.tenant(t).ID)
	})
	equal(t, "a tenant without reports", none, map[string]time.Time{})
}
