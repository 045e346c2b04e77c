package main

import (
	"fmt"
	"io"
	"net/http"
	"net/url"

	"github.com/spf13/cobra"
)

// domainsCommand is `agentowl domains`: the mail domains assigned to
// tenants (docs/channels.md, "Mail domains"), for admins of the system
// tenant. Its --tenant names the tenant a domain is assigned to, not the
// tenant the token acts in.
func (c *cli) domainsCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "domains", Short: "Assign mail domains to tenants (system tenant admins only)",
		Long: "A tenant's smtp bindings receive at named addresses only under the mail domains assigned to it\n" +
			"(or at addresses assigned to it one by one); any tenant may have generated addresses at the\n" +
			"server's AGENTOWL_SMTP_DOMAIN. Only admins of the system tenant assign and remove domains."}
	var listTenant string
	list := &cobra.Command{Use: "list", Short: "List assigned mail domains", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			path := "/api/v1/mail-domains"
			if listTenant != "" {
				path += "?" + url.Values{"tenant": {listTenant}}.Encode()
			}
			var out items
			if err := c.call(cmd.Context(), http.MethodGet, path, nil, &out); err != nil {
				return err
			}
			return c.emit(out, func(w io.Writer) {
				if len(out.Items) == 0 {
					fmt.Fprintln(w, "(none)")
					return
				}
				table(w, "DOMAIN\tTENANT\tCREATED", rows(out.Items, col("domain"), col("tenant"), col("created_at")))
			})
		}}
	list.Flags().StringVar(&listTenant, "tenant", "", "only this tenant's domains")
	var tenant string
	add := &cobra.Command{Use: "add DOMAIN", Short: "Assign a mail domain (or one address) to a tenant", Args: cobra.ExactArgs(1),
		Long: "Assigns DOMAIN (mail.example.com) or one address (support@mail.example.com) to the tenant --tenant:\n" +
			"its admins may then bind addresses under it. Point the domain's MX at this server's SMTP listener.",
		RunE: func(cmd *cobra.Command, args []string) error {
			return c.do(cmd.Context(), http.MethodPost, "/api/v1/mail-domains", item{"domain": args[0], "tenant": tenant},
				func(w io.Writer, out item) {
					fmt.Fprintf(w, "Assigned %s to tenant %s\n", str(out["domain"]), str(out["tenant"]))
				})
		}}
	add.Flags().StringVar(&tenant, "tenant", "", "the tenant the domain is assigned to")
	add.MarkFlagRequired("tenant")
	remove := &cobra.Command{Use: "remove DOMAIN", Short: "Remove a mail domain's assignment (its bindings keep receiving)",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := c.call(cmd.Context(), http.MethodDelete, "/api/v1/mail-domains/"+url.PathEscape(args[0]), nil, nil); err != nil {
				return err
			}
			return c.emit(item{"removed": args[0]}, func(w io.Writer) { fmt.Fprintf(w, "Removed mail domain %s\n", args[0]) })
		}}
	cmd.AddCommand(list, add, remove)
	return cmd
}
