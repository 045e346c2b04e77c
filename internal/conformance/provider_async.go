package conformance

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
)

// AsyncConfig enables the receiver-side checks of a provider: the kit
// listens on Listen and tells the provider its receiver is at PublicURL.
type AsyncConfig struct {
	// Listen is the local address of the kit's receiver (host:port).
	Listen string
	// Listener, if set, is used instead of Listen (tests).
	Listener net.Listener
	// PublicURL is the HTTPS URL the provider reaches that listener at
	// (through a TLS-terminating proxy, or the listener itself with TLS).
	// The kit appends /aap-conformance/<mailbox> to it.
	PublicURL string
	// TLS, if set, makes the listener serve HTTPS itself.
	TLS *tls.Config
	// DeliveryWait bounds the wait for a webhook (default 30s); set it
	// above the provider's first retry delay.
	DeliveryWait time.Duration
	// RetryAfter is the delay the kit asks for with 429 (default 3s).
	RetryAfter time.Duration
	// Quiet is how long the kit watches for traffic that must not come
	// (default 3s).
	Quiet time.Duration
}

// The asynchronous checks' IDs.
const (
	AVerificationSigned   = "provider.async.verification-signed"
	AVerificationRequired = "provider.async.verification-required"
	AUpdateUncommitted    = "provider.async.update-uncommitted"
	ANotification         = "provider.async.notification"
	ARetry                = "provider.async.retry"
	ARetryAfter           = "provider.async.retry-after"
	ANoRedirect           = "provider.async.no-redirect"
	AMoveQueued           = "provider.async.move-queued"
	ADeleteStops          = "provider.async.delete-stops"
	AUnsafeURL            = "provider.async.unsafe-url"
)

func (p *providerRun) asyncChecks() []Check {
	wrap := func(run func(ctx context.Context, t *T, rx *kitReceiver)) func(ctx context.Context, t *T) {
		return func(ctx context.Context, t *T) {
			if p.cfg.Async == nil {
				t.Skipf("needs the kit's receiver: pass --async-receiver-listen ADDR --async-public-url URL")
			}
			rx, err := p.receiver()
			if err != nil {
				t.Fatalf("the kit's receiver: %v", err)
			}
			run(ctx, t, rx)
		}
	}
	return []Check{
		{ID: AVerificationSigned, Requirement: "8_security.md Asynchronous 4", Title: "the verification message is signed over its exact body and well formed", Run: wrap(p.checkVerificationSigned)},
		{ID: AVerificationRequired, Requirement: "8_security.md Asynchronous 2", Title: "a receiver that fails the challenge leaves no instance; the secret is never returned", Run: wrap(p.checkVerificationRequired)},
		{ID: AUpdateUncommitted, Requirement: "8_security.md Asynchronous 2", Title: "a replacement receiver that fails verification changes nothing, name included", Run: wrap(p.checkUpdateUncommitted)},
		{ID: ANotification, Requirement: "8_security.md Asynchronous 3", Title: "a terminal request sends one signed request.resolved, created_at = decided_at", Run: wrap(p.checkNotification)},
		{ID: ARetry, Requirement: "8_security.md Asynchronous 5", Title: "a 5xx is retried, one attempt at a time, with the same id and body bytes", Run: wrap(p.checkRetry)},
		{ID: ARetryAfter, Requirement: "8_security.md Asynchronous 5", Title: "Retry-After on 429 is respected", Run: wrap(p.checkRetryAfter)},
		{ID: ANoRedirect, Requirement: "8_security.md Asynchronous 8", Title: "a redirect is a failed attempt, never followed", Run: wrap(p.checkNoRedirect)},
		{ID: AMoveQueued, Requirement: "8_security.md Asynchronous 6", Title: "queued notifications move to a verified replacement; completed ones are not replayed", Run: wrap(p.checkMoveQueued)},
		{ID: ADeleteStops, Requirement: "8_security.md Provider 11", Title: "deleting an instance stops its retries and sends no cancellation notifications", Run: wrap(p.checkDeleteStops)},
		{ID: AUnsafeURL, Requirement: "7_async.md Abuse Prevention", Title: "plain HTTP, userinfo, fragments and metadata addresses are refused as receivers", Run: wrap(p.checkUnsafeURL)},
	}
}

// arrival is one webhook the kit's receiver got.
type arrival struct {
	At     time.Time
	Header http.Header
	Body   []byte
	// Answered is the status the kit answered.
	Answered int
}

func (a arrival) typ() string {
	var e struct {
		Type string `json:"type"`
	}
	_ = json.Unmarshal(a.Body, &e)
	return e.Type
}

func (a arrival) field(name string) string {
	var m map[string]any
	_ = json.Unmarshal(a.Body, &m)
	s, _ := m[name].(string)
	return s
}

func (a arrival) evidence(url string) Evidence {
	return Evidence{Note: "webhook received by the kit at " + a.At.Format("15:04:05.000"),
		Request:  &Message{Method: http.MethodPost, URL: url, Headers: pick(a.Header), Body: clip(a.Body)},
		Response: &Message{Status: a.Answered}}
}

// answerFunc decides the kit's answer to one arrival; n counts the
// mailbox's arrivals of this message kind, from 0.
type answerFunc func(mb *mailbox, a *arrival, n int) (status int, header http.Header, body []byte)

// mailbox is one receiver URL of the kit with its registration.
type mailbox struct {
	URL, Secret, RegistrationID string
	key                         []byte
	answer                      answerFunc

	mu       sync.Mutex
	arrivals []arrival
	inflight int
	overlap  bool
	changed  chan struct{}
	counts   map[string]int
}

// kitReceiver is the kit's webhook listener, shared by the checks.
type kitReceiver struct {
	base string
	srv  *http.Server
	mu   sync.Mutex
	box  map[string]*mailbox
}

func (p *providerRun) receiver() (*kitReceiver, error) {
	p.rxOnce.Do(func() { p.rx, p.rxErr = startKitReceiver(p.cfg.Async, p.run) })
	return p.rx, p.rxErr
}

func startKitReceiver(cfg *AsyncConfig, run *Run) (*kitReceiver, error) {
	u, err := url.Parse(cfg.PublicURL)
	if err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") || u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("--async-public-url %q must be an https URL without query or fragment", cfg.PublicURL)
	}
	ln := cfg.Listener
	if ln == nil {
		if ln, err = net.Listen("tcp", cfg.Listen); err != nil {
			return nil, fmt.Errorf("--async-receiver-listen: %w", err)
		}
	}
	rx := &kitReceiver{base: strings.TrimRight(cfg.PublicURL, "/") + "/aap-conformance/", box: map[string]*mailbox{}}
	rx.srv = &http.Server{Handler: rx, ReadHeaderTimeout: 10 * time.Second}
	if cfg.TLS != nil {
		ln = tls.NewListener(ln, cfg.TLS)
	}
	go rx.srv.Serve(ln)
	run.Cleanup(func(ctx context.Context) { rx.srv.Shutdown(ctx) })
	return rx, nil
}

// newMailbox registers a receiver URL with a fresh registration ID and
// secret; answer nil is a correct receiver.
func (rx *kitReceiver) newMailbox(t *T, answer answerFunc) *mailbox {
	name := randHex(8)
	mb := &mailbox{URL: rx.base + name, Secret: newWebhookSecret(), RegistrationID: newUUID(), answer: answer,
		changed: make(chan struct{}), counts: map[string]int{}}
	mb.key, _ = secretKey(mb.Secret)
	t.Secret(mb.Secret, "signing-secret")
	rx.mu.Lock()
	rx.box[name] = mb
	rx.mu.Unlock()
	return mb
}

// correct is the answer of a correct receiver: the challenge of a
// verification for its registration, signed with its secret; 204 to a
// notification signed with its secret.
func correct(mb *mailbox, a *arrival, _ int) (int, http.Header, []byte) {
	if swVerify(mb.key, a.Header, a.Body, time.Now(), 5*time.Minute) != nil {
		return http.StatusUnauthorized, nil, nil
	}
	if a.typ() == "webhook.verification" {
		if a.field("registration_id") != mb.RegistrationID {
			return http.StatusForbidden, nil, nil
		}
		body, _ := json.Marshal(map[string]string{"challenge": a.field("challenge")})
		return http.StatusOK, http.Header{"Content-Type": {"application/json"}}, body
	}
	return http.StatusNoContent, nil, nil
}

func (rx *kitReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	i := strings.LastIndex(r.URL.Path, "/aap-conformance/")
	var mb *mailbox
	if i >= 0 {
		rx.mu.Lock()
		mb = rx.box[r.URL.Path[i+len("/aap-conformance/"):]]
		rx.mu.Unlock()
	}
	if mb == nil || r.Method != http.MethodPost {
		http.NotFound(w, r)
		return
	}
	body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	a := arrival{At: time.Now(), Header: r.Header.Clone(), Body: body}
	mb.mu.Lock()
	mb.inflight++
	if mb.inflight > 1 && a.typ() == "request.resolved" {
		mb.overlap = true
	}
	n := mb.counts[a.typ()]
	mb.counts[a.typ()]++
	mb.mu.Unlock()
	answer := mb.answer
	if answer == nil {
		answer = correct
	}
	status, header, out := answer(mb, &a, n)
	mb.mu.Lock()
	mb.inflight--
	a.Answered = status
	mb.arrivals = append(mb.arrivals, a)
	close(mb.changed)
	mb.changed = make(chan struct{})
	mb.mu.Unlock()
	for k, v := range header {
		w.Header()[k] = v
	}
	w.WriteHeader(status)
	w.Write(out)
}

// list returns the mailbox's arrivals of type typ ("" for all).
func (mb *mailbox) list(typ string) []arrival {
	mb.mu.Lock()
	defer mb.mu.Unlock()
	var out []arrival
	for _, a := range mb.arrivals {
		if typ == "" || a.typ() == typ {
			out = append(out, a)
		}
	}
	return out
}

// await waits until cond holds over the arrivals or limit passes.
func (mb *mailbox) await(ctx context.Context, limit time.Duration, cond func([]arrival) bool) bool {
	deadline := time.NewTimer(limit)
	defer deadline.Stop()
	for {
		mb.mu.Lock()
		snapshot := append([]arrival(nil), mb.arrivals...)
		ch := mb.changed
		mb.mu.Unlock()
		if cond(snapshot) {
			return true
		}
		select {
		case <-ch:
		case <-time.After(100 * time.Millisecond): // conditions may look at other mailboxes
		case <-deadline.C:
			return false
		case <-ctx.Done():
			return false
		}
	}
}

func countType(as []arrival, typ, id string) int {
	n := 0
	for _, a := range as {
		if a.typ() == typ && (id == "" || a.Header.Get("webhook-id") == id) {
			n++
		}
	}
	return n
}

func (p *providerRun) asyncCfg() AsyncConfig {
	c := *p.cfg.Async
	if c.DeliveryWait <= 0 {
		c.DeliveryWait = 30 * time.Second
	}
	if c.RetryAfter <= 0 {
		c.RetryAfter = 3 * time.Second
	}
	if c.Quiet <= 0 {
		c.Quiet = 3 * time.Second
	}
	return c
}

func deliveryOf(mb *mailbox) map[string]any {
	return map[string]any{"type": "webhook", "url": mb.URL, "registration_id": mb.RegistrationID, "signing_secret": mb.Secret}
}

// webhookInstance provisions an instance delivering to mb, or ends the
// check.
func (p *providerRun) webhookInstance(ctx context.Context, t *T, check string, mb *mailbox) *instance {
	name := "aap-conformance-" + check + "-" + randHex(3)
	body := map[string]any{"instance_name": name, "delivery": deliveryOf(mb)}
	key := newKey("instance")
	x := p.api.call(ctx, t, check, http.MethodPost, "/v1/instances", p.cfg.ProvisionerToken, body, "Idempotency-Key", key)
	inst, err := parseProvisioned(x)
	if err != nil {
		t.Fatalf("cannot provision an instance with the kit's receiver %s: %v", mb.URL, err)
	}
	inst.Key, inst.body = key, body
	t.Secret(inst.Token, "instance-credential")
	p.run.Cleanup(func(ctx context.Context) {
		p.api.call(ctx, &T{run: p.run}, "cleanup", http.MethodDelete, "/v1/instances/"+url.PathEscape(inst.ID), p.cfg.ProvisionerToken, nil)
	})
	return inst
}

// resolve creates a request and cancels it (no person needed), and
// returns the cancelled request.
func (p *providerRun) resolve(ctx context.Context, t *T, check string, inst *instance) *reqView {
	v, _, _ := p.pending(ctx, t, check, inst, "30m")
	return expectRequest(t, p.cancel(ctx, t, check, inst, v.ID), "cancel the request (a terminal outcome without a person)", http.StatusOK)
}

// eventFor returns the request.resolved arrivals about requestID.
func eventFor(mb *mailbox, requestID string) []arrival {
	var out []arrival
	for _, a := range mb.list("request.resolved") {
		if a.field("request_id") == requestID {
			out = append(out, a)
		}
	}
	return out
}

func (p *providerRun) awaitEvent(ctx context.Context, t *T, mb *mailbox, requestID string, n int) []arrival {
	wait := p.asyncCfg().DeliveryWait
	if !mb.await(ctx, wait, func([]arrival) bool { return len(eventFor(mb, requestID)) >= n }) {
		for _, a := range mb.list("") {
			t.add(a.evidence(mb.URL))
		}
		t.Fatalf("within %s, the kit's receiver got %d request.resolved for request %s, expected at least %d", wait, len(eventFor(mb, requestID)), requestID, n)
	}
	return eventFor(mb, requestID)
}

func (p *providerRun) checkVerificationSigned(ctx context.Context, t *T, rx *kitReceiver) {
	id := AVerificationSigned
	mb := rx.newMailbox(t, nil)
	inst := p.webhookInstance(ctx, t, id, mb)
	vs := mb.list("webhook.verification")
	if len(vs) != 1 {
		t.Fatalf("the receiver got %d verification messages for one creation, expected exactly 1", len(vs))
	}
	v := vs[0]
	t.add(v.evidence(mb.URL))
	if ct := v.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Failf("Content-Type is %q, not application/json", ct)
	}
	if err := swVerify(mb.key, v.Header, v.Body, time.Now(), 5*time.Minute); err != nil {
		t.Failf("verification message: %v", err)
	}
	if v.Header.Get("webhook-id") != v.field("id") {
		t.Failf("webhook-id %q differs from the body's id %q", v.Header.Get("webhook-id"), v.field("id"))
	}
	if v.field("registration_id") != mb.RegistrationID {
		t.Failf("registration_id %q is not the proposed %q", v.field("registration_id"), mb.RegistrationID)
	}
	if v.field("instance_id") != inst.ID {
		t.Failf("the verification proposed instance %q, the instance created is %q", v.field("instance_id"), inst.ID)
	}
	if bytes.Contains(v.Body, []byte(inst.Token)) || bytes.Contains(v.Body, []byte(p.cfg.ProvisionerToken)) {
		t.Failf("the verification message carries a credential")
	}
	if c := p.cfg.Contract; c != nil {
		if err := c.ValidateSchema("WebhookVerification", v.Body); err != nil {
			t.Failf("the verification message violates WebhookVerification: %s", shortError(err))
		}
	}
}

func (p *providerRun) checkVerificationRequired(ctx context.Context, t *T, rx *kitReceiver) {
	id := AVerificationRequired
	// The first verification gets a bare 200; the second is answered
	// correctly.
	mb := rx.newMailbox(t, func(mb *mailbox, a *arrival, n int) (int, http.Header, []byte) {
		if a.typ() == "webhook.verification" && n == 0 {
			return http.StatusOK, http.Header{"Content-Type": {"application/json"}}, []byte(`{}`)
		}
		return correct(mb, a, n)
	})
	body := map[string]any{"instance_name": "aap-conformance-" + id + "-" + randHex(3), "delivery": deliveryOf(mb)}
	key := newKey(id)
	x := p.api.call(ctx, t, id, http.MethodPost, "/v1/instances", p.cfg.ProvisionerToken, body, "Idempotency-Key", key)
	expectError(t, x, "provision with a receiver that answers a bare 200", "webhook_verification_failed", http.StatusUnprocessableEntity)
	if bytes.Contains(x.RespBody, []byte(mb.Secret)) {
		t.Failf("the answer returns the signing secret")
	}
	if x.Status < 300 {
		if inst, err := parseProvisioned(x); err == nil {
			p.run.Cleanup(func(ctx context.Context) {
				p.api.call(ctx, &T{run: p.run}, "cleanup", http.MethodDelete, "/v1/instances/"+inst.ID, p.cfg.ProvisionerToken, nil)
			})
			t.Fatalf("the instance %s was created although its receiver failed verification", inst.ID)
		}
	}
	failed := mb.list("webhook.verification")
	if len(failed) != 1 {
		t.Failf("one creation attempt sent %d verification messages, expected exactly 1", len(failed))
	}
	// Nothing was committed: the same key and input verify again and
	// create the instance now.
	x = p.api.call(ctx, t, id, http.MethodPost, "/v1/instances", p.cfg.ProvisionerToken, body, "Idempotency-Key", key)
	inst, err := parseProvisioned(x)
	if err != nil {
		t.Fatalf("retrying the same submission with a receiver that now answers: %v", err)
	}
	p.run.Cleanup(func(ctx context.Context) {
		p.api.call(ctx, &T{run: p.run}, "cleanup", http.MethodDelete, "/v1/instances/"+inst.ID, p.cfg.ProvisionerToken, nil)
	})
	t.Secret(inst.Token, "instance-credential")
	if x.Status != http.StatusCreated {
		t.Failf("the retry after a failed verification answered %d, not 201: the failed attempt was committed", x.Status)
	}
	all := mb.list("webhook.verification")
	if len(all) != 2 {
		t.Failf("the retry sent %d verification messages in all, expected 2 (one per attempt)", len(all))
	} else if all[0].field("challenge") == all[1].field("challenge") {
		t.Failf("two verification attempts used the same challenge %q (it must be fresh per attempt)", all[0].field("challenge"))
	}
	if bytes.Contains(x.RespBody, []byte(mb.Secret)) {
		t.Failf("the creation answer returns the signing secret")
	}
	g := p.getInstance(ctx, t, id, inst.ID)
	if bytes.Contains(g.RespBody, []byte(mb.Secret)) {
		t.Failf("an instance read returns the signing secret")
	}
	var got struct {
		Delivery *struct {
			Type, URL      string
			RegistrationID string `json:"registration_id"`
		} `json:"delivery"`
	}
	_ = json.Unmarshal(g.RespBody, &got)
	if got.Delivery == nil || got.Delivery.URL != mb.URL || got.Delivery.RegistrationID != mb.RegistrationID || got.Delivery.Type != "webhook" {
		t.Failf("the instance read does not show the verified delivery (type, url, registration_id): %s", g.Describe())
	}
}

func (p *providerRun) checkUpdateUncommitted(ctx context.Context, t *T, rx *kitReceiver) {
	id := AUpdateUncommitted
	mb1 := rx.newMailbox(t, nil)
	inst := p.webhookInstance(ctx, t, id, mb1)
	mb2 := rx.newMailbox(t, func(mb *mailbox, a *arrival, n int) (int, http.Header, []byte) {
		return http.StatusOK, http.Header{"Content-Type": {"application/json"}}, []byte(`{"challenge":"` + newUUID() + `"}`)
	})
	x := p.patchInstance(ctx, t, id, inst.ID, newKey(id), map[string]any{"instance_name": inst.Name + "-moved", "delivery": deliveryOf(mb2)})
	expectError(t, x, "replace the receiver with one answering a wrong challenge", "webhook_verification_failed", http.StatusUnprocessableEntity)
	if n := len(mb2.list("webhook.verification")); n != 1 {
		t.Failf("the replacement got %d verification messages, expected 1", n)
	}
	g := p.getInstance(ctx, t, id, inst.ID)
	var got struct {
		Name     string
		Delivery *struct{ URL string }
	}
	_ = json.Unmarshal(g.RespBody, &got)
	if got.Name != inst.Name {
		t.Failf("after the failed update the instance is named %q, not %q", got.Name, inst.Name)
	}
	if got.Delivery == nil || got.Delivery.URL != mb1.URL {
		t.Failf("after the failed update the delivery is %+v, not the original %s", got.Delivery, mb1.URL)
	}
	// The old receiver still gets notifications.
	r := p.resolve(ctx, t, id, inst)
	p.awaitEvent(ctx, t, mb1, r.ID, 1)
	if n := len(eventFor(mb2, r.ID)); n > 0 {
		t.Failf("the receiver that failed verification got %d notifications", n)
	}
}

func (p *providerRun) checkNotification(ctx context.Context, t *T, rx *kitReceiver) {
	id := ANotification
	mb := rx.newMailbox(t, nil)
	inst := p.webhookInstance(ctx, t, id, mb)
	r := p.resolve(ctx, t, id, inst)
	evs := p.awaitEvent(ctx, t, mb, r.ID, 1)
	e := evs[0]
	t.add(e.evidence(mb.URL))
	if ct := e.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Failf("Content-Type is %q, not application/json", ct)
	}
	if err := swVerify(mb.key, e.Header, e.Body, time.Now(), 5*time.Minute); err != nil {
		t.Failf("notification: %v", err)
	}
	if e.Header.Get("webhook-id") != e.field("id") {
		t.Failf("webhook-id %q differs from the body's id %q", e.Header.Get("webhook-id"), e.field("id"))
	}
	if e.field("instance_id") != inst.ID {
		t.Failf("instance_id %q is not the instance %q", e.field("instance_id"), inst.ID)
	}
	if ca, err := time.Parse(time.RFC3339Nano, e.field("created_at")); err != nil || r.Decision == nil || !ca.Equal(r.Decision.DecidedAt) {
		t.Failf("created_at %q does not equal the decision's decided_at %v", e.field("created_at"), r.Decision)
	}
	if h := e.Header.Get("Authorization"); h != "" || bytes.Contains(e.Body, []byte(inst.Token)) {
		t.Failf("the notification carries a credential")
	}
	if c := p.cfg.Contract; c != nil {
		if err := c.ValidateSchema("RequestResolvedEvent", e.Body); err != nil {
			t.Failf("the notification violates RequestResolvedEvent: %s", shortError(err))
		}
	}
	// Reads and replays create no more events; the acknowledged one is
	// not sent again.
	p.get(ctx, t, id, inst, r.ID, "")
	mb.await(ctx, p.asyncCfg().Quiet, func([]arrival) bool { return len(eventFor(mb, r.ID)) > 1 })
	if n := len(eventFor(mb, r.ID)); n != 1 {
		for _, a := range eventFor(mb, r.ID)[1:] {
			t.add(a.evidence(mb.URL))
		}
		t.Failf("one terminal request sent %d notifications (acknowledged with 204)", n)
	}
}

func (p *providerRun) checkRetry(ctx context.Context, t *T, rx *kitReceiver) {
	id := ARetry
	mb := rx.newMailbox(t, func(mb *mailbox, a *arrival, n int) (int, http.Header, []byte) {
		if a.typ() == "request.resolved" && n < 2 {
			time.Sleep(200 * time.Millisecond) // an overlapping attempt would be seen
			return http.StatusInternalServerError, nil, nil
		}
		return correct(mb, a, n)
	})
	inst := p.webhookInstance(ctx, t, id, mb)
	r := p.resolve(ctx, t, id, inst)
	evs := p.awaitEvent(ctx, t, mb, r.ID, 3)
	for _, e := range evs[:3] {
		t.add(e.evidence(mb.URL))
		if err := swVerify(mb.key, e.Header, e.Body, time.Now(), 5*time.Minute); err != nil {
			t.Failf("attempt at %s: %v", e.At.Format("15:04:05.000"), err)
		}
	}
	for i := 1; i < 3; i++ {
		if evs[i].Header.Get("webhook-id") != evs[0].Header.Get("webhook-id") {
			t.Failf("retry %d changed webhook-id from %s to %s", i, evs[0].Header.Get("webhook-id"), evs[i].Header.Get("webhook-id"))
		}
		if !bytes.Equal(evs[i].Body, evs[0].Body) {
			t.Failf("retry %d changed the body bytes", i)
		}
		t1, _ := strconv.ParseInt(evs[i].Header.Get("webhook-timestamp"), 10, 64)
		t0, _ := strconv.ParseInt(evs[i-1].Header.Get("webhook-timestamp"), 10, 64)
		if t1 < t0 {
			t.Failf("retry %d has an older webhook-timestamp than the attempt before it", i)
		}
	}
	mb.mu.Lock()
	overlap := mb.overlap
	mb.mu.Unlock()
	if overlap {
		t.Failf("two attempts of the notification were in flight at once (at most one outstanding attempt per event)")
	}
}

func (p *providerRun) checkRetryAfter(ctx context.Context, t *T, rx *kitReceiver) {
	id := ARetryAfter
	after := p.asyncCfg().RetryAfter
	var answeredAt time.Time
	var mu sync.Mutex
	mb := rx.newMailbox(t, func(mb *mailbox, a *arrival, n int) (int, http.Header, []byte) {
		if a.typ() == "request.resolved" && n == 0 {
			mu.Lock()
			answeredAt = time.Now()
			mu.Unlock()
			return http.StatusTooManyRequests, http.Header{"Retry-After": {strconv.Itoa(int(after / time.Second))}}, nil
		}
		return correct(mb, a, n)
	})
	inst := p.webhookInstance(ctx, t, id, mb)
	r := p.resolve(ctx, t, id, inst)
	evs := p.awaitEvent(ctx, t, mb, r.ID, 2)
	mu.Lock()
	gap := evs[1].At.Sub(answeredAt)
	mu.Unlock()
	t.add(evs[0].evidence(mb.URL))
	t.add(evs[1].evidence(mb.URL))
	if gap < after-100*time.Millisecond {
		t.Failf("the kit answered 429 with Retry-After: %d; the next attempt came %s later", int(after/time.Second), gap.Round(time.Millisecond))
	}
}

func (p *providerRun) checkNoRedirect(ctx context.Context, t *T, rx *kitReceiver) {
	id := ANoRedirect
	trap := rx.newMailbox(t, nil)
	mb := rx.newMailbox(t, func(mb *mailbox, a *arrival, n int) (int, http.Header, []byte) {
		if a.typ() == "request.resolved" && n == 0 {
			return http.StatusTemporaryRedirect, http.Header{"Location": {trap.URL}}, nil
		}
		return correct(mb, a, n)
	})
	inst := p.webhookInstance(ctx, t, id, mb)
	r := p.resolve(ctx, t, id, inst)
	// Until the provider retries at the original URL, or goes to the trap.
	mb.await(ctx, p.asyncCfg().DeliveryWait, func([]arrival) bool { return len(eventFor(mb, r.ID)) >= 2 || len(trap.list("")) > 0 })
	if got := trap.list(""); len(got) > 0 {
		for _, a := range got {
			t.add(a.evidence(trap.URL))
		}
		t.Failf("the provider followed a 307 redirect to %s", trap.URL)
	} else if len(eventFor(mb, r.ID)) < 2 {
		t.Failf("after a 307, the notification was not attempted again at its URL within %s (a redirect is a failed attempt)", p.asyncCfg().DeliveryWait)
	}
}

func (p *providerRun) checkMoveQueued(ctx context.Context, t *T, rx *kitReceiver) {
	id := AMoveQueued
	var failing sync.Map // request IDs the first receiver refuses
	mb1 := rx.newMailbox(t, func(mb *mailbox, a *arrival, n int) (int, http.Header, []byte) {
		if _, bad := failing.Load(a.field("request_id")); bad {
			return http.StatusServiceUnavailable, nil, nil
		}
		return correct(mb, a, n)
	})
	inst := p.webhookInstance(ctx, t, id, mb1)
	done := p.resolve(ctx, t, id, inst)
	p.awaitEvent(ctx, t, mb1, done.ID, 1)
	q, _, _ := p.pending(ctx, t, id, inst, "30m")
	failing.Store(q.ID, true)
	expectRequest(t, p.cancel(ctx, t, id, inst, q.ID), "cancel a second request (its notification is refused)", http.StatusOK)
	first := p.awaitEvent(ctx, t, mb1, q.ID, 1)[0]
	mb2 := rx.newMailbox(t, nil)
	x := p.patchInstance(ctx, t, id, inst.ID, newKey(id), map[string]any{"delivery": deliveryOf(mb2)})
	if x.Err != nil || x.Status != http.StatusOK {
		t.Fatalf("replace the receiver: %s", x.Describe())
	}
	moved := p.awaitEvent(ctx, t, mb2, q.ID, 1)[0]
	t.add(first.evidence(mb1.URL))
	t.add(moved.evidence(mb2.URL))
	if moved.Header.Get("webhook-id") != first.Header.Get("webhook-id") || !bytes.Equal(moved.Body, first.Body) {
		t.Failf("the moved notification has another id or body than the queued one")
	}
	if err := swVerify(mb2.key, moved.Header, moved.Body, time.Now(), 5*time.Minute); err != nil {
		t.Failf("the moved notification is not signed with the replacement's secret: %v", err)
	}
	mb2.await(ctx, p.asyncCfg().Quiet, func([]arrival) bool { return len(eventFor(mb2, done.ID)) > 0 })
	if n := len(eventFor(mb2, done.ID)); n > 0 {
		t.Failf("the replacement receiver got the already acknowledged notification of request %s again (%d times)", done.ID, n)
	}
}

func (p *providerRun) checkDeleteStops(ctx context.Context, t *T, rx *kitReceiver) {
	id := ADeleteStops
	mb := rx.newMailbox(t, func(mb *mailbox, a *arrival, n int) (int, http.Header, []byte) {
		if a.typ() == "request.resolved" {
			return http.StatusServiceUnavailable, nil, nil
		}
		return correct(mb, a, n)
	})
	inst := p.webhookInstance(ctx, t, id, mb)
	r := p.resolve(ctx, t, id, inst)
	p.awaitEvent(ctx, t, mb, r.ID, 1)
	pend, _, _ := p.pending(ctx, t, id, inst, "30m")
	x := p.api.call(ctx, t, id, http.MethodDelete, "/v1/instances/"+url.PathEscape(inst.ID), p.cfg.ProvisionerToken, nil)
	if x.Err != nil || x.Status != http.StatusNoContent {
		t.Fatalf("delete the instance: %s", x.Describe())
	}
	deleted := time.Now()
	// An attempt already in flight may still arrive; give it a second.
	quiet := p.asyncCfg().Quiet
	mb.await(ctx, quiet+time.Second, func([]arrival) bool { return false })
	for _, a := range mb.list("request.resolved") {
		if a.At.After(deleted.Add(time.Second)) {
			t.add(a.evidence(mb.URL))
			if a.field("request_id") == pend.ID {
				t.Failf("the deletion's cancellation of pending request %s sent a notification", pend.ID)
			} else {
				t.Failf("delivery of request %s's notification went on after the instance was deleted", a.field("request_id"))
			}
		}
	}
}

func (p *providerRun) checkUnsafeURL(ctx context.Context, t *T, rx *kitReceiver) {
	id := AUnsafeURL
	cases := []struct{ what, url string }{
		{"plain HTTP", "http://receiver.example.com/aap/events"},
		{"userinfo", "https://user:password@receiver.example.com/aap/events"},
		{"a fragment", "https://receiver.example.com/aap/events#frag"},
		{"the cloud metadata address", "https://169.254.169.254/latest/meta-data"},
	}
	for _, c := range cases {
		mb := &mailbox{URL: c.url, Secret: newWebhookSecret(), RegistrationID: newUUID()}
		t.Secret(mb.Secret, "signing-secret")
		x := p.api.call(ctx, t, id, http.MethodPost, "/v1/instances", p.cfg.ProvisionerToken,
			map[string]any{"instance_name": "aap-conformance-unsafe", "delivery": deliveryOf(mb)}, "Idempotency-Key", newKey(id))
		if x.Err != nil {
			t.Failf("a receiver URL with %s: %v", c.what, x.Err)
			continue
		}
		switch {
		case x.Status == http.StatusBadRequest && x.ErrorCode() == "invalid_webhook_url":
		case x.Status == http.StatusBadRequest && c.what == "the cloud metadata address":
		case x.Status == http.StatusUnprocessableEntity && c.what == "the cloud metadata address":
		default:
			if inst, err := parseProvisioned(x); err == nil {
				p.run.Cleanup(func(ctx context.Context) {
					p.api.call(ctx, &T{run: p.run}, "cleanup", http.MethodDelete, "/v1/instances/"+inst.ID, p.cfg.ProvisionerToken, nil)
				})
			}
			t.Failf("a receiver URL with %s (%s): expected 400 invalid_webhook_url, got %s", c.what, c.url, x.Describe())
		}
	}
}
