package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"

	"github.com/agentowl/agentowl"
	"github.com/agentowl/agentowl/internal/access"
	"github.com/agentowl/agentowl/internal/approval"
	"github.com/agentowl/agentowl/internal/clocktest"
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
	specOnce   sync.Once
	specDoc    *openapi3.T
	specRouter routers.Router
	specErr    error
)

func specPath() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "api", "openapi.yaml")
}

// checkContract validates a response against api/openapi.yaml, so the
// document cannot drift from the server.
func checkContract(t *testing.T, req *http.Request, resp *http.Response, body []byte) {
	t.Helper()
	specOnce.Do(func() {
		// TwiML answers of the sms and voice channels are text.
		openapi3filter.RegisterBodyDecoder("text/xml", openapi3filter.FileBodyDecoder)
		specDoc, specErr = openapi3.NewLoader().LoadFromFile(specPath())
		if specErr == nil {
			specErr = specDoc.Validate(context.Background())
		}
		if specErr == nil {
			specRouter, specErr = gorillamux.NewRouter(specDoc)
		}
	})
	if specErr != nil {
		t.Fatalf("api/openapi.yaml: %v", specErr)
	}
	route, params, err := specRouter.FindRoute(req)
	if err != nil {
		t.Errorf("%s %s: not described in api/openapi.yaml: %v", req.Method, req.URL.Path, err)
		return
	}
	opts := &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true, SchemaValidationOptions: contractFormats}
	legacy := legacyBodySchema(req, route, resp)
	// kin-openapi checks the status and the headers; a body it would
	// check with its own validator is checked here, with the same options.
	opts.ExcludeResponseBody = legacy != nil
	in := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route},
		Status:                 resp.StatusCode,
		Header:                 resp.Header,
		Options:                opts,
	}
	in.SetBodyBytes(body)
	err = openapi3filter.ValidateResponse(context.Background(), in)
	if err == nil && legacy != nil {
		err = legacy.check(resp.Header, body)
	}
	if err != nil {
		t.Errorf("%s %s -> %d violates api/openapi.yaml (%s): %v\nbody: %s", req.Method, req.URL.Path, resp.StatusCode,
			route.Operation.OperationID, err, body)
	}
}

// contractFormats are the format checks every schema of the contract gets.
var contractFormats = []openapi3.SchemaValidationOption{
	openapi3.WithStringFormatValidator("uuid", openapi3.NewRegexpFormatValidator(openapi3.FormatOfStringForUUIDOfRFC9562)),
}

// legacySchema is a response body schema that kin-openapi, on an OpenAPI
// 3.1 document, compiles into a JSON Schema 2020-12 validator and then
// sets aside for its own: one that refers to #/components/schemas and uses
// none of the keywords only 2020-12 checks. The compilation is most of what
// a test's contract check costs (it is not cached), so for these schemas
// checkContract calls the validator kin-openapi would end up calling.
type legacySchema struct{ ref *openapi3.SchemaRef }

// legacySchemas caches, per body schema, whether it is a legacySchema.
var legacySchemas sync.Map // *openapi3.Schema → bool

// legacyBodySchema returns the schema of resp's JSON body when it is a
// legacySchema, or nil when kin-openapi is to check the body itself.
func legacyBodySchema(req *http.Request, route *routers.Route, resp *http.Response) *legacySchema {
	switch resp.StatusCode {
	case http.StatusNotModified, http.StatusPermanentRedirect, http.StatusTemporaryRedirect, http.StatusMovedPermanently:
		return nil // kin-openapi checks nothing of these
	}
	responses := route.Operation.Responses
	if req.Method == http.MethodHead || responses.Len() == 0 {
		return nil
	}
	r := responses.Status(resp.StatusCode)
	if r == nil {
		r = responses.Default()
	}
	if r == nil || r.Value == nil {
		return nil
	}
	media := r.Value.Content.Get(resp.Header.Get("Content-Type"))
	mediaType, _, _ := strings.Cut(resp.Header.Get("Content-Type"), ";")
	if media == nil || media.Schema == nil || media.Schema.Value == nil || strings.ToLower(strings.TrimSpace(mediaType)) != "application/json" {
		return nil
	}
	s := media.Schema.Value
	is, ok := legacySchemas.Load(s)
	if !ok {
		is = refersToComponents(s) && !usesOnly2020Keywords(s)
		legacySchemas.Store(s, is)
	}
	if !is.(bool) {
		return nil
	}
	return &legacySchema{ref: media.Schema}
}

// check validates a JSON body as kin-openapi's ValidateResponse does after
// setting the 2020-12 validator aside.
func (l *legacySchema) check(header http.Header, body []byte) error {
	value, err := openapi3filter.JSONBodyDecoder(bytes.NewReader(body), header, l.ref, nil)
	if err != nil {
		return fmt.Errorf("failed to decode response body: %w", err)
	}
	if err := l.ref.Value.VisitJSON(value, append([]openapi3.SchemaValidationOption{openapi3.MultiErrors()},
		append(contractFormats, openapi3.VisitAsResponse())...)...); err != nil {
		return fmt.Errorf("response body doesn't match schema: %w", err)
	}
	return nil
}

// refersToComponents reports whether s, as JSON, holds a $ref to
// #/components/schemas (kin-openapi's containsInternalSchemaRef).
func refersToComponents(s *openapi3.Schema) bool {
	data, err := json.Marshal(s)
	if err != nil {
		return false
	}
	var doc any
	if json.Unmarshal(data, &doc) != nil {
		return false
	}
	var refers func(node any) bool
	refers = func(node any) bool {
		switch node := node.(type) {
		case map[string]any:
			if ref, ok := node["$ref"].(string); ok && strings.HasPrefix(ref, "#/components/schemas/") {
				return true
			}
			for _, v := range node {
				if refers(v) {
					return true
				}
			}
		case []any:
			for _, v := range node {
				if refers(v) {
					return true
				}
			}
		}
		return false
	}
	return refers(doc)
}

// usesOnly2020Keywords reports whether s or a schema under it has a keyword
// that makes kin-openapi keep its 2020-12 validator (its
// schemaUsesJSONSchema2020Features), or nullable, which its own validator
// reads differently once told the document is OpenAPI 3.1.
func usesOnly2020Keywords(s *openapi3.Schema) bool {
	found := errors.New("found")
	err := openapi3.NewSchemaRef("", s).WalkSubtree(func(_ string, ref *openapi3.SchemaRef) error {
		v := ref.Value
		if v == nil {
			return nil
		}
		if v.Nullable || v.Const != nil || len(v.PrefixItems) != 0 || v.Contains != nil ||
			len(v.PatternProperties) != 0 || len(v.DependentSchemas) != 0 || v.PropertyNames != nil ||
			v.UnevaluatedItems.Has != nil || v.UnevaluatedItems.Schema != nil ||
			v.UnevaluatedProperties.Has != nil || v.UnevaluatedProperties.Schema != nil ||
			v.If != nil || v.Then != nil || v.Else != nil ||
			len(v.DependentRequired) != 0 || len(v.Defs) != 0 || v.ContentSchema != nil {
			return found
		}
		return nil
	})
	return errors.Is(err, found)
}

var _ = agentowl.StatusPending
