// Package sqlstore implements agentowl.Tx once for both backends: over
// database/sql for SQLite, over pgx's native pool with pipelined write
// transactions for PostgreSQL (pgx.go). The SQL here is the portable subset
// that SQLite 3.35+ and PostgreSQL share (ON CONFLICT, RETURNING, ?
// placeholders rebound for PostgreSQL); schema, connection setup and error
// interpretation live in the sqlite and postgres packages.
package sqlstore

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/agentowl/agentowl"
	"github.com/agentowl/agentowl/internal/secret"
)

// Dialect is what differs between backends.
type Dialect struct {
	Name string
	// Numbered rewrites ? placeholders as $1, $2, … (PostgreSQL).
	Numbered bool
	// ForUpdate is appended to row reads that must lock ("" on SQLite, whose
	// write transactions are already exclusive).
	ForUpdate string
	// ForShare is appended to row reads that must keep the row from being
	// changed or deleted until the transaction ends without serializing
	// with each other (" FOR KEY SHARE" on PostgreSQL).
	ForShare string
	// SkipLocked is appended to the outbox claim's row selection so
	// concurrent claimers pass over each other's rows (PostgreSQL).
	SkipLocked string
	// Classify maps a driver error to agentowl.ErrConflict (unique violation) or
	// returns it unchanged.
	Classify func(error) error
	// Retryable reports whether a failed write transaction may be retried
	// (serialization failure, deadlock).
	Retryable func(error) bool
	// Unavailable reports whether a driver error means the database cannot
	// answer now, by error type or code; Read, Write and Ping then return
	// it wrapped in agentowl.ErrUnavailable.
	Unavailable func(error) bool
	// CacheStatements prepares each query once per connection (SQLite;
	// pgx caches statements itself).
	CacheStatements bool
	// StrPos names the function that returns where a string occurs in
	// another, 0 if nowhere, called as StrPos(haystack, needle): "instr"
	// on SQLite, "strpos" on PostgreSQL.
	StrPos string
}

// DB is a agentowl.Store over one or two database/sql pools.
type DB struct {
	// closeOnce makes Close idempotent: the server and a test may both
	// close the store.
	closeOnce sync.Once
	closeErr  error
	dialect   Dialect
	// box seals every stored secret (the declarations of secrets.go); nil
	// when opened without the key.
	box    *secret.Box
	writer *sql.DB
	reader *sql.DB
	// writeMu serializes writers within this process where the backend can
	// have only one writer anyway (SQLite), so they queue here instead of
	// spinning on the busy timeout.
	// batch, when set, group-commits concurrent writes (SQLite).
	batch   *batcher
	rebound sync.Map
	// readers are held reader connections (CacheStatements only).
	readers chan *conn
	// closed is closed by Close: a Read waiting for a held reader
	// connection then fails instead of waiting for one forever.
	closed chan struct{}
	// pool, when set (PostgreSQL), runs reads and writes through pgx's
	// native interface, writes pipelined (pgx.go); writer and reader then
	// serve only what needs database/sql.
	pool    *pgxpool.Pool
	pgStats pgStats
}

// New returns a Store whose secrets box seals (PrepareSecrets must have run
// with it); with a nil box, reading or writing a secret the store seals
// fails (offline administration needs none). reader may equal writer.
// groupCommit should be true for SQLite: its single writer then commits
// concurrent writes together.
//
// With CacheStatements, readConns reader connections (and, with group
// commit, the one writer connection) are held for the store's lifetime.
func New(d Dialect, box *secret.Box, writer, reader *sql.DB, groupCommit bool, readConns int) (*DB, error) {
	db := &DB{dialect: d, box: box, writer: writer, reader: reader, closed: make(chan struct{})}
	ctx := context.Background()
	if d.CacheStatements {
		db.readers = make(chan *conn, readConns)
		for range readConns {
			c, err := reader.Conn(ctx)
			if err != nil {
				db.Close()
				return nil, err
			}
			db.readers <- &conn{c: c, stmts: map[string]*sql.Stmt{}}
		}
	}
	if groupCommit {
		var wc *conn
		if d.CacheStatements {
			c, err := writer.Conn(ctx)
			if err != nil {
				db.Close()
				return nil, err
			}
			wc = &conn{c: c, stmts: map[string]*sql.Stmt{}}
		}
		db.batch = newBatcher(db, wc)
	}
	return db, nil
}

// NewPgx returns a Store over pool whose reads and writes go through pgx
// (pgx.go); sqlDB is the same pool as a database/sql handle, closed with
// the store.
func NewPgx(d Dialect, box *secret.Box, pool *pgxpool.Pool, sqlDB *sql.DB) *DB {
	return &DB{dialect: d, box: box, writer: sqlDB, reader: sqlDB, pool: pool, closed: make(chan struct{})}
}

// Dialect implements agentowl.Store.
func (db *DB) Dialect() string { return db.dialect.Name }

// Ping implements agentowl.Store. It writes nothing, but takes the write path:
// a database that answers reads while another process holds its write lock
// is not ready.
func (db *DB) Ping(ctx context.Context) error {
	return db.Write(ctx, func(t agentowl.Tx) error {
		return t.(*tx).queryRow(ctx, "SELECT 1").Scan(new(int))
	})
}

// unavailable wraps an error that means the database cannot answer now in
// agentowl.ErrUnavailable, keeping the driver's error in the chain for the log.
func (db *DB) unavailable(err error) error {
	if err == nil || db.dialect.Unavailable == nil || errors.Is(err, agentowl.ErrUnavailable) || !db.dialect.Unavailable(err) {
		return err
	}
	return fmt.Errorf("%w: %w", agentowl.ErrUnavailable, err)
}

// errClosed answers a Read after Close.
var errClosed = fmt.Errorf("%w: the store is closed", agentowl.ErrUnavailable)

// putReader hands a held reader connection back, or closes it once the
// store is closed (Close closed the ones it found idle).
func (db *DB) putReader(c *conn) {
	select {
	case <-db.closed:
		c.close()
	default:
		db.readers <- c
	}
}

// Close implements agentowl.Store.
func (db *DB) Close() error {
	db.closeOnce.Do(func() { db.closeErr = db.close() })
	return db.closeErr
}

func (db *DB) close() error {
	close(db.closed)
	if db.batch != nil {
		db.batch.close()
	}
	if db.readers != nil {
		for len(db.readers) > 0 {
			(<-db.readers).close()
		}
	}
	err := db.writer.Close()
	if db.reader != db.writer {
		err = errors.Join(err, db.reader.Close())
	}
	if db.pool != nil {
		db.pool.Close()
	}
	return err
}

// Read implements agentowl.Store.
func (db *DB) Read(ctx context.Context, fn func(agentowl.Tx) error) error {
	return db.unavailable(db.read(ctx, fn))
}

func (db *DB) read(ctx context.Context, fn func(agentowl.Tx) error) error {
	if db.readers != nil {
		var held *conn
		select {
		case <-db.closed:
			return errClosed
		default:
		}
		select {
		case held = <-db.readers:
		case <-db.closed:
			return errClosed
		case <-ctx.Done():
			return ctx.Err()
		}
		defer db.putReader(held)
		if _, err := held.c.ExecContext(ctx, "BEGIN"); err != nil {
			return err
		}
		defer held.c.ExecContext(context.Background(), "ROLLBACK") //nolint:errcheck // read-only
		return fn(&tx{db: db, conn: held})
	}
	// Without held connections (PostgreSQL) each statement runs on its own
	// (READ COMMITTED): a BEGIN and ROLLBACK around them cost two round trips
	// per Read, a third of the statements of a delivery.
	if db.pool != nil {
		err := db.pgRead(ctx, fn)
		db.pgDropLost(err)
		return err
	}
	return fn(&tx{db: db, run: db.reader})
}

// Write implements agentowl.Store.
func (db *DB) Write(ctx context.Context, fn func(agentowl.Tx) error) error {
	if db.batch != nil {
		return db.unavailable(db.batch.write(ctx, fn))
	}
	for attempt := 0; ; attempt++ {
		err := db.writeOnce(ctx, fn)
		if err != nil && attempt < 5 && db.dialect.Retryable != nil && db.dialect.Retryable(err) && ctx.Err() == nil {
			continue
		}
		db.pgDropLost(err)
		return db.unavailable(err)
	}
}

func (db *DB) writeOnce(ctx context.Context, fn func(agentowl.Tx) error) error {
	if db.pool != nil {
		return db.pgWriteOnce(ctx, fn)
	}
	sqlTx, err := db.writer.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := fn(&tx{db: db, run: sqlTx}); err != nil {
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

// tx runs statements either in a database/sql transaction or, on a held
// connection, between explicit BEGIN and COMMIT with the connection's cached
// statements (database/sql would re-prepare a connection's statement for
// every transaction).
type tx struct {
	db   *DB
	run  runner // a *sql.Tx, or the pool itself for statements on their own
	conn *conn
	// pg runs the statements through pgx instead (PostgreSQL): a *pgTx in
	// a write, pgPool in a read.
	pg pgRunner
}

// pgRunner runs statements through pgx.
type pgRunner interface {
	exec(ctx context.Context, query string, args ...any) (sql.Result, error)
	query(ctx context.Context, query string, args ...any) (rows, error)
	queryRow(ctx context.Context, query string, args ...any) row
}

// rows is what a query returns: *sql.Rows, or pgx's (pgRows).
// maxInList bounds the values of one IN (…) list, well under either
// database's limit on a statement's parameters.
const maxInList = 500

// chunks splits ids into lists of at most maxInList.
func chunks(ids []string) [][]string {
	var out [][]string
	for len(ids) > maxInList {
		out, ids = append(out, ids[:maxInList]), ids[maxInList:]
	}
	if len(ids) > 0 {
		out = append(out, ids)
	}
	return out
}

// anys is ids as query arguments.
func anys(ids []string) []any {
	out := make([]any, len(ids))
	for i, id := range ids {
		out[i] = id
	}
	return out
}

type rows interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
	Close() error
}

// row is one row of a query: *sql.Row, or pgx's (pgRow).
type row interface{ Scan(dest ...any) error }

// runner runs statements: *sql.Tx and *sql.DB.
type runner interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// conn is a connection this store holds for its lifetime with the
// statements prepared on it, so each query is parsed once per connection
// rather than on every call (parsing was a fifth of the CPU of a delivery on
// SQLite). Statements are prepared on the connection itself, never through
// the pool, which could wait forever for a connection a transaction holds.
type conn struct {
	c     *sql.Conn
	stmts map[string]*sql.Stmt
}

func (c *conn) prepared(ctx context.Context, query string) (*sql.Stmt, error) {
	if st, ok := c.stmts[query]; ok {
		return st, nil
	}
	st, err := c.c.PrepareContext(ctx, query)
	if err != nil {
		return nil, err
	}
	c.stmts[query] = st
	return st, nil
}

func (c *conn) close() {
	for _, st := range c.stmts {
		st.Close()
	}
	c.c.Close()
}

func (t *tx) exec(ctx context.Context, query string, args ...any) (sql.Result, error) {
	if t.pg != nil {
		return t.pg.exec(ctx, t.db.q(query), args...)
	}
	var res sql.Result
	var err error
	if t.conn != nil {
		var st *sql.Stmt
		if st, err = t.conn.prepared(ctx, t.db.q(query)); err == nil {
			res, err = st.ExecContext(ctx, args...)
		}
	} else {
		res, err = t.run.ExecContext(ctx, t.db.q(query), args...)
	}
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
		return agentowl.ErrNotFound
	}
	return nil
}

func (t *tx) query(ctx context.Context, query string, args ...any) (rows, error) {
	if t.pg != nil {
		return t.pg.query(ctx, t.db.q(query), args...)
	}
	if t.conn != nil {
		st, err := t.conn.prepared(ctx, t.db.q(query))
		if err != nil {
			return nil, err
		}
		return st.QueryContext(ctx, args...)
	}
	return t.run.QueryContext(ctx, t.db.q(query), args...)
}

func (t *tx) queryRow(ctx context.Context, query string, args ...any) row {
	if t.pg != nil {
		return t.pg.queryRow(ctx, t.db.q(query), args...)
	}
	if t.conn != nil {
		if st, err := t.conn.prepared(ctx, t.db.q(query)); err == nil {
			return st.QueryRowContext(ctx, args...)
		}
		return t.conn.c.QueryRowContext(ctx, t.db.q(query), args...) // reports why it could not be prepared
	}
	return t.run.QueryRowContext(ctx, t.db.q(query), args...)
}

// stmt is a statement and its arguments.
type stmt struct {
	query string
	args  []any
}

// groupRead is one statement of a group of reads sent together
// (tx.readGroup): its read scans the rows and closes them; an error it
// returns fails the group.
type groupRead struct {
	stmt
	read func(rows) error
}

// firstRow is the first row of a query, with database/sql's sql.ErrNoRows
// when there is none, which the shared code tests for.
type firstRow struct{ rows rows }

func (r *firstRow) Scan(dest ...any) error {
	defer r.rows.Close()
	if !r.rows.Next() {
		// database/sql reports a failed Next (a cancelled context) in Err,
		// not Close: it is a failure, not an empty answer.
		if err := r.rows.Err(); err != nil {
			return err
		}
		if err := r.rows.Close(); err != nil {
			return err
		}
		return sql.ErrNoRows
	}
	if err := r.rows.Scan(dest...); err != nil {
		return err
	}
	return r.rows.Close()
}

// oneRow reads at most one row into *dst; with none, *dst is left as is
// (nil for a pointer): not finding a row is an answer, not a failure.
func oneRow[T any](dst *T, scan func(scanner) (T, error), query string, args ...any) groupRead {
	return groupRead{stmt{query, args}, func(rs rows) error {
		v, err := one(&firstRow{rs}, scan)
		if errors.Is(err, agentowl.ErrNotFound) {
			return nil
		}
		if err == nil {
			*dst = v
		}
		return err
	}}
}

// allRows reads every row into *dst.
func allRows[T any](dst *[]T, scan func(scanner) (T, error), query string, args ...any) groupRead {
	return groupRead{stmt{query, args}, func(rs rows) (err error) {
		*dst, err = all(rs, nil, scan)
		return err
	}}
}

// readGroup runs reads whose arguments do not depend on each other's
// answers. In a PostgreSQL write they go in one round trip, with the held
// writes before them (pgTx.queryEach); elsewhere one after another. The
// answers are the same either way: each statement runs after the previous
// one has finished, on its own snapshot.
func (t *tx) readGroup(ctx context.Context, reads ...groupRead) error {
	if p, ok := t.pg.(*pgTx); ok {
		q := make([]groupRead, len(reads))
		for i, r := range reads {
			q[i] = r
			q[i].query = t.db.q(r.query)
		}
		return p.queryEach(ctx, q)
	}
	for _, r := range reads {
		rs, err := t.query(ctx, r.query, r.args...)
		if err == nil {
			err = r.read(rs)
		}
		if err != nil {
			return t.db.dialect.Classify(err)
		}
	}
	return nil
}

// rowCheck is what a write that must change a row returns when it changes
// none: none, or missing when the row the exists query looks for is not
// there at all (exists is a SELECT of that row, its parameters at the end
// of the write's).
type rowCheck struct {
	none, missing error
	exists        string
	existsArgs    int // how many of the write's arguments, from the end, exists takes
}

// mustExist is execOne's rule as a rowCheck: ErrNotFound when nothing
// changed.
var mustExist = &rowCheck{none: agentowl.ErrNotFound}

// execLater runs a write whose outcome the caller does not act on inside
// the transaction, only returns: on PostgreSQL it is held back and sent with
// the next statement or COMMIT (pgx.go), and its failure fails the
// transaction; with check set, so does a write that changes no row, with
// check's error. Elsewhere it runs at once, with the same outcomes.
func (t *tx) execLater(ctx context.Context, check *rowCheck, query string, args ...any) error {
	if p, ok := t.pg.(*pgTx); ok {
		h := heldWrite{query: query, args: args, check: check}
		if check != nil {
			h.query = checked(query, check)
		}
		h.query = t.db.q(h.query)
		return p.later(h)
	}
	n := len(args)
	if check != nil {
		n -= check.existsArgs
	}
	res, err := t.exec(ctx, query, args[:n]...)
	if err != nil || check == nil {
		return err
	}
	if n, err := res.RowsAffected(); err != nil || n > 0 {
		return err
	}
	if check.exists == "" {
		return check.none
	}
	err = t.queryRow(ctx, check.exists, args[n:]...).Scan(new(int))
	if errors.Is(err, sql.ErrNoRows) {
		return check.missing
	}
	return cmp.Or(err, check.none)
}

// queryRowLater runs a write that returns one row the caller reads only
// after the commit (an ID): on PostgreSQL held back like execLater, scan
// then runs when the row arrives; elsewhere at once.
func (t *tx) queryRowLater(ctx context.Context, scan func(row) error, query string, args ...any) error {
	if p, ok := t.pg.(*pgTx); ok {
		return p.later(heldWrite{query: t.db.q(query), args: args, scan: func(r pgx.Row) error { return scan(r) }})
	}
	return scan(t.queryRow(ctx, query, args...))
}

// one scans a single row, mapping sql.ErrNoRows to agentowl.ErrNotFound.
func one[T any](row row, scan func(scanner) (T, error)) (T, error) {
	v, err := scan(row)
	if errors.Is(err, sql.ErrNoRows) {
		var zero T
		return zero, agentowl.ErrNotFound
	}
	return v, err
}

// all scans every row.
func all[T any](rows rows, err error, scan func(scanner) (T, error)) ([]T, error) {
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

// keyed scans rows of two columns, a key and its value, into a map.
func keyed[K comparable, V any](rows rows, err error) (map[K]V, error) {
	type pair struct {
		k K
		v V
	}
	got, err := all(rows, err, func(s scanner) (pair, error) {
		var p pair
		err := s.Scan(&p.k, &p.v)
		return p, err
	})
	if err != nil {
		return nil, err
	}
	out := make(map[K]V, len(got))
	for _, p := range got {
		out[p.k] = p.v
	}
	return out, nil
}

type scanner interface{ Scan(dest ...any) error }

// scannerFunc lets a query scan extra columns after a shared scan function's.
type scannerFunc func(dest ...any) error

func (f scannerFunc) Scan(dest ...any) error { return f(dest...) }

func itoa(v int64) string { return strconv.FormatInt(v, 10) }
