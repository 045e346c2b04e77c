package approval_test

import (
	"context"
	"encoding/json"
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
	return attestedWith(tb, b, sign, attestation.PresignAuto)
}

// attestedWith is attested with the Signer's presign setting.
func attestedWith(tb testing.TB, b storetest.Backend, sign bool, presign attestation.Presign) (agentowl.Store, *approval.Service, *attestation.Signer, *access.Principal, *access.Principal) {
	tb.Helper()
	ctx := context.Background()
	st := b.Open(tb)
	clock := clocktest.New(time.Date(2026, 9, 16, 12, 0, 0, 0, time.UTC))
	acc := access.New(st, clock, access.Config{})
	appr := approval.New(st, acc, clock, approval.Config{}, nil, slog.New(slog.NewTextHandler(io.Discard, nil)))
	var signer *attestation.Signer
	if sign {
		var err error
		if signer, err = attestation.New(st, clock, attestation.Config{Issuer: "https://owl.example.com", Presign: presign}); err != nil {
			tb.Fatal(err)
		}
		if err := signer.Ensure(ctx); err != nil {
			tb.Fatal(err)
		}
		appr.UseAttestations(signer)
	}
	boot, err := acc.Bootstrap(ctx, "acme")
	if err != nil {
		tb.Fatal(err)
	}
	admin, err := acc.Authenticate(ctx, boot.Token, agentowl.TokenOperator)
	if err != nil {
		tb.Fatal(err)
	}
	prov, err := acc.CreateProvisionerToken(ctx, admin, "acme", "prov", 0)
	if err != nil {
		tb.Fatal(err)
	}
	provP, err := acc.Authenticate(ctx, prov.Secret, agentowl.TokenProvisioner)
	if err != nil {
		tb.Fatal(err)
	}
	inst, err := appr.ProvisionInstance(ctx, provP, "inst-1", &approval.ProvisionInput{Name: "agent"})
	if err != nil {
		tb.Fatal(err)
	}
	agent, err := acc.Authenticate(ctx, inst.Credential, agentowl.TokenInstance)
	if err != nil {
		tb.Fatal(err)
	}
	return st, appr, signer, agent, admin
}

var refund = &agentowl.CreateRequestInput{Tool: "refund", Arguments: json.RawMessage(`{"amount":5,"order":"ord_1234"}`),
	Timeout: "1h", TimeoutDur: time.Hour}

// TestAttestedDecisionRoundTrips: with attestations on, a decision still
// takes at most two round trips on PostgreSQL (the attestation's insert
// travels with the commit), and its attestation verifies.
func TestAttestedDecisionRoundTrips(t *testing.T) {
	for _, b := range storetest.Backends(t) {
		t.Run(b.Name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			st, appr, signer, agent, admin := attested(t, b, true)
			counter, _ := st.(roundTrips)
			for i := range 2 { // the first decision reads the key into the cache
				r, err := appr.CreateRequest(ctx, agent, fmt.Sprint("k", i), refund)
				if err != nil {
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
					Subject: attest.Subject{Kind: attest.SubjectAAPRequest, RequestID: r.Request.ID}, Tool: "refund",
					Arguments: refund.Arguments, Now: func() time.Time { return r.Request.CreatedAt }}); err != nil {
					t.Error(err)
				}
			}
		})
	}
}

// TestPresignedDecisionMatchesCommitted: with attestations signed before
// the decision's transaction (on every store), the attestation of each
// decision names exactly the decision committed: its time, expiry,
// outcome and decider.
func TestPresignedDecisionMatchesCommitted(t *testing.T) {
	for _, b := range storetest.Backends(t) {
		t.Run(b.Name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			_, appr, _, agent, admin := attestedWith(t, b, true, attestation.PresignAlways)
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
				a, err := appr.Attestation(ctx, decided)
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
// as the server does (before the transaction on SQLite, inside it on
// PostgreSQL); "on-presign" and "on-in-tx" force one way. Run with
//
//	AGENTOWL_TEST_DATABASE_URL=… go test ./internal/approval -run '^$' -bench Decide -benchtime 3000x -count 3
func BenchmarkDecide(b *testing.B) {
	variants := []struct {
		name    string
		sign    bool
		presign attestation.Presign
	}{{"off", false, 0}, {"on", true, attestation.PresignAuto},
		{"on-presign", true, attestation.PresignAlways}, {"on-in-tx", true, attestation.PresignNever}}
	for _, be := range storetest.Backends(b) {
		for _, v := range variants {
			b.Run(be.Name+"/attestations="+v.name, func(b *testing.B) {
				ctx := context.Background()
				_, appr, _, agent, admin := attestedWith(b, be, v.sign, v.presign)
				ids := make([]string, b.N)
				for i := range ids {
					r, err := appr.CreateRequest(ctx, agent, fmt.Sprint("key-", i), refund)
					if err != nil {
						b.Fatal(err)
					}
					ids[i] = r.Request.ID
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
				if cpu1, w1 := processCost(); cpu1 > 0 {
					b.ReportMetric(float64((cpu1-cpu0).Microseconds())/float64(b.N), "cpu-µs/op")
					if w1 > 0 {
						b.ReportMetric(float64(w1-w0)/float64(b.N), "written-B/op")
					}
				}
			})
		}
	}
}
