package approval_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/agentowl/agentowl"
	"github.com/agentowl/agentowl/attest"
	"github.com/agentowl/agentowl/internal/access"
	"github.com/agentowl/agentowl/internal/approval"
	"github.com/agentowl/agentowl/internal/attestation"
	"github.com/agentowl/agentowl/internal/clocktest"
	"github.com/agentowl/agentowl/internal/store/storetest"
)

// attested is an approval service on backend b, signing when sign is
// set, with an instance's principal and the tenant admin's.
func attested(tb testing.TB, b storetest.Backend, sign bool) (agentowl.Store, *approval.Service, *attestation.Signer, *access.Principal, *access.Principal) {
	tb.Helper()
	return attestedWith(tb, b, sign, attestation.Config{})
}

// attestedWith is attested with the Signer's configuration (its issuer
// set here).
func attestedWith(tb testing.TB, b storetest.Backend, sign bool, cfg attestation.Config) (agentowl.Store, *approval.Service, *attestation.Signer, *access.Principal, *access.Principal) {
	tb.Helper()
	st, acc, appr, clock := newApproval(tb, b)
	var signer *attestation.Signer
	if sign {
		signer = newSigner(tb, st, clock, cfg)
		appr.UseAttestations(signer)
	}
	agent, admin := acmeAgent(tb, acc, appr)
	return st, appr, signer, agent, admin
}

// newSigner is a Signer over st with its first key.
func newSigner(tb testing.TB, st agentowl.Store, clock agentowl.Clock, cfg attestation.Config) *attestation.Signer {
	tb.Helper()
	cfg.Issuer = "https://owl.example.com"
	signer, err := attestation.New(st, clock, cfg)
	if err != nil {
		tb.Fatal(err)
	}
	if err := signer.Ensure(context.Background()); err != nil {
		tb.Fatal(err)
	}
	return signer
}

// newApproval is an approval service on a new store of backend b, its
// access service and its clock.
func newApproval(tb testing.TB, b storetest.Backend) (agentowl.Store, *access.Service, *approval.Service, *clocktest.Fake) {
	st := b.Open(tb)
	clock := clocktest.New(time.Date(2026, 9, 16, 12, 0, 0, 0, time.UTC))
	acc := access.New(st, clock, access.Config{})
	return st, acc, approval.New(st, acc, clock, approval.Config{}, nil, slog.New(slog.NewTextHandler(io.Discard, nil))), clock
}

// acmeAgent bootstraps tenant acme on appr's store and provisions an
// instance: the instance's principal and the tenant admin's.
func acmeAgent(tb testing.TB, acc *access.Service, appr *approval.Service) (*access.Principal, *access.Principal) {
	tb.Helper()
	ctx := context.Background()
	admin := bootstrapAcme(tb, acc)
	prov, err := acc.CreateProvisionerToken(ctx, admin, "acme", "prov", 0)
	if err != nil {
		tb.Fatal(err)
	}
	inst, err := appr.ProvisionInstance(ctx, authenticate(tb, acc, prov.Secret, agentowl.TokenProvisioner), "inst-1",
		&approval.ProvisionInput{Name: "agent"})
	if err != nil {
		tb.Fatal(err)
	}
	return authenticate(tb, acc, inst.Credential, agentowl.TokenInstance), admin
}

var refund = &agentowl.CreateRequestInput{Tool: "refund", Arguments: json.RawMessage(`{"amount":5,"order":"ord_1234"}`),
	Timeout: "1h", TimeoutDur: time.Hour}

// signings are the ways a decision is attested: after its transaction
// (the default) and in it.
var signings = []struct {
	name string
	cfg  attestation.Config
}{{"after", attestation.Config{}}, {"in-tx", attestation.Config{InTransaction: true}}}

// TestAttestedDecisionRoundTrips: with attestations on, a decision still
// takes at most two round trips on PostgreSQL (signed in the transaction,
// the attestation's insert travels with the commit; signed after it, the
// decision writes none), and its attestation verifies.
func TestAttestedDecisionRoundTrips(t *testing.T) {
	for _, b := range storetest.Backends(t) {
		for _, sg := range signings {
			t.Run(b.Name+"/"+sg.name, func(t *testing.T) {
				t.Parallel()
				ctx := context.Background()
				st, appr, signer, agent, admin := attestedWith(t, b, true, sg.cfg)
				counter, _ := st.(roundTrips)
				for i := range 2 { // the first decision reads the key into the cache
					r, err := appr.CreateRequest(ctx, agent, fmt.Sprint("k", i), refund)
					if err != nil {
						t.Fatal(err)
					}
					if err := signer.Flush(ctx); err != nil { // the background signer's writes are not the decision's
						t.Fatal(err)
					}
					var before int64
					if counter != nil {
						_, before = counter.WriteRoundTrips()
					}
					if _, err := appr.Decide(ctx, admin, "acme", r.Request.ID, approval.DecideParams{Approve: true}); err != nil {
						t.Fatal(err)
					}
					if counter != nil {
						if _, after := counter.WriteRoundTrips(); i == 1 && after-before > 2 {
							t.Errorf("an attested decision took %d round trips, want at most 2", after-before)
						}
					}
					a, err := appr.Attestation(ctx, r.Request)
					if err != nil {
						t.Fatal(err)
					}
					verifyRefund(t, signer, a, r.Request)
				}
			})
		}
	}
}

// verifyRefund verifies a, the attestation of the decision on refund
// request r, against signer's published keys.
func verifyRefund(t *testing.T, signer *attestation.Signer, a *agentowl.Attestation, r *agentowl.ApprovalRequest) {
	t.Helper()
	ctx := context.Background()
	decision := attest.Approved
	if r.Status == agentowl.StatusDenied {
		decision = attest.Denied
	}
	set, err := signer.JWKS(ctx)
	if err != nil {
		t.Fatal(err)
	}
	jwks, _ := json.Marshal(set)
	keys, err := attest.ParseJWKS(jwks)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := attest.Verify(a.Token, keys, attest.Expectation{Issuer: "https://owl.example.com",
		Subject: attest.Subject{Kind: attest.SubjectAAPRequest, RequestID: r.ID}, Tool: "refund", Decision: decision,
		Arguments: refund.Arguments, Now: func() time.Time { return r.CreatedAt }}); err != nil {
		t.Error(err)
	}
}

// TestAttestationMatchesCommitted: whether signed before the decision's
// transaction (on every store) or after it by the background signer, the
// attestation of each decision names exactly the decision committed: its
// time, expiry, outcome and decider.
func TestAttestationMatchesCommitted(t *testing.T) {
	for _, b := range storetest.Backends(t) {
		for _, sg := range []struct {
			name string
			cfg  attestation.Config
		}{{"presigned", attestation.Config{InTransaction: true, Presign: attestation.PresignAlways}}, {"after", attestation.Config{}}} {
			t.Run(b.Name+"/"+sg.name, func(t *testing.T) {
				t.Parallel()
				ctx := context.Background()
				_, appr, signer, agent, admin := attestedWith(t, b, true, sg.cfg)
				var validity time.Duration // the instance's approval validity, learnt from the first approval
				for i, dp := range []approval.DecideParams{{Approve: true}, {Approve: true, ValidFor: 90 * time.Second}, {Note: "no"}} {
					r, err := appr.CreateRequest(ctx, agent, fmt.Sprint("presigned-", i), refund)
					if err != nil {
						t.Fatal(err)
					}
					decided, err := appr.Decide(ctx, admin, "acme", r.Request.ID, dp)
					if err != nil {
						t.Fatal(err)
					}
					// The stored attestation, not one signed on this read.
					if err := signer.Flush(ctx); err != nil {
						t.Fatal(err)
					}
					a, err := signer.Get(ctx, agentowl.AttestationAAPRequest, decided.ID)
					if err != nil {
						t.Fatal(err)
					}
					tok, err := attest.Parse(a.Token)
					if err != nil {
						t.Fatal(err)
					}
					d, doc := decided.Decision, tok.Document
					if i == 0 {
						validity = d.ExpiresAt.Sub(d.DecidedAt)
					}
					want, expires := attest.Denied, d.DecidedAt.Add(validity)
					if dp.Approve {
						want, expires = attest.Approved, d.ExpiresAt
					}
					if doc.Decision != want || !doc.DecidedAt.Equal(d.DecidedAt) || !doc.ExpiresAt.Equal(expires) ||
						doc.DecidedBy.Name == "" || "operator:"+doc.DecidedBy.Name != d.DecidedBy {
						t.Errorf("decision %d: attested %s at %s until %s by %+v; committed %s at %s until %s by %s", i,
							doc.Decision, doc.DecidedAt, doc.ExpiresAt, doc.DecidedBy, d.Status, d.DecidedAt, expires, d.DecidedBy)
					}
				}
			})
		}
	}
}

// TestSweepSignsUnsignedDecisions: decisions committed but never signed
// (their replica stopped before its background signer ran) are signed by
// the sweep once a minute old, or by the first read of their attestation;
// a decision made before the first key was created is not.
func TestSweepSignsUnsignedDecisions(t *testing.T) {
	storetest.Each(t, func(t *testing.T, b storetest.Backend) {
		ctx := context.Background()
		st, acc, appr, clock := newApproval(t, b)
		agent, admin := acmeAgent(t, acc, appr)
		decide := func(key string) *agentowl.ApprovalRequest {
			t.Helper()
			r, err := appr.CreateRequest(ctx, agent, key, refund)
			if err != nil {
				t.Fatal(err)
			}
			decided, err := appr.Decide(ctx, admin, "acme", r.Request.ID, approval.DecideParams{Approve: key != "denied"})
			if err != nil {
				t.Fatal(err)
			}
			return decided
		}
		before := decide("before-the-key")
		clock.Advance(time.Hour)
		signer := newSigner(t, st, clock, attestation.Config{})
		// Decided on a replica that signs nothing, as one stopped before
		// signing leaves them.
		approved, denied, read := decide("approved"), decide("denied"), decide("read")
		unsigned := func(r *agentowl.ApprovalRequest) bool {
			_, err := signer.Get(ctx, agentowl.AttestationAAPRequest, r.ID)
			if err != nil && !errors.Is(err, agentowl.ErrNotFound) {
				t.Fatal(err)
			}
			return err != nil
		}
		for _, r := range []*agentowl.ApprovalRequest{approved, denied, read} {
			if !unsigned(r) {
				t.Fatalf("%s has an attestation before any sweep", r.IdempotencyKey)
			}
		}
		// The first read signs.
		appr.UseAttestations(signer)
		a, err := appr.Attestation(ctx, read)
		if err != nil {
			t.Fatal(err)
		}
		verifyRefund(t, signer, a, read)
		// The sweep signs the rest once a minute old.
		clock.Advance(2 * time.Minute)
		if _, err := signer.Sweep(ctx); err != nil {
			t.Fatal(err)
		}
		for _, r := range []*agentowl.ApprovalRequest{approved, denied} {
			a, err := signer.Get(ctx, agentowl.AttestationAAPRequest, r.ID)
			if err != nil {
				t.Fatalf("%s after the sweep: %v", r.IdempotencyKey, err)
			}
			verifyRefund(t, signer, a, r)
		}
		// Before the first key: attestations were off.
		if !unsigned(before) {
			t.Error("a decision made before the first key was signed by the sweep")
		}
		if _, err := appr.Attestation(ctx, before); agentowl.ErrorCode(err) != agentowl.ECodeNotFound {
			t.Errorf("a decision made before the first key: %v, want not_found", err)
		}
	})
}

// processCost is the process's CPU time (user and system) and the bytes
// it has written (/proc/self/io wchar; 0 where unavailable).
func processCost() (time.Duration, int64) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, 0
	}
	cpu := time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	b, err := os.ReadFile("/proc/self/io")
	if err != nil {
		return cpu, 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "wchar: "); ok {
			n, _ := strconv.ParseInt(v, 10, 64)
			return cpu, n
		}
	}
	return cpu, 0
}

// BenchmarkDecide measures operator decisions per second with
// attestations off and on, on each store: 32 concurrent deciders, each
// decision a request created beforehand (outside the timer). "on" signs
// as the server does, after the decision's transaction (the background
// signer); "on-in-tx" signs in the transaction as policy and runtime
// decisions are (before it on SQLite), "on-presign" and "on-in-tx-only"
// force before it and in it. Besides the rate it reports the process's
// CPU time and the bytes it wrote per decision while deciding, and for
// "on" the CPU time and bytes per decision of the signing left after the
// timer (deferred-cpu-µs/op, deferred-written-B/op). Run with
//
//	AGENTOWL_TEST_DATABASE_URL=… go test ./internal/approval -run '^$' -bench Decide -benchtime 3000x -count 3
func BenchmarkDecide(b *testing.B) {
	variants := []struct {
		name string
		sign bool
		cfg  attestation.Config
	}{{"off", false, attestation.Config{}}, {"on", true, attestation.Config{}},
		{"on-in-tx", true, attestation.Config{InTransaction: true}},
		{"on-presign", true, attestation.Config{InTransaction: true, Presign: attestation.PresignAlways}},
		{"on-in-tx-only", true, attestation.Config{InTransaction: true, Presign: attestation.PresignNever}}}
	for _, be := range storetest.Backends(b) {
		for _, v := range variants {
			b.Run(be.Name+"/attestations="+v.name, func(b *testing.B) {
				ctx := context.Background()
				_, appr, signer, agent, admin := attestedWith(b, be, v.sign, v.cfg)
				ids := make([]string, b.N)
				for i := range ids {
					r, err := appr.CreateRequest(ctx, agent, fmt.Sprint("key-", i), refund)
					if err != nil {
						b.Fatal(err)
					}
					ids[i] = r.Request.ID
				}
				if err := signer.Flush(ctx); err != nil { // Ensure's sweep
					b.Fatal(err)
				}
				var next atomic.Int64
				b.SetParallelism(16) // 32 deciders on 2 cores
				cpu0, w0 := processCost()
				b.ResetTimer()
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						id := ids[next.Add(1)-1]
						if _, err := appr.Decide(ctx, admin, "acme", id, approval.DecideParams{Approve: true}); err != nil {
							b.Error(err)
							return
						}
					}
				})
				b.StopTimer()
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "decisions/s")
				// Less sensitive to a shared machine's load than the rate:
				// the process's CPU time and the bytes it wrote (SQLite's
				// WAL frames) per decision.
				cpu1, w1 := processCost()
				if cpu1 == 0 {
					return
				}
				b.ReportMetric(float64((cpu1-cpu0).Microseconds())/float64(b.N), "cpu-µs/op")
				if w1 > 0 {
					b.ReportMetric(float64(w1-w0)/float64(b.N), "written-B/op")
				}
				if !signer.Defers() {
					return
				}
				// The signing left after the timer; every decision then has
				// its attestation.
				if err := signer.Flush(ctx); err != nil {
					b.Fatal(err)
				}
				cpu2, w2 := processCost()
				b.ReportMetric(float64((cpu2-cpu1).Microseconds())/float64(b.N), "deferred-cpu-µs/op")
				if w2 > 0 {
					b.ReportMetric(float64(w2-w1)/float64(b.N), "deferred-written-B/op")
				}
				for _, id := range []string{ids[0], ids[len(ids)-1]} {
					if _, err := signer.Get(ctx, agentowl.AttestationAAPRequest, id); err != nil {
						b.Fatalf("request %s after the flush: %v", id, err)
					}
				}
			})
		}
	}
}
