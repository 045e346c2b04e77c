package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"github.com/agentowl/agentowl"
)

// SQL of maintenance (agentowl.MaintenanceStore): the leader lease, job records,
// the overdue scan, lapsed lease recovery and bounded purges.

// ---- leases

func (t *tx) LeaseAcquire(ctx context.Context, name, owner string, now, until time.Time) (*agentowl.Lease, error) {
	// One statement takes a free or lapsed lease, renews the owner's own and
	// leaves another live holder's alone; a renewal keeps acquired_at.
	if _, err := t.exec(ctx, `INSERT INTO maintenance_leases (name, owner, acquired_at, lease_until) VALUES (?, ?, ?, ?)
		ON CONFLICT (name) DO UPDATE SET
			acquired_at = CASE WHEN maintenance_leases.owner = excluded.owner THEN maintenance_leases.acquired_at ELSE excluded.acquired_at END,
			owner = excluded.owner, lease_until = excluded.lease_until
		WHERE maintenance_leases.owner = excluded.owner OR maintenance_leases.lease_until <= ?`,
		name, owner, ts(now), ts(until), ts(now)); err != nil {
		return nil, err
	}
	return t.LeaseGet(ctx, name)
}

func (t *tx) LeaseRelease(ctx context.Context, name, owner string, now time.Time) error {
	_, err := t.exec(ctx, `UPDATE maintenance_leases SET lease_until = ? WHERE name = ? AND owner = ? AND lease_until > ?`,
		ts(now), name, owner, ts(now))
	return err
}

func (t *tx) LeaseGet(ctx context.Context, name string) (*agentowl.Lease, error) {
	return one(t.queryRow(ctx, `SELECT name, owner, acquired_at, lease_until FROM maintenance_leases WHERE name = ?`, name),
		func(s scanner) (*agentowl.Lease, error) {
			var l agentowl.Lease
			var acquired, until int64
			if err := s.Scan(&l.Name, &l.Owner, &acquired, &until); err != nil {
				return nil, err
			}
			l.AcquiredAt, l.Until = fromTS(acquired), fromTS(until)
			return &l, nil
		})
}

// ---- job records

func (t *tx) JobRecord(ctx context.Context, r *agentowl.JobRun) error {
	failed, lastOK := 0, nullTS(nil)
	if r.Outcome == "error" {
		failed = 1
	} else {
		lastOK = ts(r.StartedAt)
	}
	_, err := t.exec(ctx, `INSERT INTO maintenance_jobs (name, owner, started_at, duration_us, outcome, error, affected, runs, failures, last_ok_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, 1, ?, ?)
		ON CONFLICT (name) DO UPDATE SET owner = excluded.owner, started_at = excluded.started_at,
			duration_us = excluded.duration_us, outcome = excluded.outcome, error = excluded.error, affected = excluded.affected,
			runs = maintenance_jobs.runs + 1, failures = maintenance_jobs.failures + excluded.failures,
			last_ok_at = COALESCE(excluded.last_ok_at, maintenance_jobs.last_ok_at)`,
		r.Name, r.Owner, ts(r.StartedAt), r.Duration.Microseconds(), r.Outcome, nullStr(r.Error), r.Affected, failed, lastOK)
	return err
}

func (t *tx) JobList(ctx context.Context) ([]*agentowl.JobRun, error) {
	rows, err := t.query(ctx, `SELECT name, owner, started_at, duration_us, outcome, error, affected, runs, failures, last_ok_at
		FROM maintenance_jobs ORDER BY name`)
	return all(rows, err, func(s scanner) (*agentowl.JobRun, error) {
		var r agentowl.JobRun
		var started, duration int64
		var msg sql.NullString
		var lastOK sql.NullInt64
		if err := s.Scan(&r.Name, &r.Owner, &started, &duration, &r.Outcome, &msg, &r.Affected, &r.Runs, &r.Failures, &lastOK); err != nil {
			return nil, err
		}
		r.StartedAt, r.Duration, r.Error, r.LastOKAt = fromTS(started), time.Duration(duration)*time.Microsecond, msg.String, fromNullTS(lastOK)
		return &r, nil
	})
}

// ---- the overdue scan

func (t *tx) OpenWorkScan(ctx context.Context, p agentowl.OpenWorkScanParams) ([]*agentowl.OpenWork, error) {
	limit := p.Limit
	if limit <= 0 {
		limit = 500
	}
	// The partial index of open work gives the page in ID order; the facts
	// are looked up per row by primary key or index.
	rows, err := t.query(ctx, `SELECT w.id, w.status, w.sequence, w.updated_at,
			e.overdue_accept_within, e.overdue_report_interval, e.overdue_input_expiry,
			(SELECT o.ended_at FROM outbox o WHERE o.id = w.delivery_id AND o.state = 'delivered'),
			(SELECT MIN(a.expires_at) FROM attention_items a WHERE a.work_id = w.id AND a.request_id IS NOT NULL
				AND a.expires_at <= ? AND (a.status <> 'resolved' OR a.resolution = 'expired')),
			(SELECT MIN(i.overdue_rule) FROM attention_items i WHERE i.work_id = w.id AND i.overdue_rule IS NOT NULL
				AND i.overdue_sequence = w.sequence)
		FROM work w JOIN endpoints e ON e.id = w.endpoint_id
		WHERE w.status IN ('pending', 'accepted', 'running', 'needs_input') AND w.id > ?
		ORDER BY w.id LIMIT ?`, ts(p.Now), p.AfterID, limit)
	return all(rows, err, func(s scanner) (*agentowl.OpenWork, error) {
		var ow agentowl.OpenWork
		var status string
		var updated int64
		var accept, report, input, delivered, inputExpired sql.NullInt64
		var rule sql.NullString
		if err := s.Scan(&ow.WorkID, &status, &ow.Sequence, &updated, &accept, &report, &input, &delivered, &inputExpired, &rule); err != nil {
			return nil, err
		}
		ow.Status, ow.UpdatedAt, ow.Overdue, ow.OverdueRule = agentowl.WorkStatus(status), fromTS(updated), scanOverdue(accept, report, input), rule.String
		ow.HandoffDeliveredAt, ow.InputExpiredAt = fromNullTS(delivered), fromNullTS(inputExpired)
		return &ow, nil
	})
}

// scanOverdue reads an endpoint's overdue columns (microseconds; 0/1).
func scanOverdue(accept, report, input sql.NullInt64) agentowl.EndpointOverdue {
	var o agentowl.EndpointOverdue
	if accept.Valid {
		d := time.Duration(accept.Int64) * time.Microsecond
		o.AcceptWithin = &d
	}
	if report.Valid {
		d := time.Duration(report.Int64) * time.Microsecond
		o.ReportInterval = &d
	}
	if input.Valid {
		on := input.Int64 != 0
		o.InputExpiry = &on
	}
	return o
}

// overdueArgs is the column values of an endpoint's overdue expectations.
func overdueArgs(o agentowl.EndpointOverdue) (accept, report, input any) {
	if o.AcceptWithin != nil {
		accept = o.AcceptWithin.Microseconds()
	}
	if o.ReportInterval != nil {
		report = o.ReportInterval.Microseconds()
	}
	if o.InputExpiry != nil {
		input = boolInt(*o.InputExpiry)
	}
	return accept, report, input
}

func (t *tx) AttentionResolveOverdue(ctx context.Context, workID, resolution string, now time.Time) error {
	return t.execLater(ctx, nil, `UPDATE attention_items SET status = 'resolved', resolution = ?, resolved_at = ?, updated_at = ?
		WHERE work_id = ? AND overdue_rule IS NOT NULL AND status <> 'resolved'`, resolution, ts(now), ts(now), workID)
}

// ---- lapsed leases

func (t *tx) MessageRecoverLapsed(ctx context.Context, now time.Time, limit int) (int, error) {
	res, err := t.exec(ctx, `UPDATE outbox SET lease_owner = NULL, lease_until = NULL WHERE id IN (
		SELECT id FROM outbox WHERE state = 'pending' AND lease_until IS NOT NULL AND lease_until <= ? LIMIT ?)
		AND state = 'pending' AND lease_until <= ?`, ts(now), limit, ts(now))
	return affected(res, err)
}

func (t *tx) SlotRecoverLapsed(ctx context.Context, now time.Time, limit int) (int, error) {
	res, err := t.exec(ctx, `UPDATE delivery_slots SET owner = NULL WHERE (key, slot) IN (
		SELECT key, slot FROM delivery_slots WHERE owner IS NOT NULL AND lease_until <= ? LIMIT ?)
		AND owner IS NOT NULL AND lease_until <= ?`, ts(now), limit, ts(now))
	return affected(res, err)
}

func affected(res sql.Result, err error) (int, error) {
	if err != nil {
		return 0, err
	}
	n, err := res.RowsAffected()
	return int(n), err
}

// ---- retention

// purgeStatements are each class's bounded deletes, run in order in one
// transaction. Every placeholder is Before; "LIMIT ?" is the batch's limit.
// A statement selects the rows it deletes by key with a LIMIT, so a batch
// never touches more than Limit rows of a table. Where a row could change
// back into something kept (a redriven message is pending again), the
// outer statement repeats the condition: PostgreSQL re-checks only that
// one on a row changed meanwhile.
var purgeStatements = map[agentowl.PurgeClass][]string{
	agentowl.PurgeDeliveries: {`DELETE FROM outbox WHERE state <> 'pending' AND retain_until <= ? AND id IN (
		SELECT id FROM outbox WHERE state <> 'pending' AND retain_until <= ? LIMIT ?)`},
	agentowl.PurgeApprovalRequests: {`DELETE FROM approval_requests WHERE id IN (
		SELECT r.id FROM approval_requests r WHERE r.retain_until IS NOT NULL AND r.retain_until <= ?
			AND NOT EXISTS (SELECT 1 FROM outbox o WHERE o.subject = r.id) LIMIT ?)`},
	agentowl.PurgeIdempotencyKeys: {`DELETE FROM idempotency_keys WHERE (scope, operation, key) IN (
		SELECT scope, operation, key FROM idempotency_keys WHERE retain_until <= ? LIMIT ?)`},
	agentowl.PurgeRateCounters: {`DELETE FROM rate_counters WHERE (key, window_start) IN (
		SELECT key, window_start FROM rate_counters WHERE window_start <= ? LIMIT ?)`},
	agentowl.PurgeDeliverySlots: {`DELETE FROM delivery_slots WHERE (key, slot) IN (
		SELECT key, slot FROM delivery_slots WHERE lease_until <= ? LIMIT ?)`},
	// A deleted instance goes once its deletion is old enough: first its
	// revoked credentials and its rules, then the row once nothing refers
	// to it (a request is kept for its own retention).
	agentowl.PurgeInstances: {
		`DELETE FROM tokens WHERE id IN (SELECT k.id FROM tokens k JOIN instances i ON i.id = k.instance_id
			WHERE k.kind = 'instance' AND k.revoked_at IS NOT NULL AND k.revoked_at <= ?
			AND i.deleted_at IS NOT NULL AND i.deleted_at <= ? LIMIT ?)`,
		`DELETE FROM policies WHERE id IN (SELECT p.id FROM policies p JOIN instances i ON i.id = p.instance_id
			WHERE i.deleted_at IS NOT NULL AND i.deleted_at <= ? LIMIT ?)`,
		`DELETE FROM instances WHERE id IN (SELECT i.id FROM instances i WHERE i.deleted_at IS NOT NULL AND i.deleted_at <= ?
			AND NOT EXISTS (SELECT 1 FROM approval_requests r WHERE r.instance_id = i.id)
			AND NOT EXISTS (SELECT 1 FROM tokens k WHERE k.instance_id = i.id)
			AND NOT EXISTS (SELECT 1 FROM policies p WHERE p.instance_id = i.id) LIMIT ?)`,
	},
	agentowl.PurgeWork: {`DELETE FROM work WHERE id IN (SELECT w.id FROM work w WHERE w.ended_at IS NOT NULL AND w.ended_at <= ?
		AND NOT EXISTS (SELECT 1 FROM work_callbacks c WHERE c.work_id = w.id)
		AND NOT EXISTS (SELECT 1 FROM attention_items a WHERE a.work_id = w.id)
		AND NOT EXISTS (SELECT 1 FROM work_decisions d WHERE d.work_id = w.id)
		AND NOT EXISTS (SELECT 1 FROM work r WHERE r.replay_of = w.id)
		AND NOT EXISTS (SELECT 1 FROM outbox o WHERE o.subject = w.id AND o.state = 'pending') LIMIT ?)`},
	// An event goes with its attachment records once none keeps bytes in
	// the object store (the retained_bytes job deletes them at expiry), and
	// only once no message's body refers to its payload (a failed handoff
	// kept for redrive outlives its work).
	agentowl.PurgeEvents: {`DELETE FROM attachments WHERE event_id IN (SELECT e.id FROM events e WHERE e.received_at <= ?
		AND NOT EXISTS (SELECT 1 FROM work w WHERE w.event_id = e.id)
		AND NOT EXISTS (SELECT 1 FROM outbox o WHERE o.subject = e.id AND o.state = 'pending')
		AND NOT EXISTS (SELECT 1 FROM outbox o WHERE o.body_event = e.id)
		AND NOT EXISTS (SELECT 1 FROM attachments a WHERE a.event_id = e.id AND a.blob_key IS NOT NULL AND a.deleted_at IS NULL) LIMIT ?)`,
		`DELETE FROM events WHERE id IN (SELECT e.id FROM events e WHERE e.received_at <= ?
		AND NOT EXISTS (SELECT 1 FROM work w WHERE w.event_id = e.id)
		AND NOT EXISTS (SELECT 1 FROM outbox o WHERE o.subject = e.id AND o.state = 'pending')
		AND NOT EXISTS (SELECT 1 FROM outbox o WHERE o.body_event = e.id)
		AND NOT EXISTS (SELECT 1 FROM attachments a WHERE a.event_id = e.id) LIMIT ?)`},
	agentowl.PurgeConversations: {`DELETE FROM conversations WHERE id IN (SELECT c.id FROM conversations c WHERE c.last_event_at <= ?
		AND NOT EXISTS (SELECT 1 FROM events e WHERE e.conversation_id = c.id)
		AND NOT EXISTS (SELECT 1 FROM work w WHERE w.conversation_id = c.id) LIMIT ?)`},
	agentowl.PurgeAudit: purgeAuditChain, // up to a signed checkpoint (auditchain.go)
}

func (t *tx) PurgeBatch(ctx context.Context, p agentowl.PurgeParams) (agentowl.PurgeResult, error) {
	if p.Limit <= 0 {
		return agentowl.PurgeResult{}, fmt.Errorf("purge %s: a positive limit is required", p.Class)
	}
	switch p.Class {
	case agentowl.PurgeAttention:
		n, err := t.purgeAttention(ctx, p)
		return agentowl.PurgeResult{Deleted: n}, err
	case agentowl.PurgeCallbacks:
		return t.purgeCallbacks(ctx, p)
	}
	stmts, ok := purgeStatements[p.Class]
	if !ok {
		return agentowl.PurgeResult{}, fmt.Errorf("purge: unknown class %q", p.Class)
	}
	n, err := t.purgeStatements(ctx, stmts, p)
	return agentowl.PurgeResult{Deleted: n}, err
}

func (t *tx) purgeStatements(ctx context.Context, stmts []string, p agentowl.PurgeParams) (int64, error) {
	var total int64
	for _, q := range stmts {
		q = strings.Replace(q, "LIMIT ?", "LIMIT "+itoa(int64(p.Limit)), 1)
		args := make([]any, strings.Count(q, "?"))
		for i := range args {
			args[i] = ts(p.Before)
		}
		res, err := t.exec(ctx, q, args...)
		if err != nil {
			return total, err
		}
		n, _ := res.RowsAffected()
		total += n
	}
	return total, nil
}

// purgeCallbacks deletes callbacks of ended work in key order from
// p.After: each batch is read off the primary key's index where the last
// one stopped, never past the entries of rows already deleted.
func (t *tx) purgeCallbacks(ctx context.Context, p agentowl.PurgeParams) (agentowl.PurgeResult, error) {
	afterWork, afterCallback, _ := strings.Cut(p.After, "\n")
	rows, err := t.query(ctx, `DELETE FROM work_callbacks WHERE (work_id, callback_id) IN (
		SELECT c.work_id, c.callback_id FROM work_callbacks c
		WHERE (c.work_id, c.callback_id) > (?, ?)
			AND c.work_id IN (SELECT w.id FROM work w WHERE w.ended_at IS NOT NULL AND w.ended_at <= ?)
		ORDER BY c.work_id, c.callback_id LIMIT `+itoa(int64(p.Limit))+`)
		RETURNING work_id, callback_id`, afterWork, afterCallback, ts(p.Before))
	if err != nil {
		return agentowl.PurgeResult{}, err
	}
	defer rows.Close()
	out := agentowl.PurgeResult{After: p.After}
	for rows.Next() {
		var w, c string
		if err := rows.Scan(&w, &c); err != nil {
			return out, err
		}
		out.Deleted++
		// Callback IDs are text without control characters: a newline
		// cannot occur in either part. The greatest key bytewise is never
		// past the greatest in the database's collation, so the next batch
		// skips no row; at worst it passes over a few deleted ones.
		if key := w + "\n" + c; w > afterWork || (w == afterWork && c > afterCallback) {
			afterWork, afterCallback, out.After = w, c, key
		}
	}
	return out, rows.Err()
}

// purgeAttention deletes resolved items of ended work with their
// decisions. The items are chosen once and both deletes name them, so a
// decision never goes without its item.
func (t *tx) purgeAttention(ctx context.Context, p agentowl.PurgeParams) (int64, error) {
	rows, err := t.query(ctx, `SELECT a.id FROM attention_items a JOIN work w ON w.id = a.work_id
		WHERE a.status = 'resolved' AND a.resolved_at <= ? AND w.ended_at IS NOT NULL
		AND NOT EXISTS (SELECT 1 FROM work_decisions d JOIN outbox o ON o.id = d.message_id
			WHERE d.attention_id = a.id AND o.state = 'pending')
		LIMIT ?`+t.db.dialect.ForUpdate, ts(p.Before), p.Limit)
	ids, err := all(rows, err, func(s scanner) (any, error) {
		var id string
		return id, s.Scan(&id)
	})
	if err != nil || len(ids) == 0 {
		return 0, err
	}
	in := "(?" + strings.Repeat(", ?", len(ids)-1) + ")"
	res, err := t.exec(ctx, `DELETE FROM work_decisions WHERE attention_id IN `+in, ids...)
	if err != nil {
		return 0, err
	}
	decisions, _ := res.RowsAffected()
	res, err = t.exec(ctx, `DELETE FROM attention_items WHERE id IN `+in, ids...)
	if err != nil {
		return decisions, err
	}
	items, _ := res.RowsAffected()
	return decisions + items, nil
}
