// Package sqldb is the SQL shared by the aap/sqlite and aap/postgres
// stores: one implementation of aap.ExecutionStore and aap.ReceiverStore
// over database/sql, with a per-dialect placeholder style, row-locking
// clause and conflict test. On SQLite, writes are group-committed.
package sqldb

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/agentowl/agentowl/aap"
)

// Dialect is what differs between databases.
type Dialect struct {
	// Numbered selects $1, $2 … placeholders instead of ?.
	Numbered bool
	// SkipLocked is appended to the wake-up lease subquery (PostgreSQL:
	// " FOR UPDATE SKIP LOCKED").
	SkipLocked string
	// IsUniqueViolation reports whether err is a unique-constraint failure.
	IsUniqueViolation func(error) bool
}

// DB implements aap.Store.
type DB struct {
	d      Dialect
	writer *sql.DB
	reader *sql.DB
	batch  *batcher // nil: every write is its own transaction
}

// New returns a store over writer (used for every write) and reader. With
// groupCommit, concurrent writes share transactions (for a single-writer
// database such as SQLite).
func New(d Dialect, writer, reader *sql.DB, groupCommit bool) *DB {
	db := &DB{d: d, writer: writer, reader: reader}
	if groupCommit {
		db.batch = newBatcher(writer)
	}
	return db
}

// Close stops the group committer and closes the connections.
func (db *DB) Close() error {
	if db.batch != nil {
		db.batch.close()
	}
	err := db.writer.Close()
	if db.reader != db.writer {
		err = errors.Join(err, db.reader.Close())
	}
	return err
}

// q rewrites ? placeholders for the dialect.
func (db *DB) q(s string) string {
	if !db.d.Numbered {
		return s
	}
	var b strings.Builder
	n := 0
	for _, r := range s {
		if r == '?' {
			n++
			b.WriteString("$" + strconv.Itoa(n))
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// write runs fn in a write transaction; durable when it returns nil.
func (db *DB) write(ctx context.Context, fn func(ctx context.Context, tx *sql.Tx) error) error {
	if db.batch != nil {
		return db.batch.write(ctx, fn)
	}
	tx, err := db.writer.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := fn(ctx, tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	return tx.Commit()
}

func nanos(t time.Time) int64 { return t.UnixNano() }

func fromNanos(n int64) time.Time { return time.Unix(0, n).UTC() }

func placeholders(n int) string {
	return strings.TrimSuffix(strings.Repeat("?,", n), ",")
}

func nullString(s string) sql.NullString { return sql.NullString{String: s, Valid: s != ""} }

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// ---- executions

const execColumns = "exec_key, tool, arguments, timeout, agent_reasoning, context, request_id, state, reason, result, error, cancel_done, created_at, updated_at"

type scanner interface{ Scan(dest ...any) error }

// scanAll reads every row of a query's answer (rows, err) with scan and
// closes them.
func scanAll[T any](rows *sql.Rows, err error, scan func(scanner) (T, error)) ([]T, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

func scanExecution(s scanner) (*aap.Execution, error) {
	var e aap.Execution
	var args, state string
	var ctxJSON, reqID, result sql.NullString
	var cancel int
	var created, updated int64
	if err := s.Scan(&e.Key, &e.Call.Tool, &args, &e.Call.Timeout, &e.Call.AgentReasoning, &ctxJSON, &reqID, &state,
		&e.Reason, &result, &e.Error, &cancel, &created, &updated); err != nil {
		return nil, err
	}
	e.Call.Arguments = []byte(args)
	if ctxJSON.Valid {
		e.Call.Context = []byte(ctxJSON.String)
	}
	if result.Valid {
		e.Result = []byte(result.String)
	}
	e.RequestID, e.State, e.CancelDone = reqID.String, aap.ExecState(state), cancel == 1
	e.CreatedAt, e.UpdatedAt = fromNanos(created), fromNanos(updated)
	return &e, nil
}

// CreateExecution implements aap.ExecutionStore.
func (db *DB) CreateExecution(ctx context.Context, e *aap.Execution) error {
	return db.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, db.q(`INSERT INTO aap_executions (`+execColumns+`)
			VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?) ON CONFLICT (exec_key) DO NOTHING`),
			e.Key, e.Call.Tool, string(e.Call.Arguments), e.Call.Timeout, e.Call.AgentReasoning, nullString(string(e.Call.Context)),
			nullString(e.RequestID), string(e.State), e.Reason, nullString(string(e.Result)), e.Error, boolInt(e.CancelDone),
			nanos(e.CreatedAt), nanos(e.UpdatedAt))
		if err != nil {
			return db.conflict(err)
		}
		n, err := res.RowsAffected()
		if err == nil && n == 0 {
			err = fmt.Errorf("%w: execution %s exists", aap.ErrConflict, e.Key)
		}
		return err
	})
}

func (db *DB) conflict(err error) error {
	if db.d.IsUniqueViolation != nil && db.d.IsUniqueViolation(err) {
		return fmt.Errorf("%w: %v", aap.ErrConflict, err)
	}
	return err
}

func (db *DB) getExecution(ctx context.Context, where string, arg any) (*aap.Execution, error) {
	e, err := scanExecution(db.reader.QueryRowContext(ctx, db.q("SELECT "+execColumns+" FROM aap_executions WHERE "+where), arg))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, aap.ErrNotFound
	}
	return e, err
}

// GetExecution implements aap.ExecutionStore.
func (db *DB) GetExecution(ctx context.Context, key string) (*aap.Execution, error) {
	return db.getExecution(ctx, "exec_key = ?", key)
}

// ExecutionByRequest implements aap.ExecutionStore.
func (db *DB) ExecutionByRequest(ctx context.Context, requestID string) (*aap.Execution, error) {
	return db.getExecution(ctx, "request_id = ?", requestID)
}

// Transition implements aap.ExecutionStore.
func (db *DB) Transition(ctx context.Context, key string, from []aap.ExecState, c aap.Change) (bool, error) {
	if len(from) == 0 {
		return false, nil
	}
	args := []any{string(c.State), nullString(c.RequestID), c.Reason, nullString(string(c.Result)), c.Error,
		boolInt(c.CancelDone), nanos(c.At), key}
	for _, s := range from {
		args = append(args, string(s))
	}
	var ok bool
	err := db.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, db.q(`UPDATE aap_executions SET state = ?, request_id = COALESCE(?, request_id),
			reason = ?, result = ?, error = ?, cancel_done = ?, updated_at = ?
			WHERE exec_key = ? AND state IN (`+placeholders(len(from))+`)`), args...)
		if err != nil {
			return db.conflict(err)
		}
		n, err := res.RowsAffected()
		ok = n == 1
		return err
	})
	return ok && err == nil, err
}

// ListExecutions implements aap.ExecutionStore.
func (db *DB) ListExecutions(ctx context.Context, states ...aap.ExecState) ([]*aap.Execution, error) {
	if len(states) == 0 {
		return nil, nil
	}
	args := make([]any, len(states))
	for i, s := range states {
		args[i] = string(s)
	}
	rows, err := db.reader.QueryContext(ctx, db.q("SELECT "+execColumns+" FROM aap_executions WHERE state IN ("+
		placeholders(len(states))+") ORDER BY created_at, exec_key"), args...)
	return scanAll(rows, err, scanExecution)
}

// ---- registrations

const regColumns = "id, secret, instance_id, confirmed, created_at"

func scanRegistration(s scanner) (*aap.Registration, error) {
	var r aap.Registration
	var inst sql.NullString
	var confirmed int
	var created int64
	if err := s.Scan(&r.ID, &r.Secret, &inst, &confirmed, &created); err != nil {
		return nil, err
	}
	r.InstanceID, r.Confirmed, r.CreatedAt = inst.String, confirmed == 1, fromNanos(created)
	return &r, nil
}

// PutRegistration implements aap.ReceiverStore.
func (db *DB) PutRegistration(ctx context.Context, r *aap.Registration) error {
	return db.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, db.q(`INSERT INTO aap_registrations (id, secret, created_at) VALUES (?,?,?)
			ON CONFLICT (id) DO NOTHING`), r.ID, r.Secret, nanos(r.CreatedAt))
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n == 1 {
			return err
		}
		var secret string
		if err := tx.QueryRowContext(ctx, db.q("SELECT secret FROM aap_registrations WHERE id = ?"), r.ID).Scan(&secret); err != nil {
			return err
		}
		if secret != r.Secret {
			return fmt.Errorf("%w: registration %s exists with another secret", aap.ErrConflict, r.ID)
		}
		return nil
	})
}

// GetRegistration implements aap.ReceiverStore.
func (db *DB) GetRegistration(ctx context.Context, id string) (*aap.Registration, error) {
	r, err := scanRegistration(db.reader.QueryRowContext(ctx, db.q("SELECT "+regColumns+" FROM aap_registrations WHERE id = ?"), id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, aap.ErrNotFound
	}
	return r, err
}

// DeleteRegistration implements aap.ReceiverStore.
func (db *DB) DeleteRegistration(ctx context.Context, id string) error {
	return db.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, db.q("DELETE FROM aap_registrations WHERE id = ?"), id)
		return err
	})
}

// BindRegistration implements aap.ReceiverStore.
func (db *DB) BindRegistration(ctx context.Context, id, instanceID string, confirm bool) error {
	return db.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		var res sql.Result
		var err error
		if confirm {
			res, err = tx.ExecContext(ctx, db.q("UPDATE aap_registrations SET instance_id = ?, confirmed = 1 WHERE id = ?"), instanceID, id)
		} else {
			res, err = tx.ExecContext(ctx, db.q(`UPDATE aap_registrations SET instance_id = ?
				WHERE id = ? AND (confirmed = 0 OR instance_id = ?)`), instanceID, id, instanceID)
		}
		if changed, err := db.changedOne(ctx, tx, res, err, "aap_registrations", id); changed || err != nil {
			return err
		}
		return fmt.Errorf("%w: registration %s is confirmed for another instance", aap.ErrConflict, id)
	})
}

// changedOne reports whether a guarded update of row id of table (its
// result res, err) changed that row. When it changed nothing, the error is
// aap.ErrNotFound if there is no such row, and nil if the row is there but
// its guard did not hold.
func (db *DB) changedOne(ctx context.Context, tx *sql.Tx, res sql.Result, err error, table, id string) (bool, error) {
	if err != nil {
		return false, err
	}
	if n, err := res.RowsAffected(); err != nil || n == 1 {
		return err == nil, err
	}
	var one int
	err = tx.QueryRowContext(ctx, db.q("SELECT 1 FROM "+table+" WHERE id = ?"), id).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return false, aap.ErrNotFound
	}
	return false, err
}

// InstanceRegistrations implements aap.ReceiverStore.
func (db *DB) InstanceRegistrations(ctx context.Context, instanceID string) ([]*aap.Registration, error) {
	rows, err := db.reader.QueryContext(ctx, db.q("SELECT "+regColumns+" FROM aap_registrations WHERE instance_id = ? ORDER BY created_at DESC, id"), instanceID)
	return scanAll(rows, err, scanRegistration)
}

// ---- events and wake-ups

// RecordEvent implements aap.ReceiverStore.
func (db *DB) RecordEvent(ctx context.Context, e *aap.Event) (bool, error) {
	var created bool
	err := db.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, db.q(`INSERT INTO aap_events (id, instance_id, request_id, registration_id, created_at,
			received_at, keep_until, body) VALUES (?,?,?,?,?,?,?,?) ON CONFLICT (id) DO NOTHING`),
			e.ID, e.InstanceID, e.RequestID, e.RegistrationID, nanos(e.CreatedAt), nanos(e.ReceivedAt), nanos(e.KeepUntil), string(e.Body))
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		if err != nil || n == 0 {
			return err
		}
		created = true
		_, err = tx.ExecContext(ctx, db.q(`UPDATE aap_registrations SET confirmed = 1
			WHERE id = ? AND confirmed = 0 AND instance_id = ?`), e.RegistrationID, e.InstanceID)
		return err
	})
	return created && err == nil, err
}

// LeaseWakeups implements aap.ReceiverStore.
func (db *DB) LeaseWakeups(ctx context.Context, now, leaseUntil time.Time, limit int) ([]aap.Wakeup, error) {
	var out []aap.Wakeup
	err := db.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		out = out[:0]
		rows, err := tx.QueryContext(ctx, db.q(`UPDATE aap_events SET lease_until = ?, attempts = attempts + 1
			WHERE id IN (SELECT id FROM aap_events WHERE acked_at IS NULL AND lease_until <= ?
				ORDER BY received_at, id LIMIT ?`+db.d.SkipLocked+`)
			RETURNING id, instance_id, request_id, created_at, received_at, attempts`), nanos(leaseUntil), nanos(now), limit)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var w aap.Wakeup
			var created, received int64
			if err := rows.Scan(&w.EventID, &w.InstanceID, &w.RequestID, &created, &received, &w.Attempts); err != nil {
				return err
			}
			w.CreatedAt, w.ReceivedAt = fromNanos(created), fromNanos(received)
			out = append(out, w)
		}
		return rows.Err()
	})
	slices.SortFunc(out, func(a, b aap.Wakeup) int {
		if c := a.ReceivedAt.Compare(b.ReceivedAt); c != 0 {
			return c
		}
		return strings.Compare(a.EventID, b.EventID)
	})
	return out, err
}

// AckWakeup implements aap.ReceiverStore.
func (db *DB) AckWakeup(ctx context.Context, eventID string, at time.Time) error {
	return db.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, db.q("UPDATE aap_events SET acked_at = ? WHERE id = ? AND acked_at IS NULL"), nanos(at), eventID)
		_, err = db.changedOne(ctx, tx, res, err, "aap_events", eventID)
		return err
	})
}

// PurgeEvents implements aap.ReceiverStore.
func (db *DB) PurgeEvents(ctx context.Context, now time.Time) (int64, error) {
	var n int64
	err := db.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, db.q("DELETE FROM aap_events WHERE keep_until < ?"), nanos(now))
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	return n, err
}
