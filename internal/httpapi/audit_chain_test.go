package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	"github.com/agentowl/agentowl"
	"github.com/agentowl/agentowl/attest"
	"github.com/agentowl/agentowl/internal/auditchain"
	"github.com/agentowl/agentowl/internal/maintenance"
)

// TestAuditChainExport: the chain and its checkpoints read page by page
// over the operator API (shapes checked against api/openapi.yaml) verify
// against the published JWK Set; bad cursors are 400, never 500.
func TestAuditChainExport(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		st := e.server.Store()
		var tenantID string
		if err := st.Read(ctx, func(tx agentowl.Tx) error {
			tn, err := tx.TenantGetByName(ctx, "default")
			if tn != nil {
				tenantID = tn.ID
			}
			return err
		}); err != nil {
			t.Fatal(err)
		}
		for i := range 5 {
			if err := st.Write(ctx, func(tx agentowl.Tx) error {
				return tx.AuditAppend(ctx, &agentowl.AuditEntry{TenantID: tenantID, At: e.clock.Now(), Actor: "operator:admin",
					Action: "policy.create", Target: fmt.Sprintf("policy:%d", i), Details: map[string]any{"note": "<a & b>", "i": i}})
			}); err != nil {
				t.Fatal(err)
			}
		}
		if r, err := e.server.Scheduler().RunJob(ctx, maintenance.JobAuditCheckpoints); err != nil || r.Affected < 1 {
			t.Fatalf("checkpoint job: %+v %v", r, err)
		}

		jwks := e.do("GET", "/.well-known/agentowl/jwks.json", "", nil)
		keys, err := attest.ParseJWKS(jwks.Body)
		if err != nil {
			t.Fatal(err)
		}
		v := auditchain.NewVerifier(tenantID)
		const base = "/api/v1/tenants/default/audit/"
		cps := e.do("GET", base+"checkpoints", e.operatorToken, nil)
		var cpPage struct {
			Items []auditchain.WireCheckpoint `json:"items"`
		}
		if err := json.Unmarshal(cps.Body, &cpPage); err != nil || cps.Status != http.StatusOK || len(cpPage.Items) != 1 {
			t.Fatalf("checkpoints: %d %s", cps.Status, cps.Body)
		}
		v.AddCheckpoint(ctx, cpPage.Items[0].JWS, keys)
		var head *auditchain.Head
		pages, n := 0, 0
		for after := "0"; after != ""; pages++ {
			r := e.do("GET", base+"chain?limit=2&after="+after, e.operatorToken, nil)
			var page struct {
				TenantID string                 `json:"tenant_id"`
				HeadSeq  int64                  `json:"head_seq"`
				Items    []auditchain.WireEntry `json:"items"`
				Next     *int64                 `json:"next"`
			}
			if err := json.Unmarshal(r.Body, &page); err != nil || r.Status != http.StatusOK || page.TenantID != tenantID {
				t.Fatalf("chain page: %d %s", r.Status, r.Body)
			}
			for _, w := range page.Items {
				en, err := auditchain.FromWire(tenantID, &w)
				if err != nil {
					t.Fatal(err)
				}
				v.Add(en)
				n++
			}
			if head == nil && page.HeadSeq > 0 {
				head = &auditchain.Head{TenantID: tenantID, Seq: page.HeadSeq}
			}
			after = ""
			if page.Next != nil {
				after = fmt.Sprint(*page.Next)
			}
		}
		rep := v.Finish(nil)
		if !rep.OK() || rep.Matched != 1 || int64(n) != head.Seq || pages < 3 {
			t.Fatalf("%d entries in %d pages (head %d): %+v", n, pages, head.Seq, rep)
		}
		r := e.do("GET", base+"chain?unchained=true", e.operatorToken, nil)
		if r.Status != http.StatusOK || len(r.JSON(t)["items"].([]any)) != 0 {
			t.Errorf("unchained: %d %s", r.Status, r.Body)
		}
		for _, q := range []string{"chain?after=-1", "chain?after=x", "chain?unchained=maybe", "chain?limit=0", "checkpoints?after=1.5"} {
			if r := e.do("GET", base+q, e.operatorToken, nil); r.Status != http.StatusBadRequest {
				t.Errorf("%s: %d %s, want 400", q, r.Status, r.Body)
			}
		}
	})
}
