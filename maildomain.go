package agentowl

import "time"

// MailDomain assigns a mail domain, or one named address, to a tenant
// (docs/channels.md, "Mail domains"): the tenant's smtp bindings may
// receive at addresses under it. Only admins of the system tenant assign
// and remove them; a domain or address belongs to at most one tenant.
type MailDomain struct {
	// Domain is a lower-case host name ("mail.example.com"), or one
	// lower-case address ("support@mail.example.com") when a single named
	// address is assigned, typically at the server's own SMTP domain.
	Domain    string
	TenantID  string
	CreatedAt time.Time
}
