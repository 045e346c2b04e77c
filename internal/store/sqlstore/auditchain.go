package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"

	"github.com/agentowl/agentowl"
)

// The audit hash chain (internal/auditchain; migration 00026). Appending
// an entry advances its tenant's chain head row and computes the entry's
// hash in the database, with agentowl_audit_hash (a SQL function on
// PostgreSQL, auditchain.Sum registered with SQLite): the head row's lock
// serializes appends of one tenant across writers and replicas for the
// rest of the transaction, and on PostgreSQL the whole append is one
// statement sent with the transaction's next statement or COMMIT, so
// chaining costs an audited write no round trip.

var zeroHash = make([]byte, 32)

// AuditAppendPostgres advances the head and inserts the entry in one
// statement: $1 tenant, $2 at, $3 actor, $4 action, $5 target, $6
// request ID, $7 details, $8 the zero hash. Exported for storetest's
// benchmark of the statement alone.
const AuditAppendPostgres = `WITH h AS (
	INSERT INTO audit_chain_heads (tenant_id, seq, prev, head)
	VALUES ($1, 1, $8, agentowl_audit_hash($8, 1, $1, $2, $3, $4, $5, $6, $7))
	ON CONFLICT (tenant_id) DO UPDATE SET seq = audit_chain_heads.seq + 1, prev = audit_chain_heads.head,
		head = agentowl_audit_hash(audit_chain_heads.head, audit_chain_heads.seq + 1, $1, $2, $3, $4, $5, $6, $7)
	RETURNING seq, prev, head)
INSERT INTO audit_log (tenant_id, at, actor, action, target, request_id, details, seq, prev_hash, hash)
VALUES ($1, $2, $3, $4, $5, $6, $7, (SELECT seq FROM h), (SELECT prev FROM h), (SELECT head FROM h))
RETURNING id, seq, prev_hash, hash`

// auditAppendHead advances the head (SQLite, whose statements cannot
// write in a WITH): the same upsert, its row returned.
const auditAppendHead = `INSERT INTO audit_chain_heads (tenant_id, seq, prev, head)
	VALUES (?, 1, ?, agentowl_audit_hash(?, 1, ?, ?, ?, ?, ?, ?, ?))
	ON CONFLICT (tenant_id) DO UPDATE SET seq = audit_chain_heads.seq + 1, prev = audit_chain_heads.head,
		head = agentowl_audit_hash(audit_chain_heads.head, audit_chain_heads.seq + 1, ?, ?, ?, ?, ?, ?, ?)
	RETURNING seq, prev, head`

// auditAppendChained appends e, whose details are stored as details, to
// its tenant's chain; e's ID, Seq, PrevHash and Hash are set once the
// transaction commits (at once on SQLite).
func (t *tx) auditAppendChained(ctx context.Context, e *agentowl.AuditEntry, details string) error {
	e.DetailsJSON = []byte(details)
	fields := []any{e.TenantID, ts(e.At), e.Actor, e.Action, e.Target, e.RequestID, details}
	if t.db.pool != nil {
		return t.queryRowLater(ctx, func(r row) error { return r.Scan(&e.ID, &e.Seq, &e.PrevHash, &e.Hash) },
			AuditAppendPostgres, append(fields, zeroHash)...)
	}
	args := append([]any{e.TenantID, zeroHash, zeroHash}, fields...)
	args = append(args, fields...)
	if err := t.queryRow(ctx, auditAppendHead, args...).Scan(&e.Seq, &e.PrevHash, &e.Hash); err != nil {
		return t.db.dialect.Classify(err)
	}
	return t.queryRow(ctx, `INSERT INTO audit_log (tenant_id, at, actor, action, target, request_id, details, seq, prev_hash, hash)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id`, append(fields, e.Seq, e.PrevHash, e.Hash)...).Scan(&e.ID)
}

const auditChainCols = `id, tenant_id, at, actor, action, target, request_id, details, seq, prev_hash, hash`

func scanChained(s scanner) (*agentowl.AuditEntry, error) {
	var e agentowl.AuditEntry
	var at int64
	var details string
	var seq sql.NullInt64
	if err := s.Scan(&e.ID, &e.TenantID, &at, &e.Actor, &e.Action, &e.Target, &e.RequestID, &details, &seq, &e.PrevHash, &e.Hash); err != nil {
		return nil, err
	}
	e.At, e.Seq, e.DetailsJSON = fromTS(at), seq.Int64, []byte(details)
	// Details as read for display; text edited past JSON stays in
	// DetailsJSON only.
	_ = json.Unmarshal(e.DetailsJSON, &e.Details)
	return &e, nil
}

func chainLimit(n int) int {
	if n <= 0 || n > 10000 {
		return 1000
	}
	return n
}

func (t *tx) AuditChainList(ctx context.Context, p agentowl.AuditChainParams) ([]*agentowl.AuditEntry, error) {
	if p.Unchained {
		rows, err := t.query(ctx, `SELECT `+auditChainCols+` FROM audit_log WHERE tenant_id = ? AND seq IS NULL AND id > ?
			ORDER BY id LIMIT ?`, p.TenantID, p.AfterID, chainLimit(p.Limit))
		return all(rows, err, scanChained)
	}
	upTo := p.UpToSeq
	if upTo <= 0 {
		upTo = 1<<63 - 1
	}
	rows, err := t.query(ctx, `SELECT `+auditChainCols+` FROM audit_log WHERE tenant_id = ? AND seq > ? AND seq <= ?
		ORDER BY seq LIMIT ?`, p.TenantID, p.AfterSeq, upTo, chainLimit(p.Limit))
	return all(rows, err, scanChained)
}

const auditHeadQuery = `SELECT h.tenant_id, h.seq, h.head,
	coalesce((SELECT c.seq FROM audit_checkpoints c WHERE c.tenant_id = h.tenant_id ORDER BY c.seq DESC LIMIT 1), 0),
	coalesce((SELECT c.at FROM audit_checkpoints c WHERE c.tenant_id = h.tenant_id ORDER BY c.seq DESC LIMIT 1), 0)
	FROM audit_chain_heads h`

func scanHead(s scanner) (*agentowl.AuditChainHead, error) {
	var h agentowl.AuditChainHead
	var at int64
	if err := s.Scan(&h.TenantID, &h.Seq, &h.Hash, &h.CheckpointSeq, &at); err != nil {
		return nil, err
	}
	if h.CheckpointSeq > 0 {
		h.CheckpointAt = fromTS(at)
	}
	return &h, nil
}

func (t *tx) AuditChainHead(ctx context.Context, tenantID string) (*agentowl.AuditChainHead, error) {
	return one(t.queryRow(ctx, auditHeadQuery+` WHERE h.tenant_id = ?`, tenantID), scanHead)
}

func (t *tx) AuditChainHeads(ctx context.Context) ([]*agentowl.AuditChainHead, error) {
	rows, err := t.query(ctx, auditHeadQuery+` ORDER BY h.tenant_id`)
	return all(rows, err, scanHead)
}

func (t *tx) AuditCheckpointAdd(ctx context.Context, c *agentowl.AuditCheckpoint) error {
	res, err := t.exec(ctx, `INSERT INTO audit_checkpoints (tenant_id, seq, head, at, jws) VALUES (?, ?, ?, ?, ?)
		ON CONFLICT (tenant_id, seq) DO NOTHING`, c.TenantID, c.Seq, c.Head, ts(c.At), c.JWS)
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err != nil || n == 0 {
		if err != nil {
			return err
		}
		return agentowl.ErrConflict
	}
	return nil
}

func (t *tx) AuditCheckpointList(ctx context.Context, p agentowl.AuditChainParams) ([]*agentowl.AuditCheckpoint, error) {
	upTo := p.UpToSeq
	if upTo <= 0 {
		upTo = 1<<63 - 1
	}
	rows, err := t.query(ctx, `SELECT tenant_id, seq, head, at, jws FROM audit_checkpoints WHERE tenant_id = ? AND seq > ? AND seq <= ?
		ORDER BY seq LIMIT ?`, p.TenantID, p.AfterSeq, upTo, chainLimit(p.Limit))
	return all(rows, err, func(s scanner) (*agentowl.AuditCheckpoint, error) {
		var c agentowl.AuditCheckpoint
		var at int64
		err := s.Scan(&c.TenantID, &c.Seq, &c.Head, &at, &c.JWS)
		c.At = fromTS(at)
		return &c, err
	})
}

// purgeAuditChain is the audit log's retention (agentowl.PurgeAudit): it
// deletes entries recorded at or before the cutoff, but of a tenant with
// signed checkpoints only up to one of them, so the oldest entry kept
// chains to a checkpoint that covers the ones deleted (retention keeps
// that checkpoint, the anchor, and deletes the older ones). A tenant's
// boundary is its newest checkpoint before its first entry newer than the
// cutoff. A tenant whose chain has no checkpoint (a server that signs
// none) is purged by time alone, as before the chain. Entries outside
// the chain go by time.
var purgeAuditChain = []string{
	`WITH f AS MATERIALIZED (
		SELECT h.tenant_id, coalesce((SELECT min(b.seq) FROM audit_log b WHERE b.tenant_id = h.tenant_id AND b.at > ?), h.seq + 1) AS keep_from
		FROM audit_chain_heads h WHERE EXISTS (SELECT 1 FROM audit_checkpoints c WHERE c.tenant_id = h.tenant_id)),
	k AS MATERIALIZED (
		SELECT f.tenant_id, (SELECT max(c.seq) FROM audit_checkpoints c WHERE c.tenant_id = f.tenant_id AND c.seq < f.keep_from) AS p FROM f)
	DELETE FROM audit_log WHERE id IN (SELECT a.id FROM audit_log a LEFT JOIN k ON k.tenant_id = a.tenant_id
		WHERE a.at <= ? AND (a.seq IS NULL OR k.tenant_id IS NULL OR a.seq <= k.p) LIMIT ?)`,
	`DELETE FROM audit_checkpoints WHERE (tenant_id, seq) IN (SELECT c.tenant_id, c.seq FROM audit_checkpoints c
		WHERE c.seq < (SELECT min(a.seq) FROM audit_log a WHERE a.tenant_id = c.tenant_id) - 1 LIMIT ?)`,
}
