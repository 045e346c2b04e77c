package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/agentowl/agentowl"
)

func systemClock() agentowl.Clock { return agentowl.SystemClock{} }

// item and items are the operator API's JSON objects, kept generic so the
// CLI prints in --json exactly what the server sent.
type item = map[string]any

type items struct {
	Items []item `json:"items"`
}

func str(v any) string {
	switch x := v.(type) {
	case nil:
		return "-"
	case string:
		if x == "" {
			return "-"
		}
		return x
	case json.Number:
		return x.String()
	}
	b, _ := json.Marshal(v)
	return string(b)
}

func get(m item, path ...string) any {
	var v any = m
	for _, p := range path {
		mm, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = mm[p]
	}
	return v
}

func rows(list []item, cols ...[]string) [][]string {
	out := make([][]string, 0, len(list))
	for _, it := range list {
		row := make([]string, len(cols))
		for i, c := range cols {
			row[i] = str(get(it, c...))
		}
		out = append(out, row)
	}
	return out
}

func col(path string) []string { return strings.Split(path, ".") }

func (c *cli) tenantPath(suffix string) string { return "/api/v1/tenants/" + c.tenantName() + suffix }

// listCmd builds a command that GETs a list and prints a table.
func (c *cli) listCmd(use, short string, path func(args []string) string, header string, cols ...string) *cobra.Command {
	cmd := &cobra.Command{Use: use, Short: short, RunE: func(cmd *cobra.Command, args []string) error {
		var out items
		if err := c.call(cmd.Context(), http.MethodGet, path(args), nil, &out); err != nil {
			return err
		}
		cs := make([][]string, len(cols))
		for i, p := range cols {
			cs[i] = col(p)
		}
		return c.emit(out, func(w io.Writer) {
			if len(out.Items) == 0 {
				fmt.Fprintln(w, "(none)")
				return
			}
			table(w, header, rows(out.Items, cs...))
		})
	}}
	return cmd
}

// listFilter is a filter flag of a list command, named as its query
// parameter.
type listFilter struct{ name, help string }

// filteredListCmd is the list command of a tenant's collection at path
// (such as "/work"): its flags are filters and --limit.
func (c *cli) filteredListCmd(short, path string, filters []listFilter, header string, cols ...string) *cobra.Command {
	var limit int
	values := make([]string, len(filters))
	list := c.listCmd("list", short, func([]string) string {
		q := map[string]string{}
		for i, f := range filters {
			q[f.name] = values[i]
		}
		return c.tenantPath(path + "?" + listQuery(limit, q))
	}, header, cols...)
	c.tenantFlag(list)
	for i, f := range filters {
		list.Flags().StringVar(&values[i], f.name, "", f.help)
	}
	list.Flags().IntVar(&limit, "limit", 100, "at most this many (1-1000)")
	return list
}

// inspectCmd builds a command that takes one ID, GETs path(ID) and prints
// the object answered with human: the inspect command of every kind.
func (c *cli) inspectCmd(use, short string, path func(id string) string, human func(w io.Writer, out item)) *cobra.Command {
	cmd := &cobra.Command{Use: use, Short: short, Args: cobra.ExactArgs(1), RunE: func(cmd *cobra.Command, args []string) error {
		return c.do(cmd.Context(), http.MethodGet, path(args[0]), nil, human)
	}}
	c.tenantFlag(cmd)
	return cmd
}

// deleteCmd is `delete ID`: it deletes the item at path(ID) and says
// "Deleted <noun> ID".
func (c *cli) deleteCmd(use, short string, path func(id string) string, noun string) *cobra.Command {
	cmd := &cobra.Command{Use: use, Short: short, Args: cobra.ExactArgs(1), RunE: func(cmd *cobra.Command, args []string) error {
		if err := c.call(cmd.Context(), http.MethodDelete, path(args[0]), nil, nil); err != nil {
			return err
		}
		return c.emit(item{"deleted": args[0]}, func(w io.Writer) { fmt.Fprintf(w, "Deleted %s %s\n", noun, args[0]) })
	}}
	c.tenantFlag(cmd)
	return cmd
}

// itemPath is the path of one item of a tenant's collection (such as
// "/work/") by its ID.
func (c *cli) itemPath(collection string) func(id string) string {
	return func(id string) string { return c.tenantPath(collection + url.PathEscape(id)) }
}

// listQuery is the query of a list: its limit, and every filter given (an
// empty value is no filter).
func listQuery(limit int, filters map[string]string) string {
	q := url.Values{"limit": {strconv.Itoa(limit)}}
	for k, v := range filters {
		if v != "" {
			q.Set(k, v)
		}
	}
	return q.Encode()
}

// showItem prints one object as aligned key: value lines.
func showItem(w io.Writer, it item, keys ...string) {
	r := make([][]string, 0, len(keys))
	for _, k := range keys {
		if v := get(it, col(k)...); v != nil {
			r = append(r, []string{k + ":", str(v)})
		}
	}
	table(w, "", r)
}

func (c *cli) addOperatorCommands(root *cobra.Command) {
	root.AddCommand(c.tenantsCommand(), c.operatorsCommand(), c.tokensCommand("operator-tokens", "operator"),
		c.tokensCommand("provisioner-tokens", "provisioner"), c.auditCommand(), c.instancesCommand(),
		c.approvalsCommand(), c.policiesCommand(), c.deliveriesCommand(), c.maintenanceCommand())
	c.addWorkCommands(root)
	c.addOpsCommands(root)
	root.AddCommand(c.notificationsCommand(), c.consoleCommand())
	root.AddCommand(c.conversationsCommand())
	root.AddCommand(c.domainsCommand())
}

func (c *cli) deliveriesCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "deliveries", Short: "Follow outbound notifications and their attempts"}
	list := c.filteredListCmd("List notifications, newest first", "/deliveries", []listFilter{
		{"instance", "only notifications to this instance's receiver"},
		{"state", "pending, delivered, failed or cancelled"},
		{"request", "only notifications about this approval request"},
	}, "EVENT ID\tKIND\tSTATE\tATTEMPTS\tNEXT ATTEMPT\tDEADLINE\tLAST ERROR", "id", "kind", "state", "attempts",
		"next_attempt_at", "deadline_at", "last_error")
	inspect := c.inspectCmd("inspect EVENT-ID", "Show a notification and every attempt", c.itemPath("/deliveries/"), func(w io.Writer, out item) {
		showItem(w, out, "id", "kind", "destination", "subject", "state", "attempts", "created_at", "deadline_at",
			"next_attempt_at", "ended_at", "last_status", "last_error")
		printAttempts(w, out)
	})
	cmd.AddCommand(list, inspect)
	return cmd
}

// printAttempts prints a delivery's attempt_history, if any, as a table.
func printAttempts(w io.Writer, delivery item) {
	hist, _ := delivery["attempt_history"].([]any)
	list := make([]item, 0, len(hist))
	for _, h := range hist {
		if m, ok := h.(map[string]any); ok {
			list = append(list, m)
		}
	}
	if len(list) > 0 {
		fmt.Fprintln(w)
		table(w, "#\tSTARTED\tENDED\tSTATUS\tERROR\tURL", rows(list, col("n"), col("started_at"), col("ended_at"),
			col("status_code"), col("error"), col("url")))
	}
}

func (c *cli) tenantsCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "tenants", Short: "List and create tenants"}
	cmd.AddCommand(c.listCmd("list", "List the tenant your token acts in", func([]string) string { return "/api/v1/tenants" },
		"NAME\tROLE\tID", "name", "role", "id"))
	var admin string
	var days int
	create := &cobra.Command{Use: "create NAME", Short: "Create a tenant and its first admin (system tenant admins only)",
		Long: "Creates a tenant with one operator, its admin, and prints that operator's first token once.\n" +
			"You get no role in the new tenant: hand the token to its admin. Only admins of the\n" +
			"system tenant (the first tenant of the database) may create tenants.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			body := item{"name": args[0]}
			if admin != "" {
				body["admin"] = admin
			}
			if days != 0 {
				body["days"] = days
			}
			return c.do(cmd.Context(), http.MethodPost, "/api/v1/tenants", body, func(w io.Writer, out item) {
				tok, _ := out["admin"].(map[string]any)
				fmt.Fprintf(w, "Created tenant %s (%s)\nIts admin %s's token (shown once):\n%s\n",
					str(out["name"]), str(out["id"]), str(tok["operator"]), str(tok["token"]))
			})
		}}
	create.Flags().StringVar(&admin, "admin", "", "name of the new tenant's first operator (default: your name)")
	create.Flags().IntVar(&days, "days", 0, "days until the admin token expires (0: never)")
	cmd.AddCommand(create)
	return cmd
}

func (c *cli) operatorsCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "operators", Short: "Manage the people who operate a tenant"}
	list := c.listCmd("list", "List a tenant's operators", func([]string) string { return c.tenantPath("/operators") },
		"NAME\tROLE\tID\tCREATED", "name", "role", "id", "created_at")
	c.tenantFlag(list)
	var name, role string
	create := &cobra.Command{Use: "create", Short: "Add an operator to a tenant with a role (admin or member)",
		RunE: func(cmd *cobra.Command, args []string) error {
			return c.do(cmd.Context(), http.MethodPost, c.tenantPath("/operators"), item{"name": name, "role": role}, func(w io.Writer, out item) {
				fmt.Fprintf(w, "Operator %s is %s\n", str(out["name"]), str(out["role"]))
			})
		}}
	c.tenantFlag(create)
	create.Flags().StringVar(&name, "name", "", "operator name")
	create.Flags().StringVar(&role, "role", "member", "admin or member")
	create.MarkFlagRequired("name")
	cmd.AddCommand(list, create)
	return cmd
}

func (c *cli) tokensCommand(use, kind string) *cobra.Command {
	cmd := &cobra.Command{Use: use, Short: "Create, list and revoke " + kind + " tokens"}
	path := "/" + use
	list := c.listCmd("list", "List "+kind+" tokens (never their secrets)", func([]string) string { return c.tenantPath(path) },
		"ID\tLABEL\tSTATUS\tCREATED\tEXPIRES", "id", "label", "status", "created_at", "expires_at")
	c.tenantFlag(list)
	var label, operator string
	var days int
	create := &cobra.Command{Use: "create", Short: "Issue a " + kind + " token (shown once)",
		RunE: func(cmd *cobra.Command, args []string) error {
			body := item{"label": label, "days": days}
			if operator != "" {
				body["operator"] = operator
			}
			return c.do(cmd.Context(), http.MethodPost, c.tenantPath(path), body, func(w io.Writer, out item) {
				fmt.Fprintf(w, "Created %s token %s (expires %s). Shown once:\n%s\n", kind, str(out["id"]), str(out["expires_at"]), str(out["token"]))
			})
		}}
	c.tenantFlag(create)
	create.Flags().StringVar(&label, "label", "", "a note to recognise the token by")
	create.Flags().IntVar(&days, "days", 0, "expire after this many days (0: no expiry)")
	if kind == "operator" {
		create.Flags().StringVar(&operator, "operator", "", "operator the token belongs to (default: you)")
	}
	revoke := &cobra.Command{Use: "revoke ID", Short: "Revoke a " + kind + " token at once", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return c.do(cmd.Context(), http.MethodDelete, c.tenantPath(path+"/"+url.PathEscape(args[0])), nil, func(w io.Writer, out item) {
				fmt.Fprintf(w, "Revoked %s token %s\n", kind, str(out["id"]))
			})
		}}
	c.tenantFlag(revoke)
	cmd.AddCommand(list, create, revoke)
	return cmd
}

func (c *cli) auditCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "audit", Short: "Read a tenant's audit log"}
	var limit int
	list := c.listCmd("list", "List configuration changes, newest first",
		func([]string) string { return c.tenantPath("/audit?limit=" + strconv.Itoa(limit)) },
		"AT\tACTOR\tACTION\tTARGET\tREQUEST", "at", "actor", "action", "target", "request_id")
	c.tenantFlag(list)
	list.Flags().IntVar(&limit, "limit", 100, "at most this many entries (1-1000)")
	cmd.AddCommand(list, c.auditExportCommand(), c.auditVerifyCommand())
	return cmd
}

func (c *cli) instancesCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "instances", Short: "Inspect AAP instances"}
	list := c.listCmd("list", "List live instances", func([]string) string { return c.tenantPath("/instances") },
		"ID\tNAME\tAPPROVAL VALIDITY\tRECEIVER\tCREATED", "id", "name", "approval_validity", "delivery.url", "created_at")
	c.tenantFlag(list)
	inspect := c.inspectCmd("inspect ID", "Show one instance", c.itemPath("/instances/"), func(w io.Writer, out item) {
		showItem(w, out, "id", "name", "approval_validity", "delivery.type", "delivery.url", "delivery.registration_id", "created_at", "deleted_at")
	})
	var validity string
	update := &cobra.Command{Use: "update ID", Short: "Change how long new approvals of an instance stay valid", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return c.do(cmd.Context(), http.MethodPatch, c.tenantPath("/instances/"+url.PathEscape(args[0])),
				item{"approval_validity": validity}, func(w io.Writer, out item) { showItem(w, out, "id", "name", "approval_validity") })
		}}
	c.tenantFlag(update)
	update.Flags().StringVar(&validity, "approval-validity", "", "validity of new approvals, such as 5m")
	update.MarkFlagRequired("approval-validity")
	cmd.AddCommand(list, inspect, update)
	return cmd
}

func (c *cli) approvalsCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "approvals", Short: "List, inspect and decide approval requests"}
	list := c.filteredListCmd("List approval requests, newest first", "/approvals", []listFilter{
		{"status", "only requests in this state (pending, approved, denied, expired, cancelled)"},
		{"instance", "only requests of this instance ID"},
	}, "ID\tTOOL\tSTATUS\tCREATED\tDEADLINE\tINSTANCE", "request.id", "request.tool", "request.status",
		"request.created_at", "request.deadline_at", "instance_id")
	inspect := c.inspectCmd("inspect REQUEST-ID", "Show one approval request in full", c.itemPath("/approvals/"), func(w io.Writer, out item) {
		printRequest(w, out["request"], out)
	})
	var approve, deny bool
	var note, validFor string
	decide := &cobra.Command{Use: "decide REQUEST-ID --approve|--deny", Short: "Approve or deny a pending request", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if approve == deny {
				return fmt.Errorf("pass exactly one of --approve or --deny")
			}
			body := item{"decision": "deny"}
			if approve {
				body["decision"] = "approve"
			}
			if note != "" {
				body["note"] = note
			}
			if validFor != "" {
				body["valid_for"] = validFor
			}
			return c.do(cmd.Context(), http.MethodPost, c.tenantPath("/approvals/"+url.PathEscape(args[0])+"/decision"), body, func(w io.Writer, out item) {
				printRequest(w, out, nil)
			})
		}}
	c.tenantFlag(decide)
	decide.Flags().BoolVar(&approve, "approve", false, "approve the call")
	decide.Flags().BoolVar(&deny, "deny", false, "deny the call")
	decide.Flags().StringVar(&note, "note", "", "a note for the agent")
	decide.Flags().StringVar(&validFor, "valid-for", "", "how long the approval permits the call to start (default: the instance's validity)")
	cmd.AddCommand(list, inspect, decide)
	return cmd
}

func printRequest(w io.Writer, req any, extra item) {
	r, _ := req.(map[string]any)
	showItem(w, r, "id", "status", "tool", "timeout", "created_at", "deadline_at", "decision.status", "decision.note",
		"decision.decided_at", "decision.expires_at")
	if extra != nil {
		showItem(w, extra, "instance_id", "decided_by")
	}
	args, _ := json.MarshalIndent(r["arguments"], "", "  ")
	fmt.Fprintf(w, "arguments:\n%s\n", args)
	if v, ok := r["agent_reasoning"]; ok {
		fmt.Fprintf(w, "agent reasoning (a claim from the agent): %s\n", str(v))
	}
}

func (c *cli) policiesCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "policies", Short: "Rules that approve or deny matching requests at creation"}
	list := c.listCmd("list", "List rules in evaluation order", func([]string) string { return c.tenantPath("/policies") },
		"ID\tNAME\tTOOL\tCONDITION\tEFFECT\tPRIORITY\tINSTANCE", "id", "name", "tool", "condition", "effect", "priority", "instance_id")
	c.tenantFlag(list)
	var name, tool, condition, effect, note, instance string
	var priority int
	create := &cobra.Command{Use: "create", Short: "Add a rule: --tool NAME|* --effect approve|deny [--condition CEL]",
		RunE: func(cmd *cobra.Command, args []string) error {
			body := item{"tool": tool, "effect": effect, "priority": priority}
			for k, v := range map[string]string{"name": name, "condition": condition, "note": note, "instance_id": instance} {
				if v != "" {
					body[k] = v
				}
			}
			return c.do(cmd.Context(), http.MethodPost, c.tenantPath("/policies"), body, func(w io.Writer, out item) {
				showItem(w, out, "id", "name", "tool", "condition", "effect", "priority", "instance_id")
			})
		}}
	c.tenantFlag(create)
	f := create.Flags()
	f.StringVar(&name, "name", "", "a readable name")
	f.StringVar(&tool, "tool", "", "tool name the rule applies to, or * for any")
	f.StringVar(&condition, "condition", "", "CEL condition over tool, arguments and context, e.g. 'arguments.amount <= 1000'")
	f.StringVar(&effect, "effect", "", "approve or deny")
	f.StringVar(&note, "note", "", "note recorded on the decision")
	f.StringVar(&instance, "instance", "", "apply to this instance only")
	f.IntVar(&priority, "priority", 0, "lower runs first")
	create.MarkFlagRequired("tool")
	create.MarkFlagRequired("effect")
	del := c.deleteCmd("delete ID", "Remove a rule", c.itemPath("/policies/"), "policy")
	cmd.AddCommand(list, create, del)
	return cmd
}
