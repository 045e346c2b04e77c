package sqlstore

import (
	"context"
	"math"
	"time"

	"github.com/agentowl/agentowl"
)

// The reads of the console's audit and settings views
// (agentowl.ConsoleViewStore).

func (t *tx) AuditQuery(ctx context.Context, p agentowl.AuditQueryParams) ([]*agentowl.AuditEntry, error) {
	before := p.BeforeID
	if before <= 0 {
		before = math.MaxInt64
	}
	// One statement shape whatever the filters, so it is prepared once; an
	// empty filter matches everything. The (tenant_id, id) index walks the
	// tenant's entries newest first from the page's start.
	pos := t.db.dialect.StrPos
	rows, err := t.query(ctx, `SELECT `+auditChainCols+` FROM audit_log
		WHERE tenant_id = ? AND id < ?
		AND (? = '' OR `+pos+`(actor, ?) > 0)
		AND (? = '' OR `+pos+`(action, ?) > 0)
		AND (? = '' OR `+pos+`(target, ?) > 0)
		ORDER BY id DESC LIMIT ?`,
		p.TenantID, before, p.Actor, p.Actor, p.Action, p.Action, p.Target, p.Target, listLimit(p.Limit))
	// The same entries as AuditList: scanChained reads them, chain included.
	return all(rows, err, scanChained)
}

func (t *tx) RuntimeCredentialLastReports(ctx context.Context, tenantID string) (map[string]time.Time, error) {
	rows, err := t.query(ctx, `SELECT c.credential_id, MAX(c.recorded_at) FROM work_callbacks c
		JOIN work w ON w.id = c.work_id WHERE w.tenant_id = ? GROUP BY c.credential_id`, tenantID)
	last, err := keyed[string, int64](rows, err)
	if err != nil {
		return nil, err
	}
	out := make(map[string]time.Time, len(last))
	for id, at := range last {
		out[id] = fromTS(at)
	}
	return out, nil
}
