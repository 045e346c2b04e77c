package attestation

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/agentowl/agentowl"
	"github.com/agentowl/agentowl/attest"
	"github.com/agentowl/agentowl/internal/clocktest"
	"github.com/agentowl/agentowl/internal/store/storetest"
)

// TestToolDigests: the digests computed with one canonicalization are
// attest's, for arguments and tool names that exercise the canonical form.
func TestToolDigests(t *testing.T) {
	tools := []string{"refund", "a<b>&c", "naïve", "line\u2028sep", "tab\tquote\"back\\", "bad\xffutf8", ""}
	args := []string{``, `null`, `{}`, `{"b":1,"a":[1.0,1e3,-0,12345678901234567890]}`,
		`{"html":"<script>&amp;</script>","u":"\u00e9\u2028","esc":"\ud83d\ude00"}`, ` { "x" : { "z":true, "y":null } } `,
		`"just a string"`, `[3,2,1]`, `{"a":1} trailing`, `{bad json`}
	for _, tool := range tools {
		for _, a := range args {
			wantArgs, errA := attest.ArgumentsDigest(json.RawMessage(a))
			wantAction, errB := attest.ToolActionDigest(tool, json.RawMessage(a))
			gotArgs, gotAction, err := toolDigests(tool, json.RawMessage(a))
			if (errA != nil || errB != nil) != (err != nil) {
				t.Errorf("tool %q arguments %q: error %v, attest's %v / %v", tool, a, err, errA, errB)
				continue
			}
			if err == nil && (gotArgs != wantArgs || gotAction != wantAction) {
				t.Errorf("tool %q arguments %q: digests %s %s, want %s %s", tool, a, gotArgs, gotAction, wantArgs, wantAction)
			}
		}
	}
}

func preparedSigner(t *testing.T, b storetest.Backend) (agentowl.Store, *Signer, attest.KeySet) {
	t.Helper()
	ctx := context.Background()
	st := b.Open(t)
	s, err := New(st, clocktest.New(time.Date(2026, 9, 16, 12, 0, 0, 0, time.UTC)), Config{Issuer: "https://owl.example.com"})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Ensure(ctx); err != nil {
		t.Fatal(err)
	}
	set, err := s.JWKS(ctx)
	if err != nil {
		t.Fatal(err)
	}
	b64, _ := json.Marshal(set)
	keys, err := attest.ParseJWKS(b64)
	if err != nil {
		t.Fatal(err)
	}
	return st, s, keys
}

// signTx records the attestation sign returns in a write transaction of
// st, as a decision's transaction does.
func signTx(t *testing.T, st agentowl.Store, sign func(tx agentowl.Tx) (*agentowl.Attestation, error)) *agentowl.Attestation {
	t.Helper()
	var a *agentowl.Attestation
	if err := st.Write(t.Context(), func(tx agentowl.Tx) (err error) {
		a, err = sign(tx)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return a
}

// TestPreparedAttestsOnlyWhatIsCommitted: an attestation signed before
// the transaction is recorded only when the decision the transaction
// commits is exactly the one signed; when anything differs (the decision
// time, the expiry, the decision, the decider, the arguments, the tool,
// the tenant; for runtime requests the revision, action digest or
// answer), the transaction signs the committed decision instead, and the
// recorded attestation names what was committed. It fails if a signed
// document and its committed decision could disagree.
func TestPreparedAttestsOnlyWhatIsCommitted(t *testing.T) {
	storetest.Each(t, func(t *testing.T, b storetest.Backend) {
		ctx := context.Background()
		st, s, keys := preparedSigner(t, b)
		at := time.Date(2026, 9, 16, 12, 0, 5, 0, time.UTC)
		const validity = 15 * time.Minute
		n := 0
		newRequest := func() *agentowl.ApprovalRequest {
			n++
			return &agentowl.ApprovalRequest{ID: agentowl.NewID(""), TenantID: "tenant-1", InstanceID: "inst-1", Tool: "refund",
				Arguments: json.RawMessage(`{"amount":5,"order":"ord_1234"}`), Status: agentowl.StatusPending}
		}
		approval := func() *agentowl.Decision {
			return &agentowl.Decision{Status: agentowl.StatusApproved, DecidedAt: at, ExpiresAt: at.Add(time.Hour), DecidedBy: "operator:alice"}
		}
		record := func(pre *Prepared, r *agentowl.ApprovalRequest, d *agentowl.Decision, validity time.Duration) *agentowl.Attestation {
			t.Helper()
			a := signTx(t, st, func(tx agentowl.Tx) (*agentowl.Attestation, error) {
				return s.SignRequestTx(ctx, tx, pre, r, d, validity)
			})
			got, err := s.Get(ctx, agentowl.AttestationAAPRequest, r.ID)
			if err != nil || got.Token != a.Token || got.ID != a.ID {
				t.Fatalf("recorded %+v (%v), returned %+v", got, err, a)
			}
			return a
		}
		// check verifies a against what was committed: r and d.
		check := func(a *agentowl.Attestation, r *agentowl.ApprovalRequest, d *agentowl.Decision, validity time.Duration) {
			t.Helper()
			want := attest.Approved
			expires := d.ExpiresAt
			if d.Status == agentowl.StatusDenied {
				want, expires = attest.Denied, d.DecidedAt.Add(validity)
			}
			doc, err := attest.Verify(a.Token, keys, attest.Expectation{Issuer: "https://owl.example.com", Tenant: r.TenantID,
				Subject: attest.Subject{Kind: attest.SubjectAAPRequest, RequestID: r.ID}, Tool: r.Tool, Arguments: r.Arguments,
				Decision: want, Now: func() time.Time { return d.DecidedAt }})
			if err != nil {
				t.Fatal(err)
			}
			if !doc.DecidedAt.Equal(d.DecidedAt) || !doc.ExpiresAt.Equal(expires) || doc.DecidedBy != decider(d.DecidedBy) {
				t.Errorf("signed decided_at %s expires_at %s by %+v; committed %s, %s, %s",
					doc.DecidedAt, doc.ExpiresAt, doc.DecidedBy, d.DecidedAt, expires, d.DecidedBy)
			}
			if !a.DecidedAt.Equal(doc.DecidedAt) || !a.ExpiresAt.Equal(doc.ExpiresAt) {
				t.Errorf("row decided_at %s expires_at %s, token %s %s", a.DecidedAt, a.ExpiresAt, doc.DecidedAt, doc.ExpiresAt)
			}
		}

		// The same decision: the prepared attestation is the one recorded.
		r := newRequest()
		pre := s.PrepareRequest(ctx, r, approval(), validity)
		if pre == nil {
			t.Fatal("nothing prepared")
		}
		if a := record(pre, r, approval(), validity); a.ID != pre.a.ID {
			t.Error("the prepared attestation of the same decision was not recorded")
		} else {
			check(a, r, approval(), validity)
		}
		// A denial likewise.
		r = newRequest()
		deny := &agentowl.Decision{Status: agentowl.StatusDenied, DecidedAt: at, DecidedBy: "operator:alice"}
		pre = s.PrepareRequest(ctx, r, deny, validity)
		if a := record(pre, r, deny, validity); a.ID != pre.a.ID {
			t.Error("the prepared attestation of the same denial was not recorded")
		} else {
			check(a, r, deny, validity)
		}

		// Anything committed otherwise than signed: signed again.
		for _, c := range []struct {
			name     string
			change   func(r *agentowl.ApprovalRequest, d *agentowl.Decision)
			validity time.Duration
		}{
			{"decided_at", func(_ *agentowl.ApprovalRequest, d *agentowl.Decision) {
				d.DecidedAt = d.DecidedAt.Add(time.Second)
				d.ExpiresAt = d.ExpiresAt.Add(time.Second)
			}, validity},
			{"decided_at within the second", func(_ *agentowl.ApprovalRequest, d *agentowl.Decision) {
				d.DecidedAt = d.DecidedAt.Add(time.Millisecond)
			}, validity},
			{"expires_at", func(_ *agentowl.ApprovalRequest, d *agentowl.Decision) { d.ExpiresAt = d.ExpiresAt.Add(-time.Minute) }, validity},
			{"decision", func(_ *agentowl.ApprovalRequest, d *agentowl.Decision) {
				d.Status, d.ExpiresAt = agentowl.StatusDenied, time.Time{}
			}, validity},
			{"decider", func(_ *agentowl.ApprovalRequest, d *agentowl.Decision) { d.DecidedBy = "operator:mallory" }, validity},
			{"arguments", func(r *agentowl.ApprovalRequest, _ *agentowl.Decision) {
				r.Arguments = json.RawMessage(`{"amount":9,"order":"ord_1234"}`)
			}, validity},
			{"arguments' form", func(r *agentowl.ApprovalRequest, _ *agentowl.Decision) {
				r.Arguments = json.RawMessage(`{"order":"ord_1234","amount":5}`)
			}, validity},
			{"tool", func(r *agentowl.ApprovalRequest, _ *agentowl.Decision) { r.Tool = "refund_all" }, validity},
			{"tenant", func(r *agentowl.ApprovalRequest, _ *agentowl.Decision) { r.TenantID = "tenant-2" }, validity},
		} {
			t.Run(c.name, func(t *testing.T) {
				r := newRequest()
				pre := s.PrepareRequest(ctx, r, approval(), validity)
				if pre == nil {
					t.Fatal("nothing prepared")
				}
				committed := *r
				d := approval()
				c.change(&committed, d)
				a := record(pre, &committed, d, c.validity)
				if a.ID == pre.a.ID || a.Token == pre.a.Token {
					t.Fatal("recorded the attestation prepared for another decision")
				}
				check(a, &committed, d, c.validity)
			})
		}
		// A denial's expiry follows the instance's validity, read again
		// in the transaction.
		r = newRequest()
		pre = s.PrepareRequest(ctx, r, deny, validity)
		if a := record(pre, r, deny, 2*validity); a.ID == pre.a.ID {
			t.Error("recorded a denial's attestation with another expiry")
		} else {
			check(a, r, deny, 2*validity)
		}
	})
}

// TestPreparedWorkAttestsOnlyWhatIsCommitted is the same for decisions on
// runtime requests.
func TestPreparedWorkAttestsOnlyWhatIsCommitted(t *testing.T) {
	storetest.Each(t, func(t *testing.T, b storetest.Backend) {
		ctx := context.Background()
		st, s, keys := preparedSigner(t, b)
		at := time.Date(2026, 9, 16, 12, 0, 5, 123456000, time.UTC)
		digest := attest.AnswerDigest("action") // any 64 hex characters
		base := func() WorkDecision {
			return WorkDecision{TenantID: "tenant-1", WorkID: agentowl.NewID("work"), RequestID: "req-1", DecisionID: agentowl.NewID("dec"),
				Revision: 2, Decision: "approve", ActionDigest: digest, DecidedBy: "operator:alice", DecidedAt: at,
				ExpiresAt: at.Add(time.Hour)}
		}
		record := func(pre *Prepared, w WorkDecision) *agentowl.Attestation {
			t.Helper()
			return signTx(t, st, func(tx agentowl.Tx) (*agentowl.Attestation, error) { return s.SignWorkTx(ctx, tx, pre, w) })
		}
		check := func(a *agentowl.Attestation, w WorkDecision) {
			t.Helper()
			want := map[string]string{"approve": attest.Approved, "reject": attest.Denied, "answer": attest.Answered}[w.Decision]
			exp := attest.Expectation{Issuer: "https://owl.example.com", Tenant: w.TenantID,
				Subject: attest.Subject{Kind: attest.SubjectWorkRequest, RequestID: w.RequestID, WorkID: w.WorkID, Revision: w.Revision,
					DecisionID: w.DecisionID}, Decision: want, Now: func() time.Time { return w.DecidedAt }}
			if w.Decision == "answer" {
				exp.Answer = w.Answer
			} else {
				exp.ActionDigest = w.ActionDigest
			}
			doc, err := attest.Verify(a.Token, keys, exp)
			if err != nil {
				t.Fatal(err)
			}
			if !doc.DecidedAt.Equal(w.DecidedAt) || !doc.ExpiresAt.Equal(w.ExpiresAt) || doc.DecidedBy != decider(w.DecidedBy) {
				t.Errorf("signed decided_at %s expires_at %s by %+v; committed %s, %s, %s",
					doc.DecidedAt, doc.ExpiresAt, doc.DecidedBy, w.DecidedAt, w.ExpiresAt, w.DecidedBy)
			}
		}
		w := base()
		pre := s.PrepareWork(ctx, w)
		if a := record(pre, w); pre == nil || a.ID != pre.a.ID {
			t.Error("the prepared attestation of the same decision was not recorded")
		} else {
			check(a, w)
		}
		for _, c := range []struct {
			name   string
			change func(w *WorkDecision)
		}{
			{"decided_at", func(w *WorkDecision) { w.DecidedAt = w.DecidedAt.Add(time.Microsecond) }},
			{"expires_at", func(w *WorkDecision) { w.ExpiresAt = w.ExpiresAt.Add(time.Minute) }},
			{"revision", func(w *WorkDecision) { w.Revision = 3 }},
			{"action digest", func(w *WorkDecision) { w.ActionDigest = attest.AnswerDigest("other") }},
			{"decision", func(w *WorkDecision) { w.Decision = "reject" }},
			{"answer", func(w *WorkDecision) { w.Decision, w.ActionDigest, w.Answer = "answer", "", "yes" }},
			{"decider", func(w *WorkDecision) { w.DecidedBy = "operator:mallory" }},
			{"request", func(w *WorkDecision) { w.RequestID = "req-2" }},
		} {
			t.Run(c.name, func(t *testing.T) {
				w := base()
				if c.name == "answer" {
					w.Decision, w.ActionDigest, w.Answer = "answer", "", "no"
				}
				pre := s.PrepareWork(ctx, w)
				if pre == nil {
					t.Fatal("nothing prepared")
				}
				c.change(&w)
				a := record(pre, w)
				if a.ID == pre.a.ID {
					t.Fatal("recorded the attestation prepared for another decision")
				}
				check(a, w)
			})
		}
	})
}
