package storetest

import (
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentowl/agentowl"
	"github.com/agentowl/agentowl/internal/secret/secrettest"
	"github.com/agentowl/agentowl/internal/store/sqlstore"
)

// BenchAuditChain measures what chaining costs an audited write
// (BENCHMARKS.md, "Audit chain"): the store's append (one write
// transaction each, chained in the database), serial and from parallel
// writers on one tenant (they serialize on its chain head) or spread over
// eight; and the statements alone, a plain insert as before the chain
// against the chained append, each in its own transaction through
// database/sql.
func BenchAuditChain(b *testing.B, be Backend) {
	url := be.URL(b)
	st := OpenURL(b, url, secrettest.NewBox(b))
	e := &env{s: st, ctx: b.Context(), now: time.Now().UTC().Truncate(time.Microsecond)}
	tenants := make([]string, 8)
	for i := range tenants {
		tn := newTenant(e.now)
		if err := st.Write(e.ctx, func(tx agentowl.Tx) error { return tx.TenantCreate(e.ctx, tn) }); err != nil {
			b.Fatal(err)
		}
		tenants[i] = tn.ID
	}
	appendOne := func(b *testing.B, tenantID string, i int) {
		if err := st.Write(e.ctx, func(tx agentowl.Tx) error { return tx.AuditAppend(e.ctx, auditEntry(tenantID, e.now, i)) }); err != nil {
			b.Fatal(err)
		}
	}
	b.Run("store/serial", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			appendOne(b, tenants[0], i)
		}
	})
	for _, spread := range []int{1, 8} {
		b.Run(fmt.Sprintf("store/parallel-%d-tenants", spread), func(b *testing.B) {
			var n atomic.Int64
			b.SetParallelism(4)
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					i := int(n.Add(1))
					appendOne(b, tenants[i%spread], i)
				}
			})
		})
	}
	db, postgres := rawDB(b, url)
	details := `{"amount":4900.5,"i":1,"note":"refunds"}`
	for _, chained := range []bool{false, true} {
		name := "statement/plain-insert"
		if chained {
			name = "statement/chained-append"
		}
		b.Run(name, func(b *testing.B) {
			for i := 0; b.Loop(); i++ {
				tx, err := db.BeginTx(e.ctx, nil)
				if err != nil {
					b.Fatal(err)
				}
				args := []any{tenants[1], e.now.UnixMicro(), "operator:ann", "policy.create", fmt.Sprintf("policy:p%d", i), "req", details}
				switch {
				case !chained:
					_, err = tx.ExecContext(e.ctx, rebind(`INSERT INTO audit_log (tenant_id, at, actor, action, target, request_id, details)
						VALUES (?, ?, ?, ?, ?, ?, ?)`, postgres), args...)
				case postgres:
					_, err = tx.ExecContext(e.ctx, auditAppendPostgresBench, append(args, make([]byte, 32))...)
				default:
					var seq int64
					var prev, h []byte
					err = tx.QueryRowContext(e.ctx, `INSERT INTO audit_chain_heads (tenant_id, seq, prev, head)
						VALUES (?1, 1, zeroblob(32), agentowl_audit_hash(zeroblob(32), 1, ?1, ?2, ?3, ?4, ?5, ?6, ?7))
						ON CONFLICT (tenant_id) DO UPDATE SET seq = audit_chain_heads.seq + 1, prev = audit_chain_heads.head,
						head = agentowl_audit_hash(audit_chain_heads.head, audit_chain_heads.seq + 1, ?1, ?2, ?3, ?4, ?5, ?6, ?7)
						RETURNING seq, prev, head`, args...).Scan(&seq, &prev, &h)
					if err == nil {
						_, err = tx.ExecContext(e.ctx, `INSERT INTO audit_log (tenant_id, at, actor, action, target, request_id, details, seq, prev_hash, hash)
							VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, append(args, seq, prev, h)...)
					}
				}
				if err == nil {
					err = tx.Commit()
				}
				if err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// auditAppendPostgresBench is sqlstore's chained append on PostgreSQL,
// without RETURNING.
var auditAppendPostgresBench = strings.TrimSuffix(sqlstore.AuditAppendPostgres, "\nRETURNING id, seq, prev_hash, hash")
