// Package sqlstore implements store.Tx once over database/sql for both
// backends. The SQL here is the portable subset that SQLite 3.35+ and
// PostgreSQL share (ON CONFLICT, RETURNING, ? placeholders rebound for
// PostgreSQL); schema, connection setup and error interpretation live in the
// sqlite and postgres packages.
package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"strconv"
	"strings"
	"sync"

	"github.com/agentowl/agentowl/internal/store"
)

// Dialect is what differs between backends.
type Dialect struct {
	Name string
	// Numbered rewrites ? placeholders as $1, $2, … (PostgreSQL).
	Numbered bool
	// ForUpdate is appended to row reads that must lock ("" on SQLite, whose
	// write transactions are already exclusive).
	ForUpdate string
	// SkipLocked is appended to the outbox claim's row selection so
	// concurrent claimers pass over each other's rows (PostgreSQL).
	SkipLocked string
	// Classify maps a driver error to store.ErrConflict (unique violation) or
	// returns it unchanged.
	Classify func(error) error
	// Retryable reports whether a failed write transaction may be retried
	// (serialization failure, deadlock).
	Retryable func(error) bool
}

// DB is a store.Store over one or two database/sql pools.
type DB struct {
	dialect Dialect
	writer  *sql.DB
	reader  *sql.DB
	// writeMu serializes writers within this process where the backend can
	// have only one writer anyway (SQLite), so they queue here instead of
	// spinning on the busy timeout.
	// batch, when set, group-commits concurrent writes (SQLite).
	batch   *batcher
	rebound sync.Map
}

// New returns a Store. reader may equal writer. groupCommit should be true
// for SQLite: its single writer then commits concurrent writes together.
func New(d Dialect, writer, reader *sql.DB, groupCommit bool) *DB {
	db := &DB{dialect: d, writer: writer, reader: reader}
	if groupCommit {
		db.batch = newBatcher(db)
	}
	return db
}

// Dialect implements store.Store.
func (db *DB) Dialect() string { return db.dialect.Name }

// Ping implements store.Store.
func (db *DB) Ping(ctx context.Context) error { return db.writer.PingContext(ctx) }

// Close implements store.Store.
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

// Read implements store.Store.
func (db *DB) Read(ctx context.Context, fn func(store.Tx) error) error {
	sqlTx, err := db.reader.BeginTx(ctx, &sql.TxOptions{ReadOnly: db.dialect.Name == "postgres"})
	if err != nil {
		return err
	}
	defer sqlTx.Rollback() //nolint:errcheck // read-only; nothing to keep
	return fn(&tx{db: db, tx: sqlTx})
}

// Write implements store.Store.
func (db *DB) Write(ctx context.Context, fn func(store.Tx) error) error {
	if db.batch != nil {
		return db.batch.write(ctx, fn)
	}
	for attempt := 0; ; attempt++ {
		err := db.writeOnce(ctx, fn)
		if err != nil && attempt < 5 && db.dialect.Retryable != nil && db.dialect.Retryable(err) && ctx.Err() == nil {
			continue
		}
		return err
	}
}

func (db *DB) writeOnce(ctx context.Context, fn func(store.Tx) error) error {
	sqlTx, err := db.writer.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := fn(&tx{db: db, tx: sqlTx}); err != nil {
		_ = sqlTx.Rollback()
		return err
	}
	return sqlTx.Commit()
}

// q rewrites a query for the dialect, caching the result.
func (db *DB) q(query string) string {
	if !db.dialect.Numbered {
		return query
	}
	if v, ok := db.rebound.Load(query); ok {
		return v.(string)
	}
	var b strings.Builder
	n := 0
	for _, r := range query {
		if r == '?' {
			n++
			b.WriteByte('$')
			b.WriteString(strconv.Itoa(n))
			continue
		}
		b.WriteRune(r)
	}
	out := b.String()
	db.rebound.Store(query, out)
	return out
}

type tx struct {
	db *DB
	tx *sql.Tx
}

func (t *tx) exec(ctx context.Context, query string, args ...any) (sql.Result, error) {
	res, err := t.tx.ExecContext(ctx, t.db.q(query), args...)
	if err != nil {
		return nil, t.db.dialect.Classify(err)
	}
	return res, nil
}

// execOne runs an update that must touch exactly one row; otherwise ErrNotFound.
func (t *tx) execOne(ctx context.Context, query string, args ...any) error {
	res, err := t.exec(ctx, query, args...)
	if err != nil {
		return err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return err
	}
	if n == 0 {
		return store.ErrNotFound
	}
	return nil
}

func (t *tx) query(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	return t.tx.QueryContext(ctx, t.db.q(query), args...)
}

func (t *tx) queryRow(ctx context.Context, query string, args ...any) *sql.Row {
	return t.tx.QueryRowContext(ctx, t.db.q(query), args...)
}

// one scans a single row, mapping sql.ErrNoRows to store.ErrNotFound.
func one[T any](row *sql.Row, scan func(scanner) (T, error)) (T, error) {
	v, err := scan(row)
	if errors.Is(err, sql.ErrNoRows) {
		var zero T
		return zero, store.ErrNotFound
	}
	return v, err
}

// all scans every row.
func all[T any](rows *sql.Rows, err error, scan func(scanner) (T, error)) ([]T, error) {
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

type scanner interface{ Scan(dest ...any) error }

func itoa(v int64) string { return strconv.FormatInt(v, 10) }
