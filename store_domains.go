package agentowl

import (
	"context"
)

// MailDomains are the mail domains (and single named addresses) assigned
// to tenants, which their smtp bindings may receive at (internal/ingress
// holds the rule). Implemented by Tx.
type MailDomainStore interface {
	// MailDomainCreate assigns d.Domain to d.TenantID; ErrConflict if it is
	// assigned already (to any tenant).
	MailDomainCreate(ctx context.Context, d *MailDomain) error
	// MailDomainGet returns the assignment of domain (a host name or an
	// address, lower-case); ErrNotFound if it has none.
	MailDomainGet(ctx context.Context, domain string) (*MailDomain, error)
	// MailDomainList lists the assignments of one tenant, or of every
	// tenant for tenantID "", ordered by domain.
	MailDomainList(ctx context.Context, tenantID string) ([]*MailDomain, error)
	// MailDomainDelete removes domain's assignment; ErrNotFound if it has
	// none. Bindings already at it are kept.
	MailDomainDelete(ctx context.Context, domain string) error
	// BindingListOutsideDomains lists live smtp bindings whose address is
	// assigned to their tenant neither itself nor by its domain: those
	// made before domains were assigned, or whose domain was removed or
	// given to another tenant since.
	BindingListOutsideDomains(ctx context.Context, p OutsideDomainsParams) ([]*Binding, error)
}

// OutsideDomainsParams filters BindingListOutsideDomains; results are
// oldest first.
type OutsideDomainsParams struct {
	// TenantID keeps one tenant's bindings; "" keeps every tenant's.
	TenantID string
	// ServerDomain, when set, is the server's SMTP domain: addresses
	// generated there (agent-<13 characters>@ServerDomain), which every
	// tenant may have, are left out.
	ServerDomain string
	Limit        int
}
