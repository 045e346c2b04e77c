package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"

	"github.com/spf13/cobra"
)

// Needs-attention commands (docs/attention.md): list, inspect, ack and
// resolve items, and decide runtime questions and approvals.

func (c *cli) attentionPath(id string) string {
	return c.tenantPath("/attention/" + url.PathEscape(id))
}

func (c *cli) attentionCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "attention", Short: "The Needs-attention inbox: runtime questions, approvals and incidents"}
	list := c.filteredListCmd("List attention items, newest first", "/attention", []listFilter{
		{"status", "open, acknowledged or resolved"},
		{"work", "only items of this work"},
	}, "ID\tKIND\tSTATUS\tREQUEST\tREV\tEXPIRES\tASSIGNEE\tWORK", "id", "kind", "status", "request.id", "request.revision",
		"request.expires_at", "assignee", "work_id")

	inspect := c.inspectCmd("inspect ATTENTION", "Show an item, its request, decision, push and receipt", c.attentionPath, printAttention)

	var assignee string
	ack := &cobra.Command{Use: "ack ATTENTION", Short: "Acknowledge and assign an item (never decides or resolves it)", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			body := map[string]any{}
			if assignee != "" {
				body["assignee"] = assignee
			}
			return c.do(cmd.Context(), http.MethodPost, c.attentionPath(args[0])+"/ack", body, func(w io.Writer, out item) {
				fmt.Fprintf(w, "Acknowledged %s, assigned to %s\n", args[0], str(out["assignee"]))
			})
		}}
	c.tenantFlag(ack)
	ack.Flags().StringVar(&assignee, "assignee", "", "who handles it (default: you)")

	resolve := &cobra.Command{Use: "resolve ATTENTION", Short: "Resolve an incident after review (not requests)", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return c.do(cmd.Context(), http.MethodPost, c.attentionPath(args[0])+"/resolve", nil, func(w io.Writer, out item) {
				fmt.Fprintf(w, "Resolved %s\n", args[0])
			})
		}}
	c.tenantFlag(resolve)

	var submit bool
	decide := &cobra.Command{Use: "decide ATTENTION DECISION.json",
		Short: "Preview a decision on the current request; --submit submits it", Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			data, err := os.ReadFile(args[1])
			if err != nil {
				return err
			}
			if !json.Valid(data) {
				return fmt.Errorf("%s is not valid JSON", args[1])
			}
			var current item
			if err := c.call(cmd.Context(), http.MethodGet, c.attentionPath(args[0]), nil, &current); err != nil {
				return err
			}
			var shown bytes.Buffer
			if !c.json {
				w := &shown
				fmt.Fprintln(w, "current request:")
				showItem(w, current, "id", "kind", "status", "request.id", "request.revision", "request.prompt",
					"request.action.description", "request.action.digest", "request.expires_at", "request.expired")
				fmt.Fprintf(w, "request.allowed_decisions\t%s\n", joined(get(current, "request", "allowed_decisions")))
				fmt.Fprintln(w)
			}
			path := c.attentionPath(args[0]) + "/decision"
			if !submit {
				path += "?preview=true"
			}
			var out item
			if err := c.call(cmd.Context(), http.MethodPost, path, json.RawMessage(data), &out); err != nil {
				// The refusal names what to fix (such as the current digest).
				return err
			}
			_, _ = cmd.OutOrStdout().Write(shown.Bytes())
			return c.emit(out, func(w io.Writer) {
				body, _ := json.MarshalIndent(out["body"], "", "  ")
				if out["body"] == nil && out["approval_request"] != nil {
					// An AAP approval request: show the request as decided.
					b, _ := json.MarshalIndent(map[string]any{"decision_id": get(data2item(data), "decision_id"),
						"decision": get(data2item(data), "decision"), "approval_request": out["approval_request"]}, "", "  ")
					body = b
				}
				switch {
				case out["preview"] == true:
					fmt.Fprintf(w, "would submit (nothing changed; add --submit after reviewing the action):\n%s\n", body)
				case out["replay"] == true:
					fmt.Fprintf(w, "already submitted (replay, nothing changed):\n%s\n", body)
				default:
					id := get(out, "attention", "decision", "decision_id")
					if id == nil { // an AAP approval item: the decision is on the approval request
						id = get(data2item(data), "decision_id")
					}
					fmt.Fprintf(w, "submitted decision %s:\n%s\n", str(id), body)
				}
			})
		}}
	c.tenantFlag(decide)
	decide.Flags().BoolVar(&submit, "submit", false, "submit the decision (without it, only preview)")
	cmd.AddCommand(list, inspect, ack, resolve, decide)
	return cmd
}

// printAttention shows an item with its three separate statuses: the work's
// runtime status, the decision push and the decision receipt.
func printAttention(w io.Writer, it item) {
	showItem(w, it, "id", "kind", "status", "resolution", "work_id", "endpoint_id", "assignee", "acknowledged_at", "resolved_at",
		"summary", "message_id", "created_at")
	if it["approval_request"] != nil {
		fmt.Fprintln(w, "\nAAP approval request (decide as with `approvals decide`):")
		showItem(w, it, "approval_request.instance_id", "approval_request.request.status", "approval_request.request.tool",
			"approval_request.decided_by", "approval_request.request.decision.decided_at", "approval_request.request.decision.expires_at")
	}
	if it["request"] != nil {
		fmt.Fprintln(w, "\nrequest:")
		showItem(w, it, "request.id", "request.revision", "request.prompt", "request.action.description", "request.action.digest",
			"request.expires_at", "request.expired")
		fmt.Fprintf(w, "request.allowed_decisions\t%s\n", joined(get(it, "request", "allowed_decisions")))
	}
	if files, _ := it["files"].([]any); len(files) > 0 {
		fmt.Fprintf(w, "\nretained files of event %v (agentowl attachments download %v ATTACHMENT FILE):\n", it["event_id"], it["event_id"])
		for _, f := range files {
			if f, ok := f.(map[string]any); ok {
				fmt.Fprintf(w, "%v\t%v\t%v bytes\t%v\n", f["id"], f["name"], f["size"], f["availability"])
			}
		}
	}
	fmt.Fprintln(w, "\nruntime (callbacks):")
	showItem(w, it, "work_status")
	if it["decision"] != nil {
		fmt.Fprintln(w, "decision:")
		showItem(w, it, "decision.decision_id", "decision.decision", "decision.answer", "decision.expected_action_digest",
			"decision.decided_by", "decision.decided_at")
		fmt.Fprintln(w, "decision push (HTTP delivery):")
		showItem(w, it, "push.state", "push.attempts", "push.last_status", "push.last_error")
		fmt.Fprintln(w, "decision receipt (runtime acceptance):")
		showItem(w, it, "decision.receipt.status", "decision.receipt.received_at", "decision.receipt.via")
	}
}

// data2item decodes a decision file (already checked to be valid JSON).
func data2item(data []byte) item {
	var it item
	_ = json.Unmarshal(data, &it)
	return it
}
