package main

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/spf13/cobra"
)

// In-app notifications (docs/console.md) and the web console's login links.

func (c *cli) notificationsCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "notifications", Short: "Your in-app notifications: results, failures and input requests"}

	var unread bool
	var limit int
	var after string
	list := &cobra.Command{Use: "list", Short: "List your notifications, newest first",
		RunE: func(cmd *cobra.Command, args []string) error {
			filters := map[string]string{"after": after}
			if unread {
				filters["unread"] = "true"
			}
			return c.do(cmd.Context(), http.MethodGet, c.tenantPath("/notifications?"+listQuery(limit, filters)), nil, func(w io.Writer, out item) {
				list, _ := out["items"].([]any)
				fmt.Fprintf(w, "%s unread\n", str(out["unread"]))
				if len(list) == 0 {
					fmt.Fprintln(w, "(none)")
					return
				}
				its := make([]item, 0, len(list))
				for _, x := range list {
					if it, ok := x.(item); ok {
						its = append(its, it)
					}
				}
				table(w, "ID\tKIND\tCAUSE\tREAD\tCREATED\tLINK\tTITLE", rows(its, col("id"), col("kind"), col("cause"), col("read"),
					col("created_at"), col("link"), col("title")))
				if next := str(out["next"]); next != "-" {
					fmt.Fprintf(w, "more: --after %s\n", next)
				}
			})
		}}
	c.tenantFlag(list)
	list.Flags().BoolVar(&unread, "unread", false, "unread notifications only")
	list.Flags().IntVar(&limit, "limit", 100, "at most this many (1-1000)")
	list.Flags().StringVar(&after, "after", "", "the page token a previous list printed")

	var all bool
	read := &cobra.Command{Use: "read NOTIFICATION | --all", Short: "Mark a notification read, or all of them",
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if all == (len(args) == 1) {
				return errors.New("give one notification ID or --all")
			}
			var out item
			if all {
				if err := c.call(cmd.Context(), http.MethodPost, c.tenantPath("/notifications/read-all"), nil, &out); err != nil {
					return err
				}
				return c.emit(out, func(w io.Writer) { fmt.Fprintf(w, "Marked %s read\n", str(out["marked"])) })
			}
			path := c.tenantPath("/notifications/" + url.PathEscape(args[0]) + "/read")
			if err := c.call(cmd.Context(), http.MethodPost, path, nil, &out); err != nil {
				return err
			}
			return c.emit(out, func(w io.Writer) { fmt.Fprintf(w, "Read %s: %s\n", args[0], str(out["title"])) })
		}}
	c.tenantFlag(read)
	read.Flags().BoolVar(&all, "all", false, "mark every unread notification read")

	var kinds, endpoints string
	prefs := &cobra.Command{Use: "prefs", Short: "Show your notification preferences; --mute-kinds/--mute-endpoints replace them",
		RunE: func(cmd *cobra.Command, args []string) error {
			path := c.tenantPath("/notifications/preferences")
			var out item
			if err := c.call(cmd.Context(), http.MethodGet, path, nil, &out); err != nil {
				return err
			}
			f := cmd.Flags()
			if f.Changed("mute-kinds") || f.Changed("mute-endpoints") {
				body := map[string]any{"muted_kinds": out["muted_kinds"], "muted_endpoints": out["muted_endpoints"]}
				if f.Changed("mute-kinds") {
					body["muted_kinds"] = commaList(kinds)
				}
				if f.Changed("mute-endpoints") {
					body["muted_endpoints"] = commaList(endpoints)
				}
				out = item{}
				if err := c.call(cmd.Context(), http.MethodPut, path, body, &out); err != nil {
					return err
				}
			}
			return c.emit(out, func(w io.Writer) {
				table(w, "", [][]string{{"muted kinds:", joined(out["muted_kinds"])}, {"muted endpoints:", joined(out["muted_endpoints"])}})
			})
		}}
	c.tenantFlag(prefs)
	prefs.Flags().StringVar(&kinds, "mute-kinds", "", `kinds to mute, comma-separated: result, failure, input ("" for none)`)
	prefs.Flags().StringVar(&endpoints, "mute-endpoints", "", `endpoint IDs to mute, comma-separated ("" for none)`)

	cmd.AddCommand(list, read, prefs)
	return cmd
}

// commaList splits a comma-separated flag; "" is the empty list.
func commaList(v string) []string {
	out := []string{}
	for _, p := range strings.Split(v, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func (c *cli) consoleCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "console", Short: "The web console at /console/"}
	var operator string
	link := &cobra.Command{Use: "login-link", Short: "Print a one-time console sign-in link (valid 15 minutes)",
		RunE: func(cmd *cobra.Command, args []string) error {
			body := map[string]any{}
			if operator != "" {
				body["operator"] = operator
			}
			return c.do(cmd.Context(), http.MethodPost, c.tenantPath("/console-login-links"), body, func(w io.Writer, out item) {
				fmt.Fprintf(w, "One-time console sign-in for %s in tenant %s, until %s (shown once):\n%s\n",
					str(out["operator"]), str(out["tenant"]), str(out["expires_at"]), str(out["url"]))
			})
		}}
	c.tenantFlag(link)
	link.Flags().StringVar(&operator, "operator", "", "the operator to sign in (default: you; others need the admin role)")
	cmd.AddCommand(link)
	return cmd
}
