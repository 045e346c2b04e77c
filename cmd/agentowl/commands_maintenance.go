package main

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"

	"github.com/spf13/cobra"
)

// Maintenance commands (docs/maintenance.md): the scheduler's status, and
// an endpoint's overdue expectations.

func (c *cli) maintenanceCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "maintenance", Short: "The maintenance scheduler: its leader and periodic jobs"}
	status := &cobra.Command{Use: "status", Short: "Show the scheduler's leader and every job's last run (system tenant admins)",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			var out item
			if err := c.call(cmd.Context(), http.MethodGet, "/api/v1/maintenance", nil, &out); err != nil {
				return err
			}
			return c.emit(out, func(w io.Writer) { printMaintenance(w, out) })
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
			var out item
			if err := c.call(cmd.Context(), http.MethodPatch, c.endpointPath(args[0]), body, &out); err != nil {
				return err
			}
			return c.emit(out, func(w io.Writer) { printEndpoint(w, out) })
		}}
	c.tenantFlag(cmd)
	f := cmd.Flags()
	f.StringVar(&acceptWithin, "accept-within", "", "first callback due this long after the handoff's delivery (such as 10m), off, or default")
	f.StringVar(&reportInterval, "report-interval", "", "while accepted or running, a callback due this often (such as 1h), off, or default")
	f.StringVar(&inputExpiry, "input-expiry", "", "while needs_input, requests answered before they expire: on, off or default")
	f.BoolVar(&defaults, "defaults", false, "go back to the server's defaults for every expectation")
	return cmd
}
