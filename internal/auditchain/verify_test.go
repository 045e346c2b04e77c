package auditchain_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentowl/agentowl/attest"
	"github.com/agentowl/agentowl/internal/auditchain"
)

const tenant = "tnt_1"

var t0 = time.Date(2026, 12, 1, 12, 0, 0, 123456000, time.UTC)

// chain builds n chained entries, seq 1..n.
func chain(n int) []*auditchain.Entry {
	var out []*auditchain.Entry
	prev := auditchain.Zero
	for i := 1; i <= n; i++ {
		e := &auditchain.Entry{ID: int64(100 + i), TenantID: tenant, Seq: int64(i), At: t0.Add(time.Duration(i) * time.Second),
			Actor: "operator:admin", Action: "policy.create", Target: fmt.Sprintf("policy:p%d", i),
			RequestID: fmt.Sprintf("req-%d", i), Details: []byte(fmt.Sprintf(`{"n":%d,"note":"a<b"}`, i))}
		e.PrevHash = prev
		e.Hash = e.Compute(prev, e.Seq)
		prev = e.Hash
		out = append(out, e)
	}
	return out
}

// rehash recomputes the chain's hashes from index i on, as an attacker
// with write access can: the chain has no secret.
func rehash(es []*auditchain.Entry, i int) {
	for ; i < len(es); i++ {
		prev := auditchain.Zero
		if i > 0 {
			prev = es[i-1].Hash
		}
		es[i].PrevHash = prev
		es[i].Hash = es[i].Compute(prev, es[i].Seq)
	}
}

type keys struct {
	signer auditchain.Ed25519Signer
	set    attest.StaticKeys
}

func newKeys(t *testing.T) keys {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	kid := attest.KeyID(pub)
	return keys{auditchain.Ed25519Signer{Kid: kid, Key: priv}, attest.StaticKeys{kid: pub}}
}

func (k keys) checkpoint(t *testing.T, e *auditchain.Entry) string {
	t.Helper()
	jws, err := k.signer.Sign(context.Background(), auditchain.CheckpointPayload(tenant, e.Seq, e.Hash, e.At))
	if err != nil {
		t.Fatal(err)
	}
	return jws
}

func verify(es []*auditchain.Entry, cps []string, ks attest.KeySet, head *auditchain.Head) *auditchain.Report {
	v := auditchain.NewVerifier(tenant)
	for _, c := range cps {
		v.AddCheckpoint(context.Background(), c, ks)
	}
	for _, e := range es {
		v.Add(e)
	}
	return v.Finish(head)
}

func headOf(e *auditchain.Entry) *auditchain.Head {
	return &auditchain.Head{TenantID: tenant, Seq: e.Seq, Hash: e.Hash}
}

// TestVerify: each kind of tampering with a 12-entry chain (checkpoints at
// seq 4 and 8) is found, and the first finding names the right entry.
func TestVerify(t *testing.T) {
	k := newKeys(t)
	other := newKeys(t)
	type want struct {
		kind    auditchain.Kind
		seq     int64 // the first finding's entry, 0 for none
		message string
	}
	tests := []struct {
		name   string
		tamper func(es []*auditchain.Entry) []*auditchain.Entry
		cps    func(es []*auditchain.Entry) []string // default: checkpoints of seq 4 and 8, signed before tampering
		head   bool                                  // pass the untampered chain head
		want   *want                                 // nil: verifies
		check  func(t *testing.T, r *auditchain.Report)
	}{
		{name: "intact", head: true, check: func(t *testing.T, r *auditchain.Report) {
			if r.Entries != 12 || r.Matched != 2 || r.LastCheckpointSeq != 8 || r.Uncovered != 4 {
				t.Errorf("report = %+v", r)
			}
		}},
		{name: "edited entry", tamper: func(es []*auditchain.Entry) []*auditchain.Entry {
			es[4].Actor = "operator:mallory"
			return es
		}, want: &want{auditchain.Altered, 5, "content does not match its hash"}},
		{name: "edited details", tamper: func(es []*auditchain.Entry) []*auditchain.Entry {
			es[10].Details = []byte(`{"n":11,"note":"a>b"}`)
			return es
		}, want: &want{auditchain.Altered, 11, "content does not match"}},
		{name: "edited entry, its hash rewritten", tamper: func(es []*auditchain.Entry) []*auditchain.Entry {
			es[4].Action = "policy.delete"
			es[4].Hash = es[4].Compute(es[4].PrevHash, 5)
			return es
		}, want: &want{auditchain.Altered, 5, "its hash is not what entry seq 6"}},
		{name: "edited entry, every later hash rewritten", tamper: func(es []*auditchain.Entry) []*auditchain.Entry {
			es[4].Action = "policy.delete"
			rehash(es, 4)
			return es
		}, want: &want{auditchain.Altered, 8, "checkpoint of seq 8"}},
		{name: "deleted entry", tamper: func(es []*auditchain.Entry) []*auditchain.Entry {
			return slices.Delete(es, 4, 5)
		}, want: &want{auditchain.Deleted, 6, "entries seq 5 to 5 are missing"}},
		{name: "deleted entry, the rest renumbered", tamper: func(es []*auditchain.Entry) []*auditchain.Entry {
			es = slices.Delete(es, 4, 5)
			for _, e := range es[4:] {
				e.Seq--
			}
			return es
		}, want: &want{auditchain.Deleted, 5, "was deleted and the entries after it renumbered"}, check: func(t *testing.T, r *auditchain.Report) {
			if len(r.Findings) != 1 {
				t.Errorf("findings = %+v, want the deletion only", r.Findings)
			}
		}},
		{name: "deleted first entry", tamper: func(es []*auditchain.Entry) []*auditchain.Entry {
			return es[1:]
		}, want: &want{auditchain.Deleted, 2, "entries seq 1 to 1 are missing"}},
		{name: "inserted entry outside the chain", tamper: func(es []*auditchain.Entry) []*auditchain.Entry {
			x := *es[3]
			x.ID, x.Seq, x.PrevHash, x.Hash = 999, 0, nil, nil
			return slices.Insert(es, 4, &x)
		}, want: &want{auditchain.Inserted, 0, "id 999"}},
		{name: "inserted entry, chained, the rest renumbered", tamper: func(es []*auditchain.Entry) []*auditchain.Entry {
			x := *es[4]
			x.ID, x.Action = 999, "policy.forged"
			x.PrevHash = es[3].Hash
			x.Hash = x.Compute(x.PrevHash, 5)
			for _, e := range es[4:] {
				e.Seq++
			}
			return slices.Insert(es, 4, &x)
		}, want: &want{auditchain.Inserted, 5, "seq 5 (id 999) was inserted"}, check: func(t *testing.T, r *auditchain.Report) {
			if len(r.Findings) != 1 || r.Matched != 2 {
				t.Errorf("report = %+v, want the insertion only and both checkpoints matched", r)
			}
		}},
		{name: "inserted entry at the tail", head: true, tamper: func(es []*auditchain.Entry) []*auditchain.Entry {
			x := *es[11]
			x.ID, x.Seq, x.PrevHash = 999, 13, es[11].Hash
			x.Hash = x.Compute(x.PrevHash, 13)
			return append(es, &x)
		}, want: &want{auditchain.Inserted, 13, "past the chain head"}},
		{name: "reordered pair (seqs swapped)", tamper: func(es []*auditchain.Entry) []*auditchain.Entry {
			es[4].Seq, es[5].Seq = 6, 5
			es[4], es[5] = es[5], es[4]
			return es
		}, want: &want{auditchain.Reordered, 5, "were reordered"}, check: func(t *testing.T, r *auditchain.Report) {
			f := r.Findings[0]
			if len(r.Findings) != 1 || f.ID != 106 || f.OtherSeq != 6 || f.OtherID != 105 || r.Matched != 2 {
				t.Errorf("report = %+v", r)
			}
		}},
		{name: "reordered pair (contents swapped)", tamper: func(es []*auditchain.Entry) []*auditchain.Entry {
			a, b := *es[4], *es[5]
			es[4].At, es[4].Target, es[4].RequestID, es[4].Details = b.At, b.Target, b.RequestID, b.Details
			es[5].At, es[5].Target, es[5].RequestID, es[5].Details = a.At, a.Target, a.RequestID, a.Details
			return es
		}, want: &want{auditchain.Reordered, 5, "were reordered"}},
		{name: "tail truncated into a checkpoint", tamper: func(es []*auditchain.Entry) []*auditchain.Entry {
			return es[:6]
		}, want: &want{auditchain.Truncated, 0, "entries seq 7 to 8 were deleted"}},
		{name: "tail after the last checkpoint truncated, head unknown (the documented limit)", tamper: func(es []*auditchain.Entry) []*auditchain.Entry {
			return es[:9]
		}, check: func(t *testing.T, r *auditchain.Report) {
			if r.LastSeq != 9 || r.Uncovered != 1 {
				t.Errorf("report = %+v", r)
			}
		}},
		{name: "tail after the last checkpoint truncated, against the chain head", head: true, tamper: func(es []*auditchain.Entry) []*auditchain.Entry {
			return es[:9]
		}, want: &want{auditchain.Truncated, 0, "the chain head is at seq 12: entries seq 10 to 12 were deleted"}},
		{name: "checkpoint signed by another key", cps: func(es []*auditchain.Entry) []string {
			return []string{other.checkpoint(t, es[3])}
		}, want: &want{auditchain.Forged, 0, "key"}},
		{name: "checkpoint's signature edited", cps: func(es []*auditchain.Entry) []string {
			c := k.checkpoint(t, es[3])
			return []string{c[:len(c)-4] + "AAAA"}
		}, want: &want{auditchain.Forged, 0, "does not verify"}},
		{name: "retention kept an anchor checkpoint", tamper: func(es []*auditchain.Entry) []*auditchain.Entry {
			return es[4:]
		}, check: func(t *testing.T, r *auditchain.Report) {
			if r.Purged != 4 || r.FirstSeq != 5 || r.Matched != 2 {
				t.Errorf("report = %+v", r)
			}
		}},
		{name: "oldest entries deleted without an anchor", tamper: func(es []*auditchain.Entry) []*auditchain.Entry {
			return es[2:]
		}, want: &want{auditchain.Deleted, 3, "entries seq 1 to 2 are missing"}},
		{name: "everything purged up to the last checkpoint", head: true, tamper: func(es []*auditchain.Entry) []*auditchain.Entry {
			return nil
		}, cps: func(es []*auditchain.Entry) []string {
			return []string{k.checkpoint(t, es[11])}
		}, check: func(t *testing.T, r *auditchain.Report) {
			if r.Purged != 12 {
				t.Errorf("report = %+v", r)
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			es := chain(12)
			head := headOf(es[11])
			cps := []string{k.checkpoint(t, es[3]), k.checkpoint(t, es[7])}
			if tc.cps != nil {
				cps = tc.cps(es)
			}
			if tc.tamper != nil {
				es = tc.tamper(es)
			}
			if !tc.head {
				head = nil
			}
			r := verify(es, cps, k.set, head)
			if tc.want == nil {
				if !r.OK() {
					t.Fatalf("findings: %+v", r.Findings)
				}
			} else {
				if r.OK() {
					t.Fatalf("no finding; report %+v", r)
				}
				f := r.Findings[0]
				if f.Kind != tc.want.kind || f.Seq != tc.want.seq || !strings.Contains(f.Message, tc.want.message) {
					t.Errorf("first finding = %+v, want %s of seq %d saying %q (all: %+v)", f, tc.want.kind, tc.want.seq, tc.want.message, r.Findings)
				}
			}
			if tc.check != nil {
				tc.check(t, r)
			}
		})
	}
}

// TestSum pins the canonical form: a change to the construction is a
// change of every stored hash, so it must be deliberate.
func TestSum(t *testing.T) {
	e := chain(1)[0]
	h := sha256.New()
	h.Write([]byte("agentowl.audit.v1\x00"))
	h.Write(make([]byte, 32))
	h.Write([]byte{0, 0, 0, 0, 0, 0, 0, 1})
	for i, s := range []string{tenant, "", e.Actor, e.Action, e.Target, e.RequestID, string(e.Details)} {
		if i == 1 {
			var at [8]byte
			for j, u := 0, uint64(e.At.UnixMicro()); j < 8; j++ {
				at[7-j] = byte(u >> (8 * j))
			}
			h.Write(at[:])
			continue
		}
		h.Write([]byte{byte(len(s) >> 24), byte(len(s) >> 16), byte(len(s) >> 8), byte(len(s))})
		h.Write([]byte(s))
	}
	if got, want := hex.EncodeToString(e.Hash), hex.EncodeToString(h.Sum(nil)); got != want {
		t.Errorf("hash = %s, want %s", got, want)
	}
	// Every field is covered.
	for name, edit := range map[string]func(*auditchain.Entry){
		"tenant": func(x *auditchain.Entry) { x.TenantID += "x" }, "at": func(x *auditchain.Entry) { x.At = x.At.Add(time.Microsecond) },
		"actor": func(x *auditchain.Entry) { x.Actor += "x" }, "action": func(x *auditchain.Entry) { x.Action += "x" },
		"target": func(x *auditchain.Entry) { x.Target += "x" }, "request_id": func(x *auditchain.Entry) { x.RequestID += "x" },
		"details": func(x *auditchain.Entry) { x.Details = append(bytes.Clone(x.Details), ' ') },
		// Length prefixes: moving a byte from one field to the next changes the hash.
		"boundary": func(x *auditchain.Entry) { x.Actor, x.Action = x.Actor+x.Action[:1], x.Action[1:] },
	} {
		x := *e
		edit(&x)
		if bytes.Equal(x.Compute(e.PrevHash, 1), e.Hash) {
			t.Errorf("editing %s keeps the hash", name)
		}
	}
	if bytes.Equal(e.Compute(e.PrevHash, 2), e.Hash) || bytes.Equal(e.Compute(bytes.Repeat([]byte{1}, 32), 1), e.Hash) {
		t.Error("the seq or the predecessor is not covered")
	}
}

// TestWireRoundTrip: an entry survives the export format byte for byte,
// details that encoding/json would rewrite included.
func TestWireRoundTrip(t *testing.T) {
	for _, details := range []string{`{"n":1,"note":"a\u003cb"}`, `{"a": 1}`, `{"n":1.50}`, `not json`, `{}`} {
		e := chain(1)[0]
		e.Details = []byte(details)
		e.Hash = e.Compute(e.PrevHash, 1)
		line, err := json.Marshal(auditchain.ToWire(e))
		if err != nil {
			t.Fatal(err)
		}
		var w auditchain.WireEntry
		if err := json.Unmarshal(line, &w); err != nil {
			t.Fatal(err)
		}
		back, err := auditchain.FromWire(tenant, &w)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(back.Compute(back.PrevHash, back.Seq), e.Hash) || !bytes.Equal(back.Hash, e.Hash) {
			t.Errorf("details %s: the line %s does not verify", details, line)
		}
	}
}
