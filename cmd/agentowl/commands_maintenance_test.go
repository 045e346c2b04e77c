package main

import (
	"strings"
	"testing"
	"time"

	"github.com/agentowl/agentowl/internal/maintenance"
)

// `agentowl maintenance status` shows the scheduler's leader (this
// server) and every job's last run; only admins of the system tenant may
// read it. `agentowl endpoints overdue` changes one expectation at a time.
func TestCLIMaintenance(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, s site) {
		srv := s.startWork(t, nil)
		admin := s.adminToken(t)
		op := func(args ...string) cliResult { return srv.cli(t, admin, args...) }

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
		if l, _ := st["leader"].(map[string]any); l == nil || l["self"] != true || st["enabled"] != true || len(itemList(st["jobs"])) != 7 {
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
