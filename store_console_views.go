package agentowl

import (
	"context"
	"time"
)

// ConsoleViewStore answers the read views of the web console's audit and
// settings pages that the other areas' stores do not. Implemented by Tx.
type ConsoleViewStore interface {
	// AuditQuery returns a tenant's audit entries newest first (by ID),
	// filtered and paged as AuditQueryParams says.
	AuditQuery(ctx context.Context, p AuditQueryParams) ([]*AuditEntry, error)
	// RuntimeCredentialLastReports returns, per runtime credential of the
	// tenant that reported at all, when the newest callback it
	// authenticated was recorded.
	RuntimeCredentialLastReports(ctx context.Context, tenantID string) (map[string]time.Time, error)
}

// AuditQueryParams filters AuditQuery. Actor, Action and Target, when not
// empty, must each occur in the entry's field of that name (a substring,
// case-sensitive). BeforeID, when positive, keeps entries older than that
// entry: the keyset page after it.
type AuditQueryParams struct {
	TenantID              string
	Actor, Action, Target string
	BeforeID              int64
	Limit                 int
}
