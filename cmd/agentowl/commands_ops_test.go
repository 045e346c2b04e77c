package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentowl/agentowl/internal/maintenance"
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
	s.srv = newTLSServer(t, func(w http.ResponseWriter, r *http.Request) {
		s.received.Add(1)
		if s.accept.Load() {
			w.WriteHeader(http.StatusAccepted)
			return
		}
		w.WriteHeader(http.StatusInternalServerError)
	})
	return s
}

// The seed's work-outbox and ingress-publications commands: a handoff that
// failed is listed, inspected and redriven; a delivered one is refused.
func TestCLIWorkOutbox(t *testing.T) {
	forEachBackend(t, func(t *testing.T, s site) {
		sink := newSwitchSink(t)
		// A handoff window of two seconds: the handoff fails while the test
		// waits for it (the wall clock drives this server).
		srv := s.startWorkWith(t, certPEM(sink.srv),
			func(c *server.Config) { c.Work.HandoffWindow = 2 * time.Second })
		admin, op := s.operator(t, srv)
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
	forEachBackendBuilt(t, func(t *testing.T, s site, bin string) {
		sink := newSwitchSink(t)
		srv := s.startWork(t, certPEM(sink.srv))
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

// `agentowl maintenance status` shows the scheduler's leader (this
// server) and every job's last run; only admins of the system tenant may
// read it. `agentowl endpoints overdue` changes one expectation at a time.
func TestCLIMaintenance(t *testing.T) {
	forEachBackend(t, func(t *testing.T, s site) {
		srv := s.startWork(t, nil)
		admin, op := s.operator(t, srv)

		var st map[string]any
		eventually(t, 30*time.Second, "every job to have run once", func() bool {
			st = cliJSON(t, op("--json", "maintenance", "status"))
			for _, j := range itemList(st["jobs"]) {
				if j["last_run"] == nil {
					return false
				}
			}
			return true
		})
		if l, _ := st["leader"].(map[string]any); l == nil || l["self"] != true || st["enabled"] != true || len(itemList(st["jobs"])) != 8 {
			t.Fatalf("maintenance status --json = %v", st)
		}
		out := op("maintenance", "status").ok(t)
		for _, want := range []string{"(the replica that answered)", "JOB", maintenance.JobRetention, maintenance.JobRetainedBytes,
			maintenance.JobConversationWindows, "accept_within 5m0s", "input_expiry on", "audit 8760h0m0s",
			"DELIVERY REPLICA", "live", "Delivery: no stall found."} {
			if !strings.Contains(out, want) {
				t.Errorf("maintenance status lacks %q:\n%s", want, out)
			}
		}
		jobs := out[strings.Index(out, "JOB"):]
		_, rows := parseTable(t, jobs[:strings.Index(jobs, "\n\n")])
		if row := rowWith(t, "maintenance status", rows, maintenance.JobExpiry); row[1] != "1s" || row[4] != "ok" {
			t.Errorf("request_expiry row = %q", row)
		}
		// The server wires retained attachments into the retained_bytes job.
		if row := rowWith(t, "maintenance status", rows, maintenance.JobRetainedBytes); row[4] != "ok" {
			t.Errorf("retained_bytes row = %q", row)
		}

		created := cliJSON(t, op("tenants", "create", "globex", "--json"))
		globex := str(get(created, "admin", "token"))
		srv.cli(t, globex, "maintenance", "status").failed(t, "forbidden")
		op("operators", "create", "--name", "mo", "--role", "member").ok(t)
		member := str(cliJSON(t, op("--json", "operator-tokens", "create", "--operator", "mo"))["token"])
		srv.cli(t, member, "maintenance", "status").failed(t, "forbidden")

		epCmd := func(args ...string) cliResult {
			return runCLI(t, append(args, "--api-url", srv.url, "--token", admin)...)
		}
		ep := cliJSON(t, epCmd("--json", "endpoints", "create", "--name", "rt", "--url", "https://127.0.0.1:9/rt", "--agent-work"))
		id := str(ep["id"])
		if ep["overdue"] != nil {
			t.Errorf("a new endpoint sets overdue %v, want the defaults", ep["overdue"])
		}
		up := cliJSON(t, op("--json", "endpoints", "overdue", id, "--accept-within", "10m", "--input-expiry", "off"))
		if o, _ := up["overdue"].(map[string]any); o["accept_within"] != "10m0s" || o["input_expiry"] != false || len(o) != 2 {
			t.Errorf("endpoints overdue = %v", up["overdue"])
		}
		up = cliJSON(t, op("--json", "endpoints", "overdue", id, "--report-interval", "off", "--accept-within", "default"))
		if o, _ := up["overdue"].(map[string]any); o["report_interval"] != "off" || o["input_expiry"] != false || len(o) != 2 {
			t.Errorf("endpoints overdue, a second change = %v", up["overdue"])
		}
		if insp := op("endpoints", "inspect", id).ok(t); !strings.Contains(insp, `"report_interval":"off"`) {
			t.Errorf("endpoints inspect does not show the expectations:\n%s", insp)
		}
		if up = cliJSON(t, op("--json", "endpoints", "overdue", id, "--defaults")); up["overdue"] != nil {
			t.Errorf("endpoints overdue --defaults left %v", up["overdue"])
		}
		op("endpoints", "overdue", id, "--accept-within", "soon").failed(t, "invalid_field")
		op("endpoints", "overdue", id, "--accept-within", "1ms").failed(t, "invalid_field")
		op("endpoints", "overdue", id, "--input-expiry", "maybe").failed(t, "on, off or default")
		op("endpoints", "overdue", id).failed(t, "--defaults")
		op("endpoints", "overdue", id, "--defaults", "--accept-within", "1m").failed(t, "--defaults")
	})
}

// The maintenance settings reach the scheduler's configuration; bad values
// name the setting.
func TestMaintenanceSettings(t *testing.T) {
	cfg, err := configureWith(t, map[string]string{
		"AGENTOWL_SCHEDULER": "off", "AGENTOWL_SCHEDULER_LEASE": "6s", "AGENTOWL_OVERDUE_ACCEPT_WITHIN": "off",
		"AGENTOWL_OVERDUE_REPORT_INTERVAL": "2h", "AGENTOWL_OVERDUE_INPUT_EXPIRY": "off", "AGENTOWL_RETAIN_EVENTS": "10d",
		"AGENTOWL_RETAIN_CONVERSATIONS": "11d", "AGENTOWL_RETAIN_WORK": "12d", "AGENTOWL_RETAIN_CALLBACKS": "36h",
		"AGENTOWL_RETAIN_ATTENTION": "14d", "AGENTOWL_RETAIN_AUDIT": "400d", "AGENTOWL_RETAIN_DELIVERIES": "8d",
		"AGENTOWL_PURGE_BATCH": "500", "AGENTOWL_DELIVERY_ACCOUNT_CONCURRENCY": "9",
	})
	if err != nil {
		t.Fatal(err)
	}
	m, day := cfg.Maintenance, 24*time.Hour
	for name, c := range map[string]struct{ got, want any }{
		"scheduler off":      {m.Disabled, true},
		"lease":              {m.Lease, 6 * time.Second},
		"accept off":         {m.Overdue.AcceptWithin, maintenance.Off},
		"report":             {m.Overdue.ReportInterval, 2 * time.Hour},
		"input off":          {m.Overdue.InputExpiryOff, true},
		"events":             {m.Retention.Events, 10 * day},
		"conversations":      {m.Retention.Conversations, 11 * day},
		"work":               {m.Retention.Work, 12 * day},
		"callbacks":          {m.Retention.Callbacks, 36 * time.Hour},
		"attention":          {m.Retention.Attention, 14 * day},
		"audit":              {m.Retention.Audit, 400 * day},
		"deliveries":         {cfg.Delivery.Retention, 8 * day},
		"purge batch":        {m.PurgeBatch, 500},
		"account concurrent": {cfg.Delivery.PerAccountConcurrency, 9},
	} {
		if c.got != c.want {
			t.Errorf("%s: %v, want %v", name, c.got, c.want)
		}
	}
	for env, bads := range map[string][]string{
		"AGENTOWL_SCHEDULER":                    {"yes", "true"},
		"AGENTOWL_SCHEDULER_LEASE":              {"1s", "11m", "soon"},
		"AGENTOWL_OVERDUE_ACCEPT_WITHIN":        {"0s", "-1m", "never", "1ms"},
		"AGENTOWL_OVERDUE_INPUT_EXPIRY":         {"no"},
		"AGENTOWL_RETAIN_EVENTS":                {"0d", "30m", "-1d", "month"},
		"AGENTOWL_RETAIN_AUDIT":                 {"29d"},
		"AGENTOWL_RETAIN_DELIVERIES":            {"6d"},
		"AGENTOWL_PURGE_BATCH":                  {"0", "100001"},
		"AGENTOWL_DELIVERY_ACCOUNT_CONCURRENCY": {"0", "1025"},
	} {
		for _, bad := range bads {
			if _, err := configureWith(t, map[string]string{env: bad}); err == nil || !strings.Contains(err.Error(), env) {
				t.Errorf("%s=%q: %v, want an error naming the setting", env, bad, err)
			}
		}
	}
}
