package notify_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentowl/agentowl"
	"github.com/agentowl/agentowl/internal/notify"
	"github.com/agentowl/agentowl/internal/store/storetest"
)

// BenchmarkFanOut: notices recorded per second for a tenant with 50
// operators (notices/s counts one per recipient). "own-tx": each cause in a
// write transaction of its own, as a callback's state change is, from 32
// goroutines: commits (fsync) bound it. "batched": 100 causes per
// transaction: the fan-out statement's own cost.
//
//	go test ./internal/notify -run '^$' -bench FanOut -benchtime 3000x
func BenchmarkFanOut(b *testing.B) {
	for _, be := range storetest.Backends(b) {
		b.Run(be.Name, func(b *testing.B) {
			ctx := context.Background()
			st := be.Open(b)
			now := time.Now().UTC()
			tenant := &agentowl.Tenant{ID: agentowl.NewID(""), Name: "bench", CreatedAt: now}
			err := st.Write(ctx, func(tx agentowl.Tx) error {
				if err := tx.TenantCreate(ctx, tenant); err != nil {
					return err
				}
				for i := range 50 {
					if err := tx.OperatorCreate(ctx, &agentowl.Operator{ID: agentowl.NewID(""), TenantID: tenant.ID,
						Name: fmt.Sprint("op-", i), Role: agentowl.RoleMember, CreatedAt: now}); err != nil {
						return err
					}
				}
				return nil
			})
			if err != nil {
				b.Fatal(err)
			}
			var seq atomic.Int64
			record := func(tx agentowl.Tx) error {
				return notify.RecordTx(ctx, tx, notify.Cause{TenantID: tenant.ID, Cause: notify.CauseWorkCompleted,
					SubjectKind: notify.SubjectWork, SubjectID: fmt.Sprint("work_", seq.Add(1)), EndpointID: "ep_bench",
					Title: "Work completed: report ready", At: now})
			}
			report := func(b *testing.B, elapsed time.Duration) {
				b.ReportMetric(float64(b.N)/elapsed.Seconds(), "causes/s")
				b.ReportMetric(float64(50*b.N)/elapsed.Seconds(), "notices/s")
			}
			b.Run("own-tx", func(b *testing.B) {
				b.SetParallelism(16) // 32 goroutines on 2 cores
				start := time.Now()
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						if err := st.Write(ctx, record); err != nil {
							b.Error(err)
							return
						}
					}
				})
				report(b, time.Since(start))
			})
			b.Run("batched", func(b *testing.B) {
				start := time.Now()
				for n := b.N; n > 0; n -= 100 {
					if err := st.Write(ctx, func(tx agentowl.Tx) error {
						for range min(n, 100) {
							if err := record(tx); err != nil {
								return err
							}
						}
						return nil
					}); err != nil {
						b.Fatal(err)
					}
				}
				report(b, time.Since(start))
			})
		})
	}
}
