package maintenance_test

import (
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/agentowl/agentowl"
	"github.com/agentowl/agentowl/attest"
	"github.com/agentowl/agentowl/internal/maintenance"
	"github.com/agentowl/agentowl/internal/server"
	"github.com/agentowl/agentowl/internal/store/storetest"
)

// TestAuditCheckpoints: the audit_checkpoints job signs a tenant's chain
// head with the server's attestation key when Every entries followed the
// last checkpoint or Interval passed since it (driven by the test clock),
// never otherwise; the checkpoints verify against the published JWK Set,
// across a key rotation, and cover the whole chain.
func TestAuditCheckpoints(t *testing.T) {
	cfg := maintenance.Config{AuditCheckpoints: maintenance.AuditCheckpoints{Every: 3, Interval: 10 * time.Minute}}
	forEachBackend(t, cfg, func(t *testing.T, f *fixture) {
		var tenant *agentowl.Tenant
		f.write(func(tx agentowl.Tx) (err error) {
			tenant, err = tx.TenantGetByName(f.ctx, "default")
			return err
		})
		head := func() *agentowl.AuditChainHead {
			t.Helper()
			var h *agentowl.AuditChainHead
			if err := f.st.Read(f.ctx, func(tx agentowl.Tx) (err error) {
				h, err = tx.AuditChainHead(f.ctx, tenant.ID)
				return err
			}); err != nil {
				t.Fatal(err)
			}
			return h
		}
		appendN := func(n int) {
			t.Helper()
			for range n {
				f.write(func(tx agentowl.Tx) error {
					return tx.AuditAppend(f.ctx, &agentowl.AuditEntry{TenantID: tenant.ID, At: f.clock.Now(), Actor: "operator:admin",
						Action: "policy.create", Target: "policy:x", Details: map[string]any{"n": n}})
				})
			}
		}
		runJob := func(want int64, why string) {
			t.Helper()
			if r := f.run(maintenance.JobAuditCheckpoints); r.Affected != want || r.Outcome != "ok" {
				t.Fatalf("%s: the job signed %d checkpoints (%s), want %d", why, r.Affected, r.Outcome, want)
			}
		}

		// The bootstrap's entries: a first checkpoint at once.
		if h := head(); h.Seq == 0 || h.CheckpointSeq != 0 {
			t.Fatalf("head before the job: %+v", h)
		}
		runJob(1, "a chain never checkpointed")
		if h := head(); h.CheckpointSeq != h.Seq || !h.CheckpointAt.Equal(f.clock.Now()) {
			t.Fatalf("head after the job: %+v", h)
		}
		runJob(0, "nothing new")
		appendN(2)
		runJob(0, "two entries, within the interval")
		f.clock.Advance(10*time.Minute - time.Second)
		runJob(0, "two entries, a second before the interval ends")
		f.clock.Advance(time.Second)
		runJob(1, "two entries, the interval passed")
		appendN(3)
		runJob(1, "Every entries")

		// A rotation: checkpoints signed before and after verify.
		if _, err := server.RotateAttestationKey(f.ctx, f.st, f.clock); err != nil {
			t.Fatal(err)
		}
		appendN(3)
		runJob(1, "Every entries after a rotation")

		resp, err := http.Get(f.srv.URL() + "/.well-known/agentowl/jwks.json")
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("jwks: %d %v", resp.StatusCode, err)
		}
		keys, err := attest.ParseJWKS(body)
		if err != nil || len(keys) != 2 {
			t.Fatalf("jwks: %d keys, %v", len(keys), err)
		}
		r, err := storetest.VerifyAuditChain(f.ctx, f.st, tenant.ID, keys, true)
		if err != nil {
			t.Fatal(err)
		}
		if !r.OK() || r.Checkpoints != 4 || r.Matched != 4 || r.Uncovered != 0 || r.LastSeq != head().Seq {
			t.Fatalf("report: %+v", r)
		}
	})
}
