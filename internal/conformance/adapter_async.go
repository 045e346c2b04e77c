package conformance

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	mathrand "math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/agentowl/agentowl/internal/syncbuf"
)

// The asynchronous adapter checks (8_security.md, the asynchronous adapter
// list, 5 to 7). They run when the adapter has a receiving service
// (AdapterConfig.Receiver): per check the kit starts it, verifies the
// registration it hands it (a webhook.verification signed with the
// check's secret), and its provider then delivers a signed
// request.resolved notification for each decision, as an asynchronous
// provider does. The adapter command runs with {mode} = async: it
// suspends instead of long polling, and the receiving service resumes it.

// The asynchronous adapter checks' IDs.
const (
	AAsyncEarly     = "adapter.async.early-notification"
	AAsyncReadFirst = "adapter.async.read-before-run"
	AAsyncAbandoned = "adapter.async.abandoned-discarded"
	AAsyncDuplicate = "adapter.async.duplicate"
)

func (a *adapterRun) asyncChecks() []Check {
	return []Check{
		{ID: AAsyncEarly, Requirement: "8_security.md Async adapter 5", Title: "a decision notified before the creation answer (before suspension finished) is not lost: the call runs once", Run: a.checkAsyncEarly},
		{ID: AAsyncReadFirst, Requirement: "8_security.md Async adapter 6", Title: "a notification alone never runs the call: the adapter reads the request (denied; an approval past its expires_at) first", Run: a.checkAsyncReadFirst},
		{ID: AAsyncAbandoned, Requirement: "8_security.md Async adapter 7", Title: "a notification for an abandoned execution is acknowledged and discarded, even when the request reads approved", Run: a.checkAsyncAbandoned},
		{ID: AAsyncDuplicate, Requirement: "8_security.md Async adapter 4, 7", Title: "the same notification delivered again is acknowledged and does not run the call again", Run: a.checkAsyncDuplicate},
	}
}

// Async check defaults.
const (
	// suspendAfter: an adapter that has not read its pending request this
	// long after the creation answer is taken as suspended.
	suspendAfter = time.Second
	// deliveryAttempts bounds the kit's attempts per notification, 200 ms
	// apart.
	deliveryAttempts = 10
)

// asyncDelivery is the kit provider's webhook delivery to the adapter's
// receiving service, signed with the kit's own Standard Webhooks
// implementation (swh.go).
type asyncDelivery struct {
	p        *scriptedProvider
	url      string
	key      []byte
	instance string
	http     *http.Client

	mu       sync.Mutex
	events   map[string][2]string // request ID → event ID, body: fixed across retries and duplicates
	notified chan struct{}        // closed when the first notification's delivery has ended
	once     sync.Once
}

// event returns req's request.resolved event, made once (created_at is
// the decision's decided_at).
func (d *asyncDelivery) event(req *scriptedRequest) (string, []byte) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if ev, ok := d.events[req.id]; ok {
		return ev[0], []byte(ev[1])
	}
	d.p.mu.Lock()
	decided := req.decided
	d.p.mu.Unlock()
	id := newUUID()
	body, _ := json.Marshal(map[string]string{"id": id, "type": "request.resolved", "instance_id": d.instance,
		"request_id": req.id, "created_at": decided.Format(time.RFC3339Nano)})
	d.events[req.id] = [2]string{id, string(body)}
	return id, body
}

// deliver sends req's event until it is acknowledged, and reports
// whether it was.
func (d *asyncDelivery) deliver(req *scriptedRequest) bool {
	defer d.once.Do(func() { close(d.notified) })
	id, body := d.event(req)
	for attempt := range deliveryAttempts {
		if attempt > 0 {
			time.Sleep(200 * time.Millisecond)
		}
		if s := d.send(id, body); s >= 200 && s < 300 {
			return true
		}
	}
	return false
}

// send posts one signed message and records it; 0 is no answer.
func (d *asyncDelivery) send(id string, body []byte) int {
	status := 0
	req, err := http.NewRequest(http.MethodPost, d.url, bytes.NewReader(body))
	if err == nil {
		req.Header.Set("Content-Type", "application/json")
		swHeaders(req.Header, d.key, id, time.Now(), body)
		var resp *http.Response
		if resp, err = d.http.Do(req); err == nil {
			io.Copy(io.Discard, io.LimitReader(resp.Body, maxBody))
			resp.Body.Close()
			status = resp.StatusCode
		}
	}
	d.p.mu.Lock()
	d.p.seen = append(d.p.seen, seen{at: time.Now(), method: http.MethodPost, url: d.url, key: id, body: body, status: status, sent: true})
	d.p.mu.Unlock()
	return status
}

// acks counts the acknowledged deliveries of req's event.
func (d *asyncDelivery) acks(req *scriptedRequest) int {
	id, _ := d.event(req)
	n := 0
	for _, x := range d.p.log() {
		if x.sent && x.key == id && x.status >= 200 && x.status < 300 {
			n++
		}
	}
	return n
}

func (p *scriptedProvider) decide(req *scriptedRequest, outcome string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.decideLocked(req, outcome)
}

// awaitSuspension waits until the adapter has read its pending request
// (or suspendAfter has passed), runs onPoll, then records the script's
// decision and notifies it.
func (p *scriptedProvider) awaitSuspension(req *scriptedRequest, read <-chan struct{}) {
	t := time.NewTimer(suspendAfter)
	defer t.Stop()
	select {
	case <-read:
	case <-t.C:
	}
	p.mu.Lock()
	hook, outcome := p.onPoll, p.script.decide
	p.onPoll = nil
	p.mu.Unlock()
	if hook != nil {
		hook()
	}
	if outcome != "" {
		p.decide(req, outcome)
		p.async.deliver(req)
	}
}

// receiving is a check's receiving service: the registration the kit
// hands it and the running command.
type receiving struct {
	addr, regID, secret, instance string
	out                           syncbuf.Buffer
	stop                          func()
}

// asyncSession is a session whose adapter has a receiving service,
// started and verified; SKIP when the adapter has none.
func (a *adapterRun) asyncSession(ctx context.Context, t *T, sc script) *session {
	if len(a.cfg.Receiver) == 0 {
		t.Skipf("the adapter has no receiving service (--receiver-command): the asynchronous checks need one")
	}
	for attempt := 1; ; attempt++ {
		s, lost, err := a.startReceiving(ctx, t, sc)
		switch {
		case err == nil:
			return s
		case lost && attempt < 3:
			// Another process took the address between its reservation
			// and the service's listen: a fresh one.
			t.Notef("the receiving service exited without verifying (%v): trying again on another address", err)
		default:
			t.Fatalf("the receiving service did not verify the registration the kit handed it: %v", err)
		}
	}
}

// startReceiving starts a session and its receiving service on a reserved
// loopback address, and verifies the registration. On failure the session
// is stopped; lost says the service exited (as one that could not listen
// does) rather than answered wrongly.
func (a *adapterRun) startReceiving(ctx context.Context, t *T, sc script) (*session, bool, error) {
	addr, err := reserveLoopbackAddr()
	if err != nil {
		return nil, false, fmt.Errorf("reserving its address: %w", err)
	}
	rc := &receiving{addr: addr, regID: newUUID(), secret: newWebhookSecret(), instance: newUUID()}
	t.Secret(rc.secret, "signing-secret")
	s := a.session(ctx, t, sc)
	s.recv = rc
	key, _ := secretKey(rc.secret)
	s.p.async = &asyncDelivery{p: s.p, url: "http://" + addr + a.cfg.ReceiverPath, key: key, instance: rc.instance,
		http: newHTTPClient(10*time.Second, nil), events: map[string][2]string{}, notified: make(chan struct{})}
	cmd := s.command(a.cfg.Receiver)
	cmd.Stdout, cmd.Stderr = &rc.out, &rc.out
	if err := cmd.Start(); err != nil {
		s.stop()
		return nil, false, fmt.Errorf("starting %q: %w", cmd.Path, err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	stopSession := s.stop
	s.stop = func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(5 * time.Second):
			cmd.Process.Kill()
			<-exited
		}
		stopSession()
	}
	if err := s.verify(ctx, exited); err != nil {
		// A service that could not listen exits at once; another
		// process's server may have answered the verification first.
		lost := false
		select {
		case <-exited:
			lost = true
		case <-time.After(time.Second):
		}
		if !lost {
			s.evidence(t)
		}
		s.stop()
		return nil, lost, fmt.Errorf("%v\nits output: %s", err, lastBytes(rc.out.String()))
	}
	return s, false, nil
}

// reservedPorts are the loopback ports handed to receiving services in
// this process: never handed out twice.
var reservedPorts sync.Map

// reserveLoopbackAddr picks a free loopback address for a receiving
// service to listen on. The port lies below the system's ephemeral range,
// so that no listener on port 0 (the kit's own servers, other tests) is
// given it between the reservation and the service's listen.
func reserveLoopbackAddr() (string, error) {
	low := ephemeralLow()
	span := min(10000, low-1024)
	for range 200 {
		port := low - 1 - mathrand.IntN(span)
		if _, taken := reservedPorts.LoadOrStore(port, true); taken {
			continue
		}
		ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			continue
		}
		addr := ln.Addr().String()
		ln.Close()
		return addr, nil
	}
	return "", errors.New("no free loopback port below the ephemeral range")
}

// ephemeralLow is the first port of the ephemeral range (Linux's, else
// the IANA range's).
func ephemeralLow() int {
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if n, err := strconv.Atoi(f[0]); err == nil && n > 2048 {
				return n
			}
		}
	}
	return 49152
}

// verify sends the registration's webhook.verification (retrying while
// the service is not listening yet) and checks the challenge comes back.
func (s *session) verify(ctx context.Context, exited <-chan struct{}) error {
	rc, d := s.recv, s.p.async
	id, challenge := newUUID(), newUUID()
	body, _ := json.Marshal(map[string]string{"id": id, "type": "webhook.verification", "registration_id": rc.regID,
		"instance_id": rc.instance, "created_at": time.Now().UTC().Format(time.RFC3339), "challenge": challenge})
	deadline := time.Now().Add(15 * time.Second)
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, d.url, bytes.NewReader(body))
		if err != nil {
			return err
		}
		req.Header.Set("Content-Type", "application/json")
		swHeaders(req.Header, d.key, id, time.Now(), body)
		resp, err := d.http.Do(req)
		if err != nil {
			select {
			case <-exited:
				return errors.New("it exited")
			default:
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("nothing answered at %s within 15s: %v", d.url, err)
			}
			time.Sleep(50 * time.Millisecond)
			continue
		}
		got, _ := io.ReadAll(io.LimitReader(resp.Body, maxBody))
		resp.Body.Close()
		s.p.mu.Lock()
		s.p.seen = append(s.p.seen, seen{at: time.Now(), method: http.MethodPost, url: d.url, key: id, body: body, status: resp.StatusCode, sent: true})
		s.p.mu.Unlock()
		var ans struct{ Challenge string }
		if resp.StatusCode != http.StatusOK || json.Unmarshal(got, &ans) != nil || ans.Challenge != challenge {
			return fmt.Errorf("answered %d %s, not 200 with the challenge %s", resp.StatusCode, truncate(got), challenge)
		}
		return nil
	}
}

func lastBytes(s string) string {
	s = strings.TrimSpace(s)
	if len(s) > maxEvidenceBody {
		return "…" + s[len(s)-maxEvidenceBody:]
	}
	return s
}

// command is the template cmd, expanded, with the kit's environment and
// the expanded --env entries.
func (s *session) command(tmpl []string) *exec.Cmd {
	args := make([]string, len(tmpl))
	for i, c := range tmpl {
		args[i] = s.expand(c)
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Env = os.Environ()
	for _, kv := range s.a.cfg.Env {
		cmd.Env = append(cmd.Env, s.expand(kv))
	}
	return cmd
}

// autoTerm returns a channel closed AsyncWait after the first
// notification was delivered while the run is still going: an adapter
// that never resumes is then told to stop, so the check ends.
func (s *session) autoTerm(t *T, finished <-chan struct{}) <-chan struct{} {
	term := make(chan struct{})
	go func() {
		select {
		case <-s.p.async.notified:
		case <-finished:
			return
		}
		w := time.NewTimer(s.a.cfg.AsyncWait)
		defer w.Stop()
		select {
		case <-w.C:
			t.Notef("the adapter was still running %s after the decision was notified", s.a.cfg.AsyncWait)
			close(term)
		case <-finished:
		}
	}()
	return term
}

// executions counts the runs of the call in out: the allow pattern's
// matches (the process that runs the call says so once).
func (a *adapterRun) executions(out string) int {
	return len(a.cfg.Expect.Allow.FindAllStringIndex(out, -1))
}

// ran counts the runs of the call in a session: the adapter runs' outputs
// and the receiving service's.
func (s *session) ran(runs ...*invocation) int {
	n := s.a.executions(s.recv.out.String())
	for _, v := range runs {
		n += s.a.executions(v.stdout + "\n" + v.stderr)
	}
	return n
}

// settle waits AsyncSettle for the receiving service's output (what it
// printed reaches the kit through a pipe, after the adapter run may have
// seen its effect) and for effects that must not come, then classifies
// runs again with all of it.
func (s *session) settle(ctx context.Context, t *T, runs ...*invocation) {
	select {
	case <-time.After(s.a.cfg.AsyncSettle):
	case <-ctx.Done():
	}
	out := s.recv.out.String()
	t.Notef("the receiving service's output: %s", orNothing(lastBytes(out)))
	for _, v := range runs {
		v.receiver = out[v.recvFrom:]
		v.class = s.a.classify(v.stdout + "\n" + v.stderr + "\n" + v.receiver)
	}
}

func orNothing(s string) string {
	if s == "" {
		return "(nothing)"
	}
	return s
}

func (a *adapterRun) checkAsyncEarly(ctx context.Context, t *T) {
	s := a.asyncSession(ctx, t, script{earlyApproval: true})
	defer s.stop()
	v := s.invoke(ctx, t, nil)
	s.settle(ctx, t, v)
	s.evidence(t)
	reqs := s.p.created()
	if len(reqs) == 0 {
		t.Fatalf("the adapter submitted nothing: %s", v.describe())
	}
	if s.p.async.acks(reqs[0]) == 0 {
		t.Failf("the receiving service did not acknowledge the notification of the approval (sent before the creation answer)")
	}
	if v.class != outAllow {
		t.Failf("the request was approved and notified before its creation answer reached the adapter, but the call did not run: %s", v.describe())
	}
	if n := s.ran(v); n > 1 {
		t.Failf("the call ran %d times for one approval", n)
	}
}

func (a *adapterRun) checkAsyncReadFirst(ctx context.Context, t *T) {
	// A denial whose first read fails: only the event is known, and it
	// carries no outcome.
	s := a.asyncSession(ctx, t, script{decide: "denied", note: denyNote, failReads: 1})
	v := s.invoke(ctx, t, nil)
	s.settle(ctx, t, v)
	s.evidence(t)
	s.stop()
	if n := s.ran(v); n > 0 || v.class == outAllow {
		t.Failf("the request was denied and notified; the adapter's first read after the notification was answered 503, and the call ran: a notification alone must never run it (%s)", v.describe())
	} else if v.class != outDeny {
		t.Failf("the request was denied and notified (the first read after it answered 503): the adapter must read it again and report the denial, it reported %s", v.describe())
	}
	// An approval whose expires_at has passed when the adapter reads it.
	s = a.asyncSession(ctx, t, script{decide: "approved", staleApproval: true})
	defer s.stop()
	v = s.invoke(ctx, t, nil)
	s.settle(ctx, t, v)
	s.evidence(t)
	if n := s.ran(v); n > 0 {
		t.Failf("an approval read back with expires_at a minute past was notified, and the call ran (%s)", v.describe())
	} else {
		a.expectClass(t, v, outExpired, "the approval notified had expires_at a minute past")
	}
}

func (a *adapterRun) checkAsyncAbandoned(ctx context.Context, t *T) {
	if a.cfg.SuspendsOnTerm {
		t.Skipf("the adapter suspends on SIGTERM (--sigterm-suspends): the kit cannot make it abandon an execution")
	}
	s := a.asyncSession(ctx, t, script{abandonRace: true})
	defer s.stop()
	term := make(chan struct{})
	s.p.mu.Lock()
	s.p.onPoll = func() { close(term) }
	s.p.mu.Unlock()
	v := s.invoke(ctx, t, term)
	reqs := s.p.created()
	if len(reqs) == 0 {
		s.evidence(t)
		t.Fatalf("the adapter submitted nothing: %s", v.describe())
	}
	req := reqs[0]
	s.p.mu.Lock()
	pending := req.status == "pending"
	s.p.mu.Unlock()
	if pending {
		// No cancellation arrived (adapter.abandon.cancel's concern): the
		// approval is recorded now, after the abandonment.
		s.p.decide(req, "approved")
		s.p.async.deliver(req)
	}
	s.p.async.waitDelivered(ctx, req)
	s.settle(ctx, t, v)
	s.evidence(t)
	if s.p.async.acks(req) == 0 {
		t.Failf("the receiving service did not acknowledge the notification for the abandoned execution (7_async.md: acknowledge and discard it)")
	}
	if n := s.ran(v); n > 0 || v.class == outAllow {
		t.Failf("the execution was abandoned (SIGTERM while it waited; its cancellation lost to an approval), yet the notification of that approval ran the call (%d runs)", n)
	}
}

func (a *adapterRun) checkAsyncDuplicate(ctx context.Context, t *T) {
	s := a.asyncSession(ctx, t, script{decide: "approved"})
	defer s.stop()
	v := s.invoke(ctx, t, nil)
	s.settle(ctx, t, v)
	reqs := s.p.created()
	if len(reqs) == 0 || v.class != outAllow {
		s.evidence(t)
		t.Fatalf("the approved and notified call did not run (see %s): %s", AAsyncEarly, v.describe())
	}
	req := reqs[0]
	id, body := s.p.async.event(req)
	for range 2 {
		if st := s.p.async.send(id, body); st < 200 || st > 299 {
			t.Failf("the same notification delivered again was answered %d: a duplicate must be acknowledged (2xx)", st)
		}
	}
	s.settle(ctx, t, v)
	s.evidence(t)
	if n := s.ran(v); n != 1 {
		t.Failf("the notification was delivered three times (the same webhook-id and body), and the call ran %d times", n)
	}
}

// waitDelivered waits until req's event was acknowledged or the kit gave
// up on it.
func (d *asyncDelivery) waitDelivered(ctx context.Context, req *scriptedRequest) {
	id, _ := d.event(req)
	for end := time.Now().Add(deliveryAttempts * 300 * time.Millisecond); time.Now().Before(end) && ctx.Err() == nil; {
		attempts := 0
		for _, x := range d.p.log() {
			if x.sent && x.key == id {
				attempts++
				if x.status >= 200 && x.status < 300 {
					return
				}
			}
		}
		if attempts >= deliveryAttempts {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}
