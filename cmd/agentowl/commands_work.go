package main

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
)

// Agent-work commands (docs/agent-work.md): endpoints, runtime credentials,
// bindings and work. Like every operator command they are clients of the
// operator API.

func (c *cli) addWorkCommands(root *cobra.Command) {
	root.AddCommand(c.endpointsCommand(), c.runtimeCredentialsCommand(), c.bindingsCommand(), c.workCommand(),
		c.attentionCommand())
	root.AddCommand(c.attachmentsCommand())
}

// readSecretFile reads a secret from a file, without its trailing newline.
func readSecretFile(path string) (string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	secret := strings.TrimRight(string(data), "\r\n")
	if secret == "" {
		return "", fmt.Errorf("%s is empty", path)
	}
	return secret, nil
}

// joined prints a JSON array of strings as a comma-separated list.
func joined(v any) string {
	raw, _ := v.([]any)
	parts := make([]string, 0, len(raw))
	for _, x := range raw {
		parts = append(parts, str(x))
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, ",")
}

// itemList returns the objects of an array field.
func itemList(v any) []item {
	raw, _ := v.([]any)
	out := make([]item, 0, len(raw))
	for _, x := range raw {
		if m, ok := x.(map[string]any); ok {
			out = append(out, m)
		}
	}
	return out
}

// apiURLFlag adds --api-url, the server URL, to commands whose own --url
// flag names an endpoint's URL (and so hides the global --url).
func (c *cli) apiURLFlag(cmd *cobra.Command) {
	cmd.Flags().StringVar(&c.url, "api-url", "", "server URL (env AGENTOWL_URL, default http://127.0.0.1:8470); --url is the endpoint's URL here")
}

func (c *cli) endpointPath(id string) string { return c.tenantPath("/endpoints/" + url.PathEscape(id)) }

func printEndpoint(w io.Writer, ep item) {
	showItem(w, ep, "id", "name", "url", "config.agent_work", "decision_url", "decision_secret_set", "overdue", "bindings", "created_at", "updated_at")
	if creds := itemList(ep["runtime_credentials"]); len(creds) > 0 {
		fmt.Fprintln(w)
		r := rows(creds, col("id"), col("status"), col("scopes"), col("expires_at"), col("label"))
		for i, it := range creds {
			r[i][2] = joined(it["scopes"])
		}
		table(w, "CREDENTIAL\tSTATUS\tSCOPES\tEXPIRES\tLABEL", r)
	}
}

func (c *cli) endpointsCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "endpoints", Short: "Manage where a tenant's events are delivered (agent runtimes and webhooks)"}
	list := c.listCmd("list", "List live endpoints", func([]string) string { return c.tenantPath("/endpoints") },
		"ID\tNAME\tAGENT WORK\tURL", "id", "name", "config.agent_work", "url")
	c.tenantFlag(list)

	var name, endpointURL, decisionURL, decisionSecretFile string
	var agentWork, noDecision bool
	decisionInput := func(body item) error {
		if decisionSecretFile != "" && decisionURL == "" {
			return errors.New("--decision-secret-file needs --decision-url")
		}
		if decisionURL != "" {
			body["decision_url"] = decisionURL
		}
		if decisionSecretFile != "" {
			secret, err := readSecretFile(decisionSecretFile)
			if err != nil {
				return err
			}
			body["decision_secret"] = secret
		}
		return nil
	}
	create := &cobra.Command{Use: "create", Short: "Add an endpoint; its signing secret is printed once",
		RunE: func(cmd *cobra.Command, args []string) error {
			body := item{"name": name, "url": endpointURL, "config": item{"agent_work": agentWork}}
			if err := decisionInput(body); err != nil {
				return err
			}
			return c.do(cmd.Context(), http.MethodPost, c.tenantPath("/endpoints"), body, func(w io.Writer, out item) {
				fmt.Fprintf(w, "Created endpoint %s (%s), agent work %s.\n", str(out["id"]), str(out["name"]), str(get(out, "config", "agent_work")))
				fmt.Fprintf(w, "Signing secret (shown once; install it on the receiver to verify deliveries):\n%s\n", str(out["signing_secret"]))
			})
		}}
	c.tenantFlag(create)
	f := create.Flags()
	f.StringVar(&name, "name", "", "a name, unique among the tenant's endpoints")
	f.StringVar(&endpointURL, "url", "", "HTTPS URL deliveries are POSTed to")
	f.BoolVar(&agentWork, "agent-work", false, "add the work block to deliveries and accept runtime callbacks")
	f.StringVar(&decisionURL, "decision-url", "", "HTTPS URL decisions are pushed to")
	f.StringVar(&decisionSecretFile, "decision-secret-file", "", "file holding the bearer secret sent to --decision-url (stored encrypted, never shown)")
	c.apiURLFlag(create)
	create.MarkFlagRequired("name")
	create.MarkFlagRequired("url")

	inspect := c.inspectCmd("inspect ENDPOINT", "Show an endpoint and its runtime credentials", c.endpointPath, printEndpoint)

	update := &cobra.Command{Use: "update ENDPOINT", Short: "Change an endpoint's name, URL, agent work or decision settings",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			body := item{}
			fl := cmd.Flags()
			if fl.Changed("name") {
				body["name"] = name
			}
			if fl.Changed("url") {
				body["url"] = endpointURL
			}
			if fl.Changed("agent-work") {
				body["config"] = item{"agent_work": agentWork}
			}
			if noDecision {
				if decisionURL != "" || decisionSecretFile != "" {
					return errors.New("--no-decision cannot be combined with --decision-url or --decision-secret-file")
				}
				body["decision_url"] = nil
			} else if err := decisionInput(body); err != nil {
				return err
			}
			if len(body) == 0 {
				return errors.New("nothing to change: pass --name, --url, --agent-work=true|false, --decision-url or --no-decision")
			}
			return c.do(cmd.Context(), http.MethodPatch, c.endpointPath(args[0]), body, printEndpoint)
		}}
	c.tenantFlag(update)
	f = update.Flags()
	f.StringVar(&name, "name", "", "new name")
	f.StringVar(&endpointURL, "url", "", "new HTTPS URL (queued deliveries follow it)")
	f.BoolVar(&agentWork, "agent-work", false, "turn agent work on (--agent-work) or off (--agent-work=false)")
	f.StringVar(&decisionURL, "decision-url", "", "new HTTPS decision URL")
	f.StringVar(&decisionSecretFile, "decision-secret-file", "", "file holding the new decision bearer secret")
	f.BoolVar(&noDecision, "no-decision", false, "remove the decision URL and secret")
	c.apiURLFlag(update)

	del := c.deleteCmd("delete ENDPOINT", "Delete an endpoint: revokes its credentials, cancels queued deliveries", c.endpointPath, "endpoint")

	rotate := &cobra.Command{Use: "rotate-secret ENDPOINT", Short: "Replace an endpoint's signing secret; the new one is printed once",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return c.do(cmd.Context(), http.MethodPost, c.endpointPath(args[0])+"/rotate-secret", nil, func(w io.Writer, out item) {
				fmt.Fprintf(w, "New signing secret of endpoint %s (shown once; it signs every delivery from now on):\n%s\n",
					str(out["id"]), str(out["signing_secret"]))
			})
		}}
	c.tenantFlag(rotate)
	pause := &cobra.Command{Use: "pause ENDPOINT", Short: "Hold an endpoint's handoffs: events queue, no attempt starts until resume",
		Long: `Holds the endpoint's handoffs: events keep being recorded and their handoffs
queued, but none is sent until 'endpoints resume'. Meanwhile 'conversations
link' can re-thread a message that joined the wrong conversation.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return c.do(cmd.Context(), http.MethodPost, c.endpointPath(args[0])+"/pause", nil, func(w io.Writer, out item) {
				fmt.Fprintf(w, "Paused endpoint %s (since %s): its handoffs are held until 'agentowl endpoints resume %s'.\n",
					str(out["id"]), str(out["paused_at"]), str(out["id"]))
			})
		}}
	c.tenantFlag(pause)
	resume := &cobra.Command{Use: "resume ENDPOINT", Short: "Hand an endpoint's held handoffs off, oldest first",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return c.do(cmd.Context(), http.MethodPost, c.endpointPath(args[0])+"/resume", nil, func(w io.Writer, out item) {
				fmt.Fprintf(w, "Resumed endpoint %s: its held handoffs go out, oldest first.\n", str(out["id"]))
			})
		}}
	c.tenantFlag(resume)
	cmd.AddCommand(list, create, inspect, update, del, rotate, pause, resume, c.endpointOverdueCommand())
	return cmd
}

func (c *cli) runtimeCredentialsCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "runtime-credentials", Short: "Issue, list and revoke endpoint-bound runtime tokens"}
	var days int
	var scopes []string
	var label string
	create := &cobra.Command{Use: "create ENDPOINT", Short: "Issue a runtime token for an endpoint (shown once)", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			body := item{"label": label}
			if cmd.Flags().Changed("days") {
				body["days"] = days // unset: the server's default lifetime; 0 is refused
			}
			if len(scopes) > 0 {
				body["scopes"] = scopes
			}
			return c.do(cmd.Context(), http.MethodPost, c.endpointPath(args[0])+"/runtime-credentials", body, func(w io.Writer, out item) {
				fmt.Fprintf(w, "Created runtime credential %s for endpoint %s (scopes %s, expires %s). Token, shown once:\n%s\n",
					str(out["id"]), str(out["endpoint_id"]), joined(out["scopes"]), str(out["expires_at"]), str(out["token"]))
			})
		}}
	c.tenantFlag(create)
	create.Flags().IntVar(&days, "days", 0, "expire after this many days (1-90; default 90)")
	create.Flags().StringSliceVar(&scopes, "scope", nil, "callbacks:write, attachments:read, decisions:read (default: all three); repeat or comma-separate")
	create.Flags().StringVar(&label, "label", "", "a note to recognise the credential by")
	list := &cobra.Command{Use: "list ENDPOINT", Short: "List an endpoint's runtime credentials (never their tokens)", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var out items
			if err := c.call(cmd.Context(), http.MethodGet, c.endpointPath(args[0])+"/runtime-credentials", nil, &out); err != nil {
				return err
			}
			return c.emit(out, func(w io.Writer) {
				if len(out.Items) == 0 {
					fmt.Fprintln(w, "(none)")
					return
				}
				r := rows(out.Items, col("id"), col("status"), col("scopes"), col("created_at"), col("expires_at"), col("label"))
				for i, it := range out.Items {
					r[i][2] = joined(it["scopes"])
				}
				table(w, "ID\tSTATUS\tSCOPES\tCREATED\tEXPIRES\tLABEL", r)
			})
		}}
	c.tenantFlag(list)
	revoke := &cobra.Command{Use: "revoke CREDENTIAL", Short: "Revoke a runtime credential at once", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return c.do(cmd.Context(), http.MethodDelete, c.tenantPath("/runtime-credentials/"+url.PathEscape(args[0])), nil, func(w io.Writer, out item) {
				fmt.Fprintf(w, "Revoked runtime credential %s\n", str(out["id"]))
			})
		}}
	c.tenantFlag(revoke)
	cmd.AddCommand(create, list, revoke)
	return cmd
}

func (c *cli) bindingsCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "bindings", Short: "Receiving addresses that route a channel's events to an endpoint"}
	list := c.listCmd("list", "List live bindings", func([]string) string { return c.tenantPath("/bindings") },
		"ID\tCHANNEL\tENDPOINT\tSIGNED\tADDRESS\tNAME", "id", "channel", "endpoint_id", "signed", "address", "name")
	c.tenantFlag(list)
	var channel, endpoint, name, secretFile, address, authTokenFile string
	var handoffDelay time.Duration
	create := &cobra.Command{Use: "create", Short: "Add a binding; its ingress URL (or email address) and secret are printed once",
		RunE: func(cmd *cobra.Command, args []string) error {
			body := item{"channel": channel, "endpoint_id": endpoint, "name": name}
			if address != "" {
				body["address"] = address
			}
			if handoffDelay != 0 {
				if handoffDelay%time.Second != 0 {
					return fmt.Errorf("--handoff-delay must be whole seconds, such as 90s or 2m")
				}
				body["handoff_delay_seconds"] = int(handoffDelay / time.Second)
			}
			for field, file := range map[string]string{"signing_secret": secretFile, "auth_token": authTokenFile} {
				if file == "" {
					continue
				}
				secret, err := readSecretFile(file)
				if err != nil {
					return err
				}
				body[field] = secret
			}
			return c.do(cmd.Context(), http.MethodPost, c.tenantPath("/bindings"), body, func(w io.Writer, out item) {
				fmt.Fprintf(w, "Created %s binding %s routing to endpoint %s.\n", str(out["channel"]), str(out["id"]), str(out["endpoint_id"]))
				if a, _ := out["address"].(string); a != "" {
					fmt.Fprintf(w, "Receiving address: %s\n", a)
				}
				if sec, _ := out["secret"].(string); sec != "" {
					fmt.Fprintf(w, "Worker secret (shown once; the Worker sends it as its bearer secret):\n%s\n", sec)
				}
				if u, _ := out["ingress_url"].(string); u != "" {
					fmt.Fprintf(w, "Ingress URL (shown once; it is the credential):\n%s\n", u)
				}
			})
		}}
	c.tenantFlag(create)
	f := create.Flags()
	f.StringVar(&channel, "channel", "", "the channel: webhook, smtp, cloudflare-email, sms or voice")
	f.StringVar(&endpoint, "endpoint", "", "endpoint the events are routed to")
	f.StringVar(&name, "name", "", "a readable name")
	f.StringVar(&secretFile, "signing-secret-file", "", "webhook: file holding a whsec_ secret: events must then carry a valid Standard Webhooks signature")
	f.StringVar(&address, "address", "", "smtp: the receiving email address (default: a generated one at the server's AGENTOWL_SMTP_DOMAIN)")
	f.StringVar(&authTokenFile, "auth-token-file", "", "sms, voice: file holding the provider account's auth token that signs its webhooks (stored encrypted, never shown)")
	f.DurationVar(&handoffDelay, "handoff-delay", 0, "hold each event's handoff this long (at most 10m): a window to re-thread a message with 'conversations link'")
	create.MarkFlagRequired("channel")
	create.MarkFlagRequired("endpoint")
	inspect := c.inspectCmd("inspect BINDING", "Show a binding", c.itemPath("/bindings/"), func(w io.Writer, out item) {
		showItem(w, out, "id", "channel", "name", "endpoint_id", "signed", "address", "handoff_delay_seconds", "created_at")
	})
	del := c.deleteCmd("delete BINDING", "Delete a binding: its ingress URL stops accepting events", c.itemPath("/bindings/"), "binding")
	cmd.AddCommand(list, create, inspect, del)
	return cmd
}

func (c *cli) workCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "work", Short: "Follow work handed to agent runtimes: delivery, runtime progress, decisions"}
	list := c.filteredListCmd("List work, newest first", "/work", []listFilter{
		{"status", "runtime status: pending, accepted, running, needs_input, completed, failed, cancelled"},
		{"endpoint", "only work of this endpoint"},
		{"conversation", "only work of this conversation"},
	}, "ID\tGEN\tRUNTIME\tDELIVERY\tDECISION\tENDPOINT\tCREATED", "id", "generation", "runtime.status", "delivery.state",
		"decision.status", "endpoint_id", "created_at")

	var all bool
	inspect := c.inspectCmd("inspect WORK", "Show work: its three statuses and its timeline", c.itemPath("/work/"), func(w io.Writer, out item) {
		printWork(w, out, all)
	})
	inspect.Flags().BoolVar(&all, "all", false, "also list routine running progress")

	replay := &cobra.Command{Use: "replay WORK", Short: "Hand the work's event over again as new work (generation + 1)", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return c.do(cmd.Context(), http.MethodPost, c.tenantPath("/work/"+url.PathEscape(args[0])+"/replay"), nil, func(w io.Writer, out item) {
				fmt.Fprintf(w, "Replayed as work %s (generation %s, conversation %s)\n", str(out["id"]), str(out["generation"]),
					str(out["conversation_id"]))
			})
		}}
	c.tenantFlag(replay)
	cmd.AddCommand(list, inspect, replay)
	return cmd
}

// printWork shows the three statuses apart, then the timeline. Routine
// running callbacks are counted, and listed only with --all.
func printWork(w io.Writer, wk item, all bool) {
	showItem(w, wk, "id", "endpoint_id", "conversation_id", "event_id", "generation", "replay_of", "credential_id", "created_at")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "delivery (HTTP acknowledgement):")
	showItem(w, wk, "delivery.state", "delivery.attempts", "delivery.last_status", "delivery.last_error", "delivery.next_attempt_at")
	fmt.Fprintln(w, "runtime (callbacks):")
	showItem(w, wk, "runtime.status", "runtime.sequence", "runtime.runtime_session_id", "runtime.callbacks",
		"runtime.result.summary", "runtime.result.url", "runtime.ended_at")
	fmt.Fprintln(w, "decision (human decision receipt):")
	showItem(w, wk, "decision.status")
	var lines [][]string
	quiet := 0
	for _, e := range itemList(wk["timeline"]) {
		if e["quiet"] == true && !all {
			quiet++
			continue
		}
		var what string
		switch e["kind"] {
		case "handoff":
			what = "work committed for handoff"
		case "delivery_attempt":
			what = fmt.Sprintf("attempt %s: status %s %s", str(get(e, "attempt", "n")), str(get(e, "attempt", "status_code")),
				strings.TrimSpace(fmt.Sprint(get(e, "attempt", "error"))))
			what = strings.TrimSuffix(what, " <nil>")
		case "callback":
			what = fmt.Sprintf("callback %s seq %s: %s", str(get(e, "callback", "callback_id")), str(get(e, "callback", "sequence")),
				str(get(e, "callback", "status")))
			if get(e, "callback", "stale") == true {
				what += " (stale: recorded, changed nothing)"
			}
		}
		lines = append(lines, []string{str(e["at"]), str(e["kind"]), what})
	}
	fmt.Fprintln(w)
	table(w, "AT\tKIND\tWHAT", lines)
	if quiet > 0 {
		fmt.Fprintf(w, "(%d routine running updates not shown; --all lists them)\n", quiet)
	}
}
