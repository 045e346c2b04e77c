package httpapi_test

import (
	"database/sql"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/agentowl/agentowl/internal/server"
	"github.com/agentowl/agentowl/internal/store/storetest"
)

// BenchmarkIngressHistory is BenchmarkAgentWorkIngress on an empty store
// and on a store that already holds the history of many delivered events
// (AGENTOWL_BENCH_HISTORY, default 1,000,000: events, ended conversations,
// completed work, delivered handoffs and their attempts), so that the cost
// of a write can be compared with and without history. The seeding runs
// once per sub-benchmark: run it with -benchtime Nx (the framework's first
// call, with b.N = 1, returns at once). AGENTOWL_BENCH_BACKEND=sqlite or
// postgres picks one backend.
//
//	go test -run '^$' -bench IngressHistory -benchtime 20000x -timeout 60m ./internal/httpapi/
func BenchmarkIngressHistory(b *testing.B) {
	history := 1_000_000
	if v, err := strconv.Atoi(os.Getenv("AGENTOWL_BENCH_HISTORY")); err == nil && v > 0 {
		history = v
	}
	for _, be := range storetest.Backends(b) {
		if want := os.Getenv("AGENTOWL_BENCH_BACKEND"); want != "" && want != be.Name {
			continue
		}
		for _, h := range []int{0, history} {
			b.Run(fmt.Sprintf("%s/history=%d", be.Name, h), func(b *testing.B) {
				if b.N == 1 {
					return
				}
				s, epID, got := startBenchRuntime(b, be)
				in := s.mustPost(b, tenantPath+"/bindings", map[string]any{"channel": "webhook", "endpoint_id": epID}, http.StatusCreated)
				path := in["ingress_url"].(string)[len(s.url):]
				body := []byte(`{"text":"Summarise ticket 7","customer":{"id":"c_123","tier":"gold"}}`)
				if status, out, err := s.post(path, "", body); err != nil || status != http.StatusAccepted {
					b.Fatalf("first event: %d %v %s", status, err, out)
				}
				for got.Load() < 1 {
					time.Sleep(time.Millisecond)
				}
				if h > 0 {
					seedStart := time.Now()
					storetest.SeedHistory(b, s.raw(b), server.IsPostgresURL(s.cfg.DatabaseURL), h)
					b.Logf("seeded %d delivered events in %s", h, time.Since(seedStart).Round(time.Second))
				}
				got.Store(0)
				b.ResetTimer()
				start, cpu := time.Now(), processCPU()
				runClients(b, b.N, func(_, _ int) error {
					status, out, err := s.post(path, "", body)
					if err != nil || status != http.StatusAccepted {
						return fmt.Errorf("ingress: %d %v %s", status, err, out)
					}
					return nil
				})
				reportHandedOff(b, start, got)
				// The process's CPU (server, engine and load generator; not
				// PostgreSQL's) per event: unlike the rates, it does not
				// depend on what else runs on the machine.
				b.ReportMetric(float64((processCPU()-cpu).Microseconds())/float64(b.N), "cpu-us/op")
			})
		}
	}
}

// processCPU is the CPU time this process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// raw opens the bench server's database past the store.
func (s *benchServer) raw(b *testing.B) *sql.DB {
	b.Helper()
	driver, dsn := "sqlite", "file:"+filepath.Join(s.cfg.DataDir, "agentowl.db")+"?_pragma=busy_timeout(10000)"
	if server.IsPostgresURL(s.cfg.DatabaseURL) {
		driver, dsn = "pgx", s.cfg.DatabaseURL
	}
	db, err := sql.Open(driver, dsn)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close() })
	return db
}
