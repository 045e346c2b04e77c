// Package httpapi serves AgentOwl's HTTP surfaces: the AAP provider API
// (/v1), the operator API (/api/v1), the runtime API (/runtime/v1), webhook
// ingress (/in) and the health and metrics endpoints, all from one route
// table (routes.go) that says who may call each route. It alone maps error
// codes to statuses and writes the contract's error body.
package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/agentowl/agentowl"
	"github.com/agentowl/agentowl/internal/access"
	"github.com/agentowl/agentowl/internal/admission"
	"github.com/agentowl/agentowl/internal/approval"
	"github.com/agentowl/agentowl/internal/attachment"
	"github.com/agentowl/agentowl/internal/delivery"
	"github.com/agentowl/agentowl/internal/doctor"
	"github.com/agentowl/agentowl/internal/inbox"
	"github.com/agentowl/agentowl/internal/ingress"
	"github.com/agentowl/agentowl/internal/maintenance"
	"github.com/agentowl/agentowl/internal/notify"
	"github.com/agentowl/agentowl/internal/work"
)

// Config bounds what the server accepts (docs/limits.md).
type Config struct {
	// MaxBodyBytes caps every request body; larger bodies get 413
	// request_too_large. Defaults to 1 MiB.
	MaxBodyBytes int64
	// MaxIdempotencyKeyBytes caps Idempotency-Key. Defaults to 1024.
	MaxIdempotencyKeyBytes int
	// ReadHeaderTimeout bounds reading a request's headers. Defaults to 10s.
	ReadHeaderTimeout time.Duration
	// ReadTimeout bounds reading a request's body, from the end of its
	// headers; a body not received by then drops the connection. Defaults
	// to 30s.
	ReadTimeout time.Duration
	// WriteTimeout bounds a request from the end of its headers to the end
	// of its answer; long polls get their wait on top. Defaults to 60s.
	WriteTimeout time.Duration
	// IdleTimeout bounds how long a kept-alive connection waits for its
	// next request. Defaults to 2m.
	IdleTimeout time.Duration
	// MaxConnections bounds the connections served at once (LimitListener).
	// Defaults to 1024.
	MaxConnections int
	// Admission bounds how long a write of the hot surfaces (requests
	// created, decisions, callbacks, inbound events) waits for its turn
	// before it is refused with 503 overloaded.
	Admission admission.Config
	// PublicURL is the server's externally reachable base URL, without a
	// trailing slash: console login links are built from it. The assembly
	// sets it.
	PublicURL string
}

func (c Config) withDefaults() Config {
	if c.MaxBodyBytes <= 0 {
		c.MaxBodyBytes = 1 << 20
	}
	if c.MaxIdempotencyKeyBytes <= 0 {
		c.MaxIdempotencyKeyBytes = 1024
	}
	for _, d := range []struct {
		v   *time.Duration
		def time.Duration
	}{{&c.ReadHeaderTimeout, 10 * time.Second}, {&c.ReadTimeout, 30 * time.Second}, {&c.WriteTimeout, time.Minute},
		{&c.IdleTimeout, 2 * time.Minute}} {
		if *d.v <= 0 {
			*d.v = d.def
		}
	}
	if c.MaxConnections <= 0 {
		c.MaxConnections = 1024
	}
	return c
}

// Server holds the HTTP handlers' dependencies.
type Server struct {
	access     *access.Service
	approval   *approval.Service
	database   Database
	deliveries *delivery.Views
	clock      agentowl.Clock
	log        *slog.Logger
	cfg        Config
	registry   *prometheus.Registry
	requests   *prometheus.CounterVec
	latency    *prometheus.HistogramVec
	// The agent-work use-cases behind the runtime (/runtime/v1), ingress
	// (/in/), operator and Needs-attention routes; all nil without
	// Services.Work (routes marked work are then not served).
	work        *work.Service
	ingress     *ingress.Service
	inbox       *inbox.Service
	attachments *attachment.Service
	// maintenance is the scheduler whose status GET /api/v1/maintenance
	// reports; nil when none runs.
	maintenance *maintenance.Scheduler
	doctor      *doctor.Service
	notify      *notify.Service
	console     http.Handler // nil without Services.Console
	admission   *admission.Set
}

// Database is the readiness check's view of the store: Ping runs an empty
// write transaction (agentowl.Store.Ping), Dialect names the backend.
type Database interface {
	Ping(ctx context.Context) error
	Dialect() string
}

// Services are what the HTTP surfaces call. Work and Ingress are optional:
// without them the agent-work routes (runtime, ingress, endpoints, work,
// Needs attention) are not served.
type Services struct {
	Access   *access.Service
	Approval *approval.Service
	Work     *work.Service
	Ingress  *ingress.Service
	// Database is what the readiness check asks: can the database take a
	// write now, and which one is it.
	Database Database
	// Deliveries reads the outbox for the deliveries API.
	Deliveries *delivery.Views
	Clock      agentowl.Clock
	Log        *slog.Logger

	// Attachments serves retained files (optional with Work).
	Attachments *attachment.Service
	// Maintenance is the scheduler, optional: without it GET
	// /api/v1/maintenance answers 503.
	Maintenance *maintenance.Scheduler
	// Doctor serves the tenant health report with the agent-work routes.
	Doctor *doctor.Service
	// Notify serves in-app notifications (required).
	Notify *notify.Service
	// Console, when set, serves the web console under /console/.
	Console http.Handler
}

// New returns a Server.
func New(svc Services, cfg Config) *Server {
	s := &Server{access: svc.Access, approval: svc.Approval, database: svc.Database, deliveries: svc.Deliveries, clock: svc.Clock, log: svc.Log,
		cfg: cfg.withDefaults(), registry: prometheus.NewRegistry(), maintenance: svc.Maintenance, doctor: svc.Doctor,
		notify: svc.Notify, console: svc.Console}
	if svc.Work != nil && svc.Ingress != nil {
		s.work, s.ingress, s.attachments = svc.Work, svc.Ingress, svc.Attachments
		s.inbox = inbox.New(svc.Work, svc.Approval, svc.Clock)
	}
	s.requests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "agentowl_http_requests_total", Help: "HTTP requests by surface, method and status.",
	}, []string{"surface", "method", "status"})
	s.latency = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "agentowl_http_request_duration_seconds", Help: "HTTP request latency by surface.",
		Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 5, 30},
	}, []string{"surface"})
	s.admission = admission.New(s.cfg.Admission, s.clock)
	s.registry.MustRegister(s.requests, s.latency, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	s.registry.MustRegister(s.admission.Collectors()...)
	return s
}

// Register adds collectors (such as the delivery engine's) to /metrics.
func (s *Server) Register(cs ...prometheus.Collector) { s.registry.MustRegister(cs...) }

// Handler returns the root handler with every route of the route table
// (routes.go).
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	s.register(mux)
	if s.console != nil {
		mux.HandleFunc("/console/", func(w http.ResponseWriter, r *http.Request) {
			if rec, ok := w.(*statusRecorder); ok {
				rec.surface = surfaceConsole
			}
			s.console.ServeHTTP(w, r)
		})
		mux.Handle("/console", http.RedirectHandler("/console/", http.StatusSeeOther))
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		s.writeError(w, r, agentowl.Errorf(agentowl.ECodeNotFound, "No such endpoint: %s %s.", r.Method, r.URL.Path))
	})
	return s.middleware(mux)
}

type ctxKey int

const (
	requestIDCtx ctxKey = iota
	responseControllerCtx
)

func requestID(r *http.Request) string {
	id, _ := r.Context().Value(requestIDCtx).(string)
	return id
}

// middleware assigns every exchange an X-Request-ID, bounds the body in
// size and time, records metrics and turns a panic into a 500 that loses
// nothing else.
func (s *Server) middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		id := agentowl.NewID("")
		w.Header().Set("X-Request-ID", id)
		ctx := context.WithValue(r.Context(), requestIDCtx, id)
		ctx = agentowl.ContextWithRequestID(ctx, id)
		ctx = withResponseController(ctx, w)
		r = r.WithContext(ctx)
		rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK, body: s.limitBody(w, r), surface: surfaceOther}
		defer func() {
			rec.body.abandon()
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				s.log.Error("panic in handler", "request_id", id, "panic", fmt.Sprint(v))
				if !rec.wrote {
					s.writeError(rec, r, fmt.Errorf("panic: %v", v))
				}
			}
			s.requests.WithLabelValues(rec.surface, r.Method, fmt.Sprint(rec.status)).Inc()
			s.latency.WithLabelValues(rec.surface).Observe(time.Since(start).Seconds())
		}()
		if err := checkURL(r); err != nil {
			s.writeError(rec, r, err)
			return
		}
		next.ServeHTTP(rec, r)
	})
}

type statusRecorder struct {
	http.ResponseWriter
	status int
	wrote  bool
	body   *bodyReader // nil without a request body
	// surface labels the request's metrics: its route's (register), or
	// "other" when no route took it.
	surface string
}

// closeIfBodyUnread closes the connection after an answer given before the
// request body was read to its end (an unauthenticated caller, an unknown
// ingress address, a refused body): the rest of the body is not read
// (bodyReader.abandon), so the connection cannot serve another request.
func (r *statusRecorder) closeIfBodyUnread() {
	if !r.wrote && r.body != nil && !r.body.eof {
		r.Header().Set("Connection", "close")
	}
}

func (r *statusRecorder) WriteHeader(code int) {
	r.closeIfBodyUnread()
	if !r.wrote {
		r.status, r.wrote = code, true
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *statusRecorder) Write(b []byte) (int, error) {
	r.closeIfBodyUnread()
	r.wrote = true
	return r.ResponseWriter.Write(b)
}

func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// writeJSON writes v with status. HTML escaping is off so that echoed tool
// arguments keep their original characters.
func writeJSON(w http.ResponseWriter, status int, v any) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		http.Error(w, `{"error":{"type":"internal","code":"internal","message":"encoding failed","request_id":"`+w.Header().Get("X-Request-ID")+`"}}`, http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// readObject reads a JSON object body into its fields, enforcing the content
// type, the size bound, the text rule, a single top-level object and the
// allowed field set.
func readObject(r *http.Request, allowed ...string) (map[string]json.RawMessage, error) {
	data, err := readBody(r, 0)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	var fields map[string]json.RawMessage
	if err := dec.Decode(&fields); err != nil || fields == nil {
		return nil, agentowl.Errorf(agentowl.ECodeInvalidJSON, "The request body must be one JSON object.")
	}
	if len(bytes.TrimSpace(data[dec.InputOffset():])) != 0 {
		return nil, agentowl.Errorf(agentowl.ECodeInvalidJSON, "The request body must contain one JSON object and nothing after it.")
	}
	for k := range fields {
		if !contains(allowed, k) {
			return nil, agentowl.FieldError(agentowl.ECodeUnknownField, k, "Unknown field %q.", k)
		}
	}
	return fields, nil
}

func contains(list []string, v string) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}

// field decodes one present field into dst; a JSON null or a wrong type is
// invalid_field.
func field(fields map[string]json.RawMessage, name string, dst any) (present bool, err error) {
	raw, ok := fields[name]
	if !ok {
		return false, nil
	}
	if string(raw) == "null" {
		return true, agentowl.FieldError(agentowl.ECodeInvalidField, name, "%s must not be null.", name)
	}
	if err := json.Unmarshal(raw, dst); err != nil {
		return true, agentowl.FieldError(agentowl.ECodeInvalidField, name, "%s has the wrong type.", name)
	}
	return true, nil
}

// requiredField is field for a required member.
func requiredField(fields map[string]json.RawMessage, name string, dst any) error {
	present, err := field(fields, name, dst)
	if err == nil && !present {
		return agentowl.FieldError(agentowl.ECodeMissingField, name, "%s is required.", name)
	}
	return err
}

func timestamp(t time.Time) string { return t.UTC().Format(time.RFC3339) }

func timestampPtr(t *time.Time) *string {
	if t == nil {
		return nil
	}
	s := timestamp(*t)
	return &s
}

// compact removes insignificant whitespace, keeping every literal as sent.
func compact(raw []byte) ([]byte, error) {
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
