package main

import (
	"encoding/json"
	"encoding/pem"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/google/uuid"

	"github.com/agentowl/agentowl/webhook"
)

// runDeliver measures decisions turned into acknowledged HTTPS deliveries:
// it starts the server binary with egress trusting local receivers, points
// instances at receivers (some of them down), approves requests, and
// reports throughput and decision→ack latency for the healthy receivers.
func runDeliver(args []string) error {
	fs := flag.NewFlagSet("deliver", flag.ExitOnError)
	binary := fs.String("binary", "/tmp/agentowl", "agentowl binary to start")
	dbURL := fs.String("database-url", "", "postgres:// URL (default: SQLite in a temp dir)")
	total := fs.Int("requests", 5000, "requests to approve")
	clients := fs.Int("clients", 32, "concurrent deciding clients")
	receivers := fs.Int("receivers", 5, "HTTPS receivers (one instance each)")
	down := fs.Int("down", 0, "how many receivers answer 503")
	rate := fs.Int("rate", 0, "decisions per second (0: as fast as possible)")
	_ = fs.Parse(args)

	dir, err := os.MkdirTemp("", "agentowl-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)

	arrivals := &arrivalLog{at: map[string]time.Time{}}
	var recvs []*httptest.Server
	for i := range *receivers {
		healthy := i >= *down
		srv := httptest.NewUnstartedServer(arrivals.handler(healthy))
		srv.EnableHTTP2 = true
		srv.StartTLS()
		defer srv.Close()
		recvs = append(recvs, srv)
	}
	caFile := filepath.Join(dir, "receivers.pem")
	var pems []byte
	for _, r := range recvs {
		pems = append(pems, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: r.Certificate().Raw})...)
	}
	if err := os.WriteFile(caFile, pems, 0o600); err != nil {
		return err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	addr := ln.Addr().String()
	ln.Close()
	cmdArgs := []string{"serve", "--data-dir", filepath.Join(dir, "data"), "--listen", addr}
	if *dbURL != "" {
		cmdArgs = append(cmdArgs, "--database-url", *dbURL)
	}
	cmd := exec.Command(*binary, cmdArgs...)
	// The receivers all listen on 127.0.0.1, where as many servers would
	// have as many addresses: the in-flight limit per address is raised to
	// what they would have together.
	cmd.Env = append(os.Environ(), "AGENTOWL_EGRESS_ALLOW_CIDRS=127.0.0.0/8", "AGENTOWL_EGRESS_CA_FILE="+caFile,
		fmt.Sprintf("AGENTOWL_DELIVERY_DESTINATION_CONCURRENCY=%d", 32*(*receivers)))
	cmd.Stderr = io.Discard
	if err := cmd.Start(); err != nil {
		return err
	}
	defer func() { _ = cmd.Process.Signal(syscall.SIGTERM); _ = cmd.Wait() }()
	base := "http://" + addr
	c := &client{base: base, http: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: *clients * 2}, Timeout: time.Minute}}
	var token string
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		b, err := os.ReadFile(filepath.Join(dir, "data", "operator-token"))
		if err == nil {
			if _, err := c.do("GET", "/readyz", "", nil, nil, nil); err == nil {
				token = strings.TrimSpace(string(b))
				break
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("server did not start")
		}
	}
	var prov struct{ Token string }
	if _, err := c.do("POST", "/api/v1/tenants/default/provisioner-tokens", token, map[string]any{"label": "bench"}, nil, &prov); err != nil {
		return err
	}
	creds := make([]string, len(recvs))
	for i, r := range recvs {
		secret := webhook.NewSecret()
		regID := uuid.NewString()
		var res struct{ Credential struct{ Token string } }
		if _, err := c.do("POST", "/v1/instances", prov.Token, map[string]any{
			"instance_name": fmt.Sprintf("bench-%d", i),
			"delivery":      map[string]any{"type": "webhook", "url": r.URL + "/hook", "registration_id": regID, "signing_secret": secret},
		}, map[string]string{"Idempotency-Key": uuid.NewString()}, &res); err != nil {
			return err
		}
		creds[i] = res.Credential.Token
	}
	ids := make([]string, *total)
	healthyReq := make([]bool, *total)
	var refusedCreate, refusedDecide atomic.Int64
	create := phase(*clients, *total, func(_, i int) error {
		var r struct{ ID string }
		inst := i % len(creds)
		healthyReq[i] = inst >= *down
		key := uuid.NewString()
		err := retryOverloaded(&refusedCreate, func() (int, error) {
			return c.do("POST", "/v1/requests", creds[inst], map[string]any{"tool": "issue_refund", "timeout": "30m",
				"arguments": map[string]any{"n": i}}, map[string]string{"Idempotency-Key": key}, &r)
		})
		ids[i] = r.ID
		return err
	})
	create.print("create")
	decidedAt, answeredAt := make([]time.Time, *total), make([]time.Time, *total)
	var tick <-chan time.Time
	if *rate > 0 {
		t := time.NewTicker(time.Second / time.Duration(*rate))
		defer t.Stop()
		tick = t.C
	}
	start := time.Now()
	decide := phase(*clients, *total, func(_, i int) error {
		if tick != nil {
			<-tick
		}
		// The latency of a decision runs from the start of its accepted
		// attempt: a refused one (503 overloaded) is sent again after
		// Retry-After, as AAP clients and our SDKs do, and counted.
		return retryOverloaded(&refusedDecide, func() (int, error) {
			decidedAt[i] = time.Now()
			status, err := c.do("POST", "/api/v1/tenants/default/approvals/"+ids[i]+"/decision", token, map[string]any{"decision": "approve"}, nil, nil)
			answeredAt[i] = time.Now()
			return status, err
		})
	})
	decide.print("decide")
	healthy := 0
	for _, h := range healthyReq {
		if h {
			healthy++
		}
	}
	for deadline := time.Now().Add(2 * time.Minute); arrivals.count() < healthy && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
	}
	elapsed := arrivals.last().Sub(start)
	// The latency, and its two parts: the accepted decision's call (its
	// wait in the admission queue and its commit) and from its answer to
	// the receiver's acknowledgement (the delivery engine; zero when the
	// receiver had it before the answer reached the client).
	var lat, call, after []time.Duration
	for i, id := range ids {
		if t, ok := arrivals.get(id); ok && healthyReq[i] {
			lat = append(lat, max(t.Sub(decidedAt[i]), 0))
			call = append(call, answeredAt[i].Sub(decidedAt[i]))
			after = append(after, max(t.Sub(answeredAt[i]), 0))
		}
	}
	if len(lat) == 0 {
		return fmt.Errorf("no deliveries arrived")
	}
	for _, l := range [][]time.Duration{lat, call, after} {
		slices.Sort(l)
	}
	pct := func(l []time.Duration, p float64) float64 { return ms(l[int(float64(len(l)-1)*p)]) }
	fmt.Printf("deliver %6d acked (of %d to healthy receivers; %d/%d receivers down) in %6.2fs  %8.0f acks/s  decision→ack p50 %6.2fms  p99 %6.2fms\n",
		len(lat), healthy, *down, *receivers, elapsed.Seconds(), float64(len(lat))/elapsed.Seconds(), pct(lat, 0.5), pct(lat, 0.99))
	fmt.Printf("  of which the decision call (admission wait, commit) p50 %6.2fms  p99 %6.2fms; answer→ack p50 %6.2fms  p99 %6.2fms\n",
		pct(call, 0.5), pct(call, 0.99), pct(after, 0.5), pct(after, 0.99))
	fmt.Printf("refused  %6d creations and %d decisions with 503 overloaded (each sent again after Retry-After)\n",
		refusedCreate.Load(), refusedDecide.Load())
	return nil
}

// retryOverloaded runs send until it is not refused with 503 (the server's
// admission queue, or a database that cannot answer now), waiting the
// Retry-After of one second in between, and counts the refusals.
func retryOverloaded(refused *atomic.Int64, send func() (int, error)) error {
	for {
		status, err := send()
		if status != http.StatusServiceUnavailable {
			return err
		}
		refused.Add(1)
		time.Sleep(time.Second)
	}
}

// arrivalLog records when each request's notification first arrived.
type arrivalLog struct {
	mu  sync.Mutex
	at  map[string]time.Time
	n   atomic.Int64
	lst time.Time
}

func (a *arrivalLog) handler(healthy bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var msg struct {
			Type      string `json:"type"`
			RequestID string `json:"request_id"`
			Challenge string `json:"challenge"`
		}
		_ = json.Unmarshal(body, &msg)
		if msg.Type == "webhook.verification" {
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(map[string]string{"challenge": msg.Challenge})
			return
		}
		if !healthy {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		now := time.Now()
		a.mu.Lock()
		if _, seen := a.at[msg.RequestID]; !seen && msg.RequestID != "" {
			a.at[msg.RequestID] = now
			a.n.Add(1)
			a.lst = now
		}
		a.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	})
}

func (a *arrivalLog) count() int { return int(a.n.Load()) }

func (a *arrivalLog) get(id string) (time.Time, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	t, ok := a.at[id]
	return t, ok
}

func (a *arrivalLog) last() time.Time {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.lst
}
