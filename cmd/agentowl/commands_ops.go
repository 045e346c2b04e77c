package main

import (
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
)

// Operating commands (docs/operating.md): the work outbox and ingress
// publications with their redrive, and work-doctor. Like every operator
// command they are clients of the operator API.

func (c *cli) addOpsCommands(root *cobra.Command) {
	root.AddCommand(
		c.queueCommand("work-outbox", "Outgoing jobs of agent work (handoffs, decision pushes): list, inspect, redrive failed ones",
			"job", "ID\tKIND\tSTATE\tATTEMPTS\tWORK\tENDPOINT\tCREATED\tLAST ERROR",
			[]string{"id", "kind", "state", "attempts", "work_id", "endpoint_id", "created_at", "last_error"},
			queueFilter{"endpoint", "only jobs to this endpoint"}, queueFilter{"work", "only jobs of this work"}),
		c.queueCommand("ingress-publications", "Events routed to endpoints: list, inspect, redrive failed publications",
			"publication", "ID\tSTATE\tATTEMPTS\tEVENT\tENDPOINT\tWORK\tCREATED\tLAST ERROR",
			[]string{"id", "state", "attempts", "event_id", "endpoint_id", "work_id", "created_at", "last_error"},
			queueFilter{"endpoint", "only publications to this endpoint"}, queueFilter{"binding", "only events this binding received"},
			queueFilter{"event", "only publications of this event"}),
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
			"bindings routing to endpoints without agent work, and the scheduler's leadership. Each finding has a\n" +
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

// queueFilter is an ID filter flag of a queue's list, named as its query
// parameter.
type queueFilter struct{ name, help string }

// queueCommand builds list, inspect and redrive of one outbox view of the
// operator API (/api/v1/tenants/T/<name>).
func (c *cli) queueCommand(name, short, what, header string, cols []string, filters ...queueFilter) *cobra.Command {
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
	inspect := &cobra.Command{Use: "inspect " + upper, Short: "Show a " + what + ", what it delivers and every attempt", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var out item
			if err := c.call(cmd.Context(), http.MethodGet, path("/"+url.PathEscape(args[0])), nil, &out); err != nil {
				return err
			}
			return c.emit(out, func(w io.Writer) { printOutboxEntry(w, out) })
		}}
	c.tenantFlag(inspect)
	redrive := &cobra.Command{Use: "redrive " + upper,
		Short: "Send a failed " + what + " again: a new attempt series of the same message (admin)",
		Long: "Starts a new attempt series of a failed or cancelled " + what + ": the same message, with the same\n" +
			"webhook-id, body, work identity and decision ID, due now and retried for a new window. It is\n" +
			"never new work (`agentowl work replay` makes new work). A delivered " + what + " is refused\n" +
			"(409 already_delivered), as is one still being delivered (409 delivery_pending).",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var out item
			if err := c.call(cmd.Context(), http.MethodPost, path("/"+url.PathEscape(args[0])+"/redrive"), nil, &out); err != nil {
				return err
			}
			return c.emit(out, func(w io.Writer) {
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
