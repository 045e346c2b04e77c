package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentowl/agentowl/internal/buildinfo"
	"github.com/agentowl/agentowl/internal/clocktest"
	"github.com/agentowl/agentowl/internal/server"
	"github.com/agentowl/agentowl/internal/server/servertest"

	"github.com/agentowl/agentowl"
	"github.com/agentowl/agentowl/internal/store/storetest"
)

// site is where one test's server keeps its data: a data directory (the
// SQLite database and the operator-token file) and, on PostgreSQL, the URL
// of a fresh schema.
type site struct {
	backend string
	dataDir string
	dbURL   string
}

func newSite(t *testing.T, b storetest.Backend) site {
	t.Helper()
	s := site{backend: b.Name, dataDir: t.TempDir()}
	if b.Name == "postgres" {
		s.dbURL = b.URL(t)
	}
	return s
}

// forEachBackend marks t parallel with other tests and runs fn as a
// parallel subtest per store backend, each on a fresh site.
func forEachBackend(t *testing.T, fn func(t *testing.T, s site)) {
	t.Parallel()
	eachBackend(t, fn)
}

// eachBackend is forEachBackend for a test already marked parallel.
func eachBackend(t *testing.T, fn func(t *testing.T, s site)) {
	for _, b := range storetest.Backends(t) {
		t.Run(b.Name, func(t *testing.T) {
			t.Parallel()
			fn(t, newSite(t, b))
		})
	}
}

// running is one in-process server serving on 127.0.0.1:0.
type running struct {
	m      *server.Server
	url    string
	stdout string // what Start printed (the first-start notice)
}

// config is the server configuration of s: its data directory and database
// (the key is the data directory's secret-key file, as `serve` makes it).
func (s site) config(clock agentowl.Clock, stdout io.Writer) server.Config {
	return server.Config{
		DataDir:     s.dataDir,
		DatabaseURL: s.dbURL,
		Listen:      "127.0.0.1:0",
		Clock:       clock,
		Logger:      slog.New(slog.NewTextHandler(io.Discard, nil)),
		Stdout:      stdout,
		Resolver:    servertest.LocalResolver{},
	}
}

// start runs a server on s; clock may be nil for the wall clock. The server
// is closed at test end if the test did not close it.
func (s site) start(t *testing.T, clock agentowl.Clock) *running {
	t.Helper()
	return s.startWith(t, clock, func(*server.Config) {})
}

// startWith is start with the configuration adjusted by adjust.
func (s site) startWith(t *testing.T, clock agentowl.Clock, adjust func(*server.Config)) *running {
	t.Helper()
	var out bytes.Buffer
	cfg := s.config(clock, &out)
	adjust(&cfg)
	m := servertest.Start(t, cfg)
	return &running{m: m, url: m.URL(), stdout: out.String()}
}

// close closes the server (once) and returns Close's error.
func (r *running) close() error { return r.m.Close() }

// tokenPath is the bootstrap operator-token file of s.
func (s site) tokenPath() string { return filepath.Join(s.dataDir, "operator-token") }

// adminToken reads the bootstrap operator token of s.
func (s site) adminToken(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(s.tokenPath())
	if err != nil {
		t.Fatalf("read operator token: %v", err)
	}
	return strings.TrimSpace(string(b))
}

// reply is a completed HTTP exchange.
type reply struct {
	status int
	header http.Header
	body   []byte
}

// object decodes the body as a JSON object.
func (r reply) object(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.body, &m); err != nil {
		t.Fatalf("body is not a JSON object: %v: %s", err, r.body)
	}
	return m
}

// errorCode returns error.code of an error body.
func (r reply) errorCode(t *testing.T) string {
	t.Helper()
	e, _ := r.object(t)["error"].(map[string]any)
	code, _ := e["code"].(string)
	return code
}

// send makes one HTTP request as a harness or probe would. body is marshalled
// to JSON unless nil; headers are name, value pairs. Every response must carry
// X-Request-ID.
func send(t *testing.T, method, url, token string, body any, headers ...string) reply {
	t.Helper()
	r, err := exchange(t, method, url, token, body, headers...)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// exchange is send for use off the test goroutine: it reports transport
// errors instead of stopping the test. A write refused with 503 overloaded
// (nothing of it stored: the server's admission queue, which also sheds
// writes while deliveries lag, as they may on a loaded CI machine) is sent
// again after its Retry-After, as AAP clients and the CLI do.
func exchange(t *testing.T, method, url, token string, body any, headers ...string) (reply, error) {
	for range 30 {
		r, err := exchangeOnce(t, method, url, token, body, headers...)
		wait, again := overloadedRetry(r.status, r.header, r.body)
		if err != nil || !again {
			return r, err
		}
		time.Sleep(wait)
	}
	return exchangeOnce(t, method, url, token, body, headers...)
}

// exchangeOnce is one exchange, whatever its answer.
func exchangeOnce(t *testing.T, method, url, token string, body any, headers ...string) (reply, error) {
	req, err := servertest.NewRequest(method, url, token, body, headers...)
	if err != nil {
		return reply{}, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return reply{}, fmt.Errorf("%s %s: %w", method, url, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return reply{}, fmt.Errorf("%s %s: read body: %w", method, url, err)
	}
	if resp.Header.Get("X-Request-ID") == "" {
		t.Errorf("%s %s -> %d: no X-Request-ID header", method, url, resp.StatusCode)
	}
	return reply{status: resp.StatusCode, header: resp.Header, body: data}, nil
}

// expectStatus fails the test unless r has status want.
func expectStatus(t *testing.T, what string, r reply, want int) {
	t.Helper()
	if r.status != want {
		t.Fatalf("%s: status %d, want %d; body: %s", what, r.status, want, r.body)
	}
}

// normJSON re-encodes a JSON document with sorted keys and no insignificant
// whitespace, so two encodings of one value compare equal.
func normJSON(t *testing.T, data []byte) string {
	t.Helper()
	var v any
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatalf("not JSON: %v: %s", err, data)
	}
	out, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

// harness is an AAP instance provisioned over /v1 as a harness would.
type harness struct {
	url        string
	instanceID string
	credential string
}

// provision creates an instance with a provisioner token.
func provision(t *testing.T, baseURL, provToken, name string) harness {
	t.Helper()
	return provisionWith(t, baseURL, provToken, map[string]any{"instance_name": name})
}

// provisionWith creates the instance body describes (its instance_name,
// and a delivery if any) with a provisioner token, as a harness would.
func provisionWith(t *testing.T, baseURL, provToken string, body map[string]any) harness {
	t.Helper()
	r := send(t, http.MethodPost, baseURL+"/v1/instances", provToken, body, "Idempotency-Key", fmt.Sprint("provision-", body["instance_name"]))
	expectStatus(t, "POST /v1/instances", r, http.StatusCreated)
	obj := r.object(t)
	inst, _ := obj["instance"].(map[string]any)
	cred, _ := obj["credential"].(map[string]any)
	h := harness{url: baseURL}
	h.instanceID, _ = inst["id"].(string)
	h.credential, _ = cred["token"].(string)
	if h.instanceID == "" || !strings.HasPrefix(h.credential, "owl_inst_") {
		t.Fatalf("provisioned instance lacks an id or an owl_inst_ credential: %s", r.body)
	}
	return h
}

// submit posts one approval request with an Idempotency-Key.
func (h harness) submit(t *testing.T, key string, body map[string]any) reply {
	t.Helper()
	return send(t, http.MethodPost, h.url+"/v1/requests", h.credential, body, "Idempotency-Key", key)
}

// get reads a request as the harness sees it, with an optional wait.
func (h harness) get(t *testing.T, id, query string) reply {
	t.Helper()
	return send(t, http.MethodGet, h.url+"/v1/requests/"+id+query, h.credential, nil)
}

func TestMainBootstrapAndHealth(t *testing.T) {
	forEachBackend(t, func(t *testing.T, s site) {
		first := s.start(t, nil)

		info, err := os.Stat(s.tokenPath())
		if err != nil {
			t.Fatalf("first start wrote no operator-token file: %v", err)
		}
		if mode := info.Mode().Perm(); mode != 0o600 {
			t.Errorf("operator-token mode = %o, want 600", mode)
		}
		token := s.adminToken(t)
		if !strings.HasPrefix(token, "owl_op_") {
			t.Errorf("operator-token holds %q, want an owl_op_ token", token)
		}
		abs, err := filepath.Abs(s.tokenPath())
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(first.stdout, abs) {
			t.Errorf("first-start notice does not name the token file %s:\n%s", abs, first.stdout)
		}
		if !strings.Contains(first.stdout, "default") {
			t.Errorf("first-start notice does not name tenant default:\n%s", first.stdout)
		}

		r := send(t, http.MethodGet, first.url+"/healthz", "", nil)
		expectStatus(t, "/healthz", r, http.StatusOK)
		if got := r.object(t)["status"]; got != "ok" {
			t.Errorf("/healthz status = %v, want ok", got)
		}
		if b := buildinfo.Get(); r.object(t)["version"] != b.Version || r.object(t)["commit"] != b.Commit {
			t.Errorf("/healthz = %s, want version %q and commit %q", r.body, b.Version, b.Commit)
		}
		r = send(t, http.MethodGet, first.url+"/readyz", "", nil)
		expectStatus(t, "/readyz", r, http.StatusOK)
		if got := r.object(t)["database"]; got != s.backend {
			t.Errorf("/readyz database = %v, want %s", got, s.backend)
		}
		r = send(t, http.MethodGet, first.url+"/api/v1/whoami", token, nil)
		expectStatus(t, "whoami with the bootstrap token", r, http.StatusOK)
		r = send(t, http.MethodGet, first.url+"/no/such/path", "", nil)
		expectStatus(t, "unknown path", r, http.StatusNotFound)
		if got, want := r.errorCode(t), "not_found"; got != want {
			t.Errorf("unknown path error code = %q, want %q", got, want)
		}
		if reqID := r.object(t)["error"].(map[string]any)["request_id"]; reqID != r.header.Get("X-Request-ID") {
			t.Errorf("error request_id %v != X-Request-ID %q", reqID, r.header.Get("X-Request-ID"))
		}
		r = send(t, http.MethodGet, first.url+"/metrics", "", nil)
		expectStatus(t, "/metrics", r, http.StatusOK)
		if !bytes.Contains(r.body, []byte("agentowl_http_requests_total")) {
			t.Errorf("/metrics lacks agentowl_http_requests_total:\n%.2000s", r.body)
		}

		before, err := os.ReadFile(s.tokenPath())
		if err != nil {
			t.Fatal(err)
		}
		if err := first.close(); err != nil {
			t.Fatalf("Close: %v", err)
		}

		second := s.start(t, nil)
		if second.stdout != "" {
			t.Errorf("second start printed a bootstrap notice:\n%s", second.stdout)
		}
		after, err := os.ReadFile(s.tokenPath())
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(before, after) {
			t.Errorf("second start rewrote operator-token: %q -> %q", before, after)
		}
		r = send(t, http.MethodGet, second.url+"/api/v1/whoami", token, nil)
		expectStatus(t, "whoami with the bootstrap token after restart", r, http.StatusOK)
		r = send(t, http.MethodGet, second.url+"/api/v1/tenants", token, nil)
		expectStatus(t, "tenants after restart", r, http.StatusOK)
		if items, _ := r.object(t)["items"].([]any); len(items) != 1 {
			t.Errorf("after restart there are %d tenants, want only default: %s", len(items), r.body)
		}
	})
}

// fakeClock is the shared settable test clock.
type fakeClock = clocktest.Fake

func newFakeClock() *fakeClock { return clocktest.New(time.Date(2026, 9, 16, 12, 0, 0, 0, time.UTC)) }

// eventually polls cond every 10ms for at most limit; it synchronizes with
// background work, it is not an assertion about speed.
func eventually(t *testing.T, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s after %s", what, limit)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Close answers an in-flight long poll at once, with the request as it is
// (AAP: "a completed wait can return a pending request"; the adapter polls
// again), rather than hold the shutdown for the rest of its 30 s wait; the
// answer is complete and comes before the store closes (issue 25: a stopped
// server exits within the attempt timeout plus 5 s).
func TestMainCloseFinishesLongPoll(t *testing.T) {
	forEachBackend(t, func(t *testing.T, s site) {
		clock := newFakeClock()
		srv := s.start(t, clock)
		admin := s.adminToken(t)
		prov := cliJSON(t, srv.cli(t, admin, "provisioner-tokens", "create", "--label", "shutdown", "--json"))
		h := provision(t, srv.url, prov["token"].(string), "long-poller")
		r := h.submit(t, "lp-1", map[string]any{"tool": "deploy", "arguments": map[string]any{"env": "prod"}, "timeout": "1h"})
		expectStatus(t, "POST /v1/requests", r, http.StatusCreated)
		id := r.object(t)["id"].(string)

		type result struct {
			r   reply
			err error
		}
		polled := make(chan result, 1)
		go func() {
			r, err := exchange(t, http.MethodGet, h.url+"/v1/requests/"+id+"?wait=30s", h.credential, nil)
			polled <- result{r, err}
		}()
		eventually(t, 10*time.Second, "the long poll to park on its 30s wait", func() bool { return clock.PendingAt(30 * time.Second) })

		closed := make(chan error, 1)
		go func() { closed <- srv.close() }()
		// The fake clock never reaches the poll's 30 s: only the shutdown
		// can end it.
		select {
		case p := <-polled:
			if p.err != nil {
				t.Fatalf("the long poll got no answer: %v", p.err)
			}
			expectStatus(t, "long poll during shutdown", p.r, http.StatusOK)
			if got := p.r.object(t)["status"]; got != "pending" {
				t.Errorf("long poll answered status %v, want pending", got)
			}
		case <-time.After(20 * time.Second):
			t.Fatal("the long poll was not answered when the server closed")
		}
		select {
		case err := <-closed:
			if err != nil {
				t.Errorf("Close: %v", err)
			}
		case <-time.After(20 * time.Second):
			t.Fatal("Close did not return after answering the long poll")
		}
	})
}

// A decision acknowledged to the operator survives kill -9 of the server.
func TestCrashKeepsApprovedDecision(t *testing.T) {
	t.Parallel()
	bin := buildAgentowl(t)
	s := site{dataDir: t.TempDir()}
	first := s.serve(t, bin, nil)
	admin := s.adminToken(t)
	prov := cliJSON(t, runCLI(t, "provisioner-tokens", "create", "--json", "--url", first.url, "--token", admin))
	h := provision(t, first.url, prov["token"].(string), "crash-agent")
	r := h.submit(t, "crash-1", map[string]any{"tool": "drop_table", "arguments": map[string]any{"table": "users"}, "timeout": "1h"})
	expectStatus(t, "POST /v1/requests", r, http.StatusCreated)
	id := r.object(t)["id"].(string)
	decided := runCLI(t, "approvals", "decide", id, "--approve", "--note", "survives", "--json", "--url", first.url, "--token", admin)
	if decided.err != nil {
		t.Fatalf("approvals decide: %v\n%s", decided.err, decided.stderr)
	}
	first.kill9(t)

	second := s.serve(t, bin, nil)
	if out, _ := os.ReadFile(second.stdout); bytes.Contains(out, []byte("First start")) {
		t.Errorf("restart after kill -9 bootstrapped again:\n%s", out)
	}
	h.url = second.url
	r = h.get(t, id, "")
	expectStatus(t, "GET /v1/requests/{id} after kill -9", r, http.StatusOK)
	if got, want := normJSON(t, r.body), normJSON(t, []byte(decided.stdout)); got != want {
		t.Errorf("after kill -9 the request reads\n%s\nwant the acknowledged decision\n%s", got, want)
	}
	if got := r.object(t)["status"]; got != "approved" {
		t.Errorf("after kill -9 status = %v, want approved", got)
	}
}
