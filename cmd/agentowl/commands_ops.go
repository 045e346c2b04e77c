package main

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
)

// Operating commands (docs/operating.md): the work outbox and ingress
// publications with their redrive, and work-doctor; and maintenance
// (docs/maintenance.md): the scheduler's status, and an endpoint's overdue
// expectations. Like every operator command they are clients of the
// operator API.

func (c *cli) addOpsCommands(root *cobra.Command) {
	root.AddCommand(
		c.queueCommand("work-outbox", "Outgoing jobs of agent work (handoffs, decision pushes): list, inspect, redrive failed ones",
			"job", "ID\tKIND\tSTATE\tATTEMPTS\tWORK\tENDPOINT\tCREATED\tLAST ERROR",
			[]string{"id", "kind", "state", "attempts", "work_id", "endpoint_id", "created_at", "last_error"},
			listFilter{"endpoint", "only jobs to this endpoint"}, listFilter{"work", "only jobs of this work"}),
		c.queueCommand("ingress-publications", "Events routed to endpoints: list, inspect, redrive failed publications",
			"publication", "ID\tSTATE\tATTEMPTS\tEVENT\tENDPOINT\tWORK\tCREATED\tLAST ERROR",
			[]string{"id", "state", "attempts", "event_id", "endpoint_id", "work_id", "created_at", "last_error"},
			listFilter{"endpoint", "only publications to this endpoint"}, listFilter{"binding", "only events this binding received"},
			listFilter{"event", "only publications of this event"}),
		c.workDoctorCommand(),
	)
}

// workDoctorCommand is `agentowl work-doctor <tenant>`: the tenant's
// findings, each with a severity and a suggested command. It exits 0 when
// the report is clean (notes only), 1 on warnings and 2 on errors.
func (c *cli) workDoctorCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "work-doctor [TENANT]",
		Short: "Check a tenant's agent work: findings with severity and a suggested command (exit 0 clean, 1 warnings, 2 errors)",
		Long: "Checks a tenant's agent work (admin): runtime credentials missing or expiring within 7 days, failed and\n" +
			"failing deliveries, overdue work, a stuck outbox, decisions without receipts, quotas near their limit,\n" +
			"bindings routing to endpoints without agent work, smtp bindings outside the tenant's mail domains, and\n" +
			"the scheduler's leadership. Each finding has a\n" +
			"severity (error, warning, info) and a command to run next. Exit status: 0 when no finding is a warning\n" +
			"or an error, 1 on warnings, 2 on errors; --json prints the report for scripts. TENANT defaults to\n" +
			"--tenant, AGENTOWL_TENANT or the tenant your token acts in.",
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				c.tenant = args[0]
			}
			var out item
			if err := c.call(cmd.Context(), http.MethodGet, c.tenantPath("/doctor"), nil, &out); err != nil {
				return err
			}
			if err := c.emit(out, func(w io.Writer) { printDoctor(w, out) }); err != nil {
				return err
			}
			switch out["status"] {
			case "error":
				cmd.SilenceErrors = true // the report said it all
				return exitCode(2)
			case "warning":
				cmd.SilenceErrors = true
				return exitCode(1)
			}
			return nil
		},
	}
	c.tenantFlag(cmd)
	return cmd
}

func printDoctor(w io.Writer, r item) {
	counts := func(k string) int { return int(num(get(r, "counts", k))) }
	fmt.Fprintf(w, "Tenant %s at %s: %s (%d errors, %d warnings, %d notes)\n", str(r["tenant"]), str(r["checked_at"]),
		strings.ToUpper(str(r["status"])), counts("error"), counts("warning"), counts("info"))
	for _, f := range itemList(r["findings"]) {
		fmt.Fprintf(w, "\n%-7s %s (%s)\n  %s\n  -> %s\n", strings.ToUpper(str(f["severity"])), str(f["check"]), str(f["subject"]),
			str(f["message"]), str(f["command"]))
	}
}

// queueCommand builds list, inspect and redrive of one outbox view of the
// operator API (/api/v1/tenants/T/<name>).
func (c *cli) queueCommand(name, short, what, header string, cols []string, filters ...listFilter) *cobra.Command {
	cmd := &cobra.Command{Use: name, Short: short}
	path := func(suffix string) string { return c.tenantPath("/" + name + suffix) }
	var state, olderThan string
	var limit int
	values := make([]string, len(filters))
	list := c.listCmd("list", "List "+what+"s, newest first (failed ones unless --state says otherwise)", func([]string) string {
		q := url.Values{"limit": {strconv.Itoa(limit)}}
		if state != "all" {
			q.Set("state", state)
		}
		if olderThan != "" {
			q.Set("older_than", olderThan)
		}
		for i, f := range filters {
			if values[i] != "" {
				q.Set(f.name, values[i])
			}
		}
		return path("?" + q.Encode())
	}, header, cols...)
	c.tenantFlag(list)
	list.Flags().StringVar(&state, "state", "failed", "failed, pending, delivered, cancelled, or all")
	list.Flags().StringVar(&olderThan, "older-than", "", "only those created at least this long ago (90m, 24h)")
	for i, f := range filters {
		list.Flags().StringVar(&values[i], f.name, "", f.help)
	}
	list.Flags().IntVar(&limit, "limit", 100, "at most this many (1-1000)")

	upper := strings.ToUpper(what)
	inspect := c.inspectCmd("inspect "+upper, "Show a "+what+", what it delivers and every attempt", c.itemPath("/"+name+"/"), printOutboxEntry)
	redrive := &cobra.Command{Use: "redrive " + upper,
		Short: "Send a failed " + what + " again: a new attempt series of the same message (admin)",
		Long: "Starts a new attempt series of a failed or cancelled " + what + ": the same message, with the same\n" +
			"webhook-id, body, work identity and decision ID, due now and retried for a new window. It is\n" +
			"never new work (`agentowl work replay` makes new work). A delivered " + what + " is refused\n" +
			"(409 already_delivered), as is one still being delivered (409 delivery_pending).",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return c.do(cmd.Context(), http.MethodPost, path("/"+url.PathEscape(args[0])+"/redrive"), nil, func(w io.Writer, out item) {
				fmt.Fprintf(w, "Redrove %s %s: attempt series %s starts at attempt %s, retried until %s.\n", what, str(out["id"]),
					strconv.Itoa(int(num(out["redrives"]))+1), str(out["series_first_attempt"]), str(out["deadline_at"]))
			})
		}}
	c.tenantFlag(redrive)
	cmd.AddCommand(list, inspect, redrive)
	return cmd
}

// num reads a JSON number of a decoded document (0 when absent).
func num(v any) float64 {
	switch x := v.(type) {
	case float64:
		return x
	case interface{ Float64() (float64, error) }:
		f, _ := x.Float64()
		return f
	}
	return 0
}

func printOutboxEntry(w io.Writer, e item) {
	showItem(w, e, "id", "kind", "state", "attempts", "redrives", "series_first_attempt", "endpoint_id", "work_id", "decision_id",
		"event_id", "binding_id", "channel", "incident_id", "created_at", "deadline_at", "next_attempt_at", "ended_at",
		"last_status", "last_error")
	printAttempts(w, e)
}

func (c *cli) maintenanceCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "maintenance", Short: "The maintenance scheduler: its leader and periodic jobs"}
	status := &cobra.Command{Use: "status", Short: "Show the scheduler's leader and every job's last run (system tenant admins)",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return c.do(cmd.Context(), http.MethodGet, "/api/v1/maintenance", nil, printMaintenance)
		}}
	cmd.AddCommand(status)
	return cmd
}

func printMaintenance(w io.Writer, st item) {
	if l, ok := st["leader"].(map[string]any); ok {
		self := ""
		if l["self"] == true {
			self = " (the replica that answered)"
		}
		fmt.Fprintf(w, "Leader: %s%s, since %s, lease until %s\n", str(l["replica"]), self, str(l["since"]), str(l["lease_until"]))
	} else {
		fmt.Fprintln(w, "Leader: none. No replica runs the jobs: start one with AGENTOWL_SCHEDULER=on (the default).")
	}
	if st["enabled"] == false {
		fmt.Fprintln(w, "The replica that answered never leads (AGENTOWL_SCHEDULER=off).")
	}
	fmt.Fprintln(w)
	var r [][]string
	for _, j := range itemList(st["jobs"]) {
		row := []string{str(j["name"]), str(j["interval"]), "never", "-", "-", "-", "-", "-"}
		if run, ok := j["last_run"].(map[string]any); ok {
			outcome := str(run["outcome"])
			if e := str(run["error"]); e != "-" {
				outcome += ": " + e
			}
			row = []string{str(j["name"]), str(j["interval"]), str(run["started_at"]), str(run["duration_ms"]) + "ms", outcome,
				str(run["affected"]), str(run["runs"]) + "/" + str(run["failures"]), str(run["replica"])}
		}
		if j["late"] == true {
			row[2] += " (late)"
		}
		r = append(r, row)
	}
	table(w, "JOB\tINTERVAL\tLAST RUN\tTOOK\tOUTCOME\tAFFECTED\tRUNS/FAILED\tREPLICA", r)
	if d, ok := st["delivery"].(map[string]any); ok {
		printDeliveryHealth(w, d)
	}
	if o, ok := st["overdue_defaults"].(map[string]any); ok {
		fmt.Fprintf(w, "\nOverdue defaults: accept_within %s, report_interval %s, input_expiry %s\n",
			str(o["accept_within"]), str(o["report_interval"]), onOffText(o["input_expiry"] == true))
	}
	if ret, ok := st["retention"].(map[string]any); ok {
		keys := make([]string, 0, len(ret))
		for k := range ret {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		parts := make([]string, len(keys))
		for i, k := range keys {
			parts[i] = k + " " + str(ret[k])
		}
		fmt.Fprintf(w, "Retention: %s\n", strings.Join(parts, ", "))
	}
}

// printDeliveryHealth prints each delivery engine's report, the pending
// messages by surface and the stall findings.
func printDeliveryHealth(w io.Writer, d map[string]any) {
	fmt.Fprintln(w)
	var r [][]string
	for _, e := range itemList(d["engines"]) {
		state := "live"
		if e["live"] != true {
			state = "silent since " + str(e["seen_at"])
		}
		r = append(r, []string{str(e["replica"]), str(e["started_at"]), state, str(e["attempts_in_flight"]),
			str(e["slots_busy"]) + "/" + str(e["slots_idle"]), str(e["slots_without_attempt"]), str(e["slots_reclaimed"])})
	}
	if len(r) == 0 {
		fmt.Fprintln(w, "Delivery: no replica delivers (start one with AGENTOWL_DELIVERY=on, the default).")
	} else {
		table(w, "DELIVERY REPLICA\tSTARTED\tSTATE\tATTEMPTS\tSLOTS BUSY/IDLE\tWITHOUT ATTEMPT\tRECLAIMED", r)
	}
	r = nil
	for _, q := range itemList(d["queues"]) {
		r = append(r, []string{str(q["surface"]), str(q["pending"]), str(q["oldest_created_at"]), str(q["oldest_due_at"])})
	}
	if len(r) > 0 {
		fmt.Fprintln(w)
		table(w, "SURFACE\tPENDING\tOLDEST CREATED\tDUE WITHOUT ATTEMPT SINCE", r)
	}
	findings, _ := d["findings"].([]any)
	if len(findings) == 0 {
		fmt.Fprintln(w, "\nDelivery: no stall found.")
		return
	}
	fmt.Fprintln(w, "\nDelivery findings:")
	for _, f := range findings {
		fmt.Fprintf(w, "  - %s\n", str(f))
	}
}

func onOffText(on bool) string {
	if on {
		return "on"
	}
	return "off"
}

// endpointOverdueCommand is `agentowl endpoints overdue`: it changes the
// flags given and keeps the endpoint's other expectations (the API replaces
// them as a whole, so the command reads them first).
func (c *cli) endpointOverdueCommand() *cobra.Command {
	var acceptWithin, reportInterval, inputExpiry string
	var defaults bool
	cmd := &cobra.Command{Use: "overdue ENDPOINT", Short: "Set when an endpoint's work counts as overdue (docs/maintenance.md)",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			fl := cmd.Flags()
			changed := fl.Changed("accept-within") || fl.Changed("report-interval") || fl.Changed("input-expiry")
			if defaults == changed {
				return errors.New("pass --accept-within, --report-interval or --input-expiry, or --defaults alone")
			}
			var body item
			if defaults {
				body = item{"overdue": nil}
			} else {
				var ep item
				if err := c.call(cmd.Context(), http.MethodGet, c.endpointPath(args[0]), nil, &ep); err != nil {
					return err
				}
				o := item{}
				if cur, ok := ep["overdue"].(map[string]any); ok {
					o = cur
				}
				for field, v := range map[string]string{"accept_within": acceptWithin, "report_interval": reportInterval} {
					switch {
					case !fl.Changed(strings.ReplaceAll(field, "_", "-")):
					case v == "default":
						delete(o, field)
					default:
						o[field] = v
					}
				}
				if fl.Changed("input-expiry") {
					switch inputExpiry {
					case "on", "off":
						o["input_expiry"] = inputExpiry == "on"
					case "default":
						delete(o, "input_expiry")
					default:
						return errors.New("--input-expiry is on, off or default")
					}
				}
				body = item{"overdue": o}
			}
			return c.do(cmd.Context(), http.MethodPatch, c.endpointPath(args[0]), body, printEndpoint)
		}}
	c.tenantFlag(cmd)
	f := cmd.Flags()
	f.StringVar(&acceptWithin, "accept-within", "", "first callback due this long after the handoff's delivery (such as 10m), off, or default")
	f.StringVar(&reportInterval, "report-interval", "", "while accepted or running, a callback due this often (such as 1h), off, or default")
	f.StringVar(&inputExpiry, "input-expiry", "", "while needs_input, requests answered before they expire: on, off or default")
	f.BoolVar(&defaults, "defaults", false, "go back to the server's defaults for every expectation")
	return cmd
}
