package httpapi_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/agentowl/agentowl"
	"github.com/agentowl/agentowl/internal/delivery"
	"github.com/agentowl/agentowl/internal/egress"
	"github.com/agentowl/agentowl/internal/httpapi"
	"github.com/agentowl/agentowl/internal/server"
	"github.com/agentowl/agentowl/internal/server/servertest"
	"github.com/agentowl/agentowl/internal/store/storetest"
	"github.com/agentowl/agentowl/internal/syncbuf"
	"github.com/agentowl/agentowl/webhook"
)

// End-to-end tests of AAP asynchronous mode (seeds/001: receiver
// verification, request.resolved notifications, signing, retries,
// Retry-After, replacement and removal of delivery, the retry deadline)
// against a real store, the real delivery engine and the real SSRF-safe
// egress client, with a fake clock. Receivers are local TLS servers that
// verify every signature themselves.
//
// Waiting for asynchronous delivery polls the receiver's records or the
// deliveries API in a bounded loop; that synchronizes and never asserts a
// duration. "Nothing was sent" is proven with a barrier: a later message
// whose arrival shows that the engine has looked for due work at the
// current time.

const (
	asyncRetryMin = time.Second
	asyncRetryMax = 4 * time.Second
	// syncLimit bounds (in real time) every wait for asynchronous work.
	syncLimit = 10 * time.Second
	// slowAttemptTimeout is the attempt timeout of tests whose receiver
	// never answers: long enough for a loaded machine's loopback TLS
	// exchange, short enough not to wait out the 10s default.
	slowAttemptTimeout = 2 * time.Second
)

// asyncEnv is env with asynchronous mode enabled.
type asyncEnv struct {
	*env
	engine *delivery.Engine
	egress *egress.Client
}

// setupAsync starts the same server as setup, with asynchronous mode on: an
// egress client that allows loopback and trusts the receivers' test CA, and
// a delivery engine on the fake clock running until the test ends.
func setupAsync(t *testing.T, b storetest.Backend) *asyncEnv {
	return setupAsyncServer(t, b, nil)
}

// debugServerConfig is servertest's configuration with the server's debug
// log kept and printed if the test fails: the set-up the async and work
// tests share, whose failures are hard to read without the log.
func debugServerConfig(t *testing.T, b storetest.Backend) server.Config {
	t.Helper()
	logs := &syncbuf.Buffer{}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("server log:\n%s", logs.String())
		}
	})
	sc := servertest.Config(t, b)
	sc.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	return sc
}

// deliveryConfig is debugServerConfig with what the async and work tests
// deliver through: an egress client that allows loopback and trusts the
// receivers' test CA, and retries between asyncRetryMin and asyncRetryMax.
func deliveryConfig(t *testing.T, b storetest.Backend) server.Config {
	t.Helper()
	sc := debugServerConfig(t, b)
	sc.Egress = egress.Config{ExtraRootsPEM: receiverCAPEM(t), AllowCIDRs: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}
	sc.Delivery = delivery.Config{RetryMinDelay: asyncRetryMin, RetryMaxDelay: asyncRetryMax}
	return sc
}

// setupAsyncServer is setupAsync with any server setting adjusted (nil
// adjusts none).
func setupAsyncServer(t *testing.T, b storetest.Backend, adjust func(sc *server.Config)) *asyncEnv {
	t.Helper()
	sc := deliveryConfig(t, b)
	if adjust != nil {
		adjust(&sc)
	}
	e := start(t, sc)
	return &asyncEnv{env: e, engine: e.server.Engine(), egress: e.server.Egress()}
}

// forEachAsyncBackend runs fn as a parallel subtest per store backend.
func forEachAsyncBackend(t *testing.T, fn func(t *testing.T, e *asyncEnv)) {
	forEachBackendWith(t, setupAsync, fn)
}

var (
	testCAOnce sync.Once
	testCAPEM  []byte
)

// receiverCAPEM is the certificate of every httptest TLS server (they share
// one self-signed certificate), which egress must trust.
func receiverCAPEM(t *testing.T) []byte {
	testCAOnce.Do(func() {
		s := httptest.NewTLSServer(http.NotFoundHandler())
		testCAPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: s.Certificate().Raw})
		s.Close()
	})
	return testCAPEM
}

// advance moves the fake clock and prompts the engine to look for due
// messages at the new time.
func (e *asyncEnv) advance(d time.Duration) {
	e.clock.Advance(d)
	e.engine.Wake()
}

// eventually polls cond every few milliseconds until it holds, for at most
// limit of real time. It synchronizes with asynchronous work; it asserts
// nothing about how long that work takes.
func eventually(t *testing.T, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
		time.Sleep(3 * time.Millisecond)
	}
}

// ---- the receiver

// action is what a receiver does with one call.
type action int

const (
	actAnswer         action = iota // verification: 200 with the challenge; notification: 204
	actBare200                      // 200 with an empty body
	act204                          // 204 No Content
	actWrongChallenge               // 200 with another challenge
	act500                          // 500
	act429                          // 429 with Retry-After: 3
	act503Date                      // 503 with Retry-After as an HTTP date 3s ahead (fake clock)
	act429Far                       // 429 with Retry-After far beyond the retry window
	actRedirect                     // 302 to a second server that must receive nothing
	actSlow                         // no answer until the caller gives up or the test ends
	actReset                        // the connection is reset (hijacked, SO_LINGER 0)
)

func (a action) String() string {
	return [...]string{"answer", "bare 200", "204", "wrong challenge", "500", "429", "503 with date",
		"429 far", "redirect", "slow", "reset"}[a]
}

// received is one call a receiver got.
type received struct {
	N      int // 1-based call number on this receiver
	Header http.Header
	Body   []byte
	At     time.Time // fake clock on arrival
	ID     string    // webhook-id
	Type   string    // body type
	// InstanceID, RegistrationID and Challenge are read from the body.
	InstanceID, RegistrationID, Challenge string
	Secret                                string // the secret the receiver verified it with
	SigErr                                error  // nil when the signature checks passed
	Action                                action
	Method, ContentType                   string
}

// Timestamp is the webhook-timestamp header as a time.
func (r *received) Timestamp(t *testing.T) time.Time {
	t.Helper()
	sec, err := strconv.ParseInt(r.Header.Get(webhook.HeaderTimestamp), 10, 64)
	if err != nil {
		t.Fatalf("webhook-timestamp %q: %v", r.Header.Get(webhook.HeaderTimestamp), err)
	}
	return time.Unix(sec, 0).UTC()
}

// receiver is a harness receiving service: it knows registration ID ->
// secret, binds an instance ID to a registration when it answers that
// registration's verification, checks every message's signature itself
// against the fake clock (and with the Standard Webhooks reference
// library), records every call and plays scripted behaviour.
type receiver struct {
	t       *testing.T
	clock   *fakeClock
	srv     *httptest.Server
	target  *httptest.Server // redirect target
	hits    atomic.Int32     // calls the redirect target got
	release chan struct{}

	mu            sync.Mutex
	registrations map[string]string // registration_id -> secret
	instances     map[string]string // instance_id -> secret
	verifyScript  []action
	notifyScript  []action
	notifyDefault action
	events        []*received
	inflight      map[string]int
	maxInflight   map[string]int
}

// newReceiver starts a receiver for e. At the end of the test it checks
// that every message carried a valid signature, that no webhook-id was
// ever sent twice concurrently and that the redirect target got nothing.
func newReceiver(t *testing.T, e *asyncEnv) *receiver {
	t.Helper()
	rc := &receiver{
		t: t, clock: e.clock, release: make(chan struct{}),
		registrations: map[string]string{}, instances: map[string]string{},
		inflight: map[string]int{}, maxInflight: map[string]int{},
	}
	rc.target = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc.hits.Add(1)
		w.WriteHeader(http.StatusNoContent)
	}))
	rc.srv = httptest.NewTLSServer(rc)
	if got := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: rc.srv.Certificate().Raw}); !bytes.Equal(got, receiverCAPEM(t)) {
		t.Fatal("test setup: the receiver's certificate is not the one egress trusts")
	}
	t.Cleanup(func() {
		close(rc.release)
		rc.srv.Close()
		rc.target.Close()
		rc.mu.Lock()
		defer rc.mu.Unlock()
		for _, ev := range rc.events {
			if ev.SigErr != nil {
				t.Errorf("receiver call %d (%s %s): signature rejected: %v", ev.N, ev.Type, ev.ID, ev.SigErr)
			}
		}
		for id, n := range rc.maxInflight {
			if n > 1 {
				t.Errorf("webhook-id %s had %d attempts in flight at once; at most one is allowed", id, n)
			}
		}
		if n := rc.hits.Load(); n != 0 {
			t.Errorf("the redirect target received %d requests; redirects must not be followed", n)
		}
	})
	return rc
}

// URL is the receiver's event endpoint.
func (rc *receiver) URL() string { return rc.srv.URL + "/aap/events" }

// register prepares a registration: a fresh UUID and secret, stored on the
// receiver before the provisioner submits them.
func (rc *receiver) register() (regID, secret string) {
	regID, secret = agentowl.NewID(""), webhook.NewSecret()
	rc.mu.Lock()
	rc.registrations[regID] = secret
	rc.mu.Unlock()
	return regID, secret
}

// input is the WebhookDeliveryInput for a registration of this receiver.
func (rc *receiver) input(regID, secret string) map[string]any {
	return map[string]any{"type": "webhook", "url": rc.URL(), "registration_id": regID, "signing_secret": secret}
}

// onVerify scripts the next verifications; afterwards they are answered.
func (rc *receiver) onVerify(acts ...action) {
	rc.mu.Lock()
	rc.verifyScript = append(rc.verifyScript, acts...)
	rc.mu.Unlock()
}

// onNotify scripts the next notifications; afterwards the default applies.
func (rc *receiver) onNotify(acts ...action) {
	rc.mu.Lock()
	rc.notifyScript = append(rc.notifyScript, acts...)
	rc.mu.Unlock()
}

// notifyAlways sets what unscripted notifications get (204 by default).
func (rc *receiver) notifyAlways(a action) {
	rc.mu.Lock()
	rc.notifyDefault = a
	rc.mu.Unlock()
}

// calls returns every recorded call of type typ ("" for all).
func (rc *receiver) calls(typ string) []*received {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	var out []*received
	for _, ev := range rc.events {
		if typ == "" || ev.Type == typ {
			out = append(out, ev)
		}
	}
	return out
}

func (rc *receiver) verifications() []*received { return rc.calls("webhook.verification") }

func (rc *receiver) notifications() []*received { return rc.calls("request.resolved") }

// notificationsFor returns the notification attempts with webhook-id id.
func (rc *receiver) notificationsFor(id string) []*received {
	var out []*received
	for _, ev := range rc.notifications() {
		if ev.ID == id {
			out = append(out, ev)
		}
	}
	return out
}

// waitNotifications waits until at least n notifications arrived and
// returns them all.
func (rc *receiver) waitNotifications(t *testing.T, n int) []*received {
	t.Helper()
	eventually(t, syncLimit, fmt.Sprintf("%d notifications at %s", n, rc.URL()), func() bool { return len(rc.notifications()) >= n })
	return rc.notifications()
}

// idle reports whether no call with webhook-id id is being handled.
func (rc *receiver) idle(id string) bool {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return rc.inflight[id] == 0
}

func pop(script *[]action, def action) action {
	if len(*script) == 0 {
		return def
	}
	a := (*script)[0]
	*script = (*script)[1:]
	return a
}

// receiverMessage is the part of a delivered message the test receivers
// read to answer it.
type receiverMessage struct {
	ID             string `json:"id"`
	Type           string `json:"type"`
	RegistrationID string `json:"registration_id"`
	InstanceID     string `json:"instance_id"`
	Challenge      string `json:"challenge"`
}

func (rc *receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(io.LimitReader(req.Body, 1<<20))
	var msg receiverMessage
	_ = json.Unmarshal(body, &msg)
	id := req.Header.Get(webhook.HeaderID)

	rc.mu.Lock()
	now := rc.clock.Now()
	ev := &received{
		N: len(rc.events) + 1, Header: req.Header.Clone(), Body: body, At: now, ID: id, Type: msg.Type,
		InstanceID: msg.InstanceID, RegistrationID: msg.RegistrationID, Challenge: msg.Challenge,
		Method: req.Method, ContentType: req.Header.Get("Content-Type"),
	}
	if msg.Type == "webhook.verification" {
		ev.Secret = rc.registrations[msg.RegistrationID]
		ev.Action = pop(&rc.verifyScript, actAnswer)
	} else {
		// Notifications carry no registration: the instance bound at
		// verification selects the secret.
		ev.Secret = rc.instances[msg.InstanceID]
		ev.Action = pop(&rc.notifyScript, rc.notifyDefault)
	}
	ev.SigErr = checkSignature(req.Header, body, ev.Secret, now, msg.ID)
	if ev.SigErr == nil && msg.Type == "webhook.verification" && ev.Action == actAnswer {
		rc.instances[msg.InstanceID] = ev.Secret
	}
	rc.events = append(rc.events, ev)
	rc.inflight[id]++
	rc.maxInflight[id] = max(rc.maxInflight[id], rc.inflight[id])
	rc.mu.Unlock()
	defer func() {
		rc.mu.Lock()
		rc.inflight[id]--
		rc.mu.Unlock()
	}()

	if ev.SigErr != nil {
		http.Error(w, "invalid signature", http.StatusUnauthorized)
		return
	}
	switch ev.Action {
	case actAnswer:
		if msg.Type == "webhook.verification" {
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(map[string]string{"challenge": msg.Challenge})
			return
		}
		w.WriteHeader(http.StatusNoContent)
	case actBare200:
		w.WriteHeader(http.StatusOK)
	case act204:
		w.WriteHeader(http.StatusNoContent)
	case actWrongChallenge:
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]string{"challenge": agentowl.NewID("")})
	case act500:
		http.Error(w, "receiver failure", http.StatusInternalServerError)
	case act429:
		w.Header().Set("Retry-After", "3")
		w.WriteHeader(http.StatusTooManyRequests)
	case act503Date:
		w.Header().Set("Retry-After", now.Add(3*time.Second).UTC().Format(http.TimeFormat))
		w.WriteHeader(http.StatusServiceUnavailable)
	case act429Far:
		w.Header().Set("Retry-After", strconv.Itoa(30*24*3600))
		w.WriteHeader(http.StatusTooManyRequests)
	case actRedirect:
		http.Redirect(w, req, rc.target.URL+"/aap/events", http.StatusFound)
	case actSlow:
		select {
		case <-rc.release:
		case <-req.Context().Done(): // the caller gave up and closed the connection
		}
		// Never answer: a late response could still be read by a client
		// racing its own cancellation, which would make the test depend on
		// timing.
		panic(http.ErrAbortHandler)
	case actReset:
		conn, _, err := w.(http.Hijacker).Hijack()
		if err != nil {
			panic(err)
		}
		raw := conn
		if tc, ok := conn.(*tls.Conn); ok {
			raw = tc.NetConn()
		}
		if tcp, ok := raw.(*net.TCPConn); ok {
			_ = tcp.SetLinger(0)
		}
		_ = raw.Close()
	}
}

// checkSignature verifies a message as a receiver must: our webhook package
// against the fake clock with the five-minute tolerance, the body ID
// matching webhook-id, and independently the Standard Webhooks reference
// library (which reads the real clock, so its timestamp check is skipped).
func checkSignature(h http.Header, body []byte, secret string, now time.Time, bodyID string) error {
	if secret == "" {
		return errors.New("the receiver knows no secret for this registration or instance")
	}
	key, err := webhook.ParseSecret(secret)
	if err != nil {
		return err
	}
	id, err := key.Verify(h, body, now, webhook.DefaultTolerance)
	if err != nil {
		return fmt.Errorf("webhook.Verify: %w", err)
	}
	if id != bodyID {
		return fmt.Errorf("webhook-id %q does not match the body's id %q", id, bodyID)
	}
	ref, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		return err
	}
	if err := ref.VerifyIgnoringTimestamp(body, h); err != nil {
		return fmt.Errorf("standard-webhooks reference library: %w", err)
	}
	return nil
}

// ---- the deliveries API

// deliveryView is a message of the deliveries API, with its attempt history.
type deliveryView = httpapi.DeliveryView

// operatorGet GETs an operator path with e's admin token, expecting 200.
func (e *asyncEnv) operatorGet(t *testing.T, path string) []byte {
	t.Helper()
	r := e.doIn(t, http.MethodGet, path, e.operatorToken, nil)
	if r.Status != http.StatusOK {
		t.Fatalf("GET %s: %d %s", path, r.Status, r.Body)
	}
	return r.Body
}

// deliveries lists tenant "default"'s messages; query is e.g. "?request=…".
func (e *asyncEnv) deliveries(t *testing.T, query string) []deliveryView {
	t.Helper()
	var out struct {
		Items []deliveryView `json:"items"`
	}
	data := e.operatorGet(t, "/api/v1/tenants/default/deliveries"+query)
	if err := json.Unmarshal(data, &out); err != nil || out.Items == nil {
		t.Fatalf("deliveries list: %v: %s", err, data)
	}
	return out.Items
}

// deliveryByID returns one message with its attempt history.
func (e *asyncEnv) deliveryByID(t *testing.T, id string) deliveryView {
	t.Helper()
	var d deliveryView
	data := e.operatorGet(t, "/api/v1/tenants/default/deliveries/"+id)
	if err := json.Unmarshal(data, &d); err != nil || d.ID != id {
		t.Fatalf("delivery %s: %v: %s", id, err, data)
	}
	return d
}

// waitDelivery polls message id until cond holds and returns it.
func (e *asyncEnv) waitDelivery(t *testing.T, id, what string, cond func(d deliveryView) bool) deliveryView {
	t.Helper()
	var d deliveryView
	eventually(t, syncLimit, "delivery "+id+" "+what, func() bool {
		d = e.deliveryByID(t, id)
		return cond(d)
	})
	return d
}

// waitAttempts waits until n attempts of message id are recorded and none is
// in flight, so the clock can move without overtaking an attempt.
func (e *asyncEnv) waitAttempts(t *testing.T, id string, n int) deliveryView {
	t.Helper()
	return e.waitAttemptsWithin(t, id, n, syncLimit)
}

// waitAttemptsWithin is waitAttempts with a limit. It polls the stored row
// (claimed n times, lease released) rather than the deliveries API, whose
// message row and attempt list are two statements that need not come from
// one snapshot.
func (e *asyncEnv) waitAttemptsWithin(t *testing.T, id string, n int, limit time.Duration) deliveryView {
	t.Helper()
	ctx := context.Background()
	eventually(t, limit, fmt.Sprintf("delivery %s to record %d attempts", id, n), func() bool {
		var m *agentowl.OutboxMessage
		if err := e.store.Read(ctx, func(tx agentowl.Tx) (err error) {
			m, err = tx.MessageGet(ctx, id)
			return err
		}); err != nil {
			t.Fatalf("read message %s: %v", id, err)
		}
		return m.Attempts == n && m.LeaseUntil == nil
	})
	d := e.deliveryByID(t, id)
	if d.Attempts != n || len(d.History) != n {
		t.Fatalf("delivery %s after %d finished attempts: %+v", id, n, d)
	}
	return d
}

// waitDelivered waits until message id is delivered.
func (e *asyncEnv) waitDelivered(t *testing.T, id string) deliveryView {
	t.Helper()
	return e.waitDelivery(t, id, "to be delivered", func(d deliveryView) bool { return d.State == "delivered" })
}

// messagesFor returns the outbox messages about request id.
func (e *asyncEnv) messagesFor(t *testing.T, requestID string) []deliveryView {
	t.Helper()
	return e.deliveries(t, "?request="+requestID)
}

// ---- factories

// hooked is an instance with a verified receiver.
type hooked struct {
	*instance
	rc            *receiver
	regID, secret string
}

// provisionHooked provisions an instance of provisioner prov whose delivery
// points at rc.
func (e *asyncEnv) provisionHooked(t *testing.T, prov string, rc *receiver) *hooked {
	t.Helper()
	regID, secret := rc.register()
	inst := provision(t, e.env, prov, map[string]any{"delivery": rc.input(regID, secret)})
	return &hooked{instance: inst, rc: rc, regID: regID, secret: secret}
}

// submitKeyed creates a request with an explicit Idempotency-Key.
func submitKeyed(t *testing.T, e *env, cred, key string, body any) *wireRequest {
	t.Helper()
	r := e.do("POST", "/v1/requests", cred, body, "Idempotency-Key", key)
	wantStatus(t, r, http.StatusCreated)
	return decodeRequest(t, r)
}

// resolvedEvent mirrors RequestResolvedEvent, decoded strictly.
type resolvedEvent struct {
	ID         string `json:"id"`
	Type       string `json:"type"`
	InstanceID string `json:"instance_id"`
	RequestID  string `json:"request_id"`
	CreatedAt  string `json:"created_at"`
}

// wantNotification checks that ev is a well-formed, correctly signed
// request.resolved for request req of instance inst, created at decidedAt.
func wantNotification(t *testing.T, ev *received, inst, req, decidedAt string) resolvedEvent {
	t.Helper()
	var body resolvedEvent
	decodeInto(t, ev.Body, &body)
	if body.Type != "request.resolved" || body.InstanceID != inst || body.RequestID != req || body.CreatedAt != decidedAt {
		t.Errorf("notification body %s, want request.resolved of instance %s, request %s, created_at %s", ev.Body, inst, req, decidedAt)
	}
	if !agentowl.ValidUUID(body.ID) || ev.ID != body.ID {
		t.Errorf("webhook-id %q, body id %q: want the same UUID", ev.ID, body.ID)
	}
	if ev.Method != http.MethodPost || !strings.HasPrefix(ev.ContentType, "application/json") {
		t.Errorf("notification sent as %s with Content-Type %q", ev.Method, ev.ContentType)
	}
	if ev.SigErr != nil {
		t.Errorf("notification signature: %v", ev.SigErr)
	}
	if ts := ev.Timestamp(t); !ts.Equal(ev.At.Truncate(time.Second)) {
		t.Errorf("webhook-timestamp %s, want the attempt time %s", ts, ev.At)
	}
	return body
}

// barrier decides a fresh request of h (whose receiver answers it) and waits
// until its notification is delivered. The engine claims every due message
// at once, so once the barrier went out, any message that was due at the
// current time has been claimed (and its attempt counted).
func (e *asyncEnv) barrier(t *testing.T, h *hooked) {
	t.Helper()
	req := submit(t, e.env, h.Credential, refundBody())
	wantStatus(t, decide(e.env, req.ID, "deny"), http.StatusOK)
	var msgID string
	eventually(t, syncLimit, "the barrier notification", func() bool {
		for _, ev := range h.rc.notifications() {
			var body resolvedEvent
			if json.Unmarshal(ev.Body, &body) == nil && body.RequestID == req.ID {
				msgID = ev.ID
				return true
			}
		}
		return false
	})
	e.waitDelivered(t, msgID)
}

// ---- 1. provisioning with delivery

func TestAsyncProvisionWithDelivery(t *testing.T) {
	forEachAsyncBackend(t, func(t *testing.T, e *asyncEnv) {
		rc := newReceiver(t, e)
		prov, _ := provisionerToken(t, e.env, "default")
		regID, secret := rc.register()
		key := newKey()
		r := e.do("POST", "/v1/instances", prov, map[string]any{"instance_name": "codex-chris-laptop", "delivery": rc.input(regID, secret)},
			"Idempotency-Key", key)
		wantStatus(t, r, http.StatusCreated)
		var p wireProvisioned
		decodeInto(t, r.Body, &p)
		wantPublicDelivery(t, p.Instance.Delivery, rc.URL(), regID)
		wantNoSecret(t, "provision response", r.Body, secret)

		vs := rc.verifications()
		if len(vs) != 1 {
			t.Fatalf("%d verifications, want 1", len(vs))
		}
		v := vs[0]
		var vb struct {
			ID             string `json:"id"`
			Type           string `json:"type"`
			RegistrationID string `json:"registration_id"`
			InstanceID     string `json:"instance_id"`
			CreatedAt      string `json:"created_at"`
			Challenge      string `json:"challenge"`
		}
		decodeInto(t, v.Body, &vb)
		if !agentowl.ValidUUID(vb.ID) || v.ID != vb.ID {
			t.Errorf("verification id %q, webhook-id %q: want the same UUID", vb.ID, v.ID)
		}
		if vb.Type != "webhook.verification" || vb.RegistrationID != regID || vb.InstanceID != p.Instance.ID {
			t.Errorf("verification %s: want type webhook.verification, registration %s, instance %s", v.Body, regID, p.Instance.ID)
		}
		if !mustTime(t, vb.CreatedAt).Equal(e.clock.Now()) {
			t.Errorf("verification created_at %s, want %s", vb.CreatedAt, e.clock.Now())
		}
		if _, err := uuid.Parse(vb.Challenge); err != nil || !agentowl.ValidUUID(vb.Challenge) {
			t.Errorf("challenge %q is not a UUID", vb.Challenge)
		}
		if v.SigErr != nil || v.Method != http.MethodPost || !strings.HasPrefix(v.ContentType, "application/json") {
			t.Errorf("verification: signature %v, method %s, Content-Type %q", v.SigErr, v.Method, v.ContentType)
		}
		if !v.Timestamp(t).Equal(e.clock.Now()) {
			t.Errorf("verification webhook-timestamp %s, want %s", v.Timestamp(t), e.clock.Now())
		}
		for _, s := range []string{secret, prov, p.Credential.Token} {
			if bytes.Contains(v.Body, []byte(s)) || strings.Contains(fmt.Sprint(v.Header), s) {
				t.Errorf("the verification carries a secret or credential %q", s)
			}
		}

		// Reads expose type, URL and registration ID, never the secret.
		g := e.do("GET", "/v1/instances/"+p.Instance.ID, prov, nil)
		wantStatus(t, g, http.StatusOK)
		var gi wireInstance
		decodeInto(t, g.Body, &gi)
		wantPublicDelivery(t, gi.Delivery, rc.URL(), regID)
		wantNoSecret(t, "GET instance", g.Body, secret)
		op := e.do("GET", "/api/v1/tenants/default/instances/"+p.Instance.ID, e.operatorToken, nil)
		wantStatus(t, op, http.StatusOK)
		wantNoSecret(t, "operator instance view", op.Body, secret)
		wantNoSecret(t, "operator instance list", e.do("GET", "/api/v1/tenants/default/instances", e.operatorToken, nil).Body, secret)

		// The replay returns the same instance and credential.
		rr := e.do("POST", "/v1/instances", prov, map[string]any{"instance_name": "codex-chris-laptop", "delivery": rc.input(regID, secret)},
			"Idempotency-Key", key)
		wantStatus(t, rr, http.StatusOK)
		var rp wireProvisioned
		decodeInto(t, rr.Body, &rp)
		if rp.Instance.ID != p.Instance.ID || rp.Credential.Token != p.Credential.Token {
			t.Errorf("replay returned %s, want the original instance and credential", rr.Body)
		}
		wantNoSecret(t, "provision replay", rr.Body, secret)
		// Verification is not an outbox notification.
		if ds := e.deliveries(t, "?instance="+p.Instance.ID); len(ds) != 0 {
			t.Errorf("provisioning recorded deliveries: %+v", ds)
		}
	})
}

// wantPublicDelivery checks an Instance.delivery: exactly type, url and
// registration_id.
func wantPublicDelivery(t *testing.T, raw json.RawMessage, url, regID string) {
	t.Helper()
	if raw == nil {
		t.Fatal("instance has no delivery")
	}
	var d struct {
		Type           string `json:"type"`
		URL            string `json:"url"`
		RegistrationID string `json:"registration_id"`
	}
	decodeInto(t, raw, &d)
	if d.Type != "webhook" || d.URL != url || d.RegistrationID != regID {
		t.Errorf("instance.delivery %s, want webhook %s %s", raw, url, regID)
	}
}

// wantNoSecret checks that body does not contain the signing secret or its
// key material.
func wantNoSecret(t *testing.T, what string, body []byte, secret string) {
	t.Helper()
	if bytes.Contains(body, []byte(strings.TrimPrefix(secret, "whsec_"))) || bytes.Contains(body, []byte("signing_secret")) {
		t.Errorf("%s exposes the signing secret: %s", what, body)
	}
}

// ---- 2. verification failures

func TestAsyncVerificationFailures(t *testing.T) {
	forEachAsyncBackend(t, func(t *testing.T, e *asyncEnv) {
		rc := newReceiver(t, e)
		prov, _ := provisionerToken(t, e.env, "default")
		cases := []struct {
			act action
			why string // the message must say this
		}{
			{actBare200, "challenge"},
			{act204, "204"},
			{actWrongChallenge, "different challenge"},
			{act500, "500"},
			{actRedirect, "redirect"},
			{actReset, ""},
			{actSlow, "10s"},
		}
		var created []string
		for _, c := range cases {
			// Registrations are rate limited (burst 10, then one per 2s by
			// default); time passes between the cases.
			e.clock.Advance(10 * time.Second)
			regID, secret := rc.register()
			body := map[string]any{"instance_name": "hooked-" + c.act.String(), "delivery": rc.input(regID, secret)}
			key := newKey()
			before := len(rc.verifications())
			rc.onVerify(c.act)
			r := e.do("POST", "/v1/instances", prov, body, "Idempotency-Key", key)
			wantError(t, r, http.StatusUnprocessableEntity, "webhook_verification_failed", "")
			msg := errorMessage(t, r)
			t.Logf("%s: %s", c.act, msg)
			if !strings.Contains(msg, c.why) || len(msg) < len("The webhook receiver could not be verified: ")+3 {
				t.Errorf("%s: message %q does not say why (want %q)", c.act, msg, c.why)
			}
			wantNoSecret(t, c.act.String(), r.Body, secret)
			vs := rc.verifications()
			if len(vs) != before+1 {
				t.Fatalf("%s: %d verifications sent, want 1", c.act, len(vs)-before)
			}
			proposed := vs[before].InstanceID
			if ids := liveInstances(t, e.env); !sameSet(ids, created) {
				t.Fatalf("%s: instances %v after a failed verification, want %v", c.act, ids, created)
			}
			wantError(t, e.do("GET", "/api/v1/tenants/default/instances/"+proposed, e.operatorToken, nil), http.StatusNotFound, "not_found", "")

			// The same key and input verify again, and can then succeed.
			r = e.do("POST", "/v1/instances", prov, body, "Idempotency-Key", key)
			wantStatus(t, r, http.StatusCreated)
			var p wireProvisioned
			decodeInto(t, r.Body, &p)
			vs = rc.verifications()
			if len(vs) != before+2 || vs[before+1].InstanceID != p.Instance.ID || vs[before+1].RegistrationID != regID {
				t.Fatalf("%s: the retry did not verify again for the created instance", c.act)
			}
			if vs[before+1].Challenge == vs[before].Challenge {
				t.Errorf("%s: the retry reused the challenge %s", c.act, vs[before].Challenge)
			}
			created = append(created, p.Instance.ID)
		}
		if n := rc.hits.Load(); n != 0 {
			t.Errorf("the redirect target received %d requests", n)
		}
	})
}

// TestAsyncVerificationDestinationNotAllowed runs with egress at its
// production default: loopback receivers are refused.
func TestAsyncVerificationDestinationNotAllowed(t *testing.T) {
	for _, b := range storetest.Backends(t) {
		t.Run(b.Name, func(t *testing.T) {
			t.Parallel()
			// Egress at its production default refuses loopback.
			e := setupAsyncServer(t, b, func(sc *server.Config) { sc.Egress.AllowCIDRs = nil })
			rc := newReceiver(t, e)
			prov, _ := provisionerToken(t, e.env, "default")
			regID, secret := rc.register()
			port := rc.srv.Listener.Addr().(*net.TCPAddr).Port

			// An IP literal that egress refuses fails validation.
			literal := rc.input(regID, secret)
			literal["url"] = fmt.Sprintf("https://127.0.0.1:%d/aap/events", port)
			r := e.do("POST", "/v1/instances", prov, map[string]any{"delivery": literal}, "Idempotency-Key", newKey())
			wantError(t, r, http.StatusBadRequest, "invalid_webhook_url", "delivery.url")

			// A host name that resolves to loopback fails verification.
			named := rc.input(regID, secret)
			named["url"] = fmt.Sprintf("https://localhost:%d/aap/events", port)
			key := newKey()
			for range 2 {
				r = e.do("POST", "/v1/instances", prov, map[string]any{"delivery": named}, "Idempotency-Key", key)
				wantError(t, r, http.StatusUnprocessableEntity, "webhook_verification_failed", "")
				if msg := errorMessage(t, r); !strings.Contains(msg, "not allowed") {
					t.Errorf("message %q does not say the destination is not allowed", msg)
				}
			}
			if ids := liveInstances(t, e.env); len(ids) != 0 {
				t.Errorf("instances %v after refused destinations", ids)
			}
			if calls := rc.calls(""); len(calls) != 0 {
				t.Errorf("the refused receiver got %d calls", len(calls))
			}
		})
	}
}

func errorMessage(t *testing.T, r *response) string {
	t.Helper()
	e, _ := r.JSON(t)["error"].(map[string]any)
	msg, _ := e["message"].(string)
	return msg
}

func sameSet(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	seen := map[string]int{}
	for _, s := range a {
		seen[s]++
	}
	for _, s := range b {
		seen[s]--
	}
	for _, n := range seen {
		if n != 0 {
			return false
		}
	}
	return true
}

// ---- 3. notification

func TestAsyncNotification(t *testing.T) {
	forEachAsyncBackend(t, func(t *testing.T, e *asyncEnv) {
		rc := newReceiver(t, e)
		prov, _ := provisionerToken(t, e.env, "default")
		h := e.provisionHooked(t, prov, rc)
		key := newKey()
		req := submitKeyed(t, e.env, h.Credential, key, refundBody())
		if req.Status != "pending" {
			t.Fatalf("request %s", req.Status)
		}
		e.clock.Advance(2 * time.Second)
		wantStatus(t, decide(e.env, req.ID, "approve", "note", "The duplicate charge has been confirmed."), http.StatusOK)

		ev := rc.waitNotifications(t, 1)[0]
		got := getRequest(t, e.env, h.Credential, req.ID)
		if got.Decision == nil || got.Status != "approved" {
			t.Fatalf("request after approval: %+v", got)
		}
		body := wantNotification(t, ev, h.ID, req.ID, got.Decision.DecidedAt)
		for _, s := range []string{h.Credential, prov, "approved", "payment_123"} {
			if bytes.Contains(ev.Body, []byte(s)) || strings.Contains(fmt.Sprint(ev.Header), s) {
				t.Errorf("the notification carries %q", s)
			}
		}

		d := e.waitDelivered(t, body.ID)
		if d.Attempts != 1 || len(d.History) != 1 || d.History[0].StatusCode != http.StatusNoContent || d.History[0].URL != rc.URL() {
			t.Errorf("delivery %+v, want delivered in 1 attempt answered 204", d)
		}
		if d.Subject != req.ID || d.NextAttempt != nil || d.EndedAt == nil {
			t.Errorf("delivery %+v", d)
		}
		if !mustTime(t, d.DeadlineAt).Equal(mustTime(t, got.Decision.DecidedAt).Add(168 * time.Hour)) {
			t.Errorf("deadline_at %s, want decided_at + 168h", d.DeadlineAt)
		}

		// Reading and replaying create no further event.
		getRequest(t, e.env, h.Credential, req.ID)
		wantStatus(t, e.do("GET", "/v1/requests/"+req.ID+"?wait=5s", h.Credential, nil), http.StatusOK)
		operatorView(t, e.env, req.ID)
		rp := e.do("POST", "/v1/requests", h.Credential, refundBody(), "Idempotency-Key", key)
		wantStatus(t, rp, http.StatusOK)
		wantError(t, decide(e.env, req.ID, "deny"), http.StatusConflict, "already_terminal", "")
		wantError(t, e.do("DELETE", "/v1/requests/"+req.ID, h.Credential, nil), http.StatusConflict, "already_terminal", "")
		e.barrier(t, h)
		if ms := e.messagesFor(t, req.ID); len(ms) != 1 {
			t.Errorf("%d messages for the request, want 1", len(ms))
		}
		if n := len(rc.notificationsFor(body.ID)); n != 1 {
			t.Errorf("the receiver got the event %d times, want once", n)
		}
		if n := len(rc.notifications()); n != 2 {
			t.Errorf("the receiver got %d notifications, want 2 (the event and the barrier)", n)
		}
	})
}

// ---- 4. retries

func TestAsyncRetries(t *testing.T) {
	forEachAsyncBackend(t, func(t *testing.T, e *asyncEnv) {
		rc := newReceiver(t, e)
		rc.onNotify(act500, act204)
		prov, _ := provisionerToken(t, e.env, "default")
		h := e.provisionHooked(t, prov, rc)
		req := submit(t, e.env, h.Credential, refundBody())
		wantStatus(t, decide(e.env, req.ID, "approve"), http.StatusOK)
		decided := getRequest(t, e.env, h.Credential, req.ID).Decision.DecidedAt

		first := rc.waitNotifications(t, 1)[0]
		wantNotification(t, first, h.ID, req.ID, decided)
		d := e.waitAttempts(t, first.ID, 1)
		if d.State != "pending" || d.History[0].StatusCode != http.StatusInternalServerError || d.NextAttempt == nil {
			t.Fatalf("after a 500: %+v", d)
		}
		if next := mustTime(t, *d.NextAttempt); next.After(e.clock.Now().Add(asyncRetryMax)) || next.Before(e.clock.Now()) {
			t.Errorf("next_attempt_at %s outside [now, now+RetryMaxDelay]", *d.NextAttempt)
		}

		e.advance(asyncRetryMax)
		second := rc.waitNotifications(t, 2)[1]
		wantNotification(t, second, h.ID, req.ID, decided)
		if second.ID != first.ID || !bytes.Equal(second.Body, first.Body) {
			t.Errorf("the retry changed the event: %s %s vs %s %s", first.ID, first.Body, second.ID, second.Body)
		}
		if !second.Timestamp(t).Equal(first.Timestamp(t).Add(asyncRetryMax)) {
			t.Errorf("retry webhook-timestamp %s, want a fresh one (%s)", second.Timestamp(t), first.Timestamp(t).Add(asyncRetryMax))
		}
		if first.Header.Get(webhook.HeaderSignature) == second.Header.Get(webhook.HeaderSignature) {
			t.Error("the retry reused the first attempt's signature")
		}
		d = e.waitDelivered(t, first.ID)
		if d.Attempts != 2 || len(d.History) != 2 || d.History[0].StatusCode != 500 || d.History[1].StatusCode != 204 {
			t.Errorf("delivery %+v, want 2 attempts: 500 then 204", d)
		}
		if n := len(rc.notifications()); n != 2 {
			t.Errorf("%d notifications, want 2", n)
		}
	})
}

// TestAsyncRetryTransportFailures: a reset connection and an attempt that
// outlives the attempt timeout are failures that are retried, never with
// two attempts in flight.
func TestAsyncRetryTransportFailures(t *testing.T) {
	// The slow attempt ends at the attempt timeout, in real time: a short
	// one, not the 10s default.
	short := func(t *testing.T, b storetest.Backend) *asyncEnv {
		return setupAsyncServer(t, b, func(sc *server.Config) { sc.Delivery.AttemptTimeout = slowAttemptTimeout })
	}
	forEachBackendWith(t, short, func(t *testing.T, e *asyncEnv) {
		rc := newReceiver(t, e)
		rc.onNotify(actReset, actSlow, act204)
		prov, _ := provisionerToken(t, e.env, "default")
		h := e.provisionHooked(t, prov, rc)
		req := submit(t, e.env, h.Credential, refundBody())
		wantStatus(t, decide(e.env, req.ID, "deny"), http.StatusOK)

		first := rc.waitNotifications(t, 1)[0]
		d := e.waitAttempts(t, first.ID, 1)
		if d.State != "pending" || d.History[0].StatusCode != 0 || d.History[0].Error == "" {
			t.Fatalf("after a reset: %+v", d)
		}

		e.advance(asyncRetryMax)
		rc.waitNotifications(t, 2)
		// The attempt times out after slowAttemptTimeout (real time) and the
		// engine gives up the connection; only then may the clock move on.
		d = e.waitAttemptsWithin(t, first.ID, 2, 3*syncLimit)
		if d.State != "pending" || d.History[1].StatusCode != 0 || !strings.Contains(d.History[1].Error, "timed out") {
			t.Fatalf("after a slow attempt: %+v", d)
		}
		eventually(t, syncLimit, "the receiver to see the abandoned attempt end", func() bool { return rc.idle(first.ID) })

		e.advance(asyncRetryMax)
		third := rc.waitNotifications(t, 3)[2]
		if third.ID != first.ID || !bytes.Equal(third.Body, first.Body) {
			t.Errorf("the retry changed the event")
		}
		d = e.waitDelivered(t, first.ID)
		if d.Attempts != 3 || len(d.History) != 3 || d.History[2].StatusCode != 204 {
			t.Errorf("delivery %+v, want 3 attempts ending in 204", d)
		}
	})
}

// ---- 5. Retry-After

func TestAsyncRetryAfter(t *testing.T) {
	forEachAsyncBackend(t, func(t *testing.T, e *asyncEnv) {
		rc := newReceiver(t, e)
		prov, _ := provisionerToken(t, e.env, "default")
		h := e.provisionHooked(t, prov, rc)
		for _, act := range []action{act429, act503Date} {
			rc.onNotify(act)
			before := len(rc.notifications())
			req := submit(t, e.env, h.Credential, refundBody())
			wantStatus(t, decide(e.env, req.ID, "approve"), http.StatusOK)
			first := rc.waitNotifications(t, before+1)[before]
			d := e.waitAttempts(t, first.ID, 1)
			answered := e.clock.Now()
			if d.State != "pending" || d.NextAttempt == nil {
				t.Fatalf("%s: %+v", act, d)
			}
			if next := mustTime(t, *d.NextAttempt); next.Before(answered.Add(3 * time.Second)) {
				t.Errorf("%s: next_attempt_at %s is before Retry-After (%s): %+v", act, next, answered.Add(3*time.Second), d)
			}

			// Short of Retry-After, nothing is sent.
			e.advance(2 * time.Second)
			e.barrier(t, h)
			if d := e.deliveryByID(t, first.ID); d.Attempts != 1 {
				t.Errorf("%s: %d attempts before Retry-After elapsed, want 1", act, d.Attempts)
			}
			if n := len(rc.notificationsFor(first.ID)); n != 1 {
				t.Errorf("%s: the receiver got %d attempts before Retry-After elapsed", act, n)
			}

			e.advance(time.Second)
			eventually(t, syncLimit, "the retry after Retry-After", func() bool { return len(rc.notificationsFor(first.ID)) == 2 })
			retry := rc.notificationsFor(first.ID)[1]
			if retry.At.Before(answered.Add(3 * time.Second)) {
				t.Errorf("%s: retried at %s, before Retry-After", act, retry.At)
			}
			e.waitDelivered(t, first.ID)
		}

		// Retry-After cannot extend the retry window.
		rc.onNotify(act429Far)
		req := submit(t, e.env, h.Credential, refundBody())
		wantStatus(t, decide(e.env, req.ID, "approve"), http.StatusOK)
		var id string
		eventually(t, syncLimit, "the notification", func() bool {
			ms := e.messagesFor(t, req.ID)
			if len(ms) == 1 {
				id = ms[0].ID
			}
			return id != "" && len(rc.notificationsFor(id)) == 1
		})
		d := e.waitAttempts(t, id, 1)
		deadline := mustTime(t, d.DeadlineAt)
		if d.State == "pending" && (d.NextAttempt == nil || !mustTime(t, *d.NextAttempt).Before(deadline)) {
			t.Errorf("a far Retry-After scheduled a retry past the deadline: %+v", d)
		}
		e.advance(deadline.Sub(e.clock.Now()) + time.Second)
		d = e.waitDelivery(t, id, "to fail", func(d deliveryView) bool { return d.State == "failed" })
		for _, ev := range rc.notificationsFor(id) {
			if !ev.Timestamp(t).Before(deadline) {
				t.Errorf("an attempt was made at %s, past the deadline %s", ev.Timestamp(t), deadline)
			}
		}
	})
}

// ---- 6. every resolution notifies once; instance deletion does not

func TestAsyncResolutionsNotify(t *testing.T) {
	forEachAsyncBackend(t, func(t *testing.T, e *asyncEnv) {
		rc := newReceiver(t, e)
		prov, _ := provisionerToken(t, e.env, "default")
		h := e.provisionHooked(t, prov, rc)
		wantStatus(t, e.do("POST", "/api/v1/tenants/default/policies", e.operatorToken, map[string]any{
			"tool": "issue_refund", "condition": "arguments.amount <= 1000", "effect": "approve", "note": "small refund",
		}), http.StatusCreated)

		type outcome struct {
			what   string
			req    *wireRequest
			status string
		}
		var outcomes []outcome
		check := func(what, reqID, status string) {
			t.Helper()
			var ms []deliveryView
			eventually(t, syncLimit, what+" notification", func() bool {
				ms = e.messagesFor(t, reqID)
				return len(ms) == 1 && len(rc.notificationsFor(ms[0].ID)) == 1
			})
			got := getRequest(t, e.env, h.Credential, reqID)
			if got.Status != status || got.Decision == nil {
				t.Fatalf("%s: request %+v, want %s", what, got, status)
			}
			ev := rc.notificationsFor(ms[0].ID)[0]
			wantNotification(t, ev, h.ID, reqID, got.Decision.DecidedAt)
			e.waitDelivered(t, ms[0].ID)
			outcomes = append(outcomes, outcome{what, got, status})
		}

		// A policy decision at creation.
		small := refundBody()
		small["arguments"] = map[string]any{"payment_id": "payment_9", "amount": 500, "currency": "GBP"}
		byPolicy := submit(t, e.env, h.Credential, small)
		if byPolicy.Status != "approved" {
			t.Fatalf("policy did not decide at creation: %+v", byPolicy)
		}
		check("policy", byPolicy.ID, "approved")
		if byPolicy.Decision.DecidedAt != byPolicy.CreatedAt {
			t.Errorf("policy decision at %s, created %s", byPolicy.Decision.DecidedAt, byPolicy.CreatedAt)
		}

		// Expiry, recorded by the sweep and by a read.
		short := refundBody()
		short["timeout"] = "1m"
		swept := submit(t, e.env, h.Credential, short)
		read := submit(t, e.env, h.Credential, short)
		e.advance(61 * time.Second)
		if got := getRequest(t, e.env, h.Credential, read.ID); got.Status != "expired" {
			t.Fatalf("read past the deadline: %+v", got)
		}
		check("read expiry", read.ID, "expired")
		if n, err := e.approval.ExpireDue(context.Background()); err != nil || n != 1 {
			t.Fatalf("ExpireDue = %d, %v; want 1", n, err)
		}
		check("sweep expiry", swept.ID, "expired")
		for _, r := range []*wireRequest{swept, read} {
			if got := getRequest(t, e.env, h.Credential, r.ID); got.Decision.DecidedAt != r.DeadlineAt {
				t.Errorf("expiry decided_at %s, want deadline %s", got.Decision.DecidedAt, r.DeadlineAt)
			}
		}

		// Cancellation; cancelling again changes nothing.
		cancelled := submit(t, e.env, h.Credential, refundBody())
		wantStatus(t, e.do("DELETE", "/v1/requests/"+cancelled.ID, h.Credential, nil), http.StatusOK)
		check("cancellation", cancelled.ID, "cancelled")
		wantStatus(t, e.do("DELETE", "/v1/requests/"+cancelled.ID, h.Credential, nil), http.StatusOK)

		// Deleting an instance cancels its pending requests silently and ends
		// its outstanding deliveries.
		failing := newReceiver(t, e)
		failing.notifyAlways(act500)
		doomed := e.provisionHooked(t, prov, failing)
		decided := submit(t, e.env, doomed.Credential, refundBody())
		pending1 := submit(t, e.env, doomed.Credential, refundBody())
		pending2 := submit(t, e.env, doomed.Credential, refundBody())
		wantStatus(t, decide(e.env, decided.ID, "approve"), http.StatusOK)
		ev := failing.waitNotifications(t, 1)[0]
		e.waitAttempts(t, ev.ID, 1)
		wantStatus(t, e.do("DELETE", "/v1/instances/"+doomed.ID, prov, nil), http.StatusNoContent)
		for _, id := range []string{pending1.ID, pending2.ID} {
			if st := storedStatus(t, e.env, id); st != agentowl.StatusCancelled {
				t.Errorf("pending request of the deleted instance is %s, want cancelled", st)
			}
			if ms := e.messagesFor(t, id); len(ms) != 0 {
				t.Errorf("instance deletion recorded a notification: %+v", ms)
			}
		}
		if d := e.deliveryByID(t, ev.ID); d.State != "cancelled" || d.NextAttempt != nil {
			t.Errorf("outstanding delivery after instance deletion: %+v", d)
		}
		e.advance(asyncRetryMax)
		e.barrier(t, h)
		if n := len(failing.notifications()); n != 1 {
			t.Errorf("the deleted instance's receiver got %d notifications, want the 1 before deletion", n)
		}

		// Reads and replays of everything above created nothing more.
		for _, o := range outcomes {
			getRequest(t, e.env, h.Credential, o.req.ID)
			if ms := e.messagesFor(t, o.req.ID); len(ms) != 1 {
				t.Errorf("%s: %d messages, want 1", o.what, len(ms))
			}
		}
		for _, ev := range rc.notifications() {
			if ev.InstanceID != h.ID {
				t.Errorf("notification for instance %s at the live instance's receiver", ev.InstanceID)
			}
		}
	})
}

// ---- 7. replacing delivery while retries are queued

func TestAsyncReplaceDeliveryWhileFailing(t *testing.T) {
	forEachAsyncBackend(t, func(t *testing.T, e *asyncEnv) {
		a := newReceiver(t, e)
		a.notifyAlways(act500)
		prov, _ := provisionerToken(t, e.env, "default")
		h := e.provisionHooked(t, prov, a)
		req := submit(t, e.env, h.Credential, refundBody())
		wantStatus(t, decide(e.env, req.ID, "approve"), http.StatusOK)
		first := a.waitNotifications(t, 1)[0]
		before := e.waitAttempts(t, first.ID, 1)

		b := newReceiver(t, e)
		regB, secretB := b.register()
		patch := map[string]any{"instance_name": "moved", "delivery": b.input(regB, secretB)}
		key := newKey()

		// A failed replacement changes nothing: A stays the receiver.
		b.onVerify(actWrongChallenge)
		r := e.do("PATCH", "/v1/instances/"+h.ID, prov, patch, "Idempotency-Key", key)
		wantError(t, r, http.StatusUnprocessableEntity, "webhook_verification_failed", "")
		wantNoSecret(t, "failed PATCH", r.Body, secretB)
		g := e.do("GET", "/v1/instances/"+h.ID, prov, nil)
		var gi wireInstance
		decodeInto(t, g.Body, &gi)
		if gi.Name != h.Name {
			t.Errorf("a failed replacement renamed the instance to %q", gi.Name)
		}
		wantPublicDelivery(t, gi.Delivery, a.URL(), h.regID)
		e.advance(asyncRetryMax)
		a.waitNotifications(t, 2)
		e.waitAttempts(t, first.ID, 2)

		// Retrying the same update verifies again and commits.
		r = e.do("PATCH", "/v1/instances/"+h.ID, prov, patch, "Idempotency-Key", key)
		wantStatus(t, r, http.StatusOK)
		var pi wireInstance
		decodeInto(t, r.Body, &pi)
		wantPublicDelivery(t, pi.Delivery, b.URL(), regB)
		wantNoSecret(t, "PATCH", r.Body, secretB)
		if vs := b.verifications(); len(vs) != 2 || vs[1].InstanceID != h.ID || vs[1].RegistrationID != regB {
			t.Fatalf("B verifications: %d", len(vs))
		}

		e.advance(asyncRetryMax)
		moved := b.waitNotifications(t, 1)[0]
		wantNotification(t, moved, h.ID, req.ID, getRequest(t, e.env, h.Credential, req.ID).Decision.DecidedAt)
		if moved.ID != first.ID || !bytes.Equal(moved.Body, first.Body) {
			t.Errorf("the moved event differs: %s %s vs %s %s", moved.ID, moved.Body, first.ID, first.Body)
		}
		if moved.Secret != secretB || moved.SigErr != nil {
			t.Errorf("B could not verify the event with its secret: %v", moved.SigErr)
		}
		keyA, _ := webhook.ParseSecret(h.secret)
		if _, err := keyA.Verify(moved.Header, moved.Body, moved.At, webhook.DefaultTolerance); err == nil {
			t.Error("the event sent to B is signed with A's secret")
		}
		d := e.waitDelivered(t, first.ID)
		if len(d.History) != 3 || d.History[0].URL != a.URL() || d.History[1].URL != a.URL() || d.History[2].URL != b.URL() {
			t.Errorf("attempt history %+v, want A, A, B", d.History)
		}
		if d.DeadlineAt != before.DeadlineAt || d.CreatedAt != before.CreatedAt {
			t.Errorf("the replacement changed the retry deadline: %+v vs %+v", d, before)
		}
		if n := len(a.notifications()); n != 2 {
			t.Errorf("A got %d attempts, want the 2 before the replacement", n)
		}
	})
}

// ---- 8. removing delivery mid-retry

func TestAsyncRemoveDeliveryMidRetry(t *testing.T) {
	forEachAsyncBackend(t, func(t *testing.T, e *asyncEnv) {
		rc := newReceiver(t, e)
		rc.notifyAlways(act500)
		prov, _ := provisionerToken(t, e.env, "default")
		h := e.provisionHooked(t, prov, rc)
		other := e.provisionHooked(t, prov, newReceiver(t, e))
		req := submit(t, e.env, h.Credential, refundBody())
		later := submit(t, e.env, h.Credential, refundBody())
		wantStatus(t, decide(e.env, req.ID, "approve"), http.StatusOK)
		first := rc.waitNotifications(t, 1)[0]
		e.waitAttempts(t, first.ID, 1)

		r := e.do("PATCH", "/v1/instances/"+h.ID, prov, map[string]any{"delivery": nil}, "Idempotency-Key", newKey())
		wantStatus(t, r, http.StatusOK)
		var pi wireInstance
		decodeInto(t, r.Body, &pi)
		if pi.Delivery != nil {
			t.Errorf("delivery after removal: %s", r.Body)
		}
		if d := e.deliveryByID(t, first.ID); d.State != "cancelled" || d.NextAttempt != nil || d.EndedAt == nil {
			t.Errorf("pending message after removal: %+v", d)
		}
		e.advance(asyncRetryMax)
		e.barrier(t, other)
		if d := e.deliveryByID(t, first.ID); d.Attempts != 1 || d.State != "cancelled" {
			t.Errorf("message after removal: %+v", d)
		}

		// Later decisions of the instance notify nobody.
		wantStatus(t, decide(e.env, later.ID, "deny"), http.StatusOK)
		fresh := submit(t, e.env, h.Credential, refundBody())
		wantStatus(t, e.do("DELETE", "/v1/requests/"+fresh.ID, h.Credential, nil), http.StatusOK)
		for _, id := range []string{later.ID, fresh.ID} {
			if ms := e.messagesFor(t, id); len(ms) != 0 {
				t.Errorf("a decision without a receiver recorded %+v", ms)
			}
		}
		e.barrier(t, other)
		if n := len(rc.notifications()); n != 1 {
			t.Errorf("the removed receiver got %d notifications, want 1", n)
		}
	})
}

// ---- 9. the retry deadline

func TestAsyncRetryDeadline(t *testing.T) {
	forEachAsyncBackend(t, func(t *testing.T, e *asyncEnv) {
		rc := newReceiver(t, e)
		rc.notifyAlways(act500)
		prov, _ := provisionerToken(t, e.env, "default")
		h := e.provisionHooked(t, prov, rc)
		req := submit(t, e.env, h.Credential, refundBody())
		e.clock.Advance(90 * time.Second)
		wantStatus(t, decide(e.env, req.ID, "deny"), http.StatusOK)
		decidedAt := mustTime(t, getRequest(t, e.env, h.Credential, req.ID).Decision.DecidedAt)
		first := rc.waitNotifications(t, 1)[0]
		d := e.waitAttempts(t, first.ID, 1)
		deadline := mustTime(t, d.DeadlineAt)
		if !deadline.Equal(decidedAt.Add(168 * time.Hour)) {
			t.Errorf("deadline_at %s, want decided_at + 168h = %s", deadline, decidedAt.Add(168*time.Hour))
		}
		for n := 2; n <= 3; n++ {
			e.advance(asyncRetryMax)
			e.waitAttempts(t, first.ID, n)
		}
		if n := len(rc.notificationsFor(first.ID)); n != 3 {
			t.Fatalf("%d attempts arrived, want 3", n)
		}

		e.advance(deadline.Sub(e.clock.Now()) + time.Second)
		d = e.waitDelivery(t, first.ID, "to fail", func(d deliveryView) bool { return d.State == "failed" })
		if d.NextAttempt != nil || d.EndedAt == nil {
			t.Errorf("failed message %+v", d)
		}
		if fs := e.deliveries(t, "?state=failed"); len(fs) != 1 || fs[0].ID != first.ID {
			t.Errorf("failed deliveries: %+v", fs)
		}
		for _, ev := range rc.notificationsFor(first.ID) {
			if !ev.Timestamp(t).Before(deadline) {
				t.Errorf("an attempt started at %s, not before the deadline %s", ev.Timestamp(t), deadline)
			}
		}
		if n := len(rc.notificationsFor(first.ID)); n != 3 {
			t.Errorf("%d attempts arrived, want 3 (none past the deadline)", n)
		}
	})
}
