package agentowl

import (
	"context"
	"time"
)

// AuditChainStore reads each tenant's audit hash chain and keeps its
// signed checkpoints (internal/auditchain). AuditAppend chains every entry
// it writes: it takes the tenant's chain head row in the write, so appends
// of one tenant serialize on it across writers and replicas. Implemented
// by Tx.
type AuditChainStore interface {
	// AuditChainList lists a tenant's chained entries with seq > AfterSeq
	// up to UpToSeq (when not 0), in seq order, at most Limit, with their
	// details as stored (DetailsJSON); with Unchained, the entries outside
	// the chain (Seq 0) instead, by ID after AfterID.
	AuditChainList(ctx context.Context, p AuditChainParams) ([]*AuditEntry, error)
	// AuditChainHead returns a tenant's chain head with its newest
	// checkpoint; ErrNotFound before its first entry.
	AuditChainHead(ctx context.Context, tenantID string) (*AuditChainHead, error)
	// AuditChainHeads returns every tenant's chain head with its newest
	// checkpoint, for the checkpoint job.
	AuditChainHeads(ctx context.Context) ([]*AuditChainHead, error)
	// AuditCheckpointAdd records a signed checkpoint; ErrConflict when the
	// tenant has one of that seq.
	AuditCheckpointAdd(ctx context.Context, c *AuditCheckpoint) error
	// AuditCheckpointList lists a tenant's checkpoints with seq > AfterSeq
	// up to UpToSeq (when not 0), in seq order, at most Limit.
	AuditCheckpointList(ctx context.Context, p AuditChainParams) ([]*AuditCheckpoint, error)
}

// AuditChainParams pages a tenant's chain or checkpoints.
type AuditChainParams struct {
	TenantID  string
	AfterSeq  int64
	UpToSeq   int64 // 0: no bound
	Unchained bool
	AfterID   int64 // Unchained only
	Limit     int
}

// AuditChainHead is a tenant's chain head: its newest entry's seq and
// hash, and its newest checkpoint (CheckpointSeq 0 when none).
type AuditChainHead struct {
	TenantID      string
	Seq           int64
	Hash          []byte
	CheckpointSeq int64
	CheckpointAt  time.Time
}

// AuditCheckpoint is a signed checkpoint of a tenant's chain: its head
// (the hash of entry Seq) at At, signed as a compact JWS.
type AuditCheckpoint struct {
	TenantID string
	Seq      int64
	Head     []byte
	At       time.Time
	JWS      string
}
