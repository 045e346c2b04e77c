package ingress

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/agentowl/agentowl"
	"github.com/agentowl/agentowl/internal/access"
)

// Mail domains (docs/channels.md, "Mail domains"). An smtp binding may
// receive at:
//
//   - an address generated at the server's SMTP domain (agent-…@
//     AGENTOWL_SMTP_DOMAIN), which any tenant may ask for by leaving the
//     address out;
//   - a named address under a domain assigned to its tenant, unless that
//     very address is assigned to another tenant;
//   - a named address assigned to its tenant itself (how a system admin
//     gives one tenant support@<the server's SMTP domain>).
//
// Only admins of the system tenant assign and remove domains. Every other
// named address is refused with one answer, whatever the reason (another
// tenant's domain or address, an unassigned domain, a taken address), so
// that the refusal tells a tenant nothing about the addresses of others.

// generatedPrefix starts every generated local part; generatedLocalLen is
// its length with the 13 base32 characters of 8 random bytes.
const (
	generatedPrefix   = "agent-"
	generatedLocalLen = len(generatedPrefix) + 13
)

// errAddressRefused is the one answer to a named address the tenant may
// not bind.
func errAddressRefused() error {
	return agentowl.FieldError(agentowl.ECodeInvalidField, "address",
		"This address cannot be bound: a named address must be under a mail domain assigned to this tenant and not in use "+
			"by another binding. Leave address out for a generated one at the server's SMTP domain; a system admin assigns "+
			"domains (agentowl domains add).")
}

// addressAllowed reports whether tenantID may bind the named address addr
// (normalized): an entry for the address itself decides, else its domain's.
func addressAllowed(ctx context.Context, tx agentowl.Tx, tenantID, addr string) (bool, error) {
	_, domain, _ := strings.Cut(addr, "@")
	for _, name := range []string{addr, domain} {
		d, err := tx.MailDomainGet(ctx, name)
		if errors.Is(err, agentowl.ErrNotFound) {
			continue
		}
		if err != nil {
			return false, err
		}
		return d.TenantID == tenantID, nil
	}
	return false, nil
}

// NormalizeMailDomain returns the canonical form of a mail domain entry: a
// lower-case host name, or a normalized address (NormalizeAddress) when it
// holds an @. ok is false for anything else.
func NormalizeMailDomain(v string) (norm string, ok bool) {
	if strings.Contains(v, "@") {
		return NormalizeAddress(v)
	}
	v = strings.ToLower(v)
	if !hostName(v) {
		return "", false
	}
	return v, true
}

// AssignedDomain is a mail domain with the name of its tenant.
type AssignedDomain struct {
	*agentowl.MailDomain
	Tenant string
}

// AddMailDomain assigns domain (a host name, or one address) to the tenant
// named tenant. System admins only; a domain assigned already, to any
// tenant, is already_exists (remove it first to move it). Recorded in the
// audit logs of the system tenant and of the tenant.
func (s *Service) AddMailDomain(ctx context.Context, p *access.Principal, domain, tenant string) (*AssignedDomain, error) {
	norm, ok := NormalizeMailDomain(domain)
	if !ok {
		return nil, agentowl.FieldError(agentowl.ECodeInvalidField, "domain",
			"domain must be a host name (mail.example.com) or one address (support@mail.example.com).")
	}
	if tenant == "" {
		return nil, agentowl.FieldError(agentowl.ECodeMissingField, "tenant", "tenant is required: the tenant the domain is assigned to.")
	}
	var out *AssignedDomain
	err := s.store.Write(ctx, func(tx agentowl.Tx) error {
		home, err := access.SystemAdminTx(ctx, tx, p)
		if err != nil {
			return err
		}
		t, err := tx.TenantGetByName(ctx, tenant)
		if errors.Is(err, agentowl.ErrNotFound) {
			return agentowl.FieldError(agentowl.ECodeNotFound, "tenant", "No tenant %q.", tenant)
		}
		if err != nil {
			return err
		}
		now := s.clock.Now()
		d := &agentowl.MailDomain{Domain: norm, TenantID: t.ID, CreatedAt: now}
		if err := tx.MailDomainCreate(ctx, d); err != nil {
			if errors.Is(err, agentowl.ErrConflict) {
				return errDomainTaken(norm)
			}
			return err
		}
		out = &AssignedDomain{MailDomain: d, Tenant: t.Name}
		return auditDomain(ctx, tx, now, p, home, t.ID, "mail_domain.add", norm, t.Name)
	})
	if errors.Is(err, agentowl.ErrConflict) {
		return nil, errDomainTaken(norm)
	}
	if err != nil {
		return nil, err
	}
	return out, nil
}

func errDomainTaken(domain string) error {
	return agentowl.FieldError(agentowl.ECodeAlreadyExists, "domain",
		"%s is assigned already: remove it first (agentowl domains remove) to assign it to another tenant.", domain)
}

// auditDomain records a domain's change in the system tenant's log and in
// the log of the tenant it concerns.
func auditDomain(ctx context.Context, tx agentowl.Tx, now time.Time, p *access.Principal, home *agentowl.Tenant, tenantID, action, domain,
	tenant string) error {
	details := map[string]any{"domain": domain, "tenant": tenant}
	if err := access.Audit(ctx, tx, now, home.ID, p, action, "mail_domain:"+domain, details); err != nil {
		return err
	}
	if tenantID == home.ID {
		return nil
	}
	return access.Audit(ctx, tx, now, tenantID, p, action, "mail_domain:"+domain, details)
}

// ListMailDomains lists the assigned mail domains, of the tenant named
// tenant or of every tenant (""). System admins only.
func (s *Service) ListMailDomains(ctx context.Context, p *access.Principal, tenant string) ([]*AssignedDomain, error) {
	var out []*AssignedDomain
	err := s.store.Read(ctx, func(tx agentowl.Tx) error {
		if _, err := access.SystemAdminTx(ctx, tx, p); err != nil {
			return err
		}
		ts, err := tx.TenantList(ctx)
		if err != nil {
			return err
		}
		names := map[string]string{}
		id := ""
		for _, t := range ts {
			names[t.ID] = t.Name
			if t.Name == tenant {
				id = t.ID
			}
		}
		if tenant != "" && id == "" {
			return agentowl.FieldError(agentowl.ECodeNotFound, "tenant", "No tenant %q.", tenant)
		}
		ds, err := tx.MailDomainList(ctx, id)
		if err != nil {
			return err
		}
		out = make([]*AssignedDomain, 0, len(ds))
		for _, d := range ds {
			out = append(out, &AssignedDomain{MailDomain: d, Tenant: names[d.TenantID]})
		}
		return nil
	})
	return out, err
}

// RemoveMailDomain removes domain's assignment. System admins only. The
// tenant's bindings at it keep receiving mail (work-doctor lists them);
// new ones are refused.
func (s *Service) RemoveMailDomain(ctx context.Context, p *access.Principal, domain string) error {
	norm, ok := NormalizeMailDomain(domain)
	return s.store.Write(ctx, func(tx agentowl.Tx) error {
		home, err := access.SystemAdminTx(ctx, tx, p)
		if err != nil {
			return err
		}
		notFound := agentowl.Errorf(agentowl.ECodeNotFound, "No mail domain %q is assigned.", domain)
		if !ok {
			return notFound
		}
		d, err := tx.MailDomainGet(ctx, norm)
		if errors.Is(err, agentowl.ErrNotFound) {
			return notFound
		}
		if err != nil {
			return err
		}
		if err := tx.MailDomainDelete(ctx, norm); err != nil {
			return err
		}
		t, err := tx.TenantGetByID(ctx, d.TenantID)
		if err != nil {
			return err
		}
		return auditDomain(ctx, tx, s.clock.Now(), p, home, t.ID, "mail_domain.remove", norm, t.Name)
	})
}
