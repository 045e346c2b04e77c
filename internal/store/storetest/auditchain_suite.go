package storetest

import (
	"context"
	"crypto/ed25519"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/agentowl/agentowl"
	"github.com/agentowl/agentowl/attest"
	"github.com/agentowl/agentowl/internal/auditchain"
)

// The audit hash chain (internal/auditchain, sqlstore/auditchain.go): the
// store chains every entry it appends, in the database, and the chain it
// holds verifies with the package's reference code; appends of one tenant
// serialize across writers; retention keeps the chain anchored at a signed
// checkpoint. AuditChainTampering (below) edits the database directly.
var auditChainTests = []suiteCase[*env]{
	{"AuditChain", testAuditChain},
	{"AuditChainConcurrent", testAuditChainConcurrent},
	{"AuditChainPurge", testAuditChainPurge},
}

// chainKeys is a checkpoint signing key and its published key set.
type chainKeys struct {
	signer auditchain.Ed25519Signer
	set    attest.StaticKeys
}

func newChainKeys(t testing.TB) chainKeys {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	kid := attest.KeyID(pub)
	return chainKeys{auditchain.Ed25519Signer{Kid: kid, Key: priv}, attest.StaticKeys{kid: pub}}
}

func auditEntry(tenantID string, at time.Time, i int) *agentowl.AuditEntry {
	return &agentowl.AuditEntry{TenantID: tenantID, At: at, Actor: "operator:ann", Action: "policy.create",
		Target: fmt.Sprintf("policy:p%d", i), RequestID: agentowl.NewID(""),
		Details: map[string]any{"i": i, "note": "<b>refunds</b> & more", "amount": 4900.5}}
}

// appendAudit appends n entries of tenantID, one write each, at and after at.
func (e *env) appendAudit(t *testing.T, tenantID string, at time.Time, n int) []*agentowl.AuditEntry {
	t.Helper()
	var out []*agentowl.AuditEntry
	for i := range n {
		a := auditEntry(tenantID, at.Add(time.Duration(i)*time.Second), i)
		e.write(t, func(tx agentowl.Tx) error { return tx.AuditAppend(e.ctx, a) })
		out = append(out, a)
	}
	return out
}

// checkpoint signs and records a checkpoint of tenantID's entry seq.
func (e *env) checkpoint(t *testing.T, k chainKeys, tenantID string, seq int64) {
	t.Helper()
	es := read(t, e, func(tx agentowl.Tx) ([]*agentowl.AuditEntry, error) {
		return tx.AuditChainList(e.ctx, agentowl.AuditChainParams{TenantID: tenantID, AfterSeq: seq - 1, UpToSeq: seq})
	})
	if len(es) != 1 {
		t.Fatalf("checkpoint of seq %d: %d entries", seq, len(es))
	}
	jws, err := k.signer.Sign(e.ctx, auditchain.CheckpointPayload(tenantID, seq, es[0].Hash, es[0].At))
	if err != nil {
		t.Fatal(err)
	}
	e.write(t, func(tx agentowl.Tx) error {
		return tx.AuditCheckpointAdd(e.ctx, &agentowl.AuditCheckpoint{TenantID: tenantID, Seq: seq, Head: es[0].Hash, At: es[0].At, JWS: jws})
	})
}

// VerifyAuditChain verifies tenantID's chain as the store holds it, page
// by page as the operator API serves it: its checkpoints against keys,
// its entries (those outside the chain included) and, with head, against
// the store's chain head.
func VerifyAuditChain(ctx context.Context, st agentowl.Store, tenantID string, keys attest.KeySet, head bool) (*auditchain.Report, error) {
	v := auditchain.NewVerifier(tenantID)
	var h *agentowl.AuditChainHead
	if err := st.Read(ctx, func(tx agentowl.Tx) (err error) {
		h, err = tx.AuditChainHead(ctx, tenantID)
		return err
	}); err != nil && err != agentowl.ErrNotFound {
		return nil, err
	}
	for after := int64(0); ; {
		var cps []*agentowl.AuditCheckpoint
		if err := st.Read(ctx, func(tx agentowl.Tx) (err error) {
			cps, err = tx.AuditCheckpointList(ctx, agentowl.AuditChainParams{TenantID: tenantID, AfterSeq: after, Limit: 3})
			return err
		}); err != nil {
			return nil, err
		}
		for _, c := range cps {
			v.AddCheckpoint(ctx, c.JWS, keys)
			after = c.Seq
		}
		if len(cps) < 3 {
			break
		}
	}
	for _, unchained := range []bool{true, false} {
		for after := int64(0); ; {
			var es []*agentowl.AuditEntry
			if err := st.Read(ctx, func(tx agentowl.Tx) (err error) {
				es, err = tx.AuditChainList(ctx, agentowl.AuditChainParams{TenantID: tenantID, AfterSeq: after, AfterID: after,
					Unchained: unchained, Limit: 5})
				return err
			}); err != nil {
				return nil, err
			}
			for _, a := range es {
				v.Add(&auditchain.Entry{ID: a.ID, TenantID: a.TenantID, Seq: a.Seq, At: a.At, Actor: a.Actor, Action: a.Action,
					Target: a.Target, RequestID: a.RequestID, Details: a.DetailsJSON, PrevHash: a.PrevHash, Hash: a.Hash})
				after = a.Seq
				if unchained {
					after = a.ID
				}
			}
			if len(es) < 5 {
				break
			}
		}
	}
	var ah *auditchain.Head
	if head && h != nil {
		ah = &auditchain.Head{TenantID: tenantID, Seq: h.Seq, Hash: h.Hash}
	}
	return v.Finish(ah), nil
}

func (e *env) verifyChain(t *testing.T, k chainKeys, tenantID string, head bool) *auditchain.Report {
	t.Helper()
	r, err := VerifyAuditChain(e.ctx, e.s, tenantID, k.set, head)
	if err != nil {
		t.Fatalf("verify: %v", err)
	}
	return r
}

func wantChainOK(t *testing.T, r *auditchain.Report) {
	t.Helper()
	if !r.OK() {
		t.Fatalf("the chain does not verify: %+v", r.Findings)
	}
}

// testAuditChain: appends chain per tenant, several in one write too, the
// hashes the database computed verify with auditchain's reference code,
// and the head and checkpoints read back.
func testAuditChain(t *testing.T, e *env) {
	k := newChainKeys(t)
	ten, other := e.tenant(t), e.tenant(t)
	e.write(t, func(tx agentowl.Tx) error {
		_, err := tx.AuditChainHead(e.ctx, ten.ID)
		if err != agentowl.ErrNotFound {
			return fmt.Errorf("head before the first entry: %v, want ErrNotFound", err)
		}
		return nil
	})
	first := e.appendAudit(t, ten.ID, e.now, 3)
	e.appendAudit(t, other.ID, e.now, 2)
	// Three entries of one tenant and one of another in one transaction.
	var batch []*agentowl.AuditEntry
	e.write(t, func(tx agentowl.Tx) error {
		batch = nil
		for i, tn := range []string{ten.ID, other.ID, ten.ID, ten.ID} {
			a := auditEntry(tn, e.now.Add(time.Minute), 10+i)
			if err := tx.AuditAppend(e.ctx, a); err != nil {
				return err
			}
			batch = append(batch, a)
		}
		return nil
	})
	if first[0].Seq != 1 || first[2].Seq != 3 || batch[0].Seq != 4 || batch[1].Seq != 3 || batch[3].Seq != 6 {
		t.Fatalf("seqs: %d %d %d %d %d", first[0].Seq, first[2].Seq, batch[0].Seq, batch[1].Seq, batch[3].Seq)
	}
	if string(first[0].PrevHash) != string(auditchain.Zero) || string(first[1].PrevHash) != string(first[0].Hash) ||
		string(batch[2].PrevHash) != string(batch[0].Hash) {
		t.Fatal("the appended entries do not chain")
	}
	es := read(t, e, func(tx agentowl.Tx) ([]*agentowl.AuditEntry, error) {
		return tx.AuditChainList(e.ctx, agentowl.AuditChainParams{TenantID: ten.ID})
	})
	if len(es) != 6 || es[5].ID != batch[3].ID || string(es[5].Hash) != string(batch[3].Hash) {
		t.Fatalf("chain list: %s", show(es))
	}
	if want := `{"amount":4900.5,"i":0,"note":"\u003cb\u003erefunds\u003c/b\u003e \u0026 more"}`; string(es[0].DetailsJSON) != want {
		t.Errorf("details as stored: %s, want %s", es[0].DetailsJSON, want)
	}
	h := read(t, e, func(tx agentowl.Tx) (*agentowl.AuditChainHead, error) { return tx.AuditChainHead(e.ctx, ten.ID) })
	if h.Seq != 6 || string(h.Hash) != string(batch[3].Hash) || h.CheckpointSeq != 0 {
		t.Fatalf("head: %s", show(h))
	}
	wantChainOK(t, e.verifyChain(t, k, ten.ID, true))
	wantChainOK(t, e.verifyChain(t, k, other.ID, true))

	e.checkpoint(t, k, ten.ID, 4)
	e.checkpoint(t, k, ten.ID, 6)
	e.checkpoint(t, k, other.ID, 3)
	err := e.writeErr(func(tx agentowl.Tx) error {
		return tx.AuditCheckpointAdd(e.ctx, &agentowl.AuditCheckpoint{TenantID: ten.ID, Seq: 4, Head: h.Hash, At: e.now, JWS: "x"})
	})
	wantErr(t, "a second checkpoint of one seq", err, agentowl.ErrConflict)
	heads := read(t, e, func(tx agentowl.Tx) ([]*agentowl.AuditChainHead, error) { return tx.AuditChainHeads(e.ctx) })
	got := map[string]int64{}
	for _, h := range heads {
		got[h.TenantID] = h.CheckpointSeq
	}
	if got[ten.ID] != 6 || got[other.ID] != 3 {
		t.Errorf("heads' newest checkpoints: %v", got)
	}
	cps := read(t, e, func(tx agentowl.Tx) ([]*agentowl.AuditCheckpoint, error) {
		return tx.AuditCheckpointList(e.ctx, agentowl.AuditChainParams{TenantID: ten.ID, AfterSeq: 4})
	})
	if len(cps) != 1 || cps[0].Seq != 6 || string(cps[0].Head) != string(h.Hash) {
		t.Errorf("checkpoints after 4: %s", show(cps))
	}
	r := e.verifyChain(t, k, ten.ID, true)
	wantChainOK(t, r)
	if r.Matched != 2 || r.Uncovered != 0 || r.Entries != 6 {
		t.Errorf("report: %+v", r)
	}
	// A rolled-back append leaves the chain as it was.
	_ = e.writeErr(func(tx agentowl.Tx) error {
		if err := tx.AuditAppend(e.ctx, auditEntry(ten.ID, e.now, 99)); err != nil {
			return err
		}
		return fmt.Errorf("roll back")
	})
	e.appendAudit(t, ten.ID, e.now.Add(time.Hour), 1)
	r = e.verifyChain(t, k, ten.ID, true)
	wantChainOK(t, r)
	if r.LastSeq != 7 {
		t.Errorf("after a rollback and an append the chain ends at %d, want 7", r.LastSeq)
	}
}

// testAuditChainConcurrent: writers appending to one tenant at once (and
// to a second, in the same transactions) leave one gapless chain that
// verifies: appends of a tenant serialize on its chain head.
func testAuditChainConcurrent(t *testing.T, e *env) {
	k := newChainKeys(t)
	ten, other := e.tenant(t), e.tenant(t)
	const writers, each = 12, 8
	errs := atOnce(writers, func(w int) error {
		for i := range each {
			err := e.s.Write(e.ctx, func(tx agentowl.Tx) error {
				if err := tx.AuditAppend(e.ctx, auditEntry(ten.ID, e.now, w*100+i)); err != nil {
					return err
				}
				if i%2 == 0 {
					return tx.AuditAppend(e.ctx, auditEntry(other.ID, e.now, w*100+i))
				}
				return nil
			})
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("append: %v", err)
	}
	r := e.verifyChain(t, k, ten.ID, true)
	wantChainOK(t, r)
	if r.Entries != writers*each || r.LastSeq != writers*each {
		t.Errorf("tenant chain: %+v, want %d entries", r, writers*each)
	}
	r = e.verifyChain(t, k, other.ID, true)
	wantChainOK(t, r)
	if r.Entries != writers*each/2 {
		t.Errorf("other tenant's chain: %d entries, want %d", r.Entries, writers*each/2)
	}
}

// testAuditChainPurge: retention deletes old entries only up to a signed
// checkpoint, keeps that checkpoint as the anchor, and the rest verifies;
// a tenant without checkpoints is purged by time.
func testAuditChainPurge(t *testing.T, e *env) {
	k := newChainKeys(t)
	ten, bare := e.tenant(t), e.tenant(t)
	old := e.now.Add(-400 * 24 * time.Hour)
	e.appendAudit(t, ten.ID, old, 10)  // seq 1-10, old
	e.appendAudit(t, ten.ID, e.now, 4) // seq 11-14, recent
	e.appendAudit(t, bare.ID, old, 3)
	for _, s := range []int64{3, 6, 12} {
		e.checkpoint(t, k, ten.ID, s)
	}
	cutoff := e.now.Add(-365 * 24 * time.Hour)
	purge := func() int64 {
		var total int64
		for {
			var n agentowl.PurgeResult
			e.write(t, func(tx agentowl.Tx) (err error) {
				n, err = tx.PurgeBatch(e.ctx, agentowl.PurgeParams{Class: agentowl.PurgeAudit, Before: cutoff, Limit: 2})
				return err
			})
			total += n.Deleted
			if n.Deleted == 0 {
				return total
			}
		}
	}
	purge()
	es := read(t, e, func(tx agentowl.Tx) ([]*agentowl.AuditEntry, error) {
		return tx.AuditChainList(e.ctx, agentowl.AuditChainParams{TenantID: ten.ID})
	})
	// Entries 7-10 are past retention too, but no checkpoint between them
	// and the recent ones lets them go yet.
	if len(es) != 8 || es[0].Seq != 7 {
		t.Fatalf("after the purge the chain holds %d entries from seq %d, want 8 from seq 7", len(es), es[0].Seq)
	}
	cps := read(t, e, func(tx agentowl.Tx) ([]*agentowl.AuditCheckpoint, error) {
		return tx.AuditCheckpointList(e.ctx, agentowl.AuditChainParams{TenantID: ten.ID})
	})
	if len(cps) != 2 || cps[0].Seq != 6 {
		t.Fatalf("checkpoints kept: %s, want the anchor (6) and 12", show(cps))
	}
	r := e.verifyChain(t, k, ten.ID, true)
	wantChainOK(t, r)
	if r.Purged != 6 || r.FirstSeq != 7 {
		t.Errorf("report: %+v", r)
	}
	if n := len(read(t, e, func(tx agentowl.Tx) ([]*agentowl.AuditEntry, error) {
		return tx.AuditList(e.ctx, agentowl.AuditListParams{TenantID: bare.ID})
	})); n != 0 {
		t.Errorf("a tenant without checkpoints kept %d entries past retention", n)
	}
	// A checkpoint of the newest old entry lets the rest go.
	e.checkpoint(t, k, ten.ID, 10)
	purge()
	r = e.verifyChain(t, k, ten.ID, true)
	wantChainOK(t, r)
	if r.Purged != 10 || r.Entries != 4 {
		t.Errorf("report: %+v", r)
	}
}

// rawDB opens the database at url (Backend.URL) past the store.
func rawDB(t testing.TB, url string) (*sql.DB, bool) {
	t.Helper()
	postgres := strings.HasPrefix(url, "postgres://") || strings.HasPrefix(url, "postgresql://")
	driver, dsn := "pgx", url
	if !postgres {
		driver, dsn = "sqlite", "file:"+url+"?_pragma=busy_timeout(10000)"
	}
	db, err := sql.Open(driver, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db, postgres
}

// AuditChainTampering edits a store's audit log directly in the database,
// as someone with write access to it could, one way per subtest, and
// checks that verification finds it and names the right entry: an edited
// entry, a deleted one, one inserted outside the chain or chained in with
// the rest renumbered, a reordered pair, a tail truncated into the signed
// checkpoints, and a tail truncated after the last checkpoint (found
// against the chain head; not found when the chain head is rewound too:
// the documented limit).
func AuditChainTampering(t *testing.T, b Backend) {
	type want struct {
		kind auditchain.Kind
		seq  int64  // the first finding's entry
		id   string // "new": the inserted row's ID
		msg  string
	}
	tests := []struct {
		name   string
		tamper []string // statements; $T the tenant, $H4/$H9 the stored hashes of seq 4 and 9
		forge  bool     // insert a forged entry, chained, at seq 5
		want   *want    // nil: verifies (the documented limit)
	}{
		{name: "edited entry", tamper: []string{`UPDATE audit_log SET actor = 'operator:mallory' WHERE tenant_id = '$T' AND seq = 5`},
			want: &want{auditchain.Altered, 5, "", "content does not match its hash"}},
		{name: "edited details", tamper: []string{`UPDATE audit_log SET details = '{"i":9}' WHERE tenant_id = '$T' AND seq = 10`},
			want: &want{auditchain.Altered, 10, "", "content does not match its hash"}},
		{name: "deleted entry", tamper: []string{`DELETE FROM audit_log WHERE tenant_id = '$T' AND seq = 5`},
			want: &want{auditchain.Deleted, 6, "", "entries seq 5 to 5 are missing"}},
		{name: "inserted entry", tamper: []string{`INSERT INTO audit_log (tenant_id, at, actor, action, target, request_id, details)
			SELECT tenant_id, at, 'operator:mallory', 'approval.decide', target, request_id, details FROM audit_log WHERE tenant_id = '$T' AND seq = 5`},
			want: &want{auditchain.Inserted, 0, "new", "not in the chain"}},
		{name: "inserted entry, chained, the rest renumbered", forge: true,
			want: &want{auditchain.Inserted, 5, "new", "was inserted"}},
		{name: "reordered pair", tamper: []string{
			`UPDATE audit_log SET seq = -seq WHERE tenant_id = '$T' AND seq IN (5, 6)`,
			`UPDATE audit_log SET seq = CASE seq WHEN -5 THEN 6 ELSE 5 END WHERE tenant_id = '$T' AND seq IN (-5, -6)`},
			want: &want{auditchain.Reordered, 5, "", "were reordered"}},
		{name: "tail truncated into a checkpoint", tamper: []string{`DELETE FROM audit_log WHERE tenant_id = '$T' AND seq >= 7`},
			want: &want{auditchain.Truncated, 0, "", "covers entries up to seq 8"}},
		{name: "tail after the last checkpoint truncated", tamper: []string{`DELETE FROM audit_log WHERE tenant_id = '$T' AND seq >= 10`},
			want: &want{auditchain.Truncated, 0, "", "the chain head is at seq 12"}},
		{name: "tail after the last checkpoint truncated, the chain head rewound (undetectable)", tamper: []string{
			`DELETE FROM audit_log WHERE tenant_id = '$T' AND seq >= 10`,
			`UPDATE audit_chain_heads SET seq = 9, head = (SELECT hash FROM audit_log WHERE tenant_id = '$T' AND seq = 9) WHERE tenant_id = '$T'`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			url := b.URL(t)
			e := &env{s: OpenURL(t, url, nil), ctx: t.Context(), now: time.Now().UTC().Truncate(time.Microsecond)}
			k := newChainKeys(t)
			ten := e.tenant(t)
			es := e.appendAudit(t, ten.ID, e.now, 12)
			e.checkpoint(t, k, ten.ID, 4)
			e.checkpoint(t, k, ten.ID, 8)
			wantChainOK(t, e.verifyChain(t, k, ten.ID, true))

			db, postgres := rawDB(t, url)
			for _, q := range tc.tamper {
				if _, err := db.ExecContext(e.ctx, strings.ReplaceAll(q, "$T", ten.ID)); err != nil {
					t.Fatalf("%v\n%s", err, q)
				}
			}
			if tc.forge {
				// Make room at seq 5 and write an entry there that chains to
				// seq 4 with a hash computed as the store computes it.
				forged := auditchain.Entry{TenantID: ten.ID, At: es[4].At, Actor: "operator:mallory", Action: "approval.decide",
					Target: "approval-request:x", RequestID: "r", Details: []byte(`{}`)}
				h := forged.Compute(es[3].Hash, 5)
				for _, q := range []string{
					`UPDATE audit_log SET seq = seq + 1000 WHERE tenant_id = ? AND seq >= 5`,
					`UPDATE audit_log SET seq = seq - 999 WHERE tenant_id = ? AND seq >= 1000`,
				} {
					if _, err := db.ExecContext(e.ctx, rebind(q, postgres), ten.ID); err != nil {
						t.Fatal(err)
					}
				}
				if _, err := db.ExecContext(e.ctx, rebind(`INSERT INTO audit_log (tenant_id, at, actor, action, target, request_id, details, seq, prev_hash, hash)
					VALUES (?, ?, ?, ?, ?, ?, ?, 5, ?, ?)`, postgres), ten.ID, forged.At.UnixMicro(), forged.Actor, forged.Action, forged.Target,
					forged.RequestID, string(forged.Details), es[3].Hash, h); err != nil {
					t.Fatal(err)
				}
			}
			var newID int64
			if err := db.QueryRowContext(e.ctx, rebind(`SELECT max(id) FROM audit_log WHERE tenant_id = ?`, postgres), ten.ID).Scan(&newID); err != nil {
				t.Fatal(err)
			}

			r := e.verifyChain(t, k, ten.ID, true)
			if tc.want == nil {
				wantChainOK(t, r)
				if r.LastSeq != 9 || r.Uncovered != 1 || r.LastCheckpointSeq != 8 {
					t.Errorf("report: %+v", r)
				}
				return
			}
			if r.OK() {
				t.Fatalf("the tampering went unnoticed: %+v", r)
			}
			f := r.Findings[0]
			wantID := int64(0)
			switch {
			case tc.want.id == "new":
				wantID = newID
			case tc.want.kind == auditchain.Reordered: // the entry written after it now holds its seq
				wantID = es[tc.want.seq].ID
			case tc.want.seq > 0 && tc.want.kind != auditchain.Inserted:
				wantID = es[tc.want.seq-1].ID
			}
			if f.Kind != tc.want.kind || f.Seq != tc.want.seq || (wantID != 0 && f.ID != wantID) || !strings.Contains(f.Message, tc.want.msg) {
				t.Errorf("first finding %+v, want %s of seq %d id %d saying %q; all: %+v", f, tc.want.kind, tc.want.seq, wantID, tc.want.msg, r.Findings)
			}
			// Without the chain head, a tail truncated after the last
			// checkpoint is the documented limit: nothing is found.
			if tc.name == "tail after the last checkpoint truncated" {
				wantChainOK(t, e.verifyChain(t, k, ten.ID, false))
			}
		})
	}
}

// rebind numbers ? placeholders for PostgreSQL.
func rebind(q string, postgres bool) string {
	if !postgres {
		return q
	}
	var b strings.Builder
	n := 0
	for _, r := range q {
		if r == '?' {
			n++
			fmt.Fprintf(&b, "$%d", n)
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// auditChainUpgrade checks migration 00026 on entries an earlier version
// wrote: they join their tenant's chain in the order written, the chain
// verifies, and new entries continue it.
func auditChainUpgrade(t *testing.T, u upgradeDB) {
	t.Helper()
	ctx := migrateTo(t, u, 25)
	stmts := []string{`INSERT INTO tenants (id, name, created_at) VALUES ('t-a', 'a', 1), ('t-b', 'b', 2)`}
	for i := range 7 {
		tn := "t-a"
		if i%3 == 2 {
			tn = "t-b"
		}
		stmts = append(stmts, fmt.Sprintf(`INSERT INTO audit_log (tenant_id, at, actor, action, target, request_id, details)
			VALUES ('%s', %d, 'operator:admin', 'policy.create', 'policy:p%d', '', '{"i":%d,"s":"x\u003cy"}')`, tn, 1_700_000_000_000_000+i, i, i))
	}
	writeOldData(t, ctx, u.db, stmts)
	s := u.open(t)
	e := &env{s: s, ctx: ctx, now: time.Now().UTC().Truncate(time.Microsecond)}
	k := newChainKeys(t)
	for tn, n := range map[string]int{"t-a": 5, "t-b": 2} {
		r := e.verifyChain(t, k, tn, true)
		wantChainOK(t, r)
		if r.Entries != n {
			t.Errorf("tenant %s: %d entries chained, want %d", tn, r.Entries, n)
		}
	}
	es := read(t, e, func(tx agentowl.Tx) ([]*agentowl.AuditEntry, error) {
		return tx.AuditChainList(e.ctx, agentowl.AuditChainParams{TenantID: "t-a"})
	})
	for i := 1; i < len(es); i++ {
		if es[i].ID <= es[i-1].ID {
			t.Fatalf("the migration chained entries out of the order written: %s", show(es))
		}
	}
	e.appendAudit(t, "t-a", e.now, 2)
	r := e.verifyChain(t, k, "t-a", true)
	wantChainOK(t, r)
	if r.LastSeq != 7 {
		t.Errorf("after two appends the chain ends at %d, want 7", r.LastSeq)
	}
}
