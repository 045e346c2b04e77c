package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentowl/agentowl/webhook"
)

// The three-replica test (issue 15, docs/maintenance.md): three `agentowl
// serve` processes on one PostgreSQL schema with one secret key take AAP
// approval decisions and agent-work events through all three while live
// HTTPS receivers take their notifications and handoffs; the scheduler's
// leader is killed with SIGKILL mid-load.

// flight counts requests in flight, and the most at once.
type flight struct {
	mu      sync.Mutex
	n, most int
}

func (f *flight) enter() {
	f.mu.Lock()
	f.n++
	f.most = max(f.most, f.n)
	f.mu.Unlock()
}

func (f *flight) leave() {
	f.mu.Lock()
	f.n--
	f.mu.Unlock()
}

func (f *flight) max() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.most
}

// copyOf is one delivery attempt a sink received.
type copyOf struct {
	body   []byte
	status int
}

// sink is a live HTTPS receiver: it verifies every signature, and records
// per webhook-id every attempt and the most attempts in flight at once,
// and the most requests in flight to itself (its destination) and to every
// sink of the account together.
type sink struct {
	srv     *httptest.Server
	url     string
	dest    flight
	account *flight
	// secret returns the whsec_ secret an event is signed with.
	secret func(ev map[string]any) (string, bool)
	// answer is the reply to the n-th attempt of an event.
	answer func(ev map[string]any, n int) (int, any)

	mu          sync.Mutex
	copies      map[string][]copyOf // by webhook-id
	inflight    map[string]int
	maxInflight map[string]int
	problems    []string
}

// newSink starts a sink listening on addr ("127.0.0.1:0" or "[::1]:0": two
// loopback addresses are two destinations, host and address both).
func newSink(t *testing.T, addr, path string, account *flight) *sink {
	t.Helper()
	s := &sink{account: account, copies: map[string][]copyOf{}, inflight: map[string]int{}, maxInflight: map[string]int{}}
	s.srv = httptest.NewUnstartedServer(http.HandlerFunc(s.serve))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	s.srv.Listener.Close()
	s.srv.Listener = ln
	s.srv.StartTLS()
	t.Cleanup(s.srv.Close)
	s.url = s.srv.URL + path
	return s
}

func (s *sink) problem(format string, args ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.problems = append(s.problems, fmt.Sprintf(format, args...))
}

func (s *sink) serve(w http.ResponseWriter, r *http.Request) {
	id := r.Header.Get(webhook.HeaderID)
	s.dest.enter()
	s.account.enter()
	s.mu.Lock()
	s.inflight[id]++
	s.maxInflight[id] = max(s.maxInflight[id], s.inflight[id])
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.inflight[id]--
		s.mu.Unlock()
		s.account.leave()
		s.dest.leave()
	}()
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	var ev map[string]any
	if err == nil {
		err = json.Unmarshal(body, &ev)
	}
	if err != nil {
		s.problem("%s: unreadable body: %v", id, err)
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	secret, ok := s.secret(ev)
	key, kerr := webhook.ParseSecret(secret)
	if !ok || kerr != nil {
		s.problem("%s: no secret for %s", id, body)
		w.WriteHeader(http.StatusNotFound)
		return
	}
	if _, err := key.Verify(r.Header, body, time.Now(), webhook.DefaultTolerance); err != nil {
		s.problem("%s: signature does not verify: %v", id, err)
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	// A slow answer widens the window in which limits could be broken.
	time.Sleep(20 * time.Millisecond)
	s.mu.Lock()
	n := len(s.copies[id]) + 1
	s.mu.Unlock()
	status, reply := s.answer(ev, n)
	s.mu.Lock()
	s.copies[id] = append(s.copies[id], copyOf{body: body, status: status})
	s.mu.Unlock()
	if reply != nil {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		json.NewEncoder(w).Encode(reply)
		return
	}
	w.WriteHeader(status)
}

// events returns, per webhook-id, the copies received, and fails on any
// problem, on a body that changed between copies and on two copies of one
// message ever in flight at once.
func (s *sink) events(t *testing.T, what string) map[string][]copyOf {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range s.problems {
		t.Errorf("%s: %s", what, p)
	}
	out := map[string][]copyOf{}
	for id, cs := range s.copies {
		out[id] = cs
		for _, c := range cs[1:] {
			if string(c.body) != string(cs[0].body) {
				t.Errorf("%s: event %s changed between attempts:\n%s\n%s", what, id, cs[0].body, c.body)
			}
		}
		if m := s.maxInflight[id]; m > 1 {
			t.Errorf("%s: event %s had %d attempts in flight at once, want at most one", what, id, m)
		}
	}
	return out
}

func acked(cs []copyOf) bool {
	for _, c := range cs {
		if c.status >= 200 && c.status < 300 {
			return true
		}
	}
	return false
}

// fleet is the replicas, and which of them are alive.
type fleet struct {
	t        *testing.T
	replicas []*serveProcess
	dead     []atomic.Bool
	next     atomic.Int64
}

// do sends a request to the next live replica, moving on to another when
// the connection fails (a replica dies under it) or the replica answers
// 5xx; it returns the first other answer.
func (f *fleet) do(method, path, token string, body any, headers ...string) (reply, error) {
	var last error
	for range 30 {
		i := int(f.next.Add(1)) % len(f.replicas)
		if f.dead[i].Load() {
			continue
		}
		r, err := exchange(f.t, method, f.replicas[i].url+path, token, body, headers...)
		if err == nil && r.status < 500 {
			return r, nil
		}
		if err == nil {
			err = fmt.Errorf("%s %s: %d %s", method, path, r.status, r.body)
		}
		last = err
		time.Sleep(50 * time.Millisecond)
	}
	return reply{}, last
}

// create POSTs body to path with an Idempotency-Key through do and returns
// the field of the answer: the item created (status created) or, the
// request sent again, the one found (200).
func (f *fleet) create(what, path, token string, body any, key string, created int, field string) (string, error) {
	r, err := f.do(http.MethodPost, path, token, body, "Idempotency-Key", key)
	if err != nil || (r.status != created && r.status != http.StatusOK) {
		return "", fmt.Errorf("%s %s: %v %d %s", what, key, err, r.status, r.body)
	}
	var doc map[string]any
	_ = json.Unmarshal(r.body, &doc)
	id, _ := doc[field].(string)
	return id, nil
}

// leader asks replica i for the scheduler's status.
func (f *fleet) leader(admin string, i int) (leaderID string, self bool) {
	r, err := exchange(f.t, http.MethodGet, f.replicas[i].url+"/api/v1/maintenance", admin, nil)
	if err != nil || r.status != http.StatusOK {
		return "", false
	}
	var st struct {
		Leader *struct {
			Replica string `json:"replica"`
			Self    bool   `json:"self"`
		} `json:"leader"`
	}
	if json.Unmarshal(r.body, &st) != nil || st.Leader == nil {
		return "", false
	}
	return st.Leader.Replica, st.Leader.Self
}

func TestThreeReplicasSurviveSIGKILL(t *testing.T) {
	bin, dbURL := replicasOnPostgres(t, 3)

	const (
		approvals, events = 90, 90
		destinationLimit  = 2 // per host:port and per address
		accountLimit      = 3 // per tenant, to both destinations together
	)
	var account flight
	aap := newSink(t, "127.0.0.1:0", "/aap/events", &account)
	rt := newSink(t, "[::1]:0", "/runtime/events", &account)
	var regMu sync.Mutex
	regs := map[string]string{} // registration_id and instance_id -> secret
	aap.secret = func(ev map[string]any) (string, bool) {
		regMu.Lock()
		defer regMu.Unlock()
		if ev["type"] == "webhook.verification" {
			s, ok := regs[str(ev["registration_id"])]
			if ok {
				regs[str(ev["instance_id"])] = s
			}
			return s, ok
		}
		s, ok := regs[str(ev["instance_id"])]
		return s, ok
	}
	aap.answer = func(ev map[string]any, n int) (int, any) {
		if ev["type"] == "webhook.verification" {
			return http.StatusOK, map[string]any{"challenge": ev["challenge"]}
		}
		if n == 1 && strings.HasSuffix(str(ev["request_id"]), "0") {
			return http.StatusServiceUnavailable, nil // some retries too
		}
		return http.StatusNoContent, nil
	}
	var endpointSecret atomic.Value
	rt.secret = func(map[string]any) (string, bool) { s, ok := endpointSecret.Load().(string); return s, ok }
	rt.answer = func(map[string]any, int) (int, any) { return http.StatusAccepted, nil }

	// Every httptest server presents the same certificate (for 127.0.0.1
	// and ::1): one root trusts both sinks. The later of two settings of a
	// variable is the one a process sees: the sinks are on both loopbacks.
	env := append(replicaEnv(writeCA(t, aap.srv), destinationLimit), "AGENTOWL_EGRESS_ALLOW_CIDRS=127.0.0.0/8,::1/128",
		fmt.Sprintf("AGENTOWL_DELIVERY_ACCOUNT_CONCURRENCY=%d", accountLimit), "AGENTOWL_SCHEDULER_LEASE=3s")
	dirs := []string{t.TempDir(), t.TempDir(), t.TempDir()}
	f := &fleet{t: t, dead: make([]atomic.Bool, 3)}
	for _, dir := range dirs {
		f.replicas = append(f.replicas, startServeWith(t, bin, dir, env, "--database-url", dbURL))
	}
	admin := site{dataDir: dirs[0]}.adminToken(t)
	first := f.replicas[0].url

	// An AAP instance whose receiver is the aap sink.
	instCred := provisionWith(t, first, provisionerToken(t, first, admin), map[string]any{"instance_name": "fleet",
		"delivery": webhookDelivery(aap.url, func(regID, secret string) {
			regMu.Lock()
			defer regMu.Unlock()
			regs[regID] = secret
		})}).credential
	// An agent-work endpoint whose runtime is the rt sink, and a binding.
	ep, bnd := bindAgentWork(t, first, admin, map[string]any{"name": "fleet-runtime", "url": rt.url}, map[string]any{"channel": "webhook"})
	endpointSecret.Store(str(ep["signing_secret"]))
	ingressPath := strings.TrimPrefix(str(bnd["ingress_url"]), first)

	// The leader, found by asking each replica whether it leads.
	victim, leaderID := -1, ""
	eventually(t, 30*time.Second, "a scheduler leader", func() bool {
		for i := range f.replicas {
			if id, self := f.leader(admin, i); self {
				victim, leaderID = i, id
				return true
			}
		}
		return false
	})

	// The load: every approval is a request and its decision, every event
	// an ingress POST, each sent to the replicas in turn by four workers.
	type acks struct {
		mu       sync.Mutex
		requests map[string]string // idempotency key -> request ID, acknowledged created
		decided  map[string]bool   // request ID -> decision acknowledged
		events   map[string]bool   // event ID -> acknowledged
	}
	got := &acks{requests: map[string]string{}, decided: map[string]bool{}, events: map[string]bool{}}
	var done atomic.Int64
	killed := make(chan struct{})
	go func() {
		for done.Load() < (approvals+events)/2 {
			time.Sleep(5 * time.Millisecond)
		}
		f.dead[victim].Store(true)
		p := f.replicas[victim]
		_ = p.cmd.Process.Kill() // SIGKILL; the test's cleanup reports a process that outlived it
		<-p.exited
		close(killed)
	}()
	var wg sync.WaitGroup
	errs := make(chan error, approvals+events)
	for w := range 4 {
		wg.Go(func() {
			for i := w; i < approvals+events; i += 4 {
				if err := func() error {
					defer done.Add(1)
					if i%2 == 1 || i/2 >= approvals {
						id, err := f.create("event", ingressPath, "", map[string]any{"n": i}, fmt.Sprintf("evt-%d", i), http.StatusAccepted, "event_id")
						if err != nil {
							return err
						}
						got.mu.Lock()
						got.events[id] = true
						got.mu.Unlock()
						return nil
					}
					k := fmt.Sprintf("req-%d", i)
					id, err := f.create("request", "/v1/requests", instCred, map[string]any{"tool": "t", "arguments": map[string]any{}, "timeout": "30m"},
						k, http.StatusCreated, "id")
					if err != nil {
						return err
					}
					got.mu.Lock()
					got.requests[k] = id
					got.mu.Unlock()
					r, err := f.do(http.MethodPost, "/api/v1/tenants/default/approvals/"+id+"/decision", admin, map[string]any{"decision": "approve"})
					// A decision whose answer was lost with its replica is
					// retried on another, which finds it already made.
					if err != nil || (r.status != http.StatusOK && r.status != http.StatusConflict) {
						return fmt.Errorf("approve %s: %v %d %s", id, err, r.status, r.body)
					}
					if r.status == http.StatusOK {
						got.mu.Lock()
						got.decided[id] = true
						got.mu.Unlock()
					}
					return nil
				}(); err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	<-killed
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if t.Failed() {
		t.FailNow()
	}
	survivor := (victim + 1) % len(f.replicas)
	t.Logf("killed replica %d (the leader) mid-load; %d requests, %d decisions, %d events acknowledged",
		victim, len(got.requests), len(got.decided), len(got.events))

	// Leadership moves to a live replica, which runs the jobs.
	eventually(t, 30*time.Second, "another replica to lead", func() bool {
		id, _ := f.leader(admin, survivor)
		return id != "" && id != leaderID
	})

	// Every acknowledged request and decision exists.
	inst := harness{url: f.replicas[survivor].url, credential: instCred}
	for k, id := range got.requests {
		r := inst.get(t, id, "")
		if r.status != http.StatusOK || r.object(t)["status"] != "approved" {
			t.Errorf("request %s (%s) after the kill: %d %s, want it approved", k, id, r.status, r.body)
		}
	}
	r := send(t, http.MethodGet, inst.url+"/api/v1/tenants/default/work?limit=1000", admin, nil)
	expectStatus(t, "GET work", r, http.StatusOK)
	workOf := map[string]string{} // event ID -> work ID
	for _, it := range itemList(r.object(t)["items"]) {
		if prev, dup := workOf[str(it["event_id"])]; dup {
			t.Errorf("event %s has two works, %s and %s", it["event_id"], prev, it["id"])
		}
		workOf[str(it["event_id"])] = str(it["id"])
	}
	for id := range got.events {
		if workOf[id] == "" {
			t.Errorf("acknowledged event %s has no work", id)
		}
	}

	// Every notification and handoff arrives (at least once), every copy
	// with one event ID.
	wantAll := func() (missing int) {
		byRequest := map[string]bool{}
		for _, cs := range aap.events(t, "aap receiver") {
			var ev map[string]any
			_ = json.Unmarshal(cs[0].body, &ev)
			if ev["type"] == "request.resolved" && acked(cs) {
				byRequest[str(ev["request_id"])] = true
			}
		}
		byEvent := map[string]bool{}
		for _, cs := range rt.events(t, "runtime") {
			var h map[string]any
			_ = json.Unmarshal(cs[0].body, &h)
			if acked(cs) {
				byEvent[str(get(h, "event", "id"))] = true
			}
		}
		for _, id := range got.requests {
			if !byRequest[id] {
				missing++
			}
		}
		for id := range got.events {
			if !byEvent[id] {
				missing++
			}
		}
		return missing
	}
	if !within(150*time.Second, func() bool { return wantAll() == 0 }) {
		// What the outbox says of the messages still out, for the failure's
		// diagnosis: state, attempts, next attempt and last error.
		for _, st := range []string{"pending", "failed"} {
			items := deliveries(t, f.replicas[survivor].url, admin, "state="+st+"&limit=1000")
			t.Logf("%d outbox messages %s", len(items), st)
			for i, it := range items {
				if i < 10 {
					t.Logf("  %v", it)
				}
			}
		}
		t.Fatalf("%d notifications or handoffs never arrived", wantAll())
	}
	eventIDs := map[string]string{} // request or event -> webhook-id
	for name, s := range map[string]*sink{"aap receiver": aap, "runtime": rt} {
		for wid, cs := range s.events(t, name) {
			var ev map[string]any
			_ = json.Unmarshal(cs[0].body, &ev)
			subject := str(ev["request_id"])
			if name == "runtime" {
				subject = str(get(ev, "event", "id"))
				if w := str(get(ev, "work", "work_id")); w != workOf[subject] {
					t.Errorf("handoff %s carries work %s, the event's work is %s", wid, w, workOf[subject])
				}
			}
			if ev["type"] == "webhook.verification" {
				continue
			}
			if prev, dup := eventIDs[subject]; dup {
				t.Errorf("%s %s was delivered under two event IDs, %s and %s", name, subject, prev, wid)
			}
			eventIDs[subject] = wid
		}
	}
	// The limits held across the replicas, the kill included.
	if m := aap.dest.max(); m > destinationLimit {
		t.Errorf("%d attempts in flight at once to the AAP receiver, destination limit %d", m, destinationLimit)
	}
	if m := rt.dest.max(); m > destinationLimit {
		t.Errorf("%d attempts in flight at once to the runtime, destination limit %d", m, destinationLimit)
	}
	if m := account.max(); m > accountLimit {
		t.Errorf("%d attempts of the tenant in flight at once, account limit %d", m, accountLimit)
	}
	t.Logf("most in flight: AAP receiver %d, runtime %d, the account %d", aap.dest.max(), rt.dest.max(), account.max())
}
