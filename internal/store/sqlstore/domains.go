package sqlstore

import (
	"context"

	"github.com/agentowl/agentowl"
)

// ---- mail domains

const mailDomainCols = `domain, tenant_id, created_at`

func scanMailDomain(s scanner) (*agentowl.MailDomain, error) {
	var v agentowl.MailDomain
	var created int64
	if err := s.Scan(&v.Domain, &v.TenantID, &created); err != nil {
		return nil, err
	}
	v.CreatedAt = fromTS(created)
	return &v, nil
}

func (t *tx) MailDomainCreate(ctx context.Context, v *agentowl.MailDomain) error {
	_, err := t.exec(ctx, `INSERT INTO mail_domains (`+mailDomainCols+`) VALUES (?, ?, ?)`, v.Domain, v.TenantID, ts(v.CreatedAt))
	return err
}

func (t *tx) MailDomainGet(ctx context.Context, domain string) (*agentowl.MailDomain, error) {
	return one(t.queryRow(ctx, `SELECT `+mailDomainCols+` FROM mail_domains WHERE domain = ?`, domain), scanMailDomain)
}

func (t *tx) MailDomainList(ctx context.Context, tenantID string) ([]*agentowl.MailDomain, error) {
	if tenantID == "" {
		rows, err := t.query(ctx, `SELECT `+mailDomainCols+` FROM mail_domains ORDER BY domain`)
		return all(rows, err, scanMailDomain)
	}
	rows, err := t.query(ctx, `SELECT `+mailDomainCols+` FROM mail_domains WHERE tenant_id = ? ORDER BY domain`, tenantID)
	return all(rows, err, scanMailDomain)
}

func (t *tx) MailDomainDelete(ctx context.Context, domain string) error {
	return t.execOne(ctx, `DELETE FROM mail_domains WHERE domain = ?`, domain)
}

// BindingListOutsideDomains: an address entry decides for its address
// (whichever tenant holds it); without one, the address's domain must be
// assigned to the binding's tenant. A generated address is agent- and 13
// characters, so its @ is the 20th character.
func (t *tx) BindingListOutsideDomains(ctx context.Context, p agentowl.OutsideDomainsParams) ([]*agentowl.Binding, error) {
	limit := p.Limit
	if limit <= 0 {
		limit = 1000
	}
	at := t.db.dialect.StrPos + `(b.address, '@')`
	rows, err := t.query(ctx, `SELECT `+qualified(bindingCols, "b")+` FROM bindings b
		WHERE b.channel = 'smtp' AND b.deleted_at IS NULL AND (? = '' OR b.tenant_id = ?)
		AND NOT (substr(b.address, 1, 6) = 'agent-' AND `+at+` = 20 AND substr(b.address, 21) = ?)
		AND (EXISTS (SELECT 1 FROM mail_domains a WHERE a.domain = b.address AND a.tenant_id <> b.tenant_id)
			OR NOT EXISTS (SELECT 1 FROM mail_domains d WHERE d.tenant_id = b.tenant_id
				AND (d.domain = b.address OR d.domain = substr(b.address, `+at+` + 1))))
		ORDER BY b.created_at, b.id LIMIT ?`, p.TenantID, p.TenantID, p.ServerDomain, limit)
	return all(rows, err, t.scanBinding)
}
