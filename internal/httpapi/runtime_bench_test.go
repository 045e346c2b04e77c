package httpapi_test

import (
	"bytes"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentowl/agentowl"
	"github.com/agentowl/agentowl/internal/delivery"
	"github.com/agentowl/agentowl/internal/egress"
	"github.com/agentowl/agentowl/internal/ingress"
	"github.com/agentowl/agentowl/internal/ratelimit"
	"github.com/agentowl/agentowl/internal/server"
	"github.com/agentowl/agentowl/internal/server/servertest"
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
	cfg        server.Config
	store      agentowl.Store
	// refused counts 503 overloaded answers, each sent again after its
	// Retry-After as AAP clients and our SDKs do (the admission queues).
	refused atomic.Int64
}

func startBenchServer(b *testing.B, be storetest.Backend, caPEM []byte) *benchServer {
	b.Helper()
	unlimited := ratelimit.Limit{Events: 1 << 30, Per: time.Minute}
	sc := servertest.Config(b, be)
	sc.Egress = egress.Config{ExtraRootsPEM: caPEM, AllowCIDRs: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}
	sc.Delivery = delivery.Config{RetryMinDelay: 100 * time.Millisecond}
	sc.Work = work.Config{CallbackLimit: unlimited, MaxCallbacksPerWork: 1 << 30}
	sc.Ingress = ingress.Config{Limit: unlimited}
	srv := servertest.Start(b, sc)
	return &benchServer{url: srv.URL(), token: srv.BootstrapToken(), cfg: sc, store: srv.Store(),
		client: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 2 * benchClients}}}
}

func (s *benchServer) post(path, token string, body []byte) (int, []byte, error) {
	for {
		req, _ := http.NewRequest(http.MethodPost, s.url+path, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := s.client.Do(req)
		if err != nil {
			return 0, nil, err
		}
		data, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if wait, _ := strconv.Atoi(resp.Header.Get("Retry-After")); resp.StatusCode == http.StatusServiceUnavailable && wait > 0 {
			s.refused.Add(1)
			time.Sleep(time.Duration(wait) * time.Second)
			continue
		}
		return resp.StatusCode, data, err
	}
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

// spread runs op for i in [0, n) over benchClients goroutines (client is
// the goroutine's number) and returns the first error; a goroutine stops at
// its first error.
func spread(n int, op func(client, i int) error) error {
	var next atomic.Int64
	var wg sync.WaitGroup
	var failed atomic.Value
	for c := range benchClients {
		wg.Go(func() {
			for i := int(next.Add(1)) - 1; i < n; i = int(next.Add(1)) - 1 {
				if err := op(c, i); err != nil {
					failed.CompareAndSwap(nil, err)
					return
				}
			}
		})
	}
	wg.Wait()
	err, _ := failed.Load().(error)
	return err
}

// runClients runs n operations over benchClients goroutines and reports
// throughput and latency percentiles.
func runClients(b *testing.B, n int, op func(client, i int) error) {
	b.Helper()
	lat := make([][]time.Duration, benchClients)
	start := time.Now()
	err := spread(n, func(c, i int) error {
		t0 := time.Now()
		if err := op(c, i); err != nil {
			return err
		}
		lat[c] = append(lat[c], time.Since(t0))
		return nil
	})
	elapsed := time.Since(start)
	if err != nil {
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
			defer reportRoundTrips(b, s.store)()
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
			b.ReportMetric(float64(s.refused.Load()), "refused")
		})
	}
}

// BenchmarkAgentWorkIngress accepts b.N events on a webhook binding from 32
// clients and waits until a local HTTPS runtime has acknowledged every
// handoff; ops/s is events accepted and handed off per second end to end.
func BenchmarkAgentWorkIngress(b *testing.B) {
	for _, be := range storetest.Backends(b) {
		b.Run(be.Name, func(b *testing.B) {
			s, epID, got := startBenchRuntime(b, be)
			in := s.mustPost(b, tenantPath+"/bindings", map[string]any{"channel": "webhook", "endpoint_id": epID}, http.StatusCreated)
			path := in["ingress_url"].(string)[len(s.url):]
			body := []byte(`{"text":"Summarise ticket 7","customer":{"id":"c_123","tier":"gold"}}`)
			b.ResetTimer()
			defer reportRoundTrips(b, s.store)()
			start := time.Now()
			runClients(b, b.N, func(_, _ int) error {
				status, out, err := s.post(path, "", body)
				if err != nil || status != http.StatusAccepted {
					return fmt.Errorf("ingress: %d %v %s", status, err, out)
				}
				return nil
			})
			b.ReportMetric(float64(s.refused.Load()), "refused")
			reportHandedOff(b, start, got)
		})
	}
}

// startBenchRuntime starts a bench server on be with a local HTTPS runtime
// (HTTP/2) that acknowledges every handoff, an agent-work endpoint to it
// and a runtime credential; it returns the server, the endpoint's ID and
// the count of handoffs the runtime received.
func startBenchRuntime(b *testing.B, be storetest.Backend) (*benchServer, string, *atomic.Int64) {
	b.Helper()
	got := &atomic.Int64{}
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
	return s, ep["id"].(string), got
}

// reportRoundTrips, on the PostgreSQL store, reports the round trips and
// statements of the write transactions run until the returned function is
// called, per write (rts/write, stmts/write: one statement per round trip
// cost the latter) and the round trips per operation (write-rts/op): every
// write of the process counts, the delivery engine's claims and outcomes
// too.
func reportRoundTrips(b *testing.B, st agentowl.Store) func() {
	type counter interface {
		WriteRoundTrips() (writes, trips int64)
		WriteStatements() int64
	}
	c, ok := st.(counter)
	if !ok || st.Dialect() != "postgres" {
		return func() {}
	}
	w0, t0 := c.WriteRoundTrips()
	s0 := c.WriteStatements()
	return func() {
		w, t := c.WriteRoundTrips()
		if w > w0 {
			b.ReportMetric(float64(t-t0)/float64(w-w0), "rts/write")
			b.ReportMetric(float64(c.WriteStatements()-s0)/float64(w-w0), "stmts/write")
		}
		b.ReportMetric(float64(t-t0)/float64(b.N), "write-rts/op")
	}
}

// reportHandedOff waits until the runtime has b.N handoffs and reports
// events accepted per second (until the last answer) and handed off per
// second (until the runtime had them all), both from start.
func reportHandedOff(b *testing.B, start time.Time, got *atomic.Int64) {
	accepted := time.Since(start)
	for got.Load() < int64(b.N) {
		time.Sleep(time.Millisecond)
	}
	b.ReportMetric(float64(b.N)/accepted.Seconds(), "accepted/s")
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "handed-off/s")
}

// BenchmarkAgentWorkDecisions submits b.N decisions (b.N ≤ 1000) on
// approval requests through the operator API from 32 clients; each is
// pushed to the endpoint's decision URL, a local HTTPS runtime that accepts
// it. ops/s and the latencies are of the submissions; receipts/s and
// receipt-p99-ms run from each submission's start until the runtime has the
// decision (the receipt is recorded as its answer is judged). The requests
// are 20 per work; same-work decides them a work at a time, so that the
// 32 clients wait on one another's lock of the work (a decision and a
// receipt serialize on their work), across-works takes them from each work
// in turn.
func BenchmarkAgentWorkDecisions(b *testing.B) {
	if b.N > 1000 {
		b.Skip("lists at most 1000 attention items; use -benchtime 1000x")
	}
	for _, be := range storetest.Backends(b) {
		for _, order := range []string{"same-work", "across-works"} {
			b.Run(be.Name+"/"+order, func(b *testing.B) { benchAgentWorkDecisions(b, be, order == "across-works") })
		}
	}
}

func benchAgentWorkDecisions(b *testing.B, be storetest.Backend, across bool) {
	var mu sync.Mutex
	arrived := map[string]time.Time{}
	rt := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var d struct {
			DecisionID string `json:"decision_id"`
		}
		_ = json.NewDecoder(r.Body).Decode(&d)
		mu.Lock()
		if _, ok := arrived[d.DecisionID]; !ok {
			arrived[d.DecisionID] = time.Now()
		}
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"accepted": true, "decision_id": d.DecisionID})
	}))
	rt.EnableHTTP2 = true
	rt.StartTLS()
	b.Cleanup(rt.Close)
	s := startBenchServer(b, be, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: rt.Certificate().Raw}))
	ep := s.mustPost(b, tenantPath+"/endpoints", map[string]any{"name": "bench", "url": rt.URL + "/handoff",
		"config": map[string]any{"agent_work": true}, "decision_url": rt.URL + "/decisions", "decision_secret": "bench-bearer-secret-0123456789"},
		http.StatusCreated)
	epID := ep["id"].(string)
	token := s.mustPost(b, tenantPath+"/endpoints/"+epID+"/runtime-credentials", map[string]any{}, http.StatusCreated)["token"].(string)
	in := s.mustPost(b, tenantPath+"/bindings", map[string]any{"channel": "webhook", "endpoint_id": epID}, http.StatusCreated)
	path := in["ingress_url"].(string)[len(s.url):]
	const perWork = 20
	works := (b.N + perWork - 1) / perWork
	for c := range works {
		s.mustPost(b, path, map[string]any{"n": c}, http.StatusAccepted)
	}
	var list struct {
		Items []struct{ ID string } `json:"items"`
	}
	s.getJSON(b, tenantPath+"/work?limit=1000", &list)
	digest := strings.Repeat("ab", 32)
	expires := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	for wi, wk := range list.Items[:works] {
		reqs := make([]any, perWork)
		for i := range reqs {
			reqs[i] = map[string]any{"id": fmt.Sprintf("r%d-%d", wi, i), "revision": 1, "kind": "approval", "prompt": "May I?",
				"allowed_decisions": []any{"approve", "reject"}, "expires_at": expires,
				"action": map[string]any{"description": "Refund", "digest": digest}}
		}
		body, _ := json.Marshal(map[string]any{"version": "agent-work.v1", "callback_id": wk.ID + ":1", "work_id": wk.ID, "sequence": 1,
			"status": "needs_input", "occurred_at": "2026-10-06T12:00:00.000Z", "requests": reqs})
		if status, out, err := s.post("/runtime/v1/work/"+wk.ID+"/callbacks", token, body); err != nil || status != http.StatusOK {
			b.Fatalf("needs_input: %d %v %s", status, err, out)
		}
	}
	var items struct {
		Items []struct {
			ID     string
			WorkID string `json:"work_id"`
		} `json:"items"`
	}
	s.getJSON(b, tenantPath+"/attention?status=open&limit=1000", &items)
	if len(items.Items) < b.N {
		b.Fatalf("%d open items for %d decisions", len(items.Items), b.N)
	}
	if across {
		// Each work's items in turn: consecutive decisions lock
		// different works.
		byWork := map[string]int{}
		rank := make([]int, len(items.Items))
		for i, it := range items.Items {
			rank[i] = byWork[it.WorkID]
			byWork[it.WorkID]++
		}
		idx := make([]int, len(items.Items))
		for i := range idx {
			idx[i] = i
		}
		sort.SliceStable(idx, func(a, c int) bool { return rank[idx[a]] < rank[idx[c]] })
		reordered := items.Items[:0:0]
		for _, i := range idx {
			reordered = append(reordered, items.Items[i])
		}
		items.Items = reordered
	}
	started := make([]time.Time, b.N)
	b.ResetTimer()
	defer reportRoundTrips(b, s.store)()
	start := time.Now()
	runClients(b, b.N, func(_, i int) error {
		started[i] = time.Now()
		body, _ := json.Marshal(map[string]any{"decision_id": fmt.Sprintf("d%d", i), "request_revision": 1,
			"decision": "approve", "expected_action_digest": digest})
		status, out, err := s.post(tenantPath+"/attention/"+items.Items[i].ID+"/decision", s.token, body)
		if err != nil || status != http.StatusCreated {
			return fmt.Errorf("decide: %d %v %s", status, err, out)
		}
		return nil
	})
	b.ReportMetric(float64(s.refused.Load()), "refused")
	for {
		mu.Lock()
		n := len(arrived)
		mu.Unlock()
		if n >= b.N {
			break
		}
		time.Sleep(time.Millisecond)
	}
	var lat []time.Duration
	var last time.Time
	for i := range b.N {
		at := arrived[fmt.Sprintf("d%d", i)]
		lat = append(lat, at.Sub(started[i]))
		if at.After(last) {
			last = at
		}
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	b.ReportMetric(float64(b.N)/last.Sub(start).Seconds(), "receipts/s")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "receipt-p99-ms")
}

func (s *benchServer) getJSON(b *testing.B, path string, out any) {
	b.Helper()
	req, _ := http.NewRequest(http.MethodGet, s.url+path, nil)
	req.Header.Set("Authorization", "Bearer "+s.token)
	resp, err := s.client.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		data, _ := io.ReadAll(resp.Body)
		b.Fatalf("GET %s: %d %s", path, resp.StatusCode, data)
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		b.Fatal(err)
	}
}
