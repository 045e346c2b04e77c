package httpapi_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentowl/agentowl"
	"github.com/agentowl/agentowl/internal/access"
	"github.com/agentowl/agentowl/internal/approval"
	"github.com/agentowl/agentowl/internal/delivery"
	"github.com/agentowl/agentowl/internal/egress"
	"github.com/agentowl/agentowl/internal/httpapi"
	"github.com/agentowl/agentowl/internal/ingress"
	"github.com/agentowl/agentowl/internal/ratelimit"
	"github.com/agentowl/agentowl/internal/store"
	"github.com/agentowl/agentowl/internal/store/storetest"
	"github.com/agentowl/agentowl/internal/work"
)

// Benchmarks of agent work over real HTTP on loopback, with the wall clock
// (BENCHMARKS.md has the figures and the command):
//
//	go test -run '^$' -bench AgentWork -benchtime 20000x ./internal/httpapi/
//
// With AGENTOWL_TEST_DATABASE_URL set they also run on PostgreSQL. Server,
// runtime and load generator share the machine.

const benchClients = 32

type benchServer struct {
	url, token string
	client     *http.Client
}

func startBenchServer(b *testing.B, be storetest.Backend, caPEM []byte) *benchServer {
	b.Helper()
	st := be.Open(b)
	clock := agentowl.SystemClock{}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	acc := access.New(st, clock, access.Config{})
	appr := approval.New(st, acc, clock, approval.Config{}, log)
	eg, err := egress.New(egress.Config{ExtraRootsPEM: caPEM, AllowCIDRs: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}})
	if err != nil {
		b.Fatal(err)
	}
	var w *work.Service
	resolve := func(ctx context.Context, tx store.Tx, dest string) (*delivery.Target, error) {
		u, secret, ok, err := w.ResolveDestination(ctx, tx, dest)
		if err != nil || !ok {
			return nil, err
		}
		return &delivery.Target{URL: u, Secret: secret}, nil
	}
	engine := delivery.New(st, clock, eg, resolve, delivery.Config{RetryMinDelay: 100 * time.Millisecond}, log)
	srv := httptest.NewUnstartedServer(nil)
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	unlimited := ratelimit.Limit{Events: 1 << 30, Per: time.Minute}
	w, err = work.New(st, clock, eg.CheckURL, engine.Wake, work.Config{PublicURL: "http://" + srv.Listener.Addr().String(),
		SecretKey: key, CallbackLimit: unlimited, MaxCallbacksPerWork: 1 << 30}, log)
	if err != nil {
		b.Fatal(err)
	}
	api := httpapi.New(acc, appr, st, clock, log, httpapi.Config{})
	api.EnableWork(w, ingress.New(st, clock, w, ingress.Config{Limit: unlimited}))
	srv.Config.Handler = api.Handler()
	srv.Start()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); engine.Run(ctx) }()
	b.Cleanup(func() { srv.Close(); cancel(); <-done; eg.CloseIdleConnections() })
	res, err := acc.Bootstrap(context.Background(), "default")
	if err != nil {
		b.Fatal(err)
	}
	return &benchServer{url: srv.URL, token: res.Token,
		client: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 2 * benchClients}}}
}

func (s *benchServer) post(path, token string, body []byte) (int, []byte, error) {
	req, _ := http.NewRequest(http.MethodPost, s.url+path, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	return resp.StatusCode, data, err
}

func (s *benchServer) mustPost(b *testing.B, path string, body any, want int) map[string]any {
	b.Helper()
	data, _ := json.Marshal(body)
	status, out, err := s.post(path, s.token, data)
	if err != nil || status != want {
		b.Fatalf("POST %s: %d %v: %s", path, status, err, out)
	}
	var m map[string]any
	_ = json.Unmarshal(out, &m)
	return m
}

// runClients runs n operations over benchClients goroutines and reports
// throughput and latency percentiles.
func runClients(b *testing.B, n int, op func(client, i int) error) {
	b.Helper()
	var next atomic.Int64
	lat := make([][]time.Duration, benchClients)
	var wg sync.WaitGroup
	var failed atomic.Value
	start := time.Now()
	for c := range benchClients {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				t0 := time.Now()
				if err := op(c, i); err != nil {
					failed.Store(err)
					return
				}
				lat[c] = append(lat[c], time.Since(t0))
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	if err, _ := failed.Load().(error); err != nil {
		b.Fatal(err)
	}
	var all []time.Duration
	for _, l := range lat {
		all = append(all, l...)
	}
	sort.Slice(all, func(i, j int) bool { return all[i] < all[j] })
	b.ReportMetric(float64(n)/elapsed.Seconds(), "ops/s")
	b.ReportMetric(float64(all[len(all)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(all[len(all)*99/100].Microseconds())/1000, "p99-ms")
}

// BenchmarkAgentWorkCallbacks records b.N callbacks (running, increasing
// sequences) from 32 clients, each reporting on its own work, with the
// per-endpoint limit raised.
func BenchmarkAgentWorkCallbacks(b *testing.B) {
	for _, be := range storetest.Backends(b) {
		b.Run(be.Name, func(b *testing.B) {
			s := startBenchServer(b, be, nil)
			ep := s.mustPost(b, tenantPath+"/endpoints", map[string]any{"name": "bench", "url": "https://127.0.0.1:9/never", "config": map[string]any{"agent_work": true}},
				http.StatusCreated)
			epID := ep["id"].(string)
			token := s.mustPost(b, tenantPath+"/endpoints/"+epID+"/runtime-credentials", map[string]any{}, http.StatusCreated)["token"].(string)
			in := s.mustPost(b, tenantPath+"/bindings", map[string]any{"channel": "webhook", "endpoint_id": epID}, http.StatusCreated)
			path := in["ingress_url"].(string)[len(s.url):]
			works := make([]string, benchClients)
			for c := range works {
				acc := s.mustPost(b, path, map[string]any{"n": c}, http.StatusAccepted)
				_ = acc
			}
			// The work IDs, from the operator API.
			req, _ := http.NewRequest(http.MethodGet, s.url+tenantPath+"/work", nil)
			req.Header.Set("Authorization", "Bearer "+s.token)
			resp, err := s.client.Do(req)
			if err != nil {
				b.Fatal(err)
			}
			var list struct {
				Items []struct{ ID string } `json:"items"`
			}
			_ = json.NewDecoder(resp.Body).Decode(&list)
			resp.Body.Close()
			for c := range works {
				works[c] = list.Items[c].ID
			}
			seq := make([]int, benchClients)
			b.ResetTimer()
			runClients(b, b.N, func(c, _ int) error {
				seq[c]++
				body := fmt.Appendf(nil, `{"version":"agent-work.v1","callback_id":"%s:%d","work_id":"%s","sequence":%d,`+
					`"status":"running","occurred_at":"2026-10-06T12:00:00.000Z"}`, works[c], seq[c], works[c], seq[c])
				status, out, err := s.post("/runtime/v1/work/"+works[c]+"/callbacks", token, body)
				if err != nil || status != http.StatusOK {
					return fmt.Errorf("callback: %d %v %s", status, err, out)
				}
				return nil
			})
		})
	}
}

// BenchmarkAgentWorkIngress accepts b.N events on a webhook binding from 32
// clients and waits until a local HTTPS runtime has acknowledged every
// handoff; ops/s is events accepted and handed off per second end to end.
func BenchmarkAgentWorkIngress(b *testing.B) {
	for _, be := range storetest.Backends(b) {
		b.Run(be.Name, func(b *testing.B) {
			var got atomic.Int64
			rt := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.Copy(io.Discard, r.Body)
				got.Add(1)
				w.WriteHeader(http.StatusAccepted)
			}))
			rt.EnableHTTP2 = true
			rt.StartTLS()
			b.Cleanup(rt.Close)
			s := startBenchServer(b, be, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: rt.Certificate().Raw}))
			ep := s.mustPost(b, tenantPath+"/endpoints", map[string]any{"name": "bench", "url": rt.URL + "/handoff", "config": map[string]any{"agent_work": true}},
				http.StatusCreated)
			s.mustPost(b, tenantPath+"/endpoints/"+ep["id"].(string)+"/runtime-credentials", map[string]any{}, http.StatusCreated)
			in := s.mustPost(b, tenantPath+"/bindings", map[string]any{"channel": "webhook", "endpoint_id": ep["id"]}, http.StatusCreated)
			path := in["ingress_url"].(string)[len(s.url):]
			body := []byte(`{"text":"Summarise ticket 7","customer":{"id":"c_123","tier":"gold"}}`)
			b.ResetTimer()
			start := time.Now()
			runClients(b, b.N, func(_, _ int) error {
				status, out, err := s.post(path, "", body)
				if err != nil || status != http.StatusAccepted {
					return fmt.Errorf("ingress: %d %v %s", status, err, out)
				}
				return nil
			})
			accepted := time.Since(start)
			for got.Load() < int64(b.N) {
				time.Sleep(time.Millisecond)
			}
			b.ReportMetric(float64(b.N)/accepted.Seconds(), "accepted/s")
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "handed-off/s")
		})
	}
}
