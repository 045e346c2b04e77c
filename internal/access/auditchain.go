package access

import (
	"context"
	"errors"

	"github.com/agentowl/agentowl"
)

// AuditChainPage is one page of a tenant's audit chain
// (internal/auditchain), for its export and verification.
type AuditChainPage struct {
	TenantID string
	// Head is the tenant's chain head when the page was read (nil before
	// its first entry): an export stops there, and a verifier compares the
	// chain's end with it.
	Head    *agentowl.AuditChainHead
	Entries []*agentowl.AuditEntry
}

// AuditChain reads a page of a tenant's audit chain: entries in seq
// order after q.AfterSeq, or with q.Unchained the entries outside the
// chain after q.AfterID. Admin only.
func (s *Service) AuditChain(ctx context.Context, p *Principal, tenant string, q agentowl.AuditChainParams) (*AuditChainPage, error) {
	m, err := p.Tenant(tenant, agentowl.RoleAdmin)
	if err != nil {
		return nil, err
	}
	q.TenantID = m.TenantID
	out := &AuditChainPage{TenantID: m.TenantID}
	err = s.store.Read(ctx, func(tx agentowl.Tx) error {
		h, err := tx.AuditChainHead(ctx, m.TenantID)
		if err != nil && !errors.Is(err, agentowl.ErrNotFound) {
			return err
		}
		out.Head = h
		out.Entries, err = tx.AuditChainList(ctx, q)
		return err
	})
	return out, err
}

// AuditCheckpoints reads a page of a tenant's signed audit checkpoints
// in seq order after afterSeq. Admin only.
func (s *Service) AuditCheckpoints(ctx context.Context, p *Principal, tenant string, afterSeq int64, limit int) (string, []*agentowl.AuditCheckpoint, error) {
	m, err := p.Tenant(tenant, agentowl.RoleAdmin)
	if err != nil {
		return "", nil, err
	}
	var out []*agentowl.AuditCheckpoint
	err = s.store.Read(ctx, func(tx agentowl.Tx) (err error) {
		out, err = tx.AuditCheckpointList(ctx, agentowl.AuditChainParams{TenantID: m.TenantID, AfterSeq: afterSeq, Limit: limit})
		return err
	})
	return m.TenantID, out, err
}
