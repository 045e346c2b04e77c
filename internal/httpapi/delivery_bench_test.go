package httpapi_test

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
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
	"github.com/agentowl/agentowl/internal/ratelimit"
	"github.com/agentowl/agentowl/internal/server/servertest"
	"github.com/agentowl/agentowl/internal/store/storetest"
)

// BenchmarkDecisionToAck measures asynchronous mode in process, with the
// wall clock: an operator's decision commits with its request.resolved
// notification, the delivery engine claims it, signs it, POSTs it over a
// keep-alive HTTPS (HTTP/2) connection to a local receiver and records it
// as delivered.
//
//	go test -run '^$' -bench DecisionToAck -benchtime 5000x ./internal/httpapi/
//
// With AGENTOWL_TEST_DATABASE_URL set it also runs on PostgreSQL.
//
// Five receivers (httptest TLS servers on 127.0.0.1) each have one
// instance; b.N pending requests, created before the timer starts, are
// spread over the instances. 32 goroutines then approve all of them through
// approval.Service.Decide, flat out ("up", "down1") or at 1,000 decisions/s
// in total ("paced1000"), and the benchmark waits until the healthy
// receivers have every one of their notifications. In "down1" one receiver
// answers 503 with Retry-After: 1, so its notifications keep being retried
// alongside the healthy traffic; they are not counted.
//
// Metrics: decisions/s (b.N over the time from the first Decide call until
// the last one returned), acks/s (notifications first received by a healthy
// receiver, over the time from the first decision to the last such
// receipt), and p50-ms / p99-ms, the time from the start of a request's
// Decide call until a healthy receiver first received its notification.
// Server, engine and receivers share the machine. The receivers all listen
// on 127.0.0.1, so they would share the engine's in-flight limit per
// resolved address (delivery.Config.PerHostConcurrency, 32); it is raised to
// 5 × 32, as five receivers at five addresses would have. After the timer stops, the
// benchmark also checks that every acknowledged notification was recorded
// as delivered.
func BenchmarkDecisionToAck(b *testing.B) {
	for _, be := range storetest.Backends(b) {
		b.Run(be.Name, func(b *testing.B) {
			b.Run("up", func(b *testing.B) { benchDecisionToAck(b, be, 0, 0) })
			b.Run("down1", func(b *testing.B) { benchDecisionToAck(b, be, 1, 0) })
			b.Run("paced1000", func(b *testing.B) { benchDecisionToAck(b, be, 0, 1000) })
		})
	}
}

const (
	ackReceivers = 5
	// ackWaitLimit bounds the wait for the healthy receivers' notifications.
	ackWaitLimit = 2 * time.Minute
)

// ackReceiver is a receiving service for the benchmark: it answers
// verifications with their challenge and records the first receipt of each
// request's notification. It does not check signatures (the tests do).
type ackReceiver struct {
	srv  *httptest.Server
	down bool // answer notifications 503 with Retry-After: 1
	// onFirst is called once per request ID, at its first receipt, by a
	// healthy receiver.
	onFirst func()

	mu    sync.Mutex
	first map[string]time.Time // request_id -> first receipt
}

func newAckReceiver(b *testing.B, down bool, onFirst func()) *ackReceiver {
	rc := &ackReceiver{down: down, onFirst: onFirst, first: map[string]time.Time{}}
	rc.srv = httptest.NewUnstartedServer(rc)
	rc.srv.EnableHTTP2 = true
	rc.srv.StartTLS()
	b.Cleanup(rc.srv.Close)
	return rc
}

func (rc *ackReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	at := time.Now()
	var msg struct {
		Type      string `json:"type"`
		Challenge string `json:"challenge"`
		RequestID string `json:"request_id"`
	}
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&msg); err != nil {
		http.Error(w, "bad body", http.StatusBadRequest)
		return
	}
	switch msg.Type {
	case "webhook.verification":
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]string{"challenge": msg.Challenge})
	case "request.resolved":
		rc.mu.Lock()
		_, seen := rc.first[msg.RequestID]
		if !seen {
			rc.first[msg.RequestID] = at
		}
		rc.mu.Unlock()
		if rc.down {
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		if !seen {
			rc.onFirst()
		}
		w.WriteHeader(http.StatusOK)
	default:
		http.Error(w, "unknown type", http.StatusBadRequest)
	}
}

// receipt returns the first receipt of request id's notification.
func (rc *ackReceiver) receipt(id string) (time.Time, bool) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	at, ok := rc.first[id]
	return at, ok
}

// benchDecisionToAck runs one sub-benchmark: down of the receivers answer
// 503; rate > 0 paces the decisions at rate per second in total.
func benchDecisionToAck(b *testing.B, be storetest.Backend, down, rate int) {
	ctx := context.Background()
	n := b.N
	healthy := 0
	for i := range n {
		if i%ackReceivers >= down {
			healthy++
		}
	}
	var acked atomic.Int64
	allAcked := make(chan struct{})
	onFirst := func() {
		if acked.Add(1) == int64(healthy) {
			close(allAcked)
		}
	}
	receivers := make([]*ackReceiver, ackReceivers)
	var caPEM []byte
	for i := range receivers {
		receivers[i] = newAckReceiver(b, i < down, onFirst)
		caPEM = append(caPEM, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: receivers[i].srv.Certificate().Raw})...)
	}

	// The server side: the one assembly, driven past HTTP.
	sc := servertest.Config(b, be)
	sc.Clock = agentowl.SystemClock{}
	sc.Approval = approval.Config{CreateLimit: ratelimit.Limit{Events: 1 << 30, Per: time.Minute}}
	sc.Egress = egress.Config{ExtraRootsPEM: caPEM, AllowCIDRs: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}
	// The five receivers all listen on 127.0.0.1, where five servers would
	// have five addresses: their in-flight limit per address is raised to
	// what five addresses would have.
	sc.Delivery = delivery.Config{RetryMinDelay: 200 * time.Millisecond, RetryMaxDelay: 2 * time.Second, PerHostConcurrency: ackReceivers * 32}
	srv := servertest.Start(b, sc)
	acc, appr := srv.Access(), srv.Approval()

	// An operator, a provisioner and one instance per receiver.
	op, err := acc.Authenticate(ctx, srv.BootstrapToken(), agentowl.TokenOperator)
	if err != nil {
		b.Fatal(err)
	}
	issued, err := acc.CreateProvisionerToken(ctx, op, "default", "bench", 0)
	if err != nil {
		b.Fatal(err)
	}
	prov, err := acc.Authenticate(ctx, issued.Secret, agentowl.TokenProvisioner)
	if err != nil {
		b.Fatal(err)
	}
	instances := make([]*access.Principal, ackReceivers)
	for i, rc := range receivers {
		key := make([]byte, 32)
		_, _ = rand.Read(key)
		p, err := appr.ProvisionInstance(ctx, prov, agentowl.NewID(""), &approval.ProvisionInput{
			Name: fmt.Sprintf("bench-%d", i),
			Receiver: &agentowl.Receiver{Type: agentowl.DeliveryTypeWebhook, URL: rc.srv.URL + "/aap/events",
				RegistrationID: agentowl.NewID(""), SigningSecret: "whsec_" + base64.StdEncoding.EncodeToString(key)},
		})
		if err != nil {
			b.Fatalf("provision instance %d: %v", i, err)
		}
		if instances[i], err = acc.Authenticate(ctx, p.Credential, agentowl.TokenInstance); err != nil {
			b.Fatal(err)
		}
	}

	// b.N pending requests, request i on instance i%5, created concurrently.
	ids := make([]string, n)
	err = spread(n, func(_, i int) error {
		res, err := appr.CreateRequest(ctx, instances[i%ackReceivers], fmt.Sprintf("bench-%d", i), &agentowl.CreateRequestInput{
			Tool: "bench.refund", Arguments: json.RawMessage(fmt.Sprintf(`{"n":%d}`, i)), Timeout: "1h", TimeoutDur: time.Hour,
		})
		if err != nil {
			return fmt.Errorf("create request %d: %w", i, err)
		}
		ids[i] = res.Request.ID
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}

	// The timed part: decide everything, then wait for the healthy acks.
	started := make([]time.Time, n)
	b.ResetTimer()
	defer reportRoundTrips(b, srv.Store())()
	start := time.Now()
	err = spread(n, func(_, i int) error {
		if rate > 0 {
			time.Sleep(time.Until(start.Add(time.Duration(i) * time.Second / time.Duration(rate))))
		}
		started[i] = time.Now()
		if _, err := appr.Decide(ctx, op, op.Membership.TenantName, ids[i], approval.DecideParams{Approve: true}); err != nil {
			return fmt.Errorf("decide request %d: %w", i, err)
		}
		return nil
	})
	decided := time.Since(start) // until the last Decide returned
	if err != nil {
		b.Fatal(err)
	}
	if healthy > 0 {
		select {
		case <-allAcked:
		case <-time.After(ackWaitLimit):
			b.Fatalf("after %s, healthy receivers had %d of %d notifications", ackWaitLimit, acked.Load(), healthy)
		}
	}
	b.StopTimer()

	// Untimed: every acknowledged notification is also recorded as
	// delivered (the outcome commits just after the receiver answers).
	deadline := time.Now().Add(ackWaitLimit)
	for {
		var msgs []*agentowl.OutboxMessage
		if err := srv.Store().Read(ctx, func(tx agentowl.Tx) (err error) {
			msgs, err = tx.MessageList(ctx, agentowl.MessageListParams{TenantID: op.Membership.TenantID, State: agentowl.MessageDelivered, Limit: n + 1})
			return err
		}); err != nil {
			b.Fatal(err)
		}
		if len(msgs) == healthy {
			break
		}
		if len(msgs) > healthy || time.Now().After(deadline) {
			b.Fatalf("%d notifications recorded as delivered, want %d", len(msgs), healthy)
		}
		time.Sleep(10 * time.Millisecond)
	}

	var lat []time.Duration
	var last time.Time
	for i, id := range ids {
		if i%ackReceivers < down {
			continue
		}
		at, ok := receivers[i%ackReceivers].receipt(id)
		if !ok {
			b.Fatalf("request %d: no receipt recorded", i)
		}
		lat = append(lat, at.Sub(started[i]))
		if at.After(last) {
			last = at
		}
	}
	b.ReportMetric(float64(n)/decided.Seconds(), "decisions/s")
	if len(lat) == 0 {
		return
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	b.ReportMetric(float64(len(lat))/last.Sub(start).Seconds(), "acks/s")
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
}
