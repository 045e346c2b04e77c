package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/agentowl/agentowl"
)

// messageCols are the columns a message is written to; messageSelect(a)
// reads them back (a is the outbox's alias, "" for none), the body with
// its event's payload put back where MessageCreate took it out
// (agentowl.PayloadRef; the same expression on both dialects).
const messageCols = `id, tenant_id, kind, destination, subject, body, created_at, deadline_at, state, attempts,
	next_attempt_at, lease_owner, lease_until, last_status, last_error, ended_at, retain_until, redrives, attempt_base`

func messageSelect(alias string) string {
	q := ""
	if alias != "" {
		q = alias + "."
	}
	body := `CASE WHEN ` + q + `body_event IS NULL THEN ` + q + `body ELSE substr(` + q + `body, 1, ` + q + `body_at) ||
		(SELECT ev.payload FROM events ev WHERE ev.id = ` + q + `body_event) || substr(` + q + `body, ` + q + `body_at + 1) END`
	cols := strings.Split(messageCols, ",")
	for i, c := range cols {
		if c = strings.TrimSpace(c); c == "body" {
			cols[i] = body
		} else {
			cols[i] = q + c
		}
	}
	return strings.Join(cols, ", ")
}

// Every read of a message selects messageSelect; built once.
var (
	messageSelectCols = messageSelect("")
	messageSelectO    = messageSelect("o")
)

func scanMessage(s scanner) (*agentowl.OutboxMessage, error) {
	var m agentowl.OutboxMessage
	var state string
	var created, deadline, next int64
	var owner, lastErr sql.NullString
	var lease, ended, retain, status sql.NullInt64
	if err := s.Scan(&m.ID, &m.TenantID, &m.Kind, &m.Destination, &m.Subject, &m.Body, &created, &deadline, &state,
		&m.Attempts, &next, &owner, &lease, &status, &lastErr, &ended, &retain, &m.Redrives, &m.AttemptBase); err != nil {
		return nil, err
	}
	if m.Body == nil {
		// Only a body whose event is gone reads as NULL; the events'
		// retention keeps every event a message refers to.
		return nil, fmt.Errorf("outbox message %s: the event its body refers to is gone", m.ID)
	}
	m.State, m.LeaseOwner, m.LastError, m.LastStatus = agentowl.MessageState(state), owner.String, lastErr.String, int(status.Int64)
	m.CreatedAt, m.DeadlineAt, m.NextAttempt = fromTS(created), fromTS(deadline), fromTS(next)
	m.LeaseUntil, m.EndedAt, m.RetainUntil = fromNullTS(lease), fromNullTS(ended), fromNullTS(retain)
	return &m, nil
}

func (t *tx) MessageCreate(ctx context.Context, m *agentowl.OutboxMessage) error {
	body, event, at := m.Body, any(nil), any(nil)
	if p := m.Payload; p != nil {
		if p.EventID == "" || p.At < 0 || p.Len < 0 || p.At+p.Len > len(m.Body) {
			return fmt.Errorf("outbox message %s: payload reference %+v outside its %d-byte body", m.ID, *p, len(m.Body))
		}
		body = append(slices.Clip(m.Body[:p.At]), m.Body[p.At+p.Len:]...)
		event, at = p.EventID, p.At
	}
	var due any
	if m.State == agentowl.MessagePending {
		due = ts(m.NextAttempt)
	}
	return t.execLater(ctx, nil, `INSERT INTO outbox (`+messageCols+`, body_event, body_at, due_since) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		m.ID, m.TenantID, m.Kind, m.Destination, m.Subject, body, ts(m.CreatedAt), ts(m.DeadlineAt), string(m.State),
		m.Attempts, ts(m.NextAttempt), nullStr(m.LeaseOwner), nullTS(m.LeaseUntil), nullInt(m.LastStatus),
		nullStr(m.LastError), nullTS(m.EndedAt), nullTS(m.RetainUntil), m.Redrives, m.AttemptBase, event, at, due)
}

func nullInt(v int) any {
	if v == 0 {
		return nil
	}
	return v
}

func (t *tx) MessageGet(ctx context.Context, id string) (*agentowl.OutboxMessage, error) {
	return one(t.queryRow(ctx, `SELECT `+messageSelectCols+` FROM outbox WHERE id = ?`, id), scanMessage)
}

func (t *tx) MessageClaim(ctx context.Context, p agentowl.ClaimParams) ([]*agentowl.OutboxMessage, error) {
	// The inner ORDER BY matches the outbox_due index so the claim stays an
	// index range scan however long the queue grows.
	rows, err := t.query(ctx, `UPDATE outbox SET lease_owner = ?, lease_until = ?, attempts = attempts + 1
		WHERE id IN (SELECT id FROM outbox WHERE state = 'pending' AND next_attempt_at <= ?
			AND (lease_until IS NULL OR lease_until <= ?) ORDER BY next_attempt_at LIMIT ?`+t.db.dialect.SkipLocked+`)
		RETURNING `+messageSelectCols, p.Owner, ts(p.LeaseUntil), ts(p.Now), ts(p.Now), p.Limit)
	msgs, err := all(rows, err, scanMessage)
	// RETURNING does not keep the subquery's order; attempts start oldest due first.
	slices.SortFunc(msgs, func(a, b *agentowl.OutboxMessage) int {
		if c := a.NextAttempt.Compare(b.NextAttempt); c != 0 {
			return c
		}
		if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return msgs, err
}

func (t *tx) MessageFinish(ctx context.Context, p agentowl.FinishParams) error {
	lost, err := t.MessageFinishAll(ctx, []agentowl.FinishParams{p})
	if err == nil && lost[0] {
		return agentowl.ErrConflict
	}
	return err
}

func (t *tx) MessageFinishAll(ctx context.Context, ps []agentowl.FinishParams) ([]bool, error) {
	// One UPDATE … FROM (VALUES …) for every message and one INSERT for the
	// attempts of those still leased: a busy engine's batch of outcomes
	// costs two statements, not two per message. VALUES columns are named
	// column1… on both backends; the casts give PostgreSQL their types.
	const row = `(CAST(? AS TEXT), CAST(? AS TEXT), CAST(? AS BIGINT), CAST(? AS BIGINT), CAST(? AS TEXT),
		CAST(? AS BIGINT), CAST(? AS BIGINT), CAST(? AS TEXT), CAST(? AS BIGINT))`
	args := make([]any, 0, 9*len(ps))
	for _, p := range ps {
		a := p.Attempt
		var ended any
		if p.State != agentowl.MessagePending {
			ended = ts(a.EndedAt)
		}
		args = append(args, p.ID, string(p.State), ts(p.NextAttempt), nullInt(a.StatusCode), nullStr(a.Error),
			ended, nullTS(p.RetainUntil), p.Owner, a.N)
	}
	rows, err := t.query(ctx, `UPDATE outbox SET state = v.column2, next_attempt_at = v.column3,
		due_since = CASE WHEN v.column2 = 'pending' THEN v.column3 END, lease_owner = NULL,
		lease_until = NULL, last_status = v.column4, last_error = v.column5, ended_at = v.column6, retain_until = v.column7
		FROM (VALUES `+repeatJoin(row, len(ps))+`) AS v
		WHERE outbox.id = v.column1 AND outbox.state = 'pending' AND outbox.lease_owner = v.column8
			AND outbox.attempts = v.column9
		RETURNING id, attempts`, args...)
	// A batch may hold a late outcome of an earlier attempt of a message
	// beside its current one: outcomes are told apart by attempt number.
	type outcome struct {
		id string
		n  int
	}
	updated, err := all(rows, err, func(s scanner) (o outcome, err error) { return o, s.Scan(&o.id, &o.n) })
	if err != nil {
		return nil, err
	}
	kept := make(map[outcome]bool, len(updated))
	for _, o := range updated {
		kept[o] = true
	}
	lost := make([]bool, len(ps))
	args = args[:0]
	for i, p := range ps {
		if lost[i] = !kept[outcome{p.ID, p.Attempt.N}]; lost[i] {
			continue
		}
		a := p.Attempt
		args = append(args, a.EventID, a.N, a.URL, ts(a.StartedAt), ts(a.EndedAt), nullInt(a.StatusCode), nullStr(a.Error))
	}
	if len(args) == 0 {
		return lost, nil
	}
	return lost, t.execLater(ctx, nil, `INSERT INTO outbox_attempts (event_id, n, url, started_at, ended_at, status_code, error)
		VALUES `+repeatJoin("(?, ?, ?, ?, ?, ?, ?)", len(args)/7), args...)
}

// repeatJoin is n copies of s separated by commas.
func repeatJoin(s string, n int) string {
	return strings.TrimSuffix(strings.Repeat(s+", ", n), ", ")
}

func (t *tx) MessageDefer(ctx context.Context, id, owner string, attempt int, next time.Time) error {
	err := t.execOne(ctx, `UPDATE outbox SET next_attempt_at = ?, lease_owner = NULL, lease_until = NULL, attempts = attempts - 1
		WHERE id = ? AND state = 'pending' AND lease_owner = ? AND attempts = ?`, ts(next), id, owner, attempt)
	if errors.Is(err, agentowl.ErrNotFound) {
		return agentowl.ErrConflict
	}
	return err
}

func (t *tx) MessageHold(ctx context.Context, id, owner string, attempt int) error {
	held := ts(agentowl.OutboxHeld)
	err := t.execOne(ctx, `UPDATE outbox SET next_attempt_at = ?, due_since = ?, lease_owner = NULL, lease_until = NULL,
		attempts = attempts - 1 WHERE id = ? AND state = 'pending' AND lease_owner = ? AND attempts = ?`, held, held, id, owner, attempt)
	if errors.Is(err, agentowl.ErrNotFound) {
		return agentowl.ErrConflict
	}
	return err
}

func (t *tx) MessageHoldDestination(ctx context.Context, destination string) (int, error) {
	held := ts(agentowl.OutboxHeld)
	res, err := t.exec(ctx, `UPDATE outbox SET next_attempt_at = ?, due_since = ?
		WHERE destination = ? AND state = 'pending' AND lease_owner IS NULL`, held, held, destination)
	return affected(res, err)
}

func (t *tx) MessageReleaseDestination(ctx context.Context, destination string, now time.Time) (int, error) {
	// Due since their creation, for the claim's order (oldest due first):
	// the queue resumes in the order it was held.
	res, err := t.exec(ctx, `UPDATE outbox SET next_attempt_at = created_at, due_since = ?
		WHERE destination = ? AND state = 'pending' AND next_attempt_at = ?`, ts(now), destination, ts(agentowl.OutboxHeld))
	return affected(res, err)
}

func (t *tx) MessageUndefer(ctx context.Context, ids []string, now time.Time, limit int) (int, error) {
	// A deferral moves next_attempt_at past due_since (a recorded attempt
	// sets both): that is what tells a deferred message from a retry.
	const deferred = `state = 'pending' AND lease_owner IS NULL AND next_attempt_at > ? AND next_attempt_at > due_since`
	n := ts(now)
	if ids == nil {
		res, err := t.exec(ctx, `UPDATE outbox SET next_attempt_at = ? WHERE id IN (SELECT id FROM outbox WHERE `+deferred+` LIMIT ?)
			AND `+deferred, n, n, limit, n)
		return affected(res, err)
	}
	ids = ids[:min(len(ids), limit)]
	if len(ids) == 0 {
		return 0, nil
	}
	args := []any{n}
	for _, id := range ids {
		args = append(args, id)
	}
	res, err := t.exec(ctx, `UPDATE outbox SET next_attempt_at = ? WHERE id IN (?`+strings.Repeat(", ?", len(ids)-1)+`) AND `+deferred,
		append(args, n)...)
	return affected(res, err)
}

func (t *tx) MessageCancelDestination(ctx context.Context, destination string, now time.Time, grace time.Duration) ([]string, error) {
	// A message in flight ends when its lease would, so the delivery grace
	// period starts after that attempt.
	rows, err := t.query(ctx, `UPDATE outbox SET state = 'cancelled',
		ended_at = CASE WHEN lease_until IS NOT NULL AND lease_until > ? THEN lease_until ELSE ? END,
		retain_until = CASE WHEN lease_until IS NOT NULL AND lease_until > ? THEN lease_until ELSE ? END + ?,
		lease_owner = NULL, lease_until = NULL
		WHERE destination = ? AND state = 'pending' RETURNING id`,
		ts(now), ts(now), ts(now), ts(now), grace.Microseconds(), destination)
	return all(rows, err, scanString)
}

func (t *tx) MessageList(ctx context.Context, p agentowl.MessageListParams) ([]*agentowl.OutboxMessage, error) {
	where, args := []string{"tenant_id = ?"}, []any{p.TenantID}
	where, args = eq(where, args, "subject", p.Subject)
	where, args = eq(where, args, "destination", p.Prefix)
	where, args = eq(where, args, "state", p.State)
	return listNewest(ctx, t, messageSelectCols, "outbox", where, args, nil, p.Limit, scanMessage)
}

func (t *tx) AttemptList(ctx context.Context, eventID string) ([]*agentowl.Attempt, error) {
	rows, err := t.query(ctx, `SELECT event_id, n, url, started_at, ended_at, status_code, error FROM outbox_attempts
		WHERE event_id = ? ORDER BY n`, eventID)
	return all(rows, err, func(s scanner) (*agentowl.Attempt, error) {
		var a agentowl.Attempt
		var started, ended int64
		var status sql.NullInt64
		var errText sql.NullString
		if err := s.Scan(&a.EventID, &a.N, &a.URL, &started, &ended, &status, &errText); err != nil {
			return nil, err
		}
		a.StartedAt, a.EndedAt, a.StatusCode, a.Error = fromTS(started), fromTS(ended), int(status.Int64), errText.String
		return &a, nil
	})
}

func (t *tx) MessageStats(ctx context.Context, now time.Time) ([]*agentowl.QueueStats, error) {
	// The surface is the destination's kind; the CASE is portable where a
	// string search function is not.
	rows, err := t.query(ctx, `SELECT CASE WHEN destination LIKE 'instance:%' THEN 'instance'
			WHEN destination LIKE 'endpoint:%' THEN 'endpoint' WHEN destination LIKE 'decision:%' THEN 'decision' ELSE 'other' END AS surface,
			count(*), min(created_at), min(CASE WHEN due_since <= ? THEN due_since END)
		FROM outbox WHERE state = 'pending' GROUP BY 1 ORDER BY 1`, ts(now))
	return all(rows, err, func(s scanner) (*agentowl.QueueStats, error) {
		var q agentowl.QueueStats
		var created int64
		var due sql.NullInt64
		err := s.Scan(&q.Surface, &q.Pending, &created, &due)
		q.OldestCreated, q.OldestDue = fromTS(created), fromNullTS(due)
		return &q, err
	})
}
