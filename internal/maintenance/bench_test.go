package maintenance_test

import (
	"database/sql"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agentowl/agentowl/internal/maintenance"
	"github.com/agentowl/agentowl/internal/ratelimit"
	"github.com/agentowl/agentowl/internal/server"
	"github.com/agentowl/agentowl/internal/store/storetest"
)

// Benchmarks of BENCHMARKS.md ("Maintenance"). They seed their tables past
// the store with one INSERT … SELECT each, so that a million rows take
// seconds, not an hour of single inserts.

// benchBackends is the backends a benchmark runs on: both, or the one
// named by AGENTOWL_BENCH_BACKEND.
func benchBackends(b *testing.B) []storetest.Backend {
	var out []storetest.Backend
	for _, bk := range storetest.Backends(b) {
		if want := benchBackend(); want == "" || want == bk.Name {
			out = append(out, bk)
		}
	}
	return out
}

// raw opens the fixture's database past the store, for seeding.
func (f *fixture) raw() (*sql.DB, func(string) string) {
	f.t.Helper()
	cfg := f.srv.Config()
	driver, dsn := "sqlite", "file:"+filepath.Join(cfg.DataDir, "agentowl.db")+"?_pragma=busy_timeout(10000)"
	rebind := func(q string) string { return q }
	if server.IsPostgresURL(cfg.DatabaseURL) {
		driver, dsn = "pgx", cfg.DatabaseURL
		rebind = func(q string) string {
			var b strings.Builder
			n := 0
			for _, r := range q {
				if r == '?' {
					n++
					b.WriteString("$" + strconv.Itoa(n))
					continue
				}
				b.WriteRune(r)
			}
			return b.String()
		}
	}
	db, err := sql.Open(driver, dsn)
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() { db.Close() })
	return db, rebind
}

// seedWork inserts n work items (IDs prefix1, prefix2, …) of the endpoint,
// event and conversation of work like, with the status and times given.
func (f *fixture) seedWork(like string, prefix string, n int, status string, updated time.Time, ended *time.Time) {
	f.t.Helper()
	w := f.work(like)
	db, rebind := f.raw()
	var endedAt any
	if ended != nil {
		endedAt = ended.UnixMicro()
	}
	// Distinct generations keep (event, endpoint, generation) unique.
	if _, err := db.Exec(rebind(`WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?)
		INSERT INTO work (id, tenant_id, endpoint_id, conversation_id, event_id, generation, delivery_id, status, sequence,
			callbacks, created_at, updated_at, ended_at)
		SELECT CAST(? AS TEXT) || CAST(i AS TEXT), ?, ?, ?, ?, i + 1, CAST(? AS TEXT) || CAST(i AS TEXT), ?, 1, 0, ?, ?, ? FROM n`),
		n, prefix, w.TenantID, w.EndpointID, w.ConversationID, w.EventID, "d-"+prefix, status,
		updated.UnixMicro(), updated.UnixMicro(), endedAt); err != nil {
		f.t.Fatalf("seed work: %v", err)
	}
}

// BenchmarkOverdueScan is one run of the overdue job over 100,000 open
// work items, none of them due: the scan's cost in steady state.
//
//	go test ./internal/maintenance -run '^$' -bench OverdueScan -benchtime 10x
func BenchmarkOverdueScan(b *testing.B) {
	for _, bk := range benchBackends(b) {
		b.Run(bk.Name, func(b *testing.B) {
			f := setup(b, bk, maintenance.Config{})
			ep := f.endpoint(nil)
			f.seedWork(f.handOff(ep), "work_bench_", 100_000, "running", f.clock.Now(), nil)
			cpu, n := cpuTime(), 0
			for b.Loop() {
				if r := f.run(maintenance.JobOverdue); r.Affected != 0 {
					b.Fatalf("opened %d incidents, want none", r.Affected)
				}
				n++
			}
			b.ReportMetric(float64((cpuTime()-cpu).Milliseconds())/float64(n), "cpu-ms/op")
		})
	}
}

// BenchmarkRetentionPurge purges the million callbacks of 1,000 ended work
// items (and the items) while live ingress traffic writes, and reports the
// purge rate and the live traffic's p99 during the purge against the same
// traffic without it.
//
//	go test ./internal/maintenance -run '^$' -bench RetentionPurge -benchtime 1x
func BenchmarkRetentionPurge(b *testing.B) {
	const works, perWork = 1000, 1000
	for _, bk := range benchBackends(b) {
		b.Run(bk.Name, func(b *testing.B) {
			for range b.N {
				b.StopTimer()
				f := setup(b, bk, maintenance.Config{}, func(c *server.Config) {
					c.Ingress.Limit = ratelimit.Limit{Events: 10_000_000, Per: time.Minute}
				})
				ep := f.endpoint(nil)
				like := f.handOff(ep)
				ended := f.clock.Now().Add(-31 * 24 * time.Hour)
				f.seedWork(like, "work_old_", works, "completed", ended, &ended)
				db, rebind := f.raw()
				if _, err := db.Exec(rebind(`WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < ?)
					INSERT INTO work_callbacks (work_id, callback_id, sequence, status, occurred_at, body, body_hash, stale,
						work_status, credential_id, recorded_at, seq)
					SELECT 'work_old_' || CAST(i / ? + 1 AS TEXT), 'cb-' || CAST(i AS TEXT), i % ? + 1, 'running', '2026-08-16T12:00:00Z', ?, ?, 0,
						'running', ?, ?, i FROM n`),
					works*perWork-1, perWork, perWork, []byte(`{"status":"running"}`), make([]byte, 32), ep.cred.ID, ended.UnixMicro()); err != nil {
					b.Fatalf("seed callbacks: %v", err)
				}

				baseline := f.live(ep, 3*time.Second, nil)
				done := make(chan struct{})
				var purged int64
				var took time.Duration
				go func() {
					defer close(done)
					start := time.Now()
					r := f.run(maintenance.JobRetention)
					purged, took = r.Affected, time.Since(start)
				}()
				b.StartTimer()
				during := f.live(ep, 0, done)
				<-done
				b.StopTimer()
				if purged < works*perWork+works {
					b.Fatalf("purged %d rows, want the %d callbacks and %d works", purged, works*perWork, works)
				}
				b.ReportMetric(float64(purged)/took.Seconds(), "rows/s")
				b.ReportMetric(float64(baseline.p99.Microseconds())/1000, "live-p99-ms-without")
				b.ReportMetric(float64(during.p99.Microseconds())/1000, "live-p99-ms-during")
				b.ReportMetric(float64(during.n)/during.took.Seconds(), "live-events/s-during")
				b.ReportMetric(float64(baseline.n)/baseline.took.Seconds(), "live-events/s-without")
			}
		})
	}
}

// liveStats is what live traffic saw.
type liveStats struct {
	n        int
	p50, p99 time.Duration
	took     time.Duration
}

// live sends ingress events to ep from 8 clients for d, or until stop
// closes, and reports their latencies.
func (f *fixture) live(ep *endpoint, d time.Duration, stop <-chan struct{}) liveStats {
	start := time.Now()
	var mu sync.Mutex
	var lat []time.Duration
	var wg sync.WaitGroup
	over := func() bool {
		if stop != nil {
			select {
			case <-stop:
				return true
			default:
				return false
			}
		}
		return time.Since(start) >= d
	}
	for range 8 {
		wg.Go(func() {
			for !over() {
				t0 := time.Now()
				if _, err := f.srv.Ingress().AcceptWebhook(f.ctx, ep.binding, http.Header{}, []byte(`{"text":"live"}`)); err != nil {
					f.t.Error(err)
					return
				}
				mu.Lock()
				lat = append(lat, time.Since(t0))
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	slices.Sort(lat)
	if len(lat) == 0 {
		return liveStats{}
	}
	return liveStats{n: len(lat), p50: lat[len(lat)/2], p99: lat[len(lat)*99/100], took: time.Since(start)}
}

// cpuTime is the CPU time this process has used: on a shared machine it
// says more than the wall clock.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// benchBackend is AGENTOWL_BENCH_BACKEND: sqlite, postgres, or "" for both.
func benchBackend() string { return os.Getenv("AGENTOWL_BENCH_BACKEND") }
