package httpapi_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"

	"github.com/agentowl/agentowl"
	"github.com/agentowl/agentowl/internal/access"
	"github.com/agentowl/agentowl/internal/approval"
	"github.com/agentowl/agentowl/internal/clocktest"
	"github.com/agentowl/agentowl/internal/conformance"
	"github.com/agentowl/agentowl/internal/server"
	"github.com/agentowl/agentowl/internal/server/servertest"
	"github.com/agentowl/agentowl/internal/store/storetest"
)

// fakeClock is the shared settable test clock.
type fakeClock = clocktest.Fake

func newFakeClock() *fakeClock {
	return clocktest.New(time.Date(2026, 9, 16, 12, 0, 0, 0, time.UTC))
}

// env is one test's running server on a real store.
type env struct {
	t        *testing.T
	store    agentowl.Store
	clock    *fakeClock
	access   *access.Service
	approval *approval.Service
	srv      testServer
	server   *server.Server
	// operatorToken is an admin of tenant "default".
	operatorToken string
	// admins holds an admin token per tenant created by createTenant
	// ("default": operatorToken); operator tokens act in one tenant only.
	admins sync.Map
}

// adminOf returns an admin token of tenant (created by createTenant).
func (e *env) adminOf(tenant string) string {
	if v, ok := e.admins.Load(tenant); ok {
		return v.(string)
	}
	return e.operatorToken
}

// setup starts a server on backend b with a fake clock.
func setup(t *testing.T, b storetest.Backend) *env { return setupWith(t, b, approval.Config{}) }

// setupWith is setup with the provider's configuration.
func setupWith(t *testing.T, b storetest.Backend, cfg approval.Config) *env {
	t.Helper()
	sc := servertest.Config(t, b)
	sc.Approval = cfg
	// No delivery engine: these tests deliver nothing, and the long-poll
	// tests synchronize on the fake clock's timers, which an idle engine
	// would add to whenever it is woken.
	sc.NoDelivery = true
	return start(t, sc)
}

// testServer is how tests reach a running server: its base URL and a
// client whose idle connections close with the test.
type testServer struct {
	URL    string
	client *http.Client
}

// Client returns the test's HTTP client for the server.
func (s testServer) Client() *http.Client { return s.client }

// start starts the one server assembly from sc on a fake clock (unless sc
// has a clock), without its maintenance scheduler, and returns the test's
// view of it. These tests run the maintenance jobs by hand (ExpireDue,
// ExpireRequests, RecordDeliveryIncidents) where they check them: a
// scheduler woken by every Advance would run them in between.
func start(t *testing.T, sc server.Config) *env {
	t.Helper()
	sc.Maintenance.Disabled = true
	return startScheduled(t, sc)
}

// startScheduled is start with the scheduler as sc configures it.
func startScheduled(t *testing.T, sc server.Config) *env {
	t.Helper()
	clock, ok := sc.Clock.(*fakeClock)
	if !ok {
		clock = newFakeClock()
		sc.Clock = clock
	}
	srv := servertest.Start(t, sc)
	transport := &http.Transport{}
	t.Cleanup(transport.CloseIdleConnections)
	e := &env{t: t, store: srv.Store(), clock: clock, access: srv.Access(), approval: srv.Approval(),
		srv: testServer{URL: srv.URL(), client: &http.Client{Transport: transport}}, server: srv, operatorToken: srv.BootstrapToken()}
	e.admins.Store("default", e.operatorToken)
	return e
}

// settledWaiters waits until the number of timers on clock stops changing
// (the server's background loops have parked on it) and returns it. It only
// synchronizes; it asserts nothing about timing.
func settledWaiters(clock *fakeClock) int {
	last, stable := clock.Waiters(), 0
	for stable < 20 {
		time.Sleep(time.Millisecond)
		if n := clock.Waiters(); n == last {
			stable++
		} else {
			last, stable = n, 0
		}
	}
	return last
}

// forEachBackend runs fn as a parallel subtest per store backend.
func forEachBackend(t *testing.T, fn func(t *testing.T, e *env)) {
	forEachBackendWith(t, setup, fn)
}

// forEachBackendWith runs fn as a parallel subtest per store backend, on
// what setup starts there.
func forEachBackendWith[E any](t *testing.T, setup func(*testing.T, storetest.Backend) E, fn func(t *testing.T, e E)) {
	for _, b := range storetest.Backends(t) {
		t.Run(b.Name, func(t *testing.T) {
			t.Parallel()
			fn(t, setup(t, b))
		})
	}
}

// response is a completed exchange, already checked against api/openapi.yaml.
type response struct {
	Status int
	Header http.Header
	Body   []byte
}

// JSON decodes the body into a generic map.
func (r *response) JSON(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.Body, &m); err != nil {
		t.Fatalf("response is not a JSON object: %v: %s", err, r.Body)
	}
	return m
}

// ErrorCode returns error.code of an error body.
func (r *response) ErrorCode(t *testing.T) string {
	t.Helper()
	e, _ := r.JSON(t)["error"].(map[string]any)
	code, _ := e["code"].(string)
	return code
}

// do sends a request; body may be a string (sent as is), []byte, or a value
// marshalled to JSON. headers are name, value pairs. Every response is
// validated against api/openapi.yaml and must carry X-Request-ID.
func (e *env) do(method, path, token string, body any, headers ...string) *response {
	e.t.Helper()
	return e.doIn(e.t, method, path, token, body, headers...)
}

// doIn is do for t, a subtest sharing e's server.
func (e *env) doIn(t *testing.T, method, path, token string, body any, headers ...string) *response {
	t.Helper()
	req, err := servertest.NewRequest(method, e.srv.URL+path, token, body, headers...)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := e.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Header.Get("X-Request-ID") == "" {
		t.Errorf("%s %s: no X-Request-ID header", method, path)
	}
	checkContract(t, req, resp, data)
	return &response{Status: resp.StatusCode, Header: resp.Header, Body: data}
}

var (
	specOnce sync.Once
	spec     *conformance.Contract
	specErr  error
)

func specPath() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "api", "openapi.yaml")
}

// checkContract validates a response against api/openapi.yaml, so the
// document cannot drift from the server: the conformance kit's validator
// (its JSON bodies against schemas compiled once for the document).
func checkContract(t *testing.T, req *http.Request, resp *http.Response, body []byte) {
	t.Helper()
	specOnce.Do(func() {
		// TwiML answers of the sms and voice channels are text.
		openapi3filter.RegisterBodyDecoder("text/xml", openapi3filter.FileBodyDecoder)
		var doc *openapi3.T
		if doc, specErr = openapi3.NewLoader().LoadFromFile(specPath()); specErr == nil {
			specErr = doc.Validate(context.Background())
		}
		if specErr == nil {
			spec, specErr = conformance.LoadContract(specPath())
		}
	})
	if specErr != nil {
		t.Fatalf("api/openapi.yaml: %v", specErr)
	}
	path := req.URL.EscapedPath()
	if req.URL.RawQuery != "" {
		path += "?" + req.URL.RawQuery
	}
	if err := spec.ValidateExchange(&conformance.Exchange{Method: req.Method, Path: path, ReqHeader: req.Header,
		Status: resp.StatusCode, RespHeader: resp.Header, RespBody: body}); err != nil {
		t.Errorf("%s %s -> %d violates api/openapi.yaml: %v\nbody: %s", req.Method, req.URL.Path, resp.StatusCode, err, body)
	}
}

var _ = agentowl.StatusPending
