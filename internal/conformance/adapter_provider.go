package conformance

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"time"
)

// script is what the kit's provider answers in one adapter check.
type script struct {
	// unavailable is how many creations are answered 503 with
	// Retry-After before one is accepted.
	unavailable int
	// retryAfter is the Retry-After of those answers, in seconds.
	retryAfter int
	// immediate decides the request at creation (approved); "" leaves it
	// pending.
	immediate string
	// decide is the outcome the first long poll (after any cut) records:
	// approved, denied, expired or cancelled; "" holds every poll pending.
	decide string
	// note is the decision's note.
	note string
	// staleApproval makes an approval's expires_at already past.
	staleApproval bool
	// cutPolls is how many reads of a pending request are cut (the
	// connection closed without an answer) before one is answered.
	cutPolls int

	// The asynchronous checks' script (adapter_async.go): in them decide
	// is recorded, and notified, once the adapter has suspended.
	//
	// earlyApproval approves the request and notifies the receiver before
	// the creation answer (which still says pending) is sent.
	earlyApproval bool
	// failReads is how many reads after the decision are answered 503.
	failReads int
	// abandonRace answers a cancellation with 409: an approval was
	// recorded just before it.
	abandonRace bool
}

// seen is one HTTP request the kit's provider received.
type seen struct {
	at     time.Time
	method string
	path   string // with the query
	auth   string
	key    string // Idempotency-Key
	body   []byte
	status int // 0: the connection was cut
	// sent marks a message the kit sent (a notification to the adapter's
	// receiving service, at url) rather than one it received.
	sent bool
	url  string
}

// scriptedRequest is a request the kit's provider holds.
type scriptedRequest struct {
	id, key          string
	body             []byte // the creation body as received
	call             map[string]json.RawMessage
	status           string
	created, decided time.Time
	deadline         time.Time
	expires          *time.Time
	note             string
	changed          chan struct{} // closed and replaced on every change
	read             chan struct{} // closed (and nil) at the first read
}

// scriptedProvider is the kit's own AAP provider for adapter checks: the
// /v1 request routes an adapter uses (create, read with long poll,
// cancel), answering as the check's script says and recording every
// request it receives.
type scriptedProvider struct {
	token  string
	script script
	// onPoll, if set, is called (once) when the first read of a pending
	// request arrives: the adapter is waiting.
	onPoll func()

	// async, if set, delivers the request.resolved notifications of
	// decisions to the adapter's receiving service.
	async *asyncDelivery

	mu       sync.Mutex
	seen     []seen
	requests map[string]*scriptedRequest
	byKey    map[string]*scriptedRequest
	cuts     int
	polled   bool
}

func newScriptedProvider(token string, s script) *scriptedProvider {
	return &scriptedProvider{token: token, script: s, requests: map[string]*scriptedRequest{}, byKey: map[string]*scriptedRequest{}}
}

// start serves p on a loopback port until ctx ends; it returns the base URL.
func (p *scriptedProvider) start(ctx context.Context) (string, func(), error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	srv := &http.Server{Handler: p, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	stop := func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		defer cancel()
		if srv.Shutdown(sctx) != nil {
			srv.Close()
		}
	}
	return "http://" + ln.Addr().String(), stop, nil
}

// log returns a copy of what the provider received.
func (p *scriptedProvider) log() []seen {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]seen(nil), p.seen...)
}

// creations returns the received POST /v1/requests.
func (p *scriptedProvider) creations() []seen {
	var out []seen
	for _, s := range p.log() {
		if s.method == http.MethodPost && s.path == "/v1/requests" {
			out = append(out, s)
		}
	}
	return out
}

// created returns the requests the provider created.
func (p *scriptedProvider) created() []*scriptedRequest {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]*scriptedRequest, 0, len(p.requests))
	for _, r := range p.requests {
		out = append(out, r)
	}
	return out
}

func (p *scriptedProvider) record(r *http.Request, body []byte, status int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.seen = append(p.seen, seen{at: time.Now(), method: r.Method, path: r.URL.RequestURI(), auth: r.Header.Get("Authorization"),
		key: r.Header.Get("Idempotency-Key"), body: body, status: status})
}

func writeAPIError(w http.ResponseWriter, status int, typ, code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Request-ID", newUUID())
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]any{"error": map[string]string{"type": typ, "code": code, "message": msg}})
}

func (p *scriptedProvider) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(io.LimitReader(r.Body, maxBody))
	status := p.serve(w, r, body)
	p.record(r, body, status)
}

// serve answers r and returns the status it answered (0: cut).
func (p *scriptedProvider) serve(w http.ResponseWriter, r *http.Request, body []byte) int {
	if r.Header.Get("Authorization") != "Bearer "+p.token {
		writeAPIError(w, 401, "authentication_error", "invalid_credential", "missing or invalid instance credential")
		return 401
	}
	switch {
	case r.URL.Path == "/v1/requests" && r.Method == http.MethodPost:
		return p.create(w, r, body)
	case strings.HasPrefix(r.URL.Path, "/v1/requests/") && !strings.Contains(r.URL.Path[len("/v1/requests/"):], "/"):
		id := r.URL.Path[len("/v1/requests/"):]
		p.mu.Lock()
		req := p.requests[id]
		p.mu.Unlock()
		if req == nil {
			writeAPIError(w, 404, "not_found_error", "not_found", "no such request")
			return 404
		}
		switch r.Method {
		case http.MethodGet:
			return p.get(w, r, req)
		case http.MethodDelete:
			return p.cancel(w, req)
		}
	}
	writeAPIError(w, 404, "not_found_error", "not_found", "not a route of the conformance kit's provider")
	return 404
}

func (p *scriptedProvider) create(w http.ResponseWriter, r *http.Request, body []byte) int {
	key := r.Header.Get("Idempotency-Key")
	if key == "" {
		writeAPIError(w, 400, "invalid_request_error", "missing_idempotency_key", "Idempotency-Key is required")
		return 400
	}
	var call map[string]json.RawMessage
	if err := json.Unmarshal(body, &call); err != nil || call["tool"] == nil || call["arguments"] == nil || call["timeout"] == nil {
		writeAPIError(w, 400, "invalid_request_error", "invalid_request", "tool, arguments and timeout are required")
		return 400
	}
	p.mu.Lock()
	if p.script.unavailable > 0 {
		p.script.unavailable--
		p.mu.Unlock()
		w.Header().Set("Retry-After", strconv.Itoa(max(p.script.retryAfter, 1)))
		writeAPIError(w, 503, "api_error", "unavailable", "the provider is briefly unavailable")
		return 503
	}
	if old := p.byKey[key]; old != nil {
		p.mu.Unlock()
		if !sameJSONBytes(old.body, body) {
			writeAPIError(w, 409, "invalid_request_error", "idempotency_conflict", "the key was used with another body")
			return 409
		}
		p.answer(w, 200, old)
		return 200
	}
	now := time.Now().UTC().Truncate(time.Millisecond)
	req := &scriptedRequest{id: newUUID(), key: key, body: body, call: call, status: "pending", created: now,
		deadline: now.Add(30 * time.Minute), changed: make(chan struct{}), read: make(chan struct{})}
	var timeout string
	_ = json.Unmarshal(call["timeout"], &timeout)
	if d, err := time.ParseDuration(timeout); err == nil && d > 0 && d < 30*time.Minute {
		req.deadline = now.Add(d)
	}
	if p.script.decide == "expired" {
		// The provider may shorten a deadline: one second, so the
		// expiry check does not wait for the adapter's timeout.
		req.deadline = now.Add(time.Second)
	}
	p.requests[req.id], p.byKey[key] = req, req
	read := req.read
	if p.script.immediate != "" {
		p.decideLocked(req, p.script.immediate)
	}
	p.mu.Unlock()
	if p.async != nil && req.status == "pending" {
		if p.script.earlyApproval {
			// The answer says pending, as the request was when it was
			// made; the approval is recorded and notified before the
			// answer leaves, so it arrives before the adapter has even
			// seen the request ID.
			view := p.view(req)
			p.decide(req, "approved")
			p.async.deliver(req)
			p.write(w, 201, view)
			return 201
		}
		go p.awaitSuspension(req, read)
	}
	p.answer(w, 201, req)
	return 201
}

// decideLocked records outcome on a pending request.
func (p *scriptedProvider) decideLocked(req *scriptedRequest, outcome string) {
	if req.status != "pending" {
		return
	}
	now := time.Now().UTC().Truncate(time.Millisecond)
	req.status, req.decided, req.note = outcome, now, p.script.note
	if outcome == "approved" {
		exp := now.Add(10 * time.Minute)
		if p.script.staleApproval {
			// Decided long ago; its permission to start ended a minute ago.
			req.decided = now.Add(-6 * time.Minute)
			exp = now.Add(-time.Minute)
		}
		req.expires = &exp
	}
	close(req.changed)
	req.changed = make(chan struct{})
}

func (p *scriptedProvider) get(w http.ResponseWriter, r *http.Request, req *scriptedRequest) int {
	wait := time.Duration(0)
	if v := r.URL.Query().Get("wait"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			writeAPIError(w, 400, "invalid_request_error", "invalid_wait", "wait must be a duration such as 30s")
			return 400
		}
		wait = min(d, 30*time.Second)
	}
	p.mu.Lock()
	first := false
	if req.status == "pending" && !p.polled {
		p.polled, first = true, true
	}
	if req.read != nil {
		close(req.read)
		req.read = nil
	}
	if req.status != "pending" && p.script.failReads > 0 {
		p.script.failReads--
		p.mu.Unlock()
		w.Header().Set("Retry-After", "1")
		writeAPIError(w, 503, "api_error", "unavailable", "the provider is briefly unavailable")
		return 503
	}
	if p.async != nil {
		// Decisions come at suspension (awaitSuspension), not on a read.
		first = false
	}
	if req.status == "pending" && p.cuts < p.script.cutPolls {
		p.cuts++
		p.mu.Unlock()
		// A connection cut mid long poll: the answer has begun (so no
		// HTTP client can retry it as never sent), then the connection
		// closes.
		if hj, ok := w.(http.Hijacker); ok {
			if conn, buf, err := hj.Hijack(); err == nil {
				buf.WriteString("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 4096\r\n\r\n{\"id\":\"" + req.id + "\",")
				buf.Flush()
				conn.Close()
				return 0
			}
		}
		panic(http.ErrAbortHandler)
	}
	switch d := p.script.decide; {
	case req.status != "pending" || d == "" || p.async != nil:
	case d == "expired":
		// Expiry comes at the deadline.
		p.mu.Unlock()
		select {
		case <-time.After(time.Until(req.deadline)):
		case <-r.Context().Done():
			return 0
		}
		p.mu.Lock()
		p.decideLocked(req, "expired")
	default:
		p.decideLocked(req, d)
	}
	changed, pending, onPoll := req.changed, req.status == "pending", p.onPoll
	p.mu.Unlock()
	if first && onPoll != nil {
		onPoll()
	}
	if pending && wait > 0 {
		select {
		case <-changed:
		case <-time.After(wait):
		case <-r.Context().Done():
			return 0
		}
	}
	p.answer(w, 200, req)
	return 200
}

func (p *scriptedProvider) cancel(w http.ResponseWriter, req *scriptedRequest) int {
	p.mu.Lock()
	if req.status == "pending" && p.script.abandonRace {
		// A person approved it just before the cancellation arrived.
		p.decideLocked(req, "approved")
		go p.async.deliver(req)
	}
	if req.status != "pending" {
		p.mu.Unlock()
		writeAPIError(w, 409, "invalid_request_error", "already_terminal", "the request is already "+req.status)
		return 409
	}
	note := p.script.note
	p.script.note = ""
	p.decideLocked(req, "cancelled")
	p.script.note = note
	p.mu.Unlock()
	p.answer(w, 200, req)
	return 200
}

// answer writes req as an ApprovalRequest.
func (p *scriptedProvider) answer(w http.ResponseWriter, status int, req *scriptedRequest) {
	p.write(w, status, p.view(req))
}

func (p *scriptedProvider) write(w http.ResponseWriter, status int, view map[string]any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Request-ID", newUUID())
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(view)
}

// view is req as an ApprovalRequest now.
func (p *scriptedProvider) view(req *scriptedRequest) map[string]any {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := map[string]any{"id": req.id, "tool": req.call["tool"], "arguments": req.call["arguments"], "timeout": req.call["timeout"],
		"status": req.status, "created_at": req.created.Format(time.RFC3339Nano), "deadline_at": req.deadline.Format(time.RFC3339Nano)}
	for _, k := range []string{"agent_reasoning", "context"} {
		if v, ok := req.call[k]; ok {
			out[k] = v
		}
	}
	if req.status != "pending" {
		d := map[string]any{"status": req.status, "decided_at": req.decided.Format(time.RFC3339Nano)}
		if req.note != "" {
			d["note"] = req.note
		}
		if req.expires != nil {
			d["expires_at"] = req.expires.Format(time.RFC3339Nano)
		}
		out["decision"] = d
	}
	return out
}

// sameJSONBytes compares two JSON documents as values (numbers by their
// literal text).
func sameJSONBytes(a, b []byte) bool {
	va, err1 := decodeJSONNumbers(a)
	vb, err2 := decodeJSONNumbers(b)
	return err1 == nil && err2 == nil && reflect.DeepEqual(va, vb)
}

func decodeJSONNumbers(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	err := dec.Decode(&v)
	return v, err
}
