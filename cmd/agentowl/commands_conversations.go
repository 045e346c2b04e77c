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
)

// Conversation commands (docs/channels.md): the operator view of
// conversations and the two audited commands that steer them, link and
// reset. Like every operator command they are clients of the operator API.

// pageOf is a page of a list with the cursor of the next one.
type pageOf struct {
	Items []item `json:"items"`
	Next  string `json:"next,omitempty"`
}

func (c *cli) conversationPath(id string) string {
	return c.tenantPath("/conversations/" + url.PathEscape(id))
}

// nextHint tells how to ask for the page after this one.
func nextHint(w io.Writer, next, command string) {
	if next != "" {
		fmt.Fprintf(w, "(more: %s --after %s)\n", command, next)
	}
}

func printConversation(w io.Writer, it item) {
	showItem(w, it, "id", "channel", "binding_id", "key", "status", "runtime_session_id", "events", "open_work",
		"created_at", "last_event_at", "ended_at")
}

// eventSummary is one line about an event's content: an SMS body, a call's
// lifecycle status or transcription, else the payload, shortened.
func eventSummary(ev item) string {
	p, _ := ev["payload"].(map[string]any)
	var s string
	switch {
	case p == nil:
	case get(p, "transcription", "text") != nil:
		s = "transcription: " + str(get(p, "transcription", "text"))
	case p["event"] != nil && p["call_sid"] != nil:
		s = "call " + str(p["event"])
		if st, _ := p["call_status"].(string); st != "" {
			s += " " + st
		}
	case p["body"] != nil:
		s = str(p["body"])
	case p["subject"] != nil:
		s = str(p["subject"])
	default:
		b, _ := json.Marshal(p)
		s = string(b)
	}
	if n := len(ev["attachments"].([]any)); n > 0 {
		s += fmt.Sprintf(" [%d attachment(s)]", n)
	}
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > 72 {
		s = string(r[:71]) + "…"
	}
	return s
}

func (c *cli) conversationsCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "conversations", Short: "See and steer conversations: their events, links and resets"}

	var channel, binding, status, after string
	var limit int
	list := &cobra.Command{Use: "list", Short: "List conversations, the most recently active first",
		RunE: func(cmd *cobra.Command, args []string) error {
			q := url.Values{}
			for k, v := range map[string]string{"channel": channel, "binding": binding, "status": status, "after": after} {
				if v != "" {
					q.Set(k, v)
				}
			}
			if limit != 0 {
				q.Set("limit", strconv.Itoa(limit))
			}
			var out pageOf
			if err := c.call(cmd.Context(), http.MethodGet, c.tenantPath("/conversations?"+q.Encode()), nil, &out); err != nil {
				return err
			}
			return c.emit(out, func(w io.Writer) {
				if len(out.Items) == 0 {
					fmt.Fprintln(w, "(none)")
					return
				}
				table(w, "ID\tCHANNEL\tKEY\tSTATUS\tLAST EVENT\tBINDING", rows(out.Items, col("id"), col("channel"), col("key"),
					col("status"), col("last_event_at"), col("binding_id")))
				nextHint(w, out.Next, "agentowl conversations list")
			})
		}}
	c.tenantFlag(list)
	f := list.Flags()
	f.StringVar(&channel, "channel", "", "only this channel: webhook, smtp, cloudflare-email, sms or voice")
	f.StringVar(&binding, "binding", "", "only conversations of this binding")
	f.StringVar(&status, "status", "", "only open or only ended conversations")
	f.IntVar(&limit, "limit", 0, "at most this many (1-1000; default 100)")
	f.StringVar(&after, "after", "", "the page after this cursor (printed as more: …)")

	inspect := c.inspectCmd("inspect CONVERSATION", "Show a conversation, its event count and its open work", c.conversationPath, printConversation)

	var all bool
	var evLimit int
	var evAfter string
	events := &cobra.Command{Use: "events CONVERSATION", Short: "List a conversation's events, oldest first, with their handoff and work",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var out pageOf
			cursor := evAfter
			for {
				q := url.Values{}
				if evLimit != 0 {
					q.Set("limit", strconv.Itoa(evLimit))
				}
				if cursor != "" {
					q.Set("after", cursor)
				}
				var pg pageOf
				if err := c.call(cmd.Context(), http.MethodGet, c.conversationPath(args[0])+"/events?"+q.Encode(), nil, &pg); err != nil {
					return err
				}
				out.Items, out.Next = append(out.Items, pg.Items...), pg.Next
				if !all || pg.Next == "" {
					break
				}
				cursor = pg.Next
			}
			return c.emit(out, func(w io.Writer) {
				if len(out.Items) == 0 {
					fmt.Fprintln(w, "(none)")
					return
				}
				r := make([][]string, 0, len(out.Items))
				for _, ev := range out.Items {
					var work []string
					for _, wk := range itemList(ev["work"]) {
						work = append(work, str(wk["id"])+" ("+str(wk["status"])+")")
					}
					if len(work) == 0 {
						work = []string{"-"}
					}
					r = append(r, []string{str(ev["received_at"]), str(ev["id"]), str(ev["sender"]), str(ev["handoff"]),
						strings.Join(work, ","), eventSummary(ev)})
				}
				table(w, "RECEIVED\tEVENT\tSENDER\tHANDOFF\tWORK\tCONTENT", r)
				nextHint(w, out.Next, "agentowl conversations events "+args[0])
			})
		}}
	c.tenantFlag(events)
	events.Flags().BoolVar(&all, "all", false, "every page, not only the first")
	events.Flags().IntVar(&evLimit, "limit", 0, "events per page (1-100; default 100)")
	events.Flags().StringVar(&evAfter, "after", "", "the page after this cursor (printed as more: …)")

	link := &cobra.Command{Use: "link EVENT CONVERSATION",
		Short: "Move an event not yet handed off into an open conversation of its binding (audited)",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return c.do(cmd.Context(), http.MethodPost, c.conversationPath(args[1])+"/link", item{"event_id": args[0]}, func(w io.Writer, out item) {
				if get(out, "from", "id") == get(out, "to", "id") {
					fmt.Fprintf(w, "Event %s is already in conversation %s\n", args[0], args[1])
					return
				}
				fmt.Fprintf(w, "Linked event %s into conversation %s (from %s, now %s)\n", args[0], str(get(out, "to", "id")),
					str(get(out, "from", "id")), str(get(out, "from", "status")))
			})
		}}
	c.tenantFlag(link)

	var force bool
	reset := &cobra.Command{Use: "reset CONVERSATION",
		Short: "End a conversation's session: the next event starts a new conversation (audited)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return c.do(cmd.Context(), http.MethodPost, c.conversationPath(args[0])+"/reset", item{"force": force}, func(w io.Writer, out item) {
				fmt.Fprintf(w, "Reset conversation %s: ended at %s", str(out["id"]), str(out["ended_at"]))
				if n, _ := out["open_work"].(json.Number); n.String() != "0" {
					fmt.Fprintf(w, "; %s work not ended goes on", n)
				}
				fmt.Fprintln(w)
			})
		}}
	c.tenantFlag(reset)
	reset.Flags().BoolVar(&force, "force", false, "reset even while work of the conversation has not ended")

	cmd.AddCommand(list, inspect, events, link, reset)
	return cmd
}
