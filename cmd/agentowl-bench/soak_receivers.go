package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"time"

	"github.com/agentowl/agentowl/webhook"
)

// behaviour is how one of the soak's receivers answers. Each receiver has
// its own loopback address, so the engine's per-address limits keep the
// receivers apart as they would keep apart receivers on separate hosts.
type behaviour int

const (
	recvFast        behaviour = iota // answers at once
	recvSlow200                      // answers after 200 ms (recorder.slowDelay)
	recvSlow2s                       // answers after 2 s
	recvTimeout                      // first attempt of a message outlasts the server's attempt timeout
	recvUnavailable                  // first two attempts: 503 with Retry-After: 1
	recvRateLimited                  // first two attempts: 429 with Retry-After: 1
	recvFlapping                     // 200 and 500 in turn, across all messages
	recvCutoff                       // first attempt: the connection is closed mid-response
	numBehaviours
)

func (b behaviour) String() string {
	return [...]string{"fast", "slow200", "slow2s", "timeout", "unavailable", "ratelimited", "flapping", "cutoff"}[b]
}

// hangFor is how long the timeout receiver holds a first attempt: past the
// server's 10 s attempt timeout, which ends it sooner.
const hangFor = 15 * time.Second

// msgKind is the kind of outbound message a receiver path takes.
type msgKind int

const (
	msgNotification msgKind = iota // AAP request.resolved, to an instance's receiver
	msgHandoff                     // an event handed to an agent-work endpoint
	msgPush                        // an operator's decision pushed to the endpoint's decision URL
	numMsgKinds
)

func (k msgKind) String() string { return [...]string{"notification", "handoff", "push"}[k] }

// subject is what a message is about, the key that ties it to the call
// that caused it: a request ID, an event ID or a decision ID.
type subject struct {
	kind msgKind
	id   string
}

// route is what the bench registered for a receiver's URL path.
type route struct {
	kind   msgKind
	key    webhook.Key
	bearer string // decision pushes: the endpoint's decision secret
}

// attempt is one POST of a message, as its receiver answered it.
type attempt struct {
	at     time.Time // when it was answered
	status int       // 0: no answer (held past the server's timeout, or cut off)
}

// message is everything the receivers saw of one webhook-id.
type message struct {
	recv     behaviour
	subj     subject
	typ      string // the body's type
	sum      [32]byte
	begun    int
	inflight int
	overlaps []time.Time // an attempt began while another was in flight
	attempts []attempt
}

// acks returns the times of the message's 2xx answers.
func (m *message) acks() []time.Time {
	var out []time.Time
	for _, a := range m.attempts {
		if a.status >= 200 && a.status < 300 {
			out = append(out, a.at)
		}
	}
	return out
}

// recorder is the receivers' shared record: the routes the bench set up,
// every message by webhook-id, and every problem (a bad signature, a body
// that changed between attempts).
type recorder struct {
	done chan struct{} // closed at the end, to free held handlers
	// slowDelay is how long receiver slow200 takes to answer (200 ms
	// unless the stall benchmark's -delay says otherwise); set it before
	// the receivers start.
	slowDelay time.Duration

	mu       sync.Mutex
	routes   map[string]route // behaviour + path -> route
	byID     map[string]*message
	flaps    int
	problems []string
	// active and peak are, per receiver, the attempts it is answering now
	// and the most it has answered at once.
	active, peak [numBehaviours]int
}

func newRecorder() *recorder {
	return &recorder{done: make(chan struct{}), slowDelay: 200 * time.Millisecond, routes: map[string]route{}, byID: map[string]*message{}}
}

// addRoute registers a path of receiver b, signed with secret.
func (rc *recorder) addRoute(b behaviour, path string, kind msgKind, secret, bearer string) error {
	key, err := webhook.ParseSecret(secret)
	if err != nil {
		return fmt.Errorf("secret of %s%s: %w", b, path, err)
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.routes[b.String()+path] = route{kind: kind, key: key, bearer: bearer}
	return nil
}

func (rc *recorder) problem(format string, args ...any) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if len(rc.problems) < 1000 {
		rc.problems = append(rc.problems, fmt.Sprintf(format, args...))
	}
}

// begin records the start of an attempt and returns its number for the
// webhook-id (1-based) and the flapping counter.
func (rc *recorder) begin(b behaviour, id string, subj subject, typ string, body []byte) (n, flap int) {
	sum := sha256.Sum256(body)
	rc.mu.Lock()
	defer rc.mu.Unlock()
	m := rc.byID[id]
	if m == nil {
		m = &message{recv: b, subj: subj, typ: typ, sum: sum}
		rc.byID[id] = m
	} else if m.sum != sum || m.recv != b {
		rc.problems = append(rc.problems, fmt.Sprintf("%s %s: another body or receiver than its first attempt's", subj.kind, id))
	}
	if m.inflight > 0 {
		m.overlaps = append(m.overlaps, time.Now())
	}
	m.inflight++
	m.begun++
	rc.active[b]++
	rc.peak[b] = max(rc.peak[b], rc.active[b])
	if b == recvFlapping {
		rc.flaps++
	}
	return m.begun, rc.flaps
}

// end records the answer of an attempt begun with begin.
func (rc *recorder) end(b behaviour, id string, status int) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	m := rc.byID[id]
	m.inflight--
	rc.active[b]--
	m.attempts = append(m.attempts, attempt{at: time.Now(), status: status})
}

// snapshot returns a copy of the messages and the problems.
func (rc *recorder) snapshot() (map[string]message, []string) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	out := make(map[string]message, len(rc.byID))
	for id, m := range rc.byID {
		c := *m
		c.attempts = append([]attempt(nil), m.attempts...)
		c.overlaps = append([]time.Time(nil), m.overlaps...)
		out[id] = c
	}
	return out, append([]string(nil), rc.problems...)
}

// peakInFlight is the most attempts receiver b has answered at once.
func (rc *recorder) peakInFlight(b behaviour) int {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return rc.peak[b]
}

// acked returns, per subject, whether some message about it got a 2xx.
func (rc *recorder) acked() map[subject]bool {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	out := map[subject]bool{}
	for _, m := range rc.byID {
		for _, a := range m.attempts {
			if a.status >= 200 && a.status < 300 {
				out[m.subj] = true
				break
			}
		}
	}
	return out
}

// handler is receiver b: it checks the signature (and a push's bearer
// secret), answers verifications with their challenge, and answers
// messages as b does, recording every attempt.
func (rc *recorder) handler(b behaviour) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		rc.mu.Lock()
		rt, ok := rc.routes[b.String()+r.URL.Path]
		rc.mu.Unlock()
		if err != nil || !ok {
			rc.problem("%s: %s %s: unknown path or unreadable body (%v)", b, r.Method, r.URL.Path, err)
			w.WriteHeader(http.StatusNotFound)
			return
		}
		id := r.Header.Get(webhook.HeaderID)
		if _, err := rt.key.Verify(r.Header, body, time.Now(), webhook.DefaultTolerance); err != nil {
			rc.problem("%s %s %s: signature does not verify: %v", b, rt.kind, id, err)
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		var msg struct {
			ID         string `json:"id"`
			Type       string `json:"type"`
			Challenge  string `json:"challenge"`
			RequestID  string `json:"request_id"`
			DecisionID string `json:"decision_id"`
			Event      struct {
				ID string `json:"id"`
			} `json:"event"`
		}
		if err := json.Unmarshal(body, &msg); err != nil {
			rc.problem("%s %s %s: body is not JSON: %v", b, rt.kind, id, err)
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		if msg.Type == "webhook.verification" {
			// Registration is not a delivery under test: every receiver
			// answers it at once.
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(map[string]string{"challenge": msg.Challenge})
			return
		}
		subj := subject{kind: rt.kind}
		switch rt.kind {
		case msgNotification:
			subj.id = msg.Type + " " + msg.RequestID
		case msgHandoff:
			subj.id = msg.Event.ID
		case msgPush:
			subj.id = msg.DecisionID
			if r.Header.Get("Authorization") != "Bearer "+rt.bearer {
				rc.problem("%s push %s: wrong or missing decision bearer secret", b, id)
				w.WriteHeader(http.StatusUnauthorized)
				return
			}
		}
		if msg.ID != id && rt.kind != msgPush {
			rc.problem("%s %s: body id %q is not the webhook-id %q", b, rt.kind, msg.ID, id)
		}
		n, flap := rc.begin(b, id, subj, msg.Type, body)
		status := rc.answer(w, r, b, rt.kind, n, flap, msg.DecisionID)
		rc.end(b, id, status)
	}
}

// answer answers attempt n of a message as receiver b does and returns the
// status it gave, 0 for none.
func (rc *recorder) answer(w http.ResponseWriter, r *http.Request, b behaviour, kind msgKind, n, flap int, decisionID string) int {
	wait := func(d time.Duration) bool {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
			return true
		case <-r.Context().Done():
		case <-rc.done:
		}
		return false
	}
	status, retryAfter := http.StatusOK, ""
	switch {
	case b == recvSlow200 && !wait(rc.slowDelay), b == recvSlow2s && !wait(2*time.Second):
		return 0
	case b == recvTimeout && n == 1:
		if !wait(hangFor) {
			return 0
		}
		status = http.StatusServiceUnavailable // the server did not give up: not what is under test
	case b == recvUnavailable && n <= 2:
		status, retryAfter = http.StatusServiceUnavailable, "1"
	case b == recvRateLimited && n <= 2:
		status, retryAfter = http.StatusTooManyRequests, "1"
	case b == recvFlapping && flap%2 == 0:
		status = http.StatusInternalServerError
	case b == recvCutoff && n == 1:
		// A status line and half a header, then the connection closes: the
		// server cannot know whether it was a 2xx.
		if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
			_, _ = io.WriteString(conn, "HTTP/1.1 200 OK\r\nContent-Ty")
			_ = conn.Close()
		}
		return 0
	}
	if retryAfter != "" {
		w.Header().Set("Retry-After", retryAfter)
	}
	if kind == msgPush && status == http.StatusOK {
		// The only answer that records the runtime's receipt.
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(map[string]any{"accepted": true, "decision_id": decisionID})
		return status
	}
	w.WriteHeader(status)
	return status
}

// receiverSet is the running receivers, one per behaviour.
type receiverSet struct {
	rec  *recorder
	srvs [numBehaviours]*httptest.Server
}

// receiverIP is receiver b's own loopback address (127.0.0.2 onwards:
// 127.0.0.1 is the servers').
func receiverIP(b behaviour) net.IP { return net.IPv4(127, 0, 0, byte(2+b)) }

// startReceivers starts one HTTPS receiver per behaviour, each on its own
// loopback address, with cert.
func startReceivers(rec *recorder, cert tls.Certificate) (*receiverSet, error) {
	rs := &receiverSet{rec: rec}
	for b := range numBehaviours {
		ln, err := net.Listen("tcp", net.JoinHostPort(receiverIP(b).String(), "0"))
		if err != nil {
			rs.close()
			return nil, fmt.Errorf("receiver %s: %w", b, err)
		}
		srv := httptest.NewUnstartedServer(rec.handler(b))
		srv.Listener.Close()
		srv.Listener = ln
		srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
		// Cut connections and timed-out attempts are the point: not news.
		srv.Config.ErrorLog = log.New(io.Discard, "", 0)
		srv.StartTLS()
		rs.srvs[b] = srv
	}
	return rs, nil
}

// url is receiver b's base URL.
func (rs *receiverSet) url(b behaviour) string { return rs.srvs[b].URL }

func (rs *receiverSet) close() {
	select {
	case <-rs.rec.done:
	default:
		close(rs.rec.done)
	}
	for _, s := range rs.srvs {
		if s != nil {
			s.CloseClientConnections()
			s.Close()
		}
	}
}

// newLoopbackPKI makes a private root and one certificate, signed by it,
// for every receiver's address; it returns the root as PEM (the server's
// egress CA file) and the certificate.
func newLoopbackPKI() ([]byte, tls.Certificate, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, tls.Certificate{}, err
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "agentowl-bench soak root"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, tls.Certificate{}, err
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, tls.Certificate{}, err
	}
	leafKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, tls.Certificate{}, err
	}
	leafTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "agentowl-bench soak receivers"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	for b := range numBehaviours {
		leafTmpl.IPAddresses = append(leafTmpl.IPAddresses, receiverIP(b))
	}
	leafDER, err := x509.CreateCertificate(rand.Reader, leafTmpl, ca, &leafKey.PublicKey, caKey)
	if err != nil {
		return nil, tls.Certificate{}, err
	}
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})
	return caPEM, tls.Certificate{Certificate: [][]byte{leafDER}, PrivateKey: leafKey}, nil
}

// pathOf is the receiver path of tenant t's messages of kind k.
func pathOf(t int, k msgKind) string {
	return fmt.Sprintf("/t%d/%s", t, strings.ToLower(k.String()))
}
