package aap_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/agentowl/agentowl"
	"github.com/agentowl/agentowl/aap"
	"github.com/agentowl/agentowl/internal/server/servertest"
	"github.com/agentowl/agentowl/webhook"
)

// BenchmarkReceiverNotifications measures notifications verified
// (signature, timestamp, body id, bound instance) and durably recorded
// (SQLite, WAL, synchronous=FULL, group commit) per second, with 64
// concurrent senders. "handler" calls ServeHTTP directly; "https" goes
// through a TLS loopback server with keep-alive connections, as a provider
// would. Each notification is a new event; signing it (the sender's ~1µs
// HMAC) is inside the loop.
//
//	go test ./aap/ -run '^$' -bench ReceiverNotifications -benchtime 20000x
func BenchmarkReceiverNotifications(b *testing.B) {
	for _, viaHTTPS := range []bool{false, true} {
		name := "handler"
		if viaHTTPS {
			name = "https"
		}
		b.Run(name, func(b *testing.B) {
			st := openStore(b, filepath.Join(b.TempDir(), "receiver.db"))
			defer st.Close()
			r, err := aap.NewReceiver(aap.ReceiverConfig{Store: st})
			must(b, err)
			secret, reg, inst := webhook.NewSecret(), uuid.NewString(), uuid.NewString()
			key, _ := webhook.ParseSecret(secret)
			must(b, r.Register(context.Background(), reg, secret))
			must(b, st.BindRegistration(context.Background(), reg, inst, true))
			send := func(rec *httptest.ResponseRecorder, req *http.Request) int { r.ServeHTTP(rec, req); return rec.Code }
			if viaHTTPS {
				srv := httptest.NewTLSServer(r)
				defer srv.Close()
				client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, MaxIdleConnsPerHost: 128}}
				u, err := url.Parse(srv.URL + "/aap/events")
				must(b, err)
				send = func(_ *httptest.ResponseRecorder, req *http.Request) int {
					req.URL, req.RequestURI, req.Host = u, "", ""
					resp, err := client.Do(req)
					if err != nil {
						b.Error(err)
						return 0
					}
					resp.Body.Close()
					return resp.StatusCode
				}
			}
			b.SetParallelism(32) // 64 senders on 2 cores
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					id := uuid.NewString()
					body, _ := json.Marshal(resolved(id, inst, uuid.NewString(), time.Now()))
					req := httptest.NewRequest(http.MethodPost, "/aap/events", bytes.NewReader(body))
					req.Header.Set("Content-Type", "application/json")
					key.SetHeaders(req.Header, id, time.Now(), body)
					if code := send(httptest.NewRecorder(), req); code != http.StatusNoContent {
						b.Errorf("status %d", code)
						return
					}
				}
			})
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "notifications/s")
		})
	}
}

// BenchmarkWakeupLatency measures, on the wall clock, the time from an
// operator's decision (POST …/decision returns) to the moment the harness's
// tool starts: the provider's outbox and delivery engine sign and send the
// notification over TLS, the receiver verifies and records it, Dispatch
// hands it to the Adapter, which reads the request back and runs the tool.
// It reports p50 and p99 over b.N sequential decisions.
//
//	go test ./aap/ -run '^$' -bench WakeupLatency -benchtime 300x
func BenchmarkWakeupLatency(b *testing.B) {
	clock := agentowl.SystemClock{}
	rs := newReceiverSite(b, clock, nil)
	p := newProvider(b, clock, rs.caPEM())
	cred := p.provision(rs, "latency")
	hst := openStore(b, filepath.Join(b.TempDir(), "harness.db"))
	defer hst.Close()
	started := make(chan time.Time, 1)
	a, err := aap.NewAdapter(aap.AdapterConfig{Provider: cred.Client(nil), Store: hst,
		Run: func(context.Context, *aap.Execution) (json.RawMessage, error) {
			started <- time.Now()
			return nil, nil
		}})
	must(b, err)
	r, _ := rs.current()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { _ = r.Dispatch(ctx, aap.DispatchConfig{Handle: a.HandleWakeup}) })
	defer func() { cancel(); wg.Wait() }()
	call := aap.Call{Tool: "issue_refund", Arguments: json.RawMessage(`{"amount":4900}`), Timeout: "30m"}
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		x, err := a.Submit(ctx, "", call)
		must(b, err)
		t0 := time.Now()
		if !p.decide(x.RequestID, true, 5*time.Minute) {
			b.Fatal("decision refused")
		}
		select {
		case at := <-started:
			lat = append(lat, at.Sub(t0))
		case <-time.After(servertest.SyncLimit):
			b.Fatal("the harness was not woken")
		}
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[(len(lat)*99)/100].Microseconds())/1000, "p99-ms")
}
