package conformance

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentowl/agentowl/aap"
	"github.com/agentowl/agentowl/aap/sqlite"
)

// kitReceiverSite is the harness kit's real aap.Receiver (what `agentowl
// receiver serve` runs) on a real SQLite store, with a registration bound
// to an instance, and its wake-ups dispatched and counted as effects.
type receiverSite struct {
	url, secret, instance string
	mu                    sync.Mutex
	effects               []string // request IDs of dispatched wake-ups
}

func (s *receiverSite) count(_ context.Context, requestID string) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, id := range s.effects {
		if id == requestID {
			n++
		}
	}
	return n, nil
}

func (s *receiverSite) effect(id string) {
	s.mu.Lock()
	s.effects = append(s.effects, id)
	s.mu.Unlock()
}

// startReceiver starts the kit's receiver behind wrap (nil: as is).
func startReceiver(t *testing.T, wrap func(s *receiverSite, h http.Handler) http.Handler) *receiverSite {
	t.Helper()
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "receiver.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	rcv, err := aap.NewReceiver(aap.ReceiverConfig{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	s := &receiverSite{secret: newWebhookSecret(), instance: newUUID()}
	reg := newUUID()
	if err := rcv.Register(context.Background(), reg, s.secret); err != nil {
		t.Fatal(err)
	}
	var h http.Handler = rcv
	if wrap != nil {
		h = wrap(s, rcv)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	s.url = srv.URL + "/aap/events"
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		rcv.Dispatch(ctx, aap.DispatchConfig{Lease: time.Second, Handle: func(_ context.Context, w aap.Wakeup) error {
			s.effect(w.RequestID)
			return nil
		}})
	}()
	t.Cleanup(func() { cancel(); <-done })
	// The provider's verification binds the instance to the registration.
	key, _ := secretKey(s.secret)
	id := newUUID()
	body, _ := json.Marshal(map[string]string{"id": id, "type": "webhook.verification", "registration_id": reg,
		"instance_id": s.instance, "created_at": time.Now().UTC().Format(time.RFC3339), "challenge": newUUID()})
	req, _ := http.NewRequest(http.MethodPost, s.url, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	swHeaders(req.Header, key, id, time.Now(), body)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("verification of the test registration: %v %v", err, resp)
	}
	resp.Body.Close()
	return s
}

func (s *receiverSite) config() ReceiverConfig {
	return ReceiverConfig{URL: s.url, Secret: s.secret, InstanceID: s.instance, Effects: s.count, EffectsSettle: 500 * time.Millisecond}
}

// recordingWriter captures the inner handler's answer so a wrapper can
// change it.
type recordingWriter struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (w *recordingWriter) Header() http.Header         { return w.header }
func (w *recordingWriter) WriteHeader(s int)           { w.status = s }
func (w *recordingWriter) Write(b []byte) (int, error) { return w.body.Write(b) }

// rewrite runs h and lets change alter its answer.
func rewrite(h http.Handler, change func(r *http.Request, body []byte, rec *recordingWriter)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		rec := &recordingWriter{header: http.Header{}, status: http.StatusOK}
		h.ServeHTTP(rec, r)
		change(r, body, rec)
		for k, v := range rec.header {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.status)
		w.Write(rec.body.Bytes())
	})
}

// acceptRefusal turns the inner receiver's refusal with code into 204.
func acceptRefusal(code string) func(s *receiverSite, h http.Handler) http.Handler {
	return func(s *receiverSite, h http.Handler) http.Handler {
		return rewrite(h, func(r *http.Request, body []byte, rec *recordingWriter) {
			if rec.status >= 400 && strings.Contains(rec.body.String(), `"code":"`+code+`"`) {
				rec.status = http.StatusNoContent
				rec.body.Reset()
			}
		})
	}
}

type brokenReceiver struct {
	name, fails string
	wrap        func(s *receiverSite, h http.Handler) http.Handler
	// skips are the checks that cannot run when it fails.
	skips []string
}

var brokenReceivers = []brokenReceiver{
	{"refuses every notification", RAcceptsValid, func(s *receiverSite, h http.Handler) http.Handler {
		return rewrite(h, func(r *http.Request, body []byte, rec *recordingWriter) {
			if rec.status == http.StatusNoContent {
				rec.status = http.StatusServiceUnavailable
			}
		})
	}, []string{RDuplicate, RReplayedID}},
	{"runs a duplicate again", RDuplicate, func(s *receiverSite, h http.Handler) http.Handler {
		var seen sync.Map
		return rewrite(h, func(r *http.Request, body []byte, rec *recordingWriter) {
			var m map[string]string
			_ = json.Unmarshal(body, &m)
			if rec.status == http.StatusNoContent {
				if _, dup := seen.LoadOrStore(m["id"]+m["request_id"], true); dup {
					s.effect(m["request_id"])
				}
			}
		})
	}, nil},
	{"accepts any signature", RBadSignature, func(s *receiverSite, h http.Handler) http.Handler {
		return acceptRefusal("invalid_signature")(s, acceptRefusal("missing_signature_headers")(s, h))
	}, nil},
	{"accepts stale timestamps", RStaleTimestamp, acceptRefusal("timestamp_out_of_tolerance"), nil},
	{"ignores the body id", RIDMismatch, acceptRefusal("id_mismatch"), nil},
	{"records a replayed id with another body", RReplayedID, func(s *receiverSite, h http.Handler) http.Handler {
		var first sync.Map // webhook-id -> request_id
		return rewrite(h, func(r *http.Request, body []byte, rec *recordingWriter) {
			var m map[string]string
			_ = json.Unmarshal(body, &m)
			if rec.status == http.StatusNoContent {
				if prev, dup := first.LoadOrStore(m["id"], m["request_id"]); dup && prev != m["request_id"] {
					s.effect(m["request_id"])
				}
			}
		})
	}, nil},
	{"accepts any instance", ROtherInstance, acceptRefusal("unknown_instance"), nil},
	{"answers every verification", RUnexpectedRegis, func(s *receiverSite, h http.Handler) http.Handler {
		return rewrite(h, func(r *http.Request, body []byte, rec *recordingWriter) {
			var m map[string]string
			_ = json.Unmarshal(body, &m)
			if m["type"] == "webhook.verification" && rec.status == http.StatusForbidden {
				rec.status = http.StatusOK
				rec.body.Reset()
				rec.body.WriteString(`{"challenge":"` + m["challenge"] + `"}`)
			}
		})
	}, nil},
}

// TestReceiverAgentOwl: the harness kit's receiver passes every receiver
// check; each broken receiver fails exactly its own check.
func TestReceiverAgentOwl(t *testing.T) {
	t.Parallel()
	covered := map[string]bool{}
	for _, b := range brokenReceivers {
		covered[b.fails] = true
	}
	for _, c := range (&receiverRun{}).checks() {
		if !covered[c.ID] {
			t.Errorf("check %s has no broken receiver that makes it fail", c.ID)
		}
	}
	cases := append([]brokenReceiver{{name: "the harness kit's receiver"}}, brokenReceivers...)
	for _, bc := range cases {
		t.Run(bc.name, func(t *testing.T) {
			t.Parallel()
			s := startReceiver(t, bc.wrap)
			rep, err := CheckReceiver(context.Background(), s.config())
			if err != nil {
				t.Fatal(err)
			}
			var fails []string
			if bc.fails != "" {
				fails = []string{bc.fails}
			}
			requireOutcome(t, rep, fails, bc.skips)
		})
	}
}

// TestReceiverBadConfig: bad input is an error, not a run.
func TestReceiverBadConfig(t *testing.T) {
	for _, cfg := range []ReceiverConfig{
		{URL: "not a url", Secret: newWebhookSecret(), InstanceID: newUUID()},
		{URL: "http://127.0.0.1:1/x", Secret: "secret", InstanceID: newUUID()},
		{URL: "http://127.0.0.1:1/x", Secret: newWebhookSecret(), InstanceID: "inst"},
	} {
		if _, err := CheckReceiver(context.Background(), cfg); err == nil {
			t.Errorf("%+v: no error", cfg)
		}
	}
}
