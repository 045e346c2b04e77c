package main

import (
	"bytes"
	"encoding/json"
	"encoding/pem"
	"errors"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentowl/agentowl/internal/server"
)

// switchSink is a TLS endpoint that answers 500 until told to accept.
type switchSink struct {
	srv      *httptest.Server
	accept   atomic.Bool
	received atomic.Int64
}

func newSwitchSink(t *testing.T) *switchSink {
	t.Helper()
	s := &switchSink{}
	s.srv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.received.Add(1)
		if s.accept.Load() {
			w.WriteHeader(http.StatusAccepted)
			return
		}
		w.WriteHeader(http.StatusInternalServerError)
	}))
	t.Cleanup(s.srv.Close)
	return s
}

// The seed's work-outbox and ingress-publications commands: a handoff that
// failed is listed, inspected and redriven; a delivered one is refused.
func TestCLIWorkOutbox(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, s site) {
		sink := newSwitchSink(t)
		// A handoff window of two seconds: the handoff fails while the test
		// waits for it (the wall clock drives this server).
		srv := s.startWorkWith(t, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: sink.srv.Certificate().Raw}),
			func(c *server.Config) { c.Work.HandoffWindow = 2 * time.Second })
		admin := s.adminToken(t)
		op := func(args ...string) cliResult { return srv.cli(t, admin, args...) }
		ep := cliJSON(t, runCLI(t, "--json", "endpoints", "create", "--name", "flaky", "--url", sink.srv.URL+"/events", "--agent-work",
			"--api-url", srv.url, "--token", admin))
		epID := ep["id"].(string)
		out := op("bindings", "create", "--channel", "webhook", "--endpoint", epID).ok(t)
		lines := strings.Split(strings.TrimSpace(out), "\n")
		r := send(t, http.MethodPost, lines[len(lines)-1], "", map[string]any{"text": "Summarise ticket 7"})
		expectStatus(t, "POST ingress", r, http.StatusAccepted)
		eventID := r.object(t)["event_id"].(string)

		var jobs []map[string]any
		eventually(t, 20*time.Second, "the handoff to fail", func() bool {
			jobs = itemsOf(t, cliJSON(t, op("--json", "work-outbox", "list", "--tenant", "default", "--endpoint", epID)))
			return len(jobs) == 1
		})
		job := jobs[0]
		jobID, workID := job["id"].(string), job["work_id"].(string)
		if job["state"] != "failed" || job["event_id"] != eventID || job["kind"] != "work.handoff" {
			t.Fatalf("work-outbox list = %v", jobs)
		}
		header, rows := parseTable(t, op("work-outbox", "list").ok(t))
		expectHeader(t, "work-outbox list", header, "ID", "KIND", "STATE", "ATTEMPTS", "WORK", "ENDPOINT", "CREATED", "LAST", "ERROR")
		if row := rowWith(t, "work-outbox list", rows, jobID); row[1] != "work.handoff" || row[2] != "failed" || row[4] != workID {
			t.Errorf("work-outbox list row %q", row)
		}
		pubs := itemsOf(t, cliJSON(t, op("--json", "ingress-publications", "list", "--event", eventID, "--state", "all")))
		if len(pubs) != 1 || pubs[0]["id"] != jobID {
			t.Errorf("ingress-publications list --event = %v, want %s", pubs, jobID)
		}
		if n := len(itemsOf(t, cliJSON(t, op("--json", "work-outbox", "list", "--state", "delivered")))); n != 0 {
			t.Errorf("--state delivered lists %d jobs", n)
		}
		insp := op("work-outbox", "inspect", jobID).ok(t)
		for _, want := range []string{jobID, workID, "work.handoff", "#", "HTTP 500"} {
			if !strings.Contains(insp, want) {
				t.Errorf("work-outbox inspect lacks %q:\n%s", want, insp)
			}
		}
		op("work-outbox", "list", "--state", "stuck").failed(t, "invalid_field")
		op("work-outbox", "list", "--older-than", "yesterday").failed(t, "invalid_field")

		sink.accept.Store(true)
		out = op("work-outbox", "redrive", jobID).ok(t)
		if !strings.Contains(out, "Redrove job "+jobID+": attempt series 2 starts at attempt ") {
			t.Errorf("work-outbox redrive printed:\n%s", out)
		}
		eventually(t, 20*time.Second, "the redriven handoff delivered", func() bool {
			return cliJSON(t, op("--json", "work-outbox", "inspect", jobID))["state"] == "delivered"
		})
		op("work-outbox", "redrive", jobID).failed(t, "already_delivered")
		op("ingress-publications", "redrive", jobID).failed(t, "already_delivered")
		if n := len(itemsOf(t, cliJSON(t, op("--json", "work", "list")))); n != 1 {
			t.Errorf("work after a redrive: %d, want 1", n)
		}
	})
}

// `agentowl work-doctor <tenant>` as the seed writes it, run as the built
// binary: exit status 2 on an error finding, 1 on a warning, 0 when only
// notes remain; --json prints the report.
func TestCLIWorkDoctor(t *testing.T) {
	t.Parallel()
	bin := buildAgentowl(t)
	forEachBackend(t, func(t *testing.T, s site) {
		sink := newSwitchSink(t)
		srv := s.startWork(t, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: sink.srv.Certificate().Raw}))
		admin := s.adminToken(t)
		doctor := func() (int, string) {
			t.Helper()
			cmd := exec.Command(bin, "work-doctor", "default", "--url", srv.url, "--token", admin)
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			var exit *exec.ExitError
			if err != nil && !errors.As(err, &exit) {
				t.Fatalf("agentowl work-doctor: %v", err)
			}
			if stderr.Len() != 0 {
				t.Errorf("agentowl work-doctor wrote to stderr: %s", stderr.String())
			}
			return cmd.ProcessState.ExitCode(), stdout.String()
		}
		ep := cliJSON(t, runCLI(t, "--json", "endpoints", "create", "--name", "rt", "--url", sink.srv.URL+"/events", "--agent-work",
			"--api-url", srv.url, "--token", admin))
		epID := ep["id"].(string)
		code, out := doctor()
		if code != 2 || !strings.Contains(out, "ERROR   runtime_credentials (endpoint:"+epID+")") ||
			!strings.Contains(out, "-> agentowl runtime-credentials create "+epID+" --days 90") {
			t.Fatalf("work-doctor with an endpoint without credentials: exit %d\n%s", code, out)
		}
		res := runCLI(t, "--json", "work-doctor", "default", "--url", srv.url, "--token", admin)
		var report map[string]any
		if err := json.Unmarshal([]byte(res.stdout), &report); err != nil {
			t.Fatalf("work-doctor --json printed no JSON: %v\n%s", err, res.stdout)
		}
		var code2 exitCode
		if report["status"] != "error" || get(report, "counts", "error") == nil || !errors.As(res.err, &code2) || code2 != 2 ||
			res.stderr != "" {
			t.Errorf("work-doctor --json: %v, err %v, stderr %q", report, res.err, res.stderr)
		}

		// A credential, and a handoff being retried: a warning.
		srv.cli(t, admin, "runtime-credentials", "create", epID).ok(t)
		out = srv.cli(t, admin, "bindings", "create", "--channel", "webhook", "--endpoint", epID).ok(t)
		lines := strings.Split(strings.TrimSpace(out), "\n")
		expectStatus(t, "POST ingress", send(t, http.MethodPost, lines[len(lines)-1], "", map[string]any{"text": "hi"}), http.StatusAccepted)
		eventually(t, 20*time.Second, "a failed attempt", func() bool { return sink.received.Load() > 0 })
		eventually(t, 20*time.Second, "work-doctor to warn", func() bool { code, out = doctor(); return code == 1 })
		if !strings.Contains(out, "WARNING failing_deliveries (endpoint:"+epID+")") {
			t.Errorf("work-doctor with a handoff being retried:\n%s", out)
		}

		sink.accept.Store(true)
		eventually(t, 20*time.Second, "work-doctor clean", func() bool { code, out = doctor(); return code == 0 })
		if !strings.Contains(out, ": OK (0 errors, 0 warnings, ") {
			t.Errorf("clean work-doctor:\n%s", out)
		}
	})
}
