package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/agentowl/agentowl"
)

// PostgreSQL through pgx's native interface. A write transaction costs round
// trips, not statements: each round trip wakes two processes on a busy
// machine, and pgbench shows the same transaction shape pipelined into two
// round trips reaching twice the rate of one statement per round trip
// (BENCHMARKS.md, "PostgreSQL: each path"). So a write transaction here
//
//   - sends BEGIN only with its first statement, in the same round trip;
//   - holds back writes whose outcome the caller does not wait for (later:
//     no rows read back, or only read back after the commit), and sends them,
//     in order, ahead of the next statement that must answer now or with
//     COMMIT, all in one pipelined round trip;
//   - checks "exactly this row was changed" of a held-back write in the
//     database, so that a miss fails the transaction before COMMIT runs.
//
// A held-back write that fails aborts the transaction: the statements after
// it in the pipeline do not run, COMMIT becomes a rollback, and Write returns
// the write's error. Nothing is answered before COMMIT has returned.

// pgStats counts the round trips and statements of write transactions, so
// tests and benchmarks can show what a write costs (statements, BEGIN and
// COMMIT included, are what it cost with one statement per round trip).
type pgStats struct {
	writes, trips, stmts atomic.Int64
}

// WriteRoundTrips reports how many write transactions ran and how many round
// trips they took, on the PostgreSQL store (zero elsewhere).
func (db *DB) WriteRoundTrips() (writes, trips int64) {
	if db.pool == nil {
		return 0, 0
	}
	return db.pgStats.writes.Load(), db.pgStats.trips.Load()
}

// WriteStatements reports how many statements the write transactions sent,
// BEGIN, COMMIT and ROLLBACK included, on the PostgreSQL store.
func (db *DB) WriteStatements() int64 {
	if db.pool == nil {
		return 0
	}
	return db.pgStats.stmts.Load()
}

// heldWrite is a statement sent later, ahead of the next one or COMMIT.
type heldWrite struct {
	query string
	args  []any
	// scan, when set, reads the statement's one row (RETURNING).
	scan func(pgx.Row) error
	// check, when set, is the outcome of a write that changed no row: the
	// statement is wrapped so that the database itself refuses that
	// (checked), and the refusal is mapped back to check's errors.
	check *rowCheck
}

// pgTx is a write transaction on one pooled connection.
type pgTx struct {
	db    *DB
	conn  *pgxpool.Conn
	begun bool // BEGIN has been sent
	held  []heldWrite
	// open closes the results of the last round trip when its rows are
	// still being read; the next statement closes them first.
	open func() error
	// err is the failure that aborted the transaction: every later
	// statement returns it.
	err error
}

// errConnLost marks an operation whose connection was lost.
type errConnLost struct{ err error }

func (e *errConnLost) Error() string { return e.err.Error() }
func (e *errConnLost) Unwrap() error { return e.err }

// checked wraps a write so that the database fails it when it changed no
// row, which lets it travel with COMMIT in one round trip: a data-modifying
// CTE and 1/count(*) over its RETURNING rows (division_by_zero); with an
// exists query, ln(count(*)) (invalid_argument_for_logarithm) when the row
// is not there at all. The expressions depend on count(*), so the planner
// cannot fold them. The failures are mapped back to the check's errors
// (checkFailure) and never reach callers as they are.
func checked(query string, c *rowCheck) string {
	if c.exists == "" {
		return `WITH w AS (` + query + ` RETURNING 1) SELECT 1 / count(*) FROM w`
	}
	return `WITH w AS (` + query + ` RETURNING 1) SELECT CASE WHEN count(*) > 0 OR EXISTS (` + c.exists +
		`) THEN 1 / count(*) ELSE ln(count(*)) END FROM w`
}

// checkFailure maps a checked write's refusal to its error.
func checkFailure(err error, c *rowCheck) error {
	var pe *pgconn.PgError
	switch {
	case !errors.As(err, &pe):
		return nil
	case pe.Code == "22012":
		return c.none
	case pe.Code == "2201E" && c.exists != "":
		return c.missing
	}
	return nil
}

// closeOpen finishes the previous round trip's results.
func (p *pgTx) closeOpen() error {
	if p.open == nil {
		return nil
	}
	err := p.open()
	p.open = nil
	if err != nil && p.err == nil {
		p.err = p.db.dialect.Classify(err)
	}
	return err
}

// send sends BEGIN (first time), the held writes and then last (when not
// empty) in one round trip, reads the held writes' results and returns the
// batch positioned at last's result. On failure it returns the error, with
// the batch closed.
func (p *pgTx) send(ctx context.Context, last string, args ...any) (pgx.BatchResults, error) {
	if last == "" {
		return p.sendAll(ctx, nil)
	}
	return p.sendAll(ctx, []stmt{{last, args}})
}

// sendAll is send with several statements at the end, in order; the batch
// is positioned at the first one's result.
func (p *pgTx) sendAll(ctx context.Context, last []stmt) (pgx.BatchResults, error) {
	if err := p.closeOpen(); err != nil {
		return nil, err
	}
	if p.err != nil {
		return nil, p.err
	}
	b := &pgx.Batch{}
	if !p.begun {
		b.Queue("BEGIN")
	}
	for _, h := range p.held {
		b.Queue(h.query, h.args...)
	}
	for _, l := range last {
		b.Queue(l.query, l.args...)
	}
	held := p.held
	p.held = nil
	p.db.pgStats.trips.Add(1)
	p.db.pgStats.stmts.Add(int64(b.Len()))
	br := p.conn.SendBatch(ctx, b)
	fail := func(err error) (pgx.BatchResults, error) {
		br.Close()
		p.err = p.db.dialect.Classify(err)
		return nil, p.err
	}
	if !p.begun {
		if _, err := br.Exec(); err != nil {
			return fail(err)
		}
		p.begun = true
	}
	for _, h := range held {
		var err error
		switch {
		case h.scan != nil:
			err = h.scan(br.QueryRow())
		case h.check != nil:
			var one any
			if err = br.QueryRow().Scan(&one); err != nil {
				if cerr := checkFailure(err, h.check); cerr != nil {
					br.Close()
					p.err = cerr
					return nil, p.err
				}
			}
		default:
			_, err = br.Exec()
		}
		if err != nil {
			return fail(err)
		}
	}
	return br, nil
}

func (p *pgTx) exec(ctx context.Context, query string, args ...any) (sql.Result, error) {
	br, err := p.send(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	tag, err := br.Exec()
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		p.err = p.db.dialect.Classify(err)
		return nil, p.err
	}
	return pgResult(tag.RowsAffected()), nil
}

func (p *pgTx) query(ctx context.Context, query string, args ...any) (rows, error) {
	br, err := p.send(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	r, err := br.Query()
	if err != nil {
		br.Close()
		p.err = p.db.dialect.Classify(err)
		return nil, p.err
	}
	pr := &pgRows{r: r, done: br.Close}
	p.open = pr.Close
	return pr, nil
}

func (p *pgTx) queryRow(ctx context.Context, query string, args ...any) row {
	rs, err := p.query(ctx, query, args...)
	if err != nil {
		return errRow{err}
	}
	return &firstRow{rows: rs}
}

// queryEach sends the statements in one round trip (with the held writes)
// and hands each one's rows to its read, in order. Each statement still
// runs on its own snapshot, after the one before it has finished (a row
// lock taken by the first is held when the next reads), exactly as if
// they were sent one by one.
func (p *pgTx) queryEach(ctx context.Context, reads []groupRead) error {
	stmts := make([]stmt, len(reads))
	for i, r := range reads {
		stmts[i] = r.stmt
	}
	br, err := p.sendAll(ctx, stmts)
	if err != nil {
		return err
	}
	for _, r := range reads {
		rs, err := br.Query()
		if err == nil {
			err = r.read(&pgRows{r: rs})
		}
		if err != nil {
			br.Close()
			p.err = p.db.dialect.Classify(err)
			return p.err
		}
	}
	if err := br.Close(); err != nil {
		p.err = p.db.dialect.Classify(err)
		return p.err
	}
	return nil
}

// later holds a write back until the next statement or COMMIT.
func (p *pgTx) later(h heldWrite) error {
	if p.err != nil {
		return p.err
	}
	p.held = append(p.held, h)
	return nil
}

// commit sends the held writes with COMMIT. A transaction that ran no
// statement sends nothing.
func (p *pgTx) commit(ctx context.Context) error {
	if err := p.closeOpen(); err != nil {
		return err
	}
	if p.err != nil {
		return p.err
	}
	if !p.begun && len(p.held) == 0 {
		return nil
	}
	br, err := p.send(ctx, "COMMIT")
	if err != nil {
		return err
	}
	tag, err := br.Exec()
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return p.db.dialect.Classify(err)
	}
	// COMMIT of a transaction that failed answers ROLLBACK, not an error.
	if tag.String() != "COMMIT" {
		return fmt.Errorf("postgres: transaction rolled back (%s)", tag.String())
	}
	return nil
}

// end rolls back what did not commit. pgxpool destroys a connection
// released inside a transaction, so a failed ROLLBACK leaves nothing behind.
func (p *pgTx) end() {
	_ = p.closeOpen() // rows a failed caller left unread; their error is the caller's
	if p.conn.Conn().PgConn().TxStatus() != 'I' {
		p.db.pgStats.trips.Add(1)
		p.db.pgStats.stmts.Add(1)
		ctx, cancel := context.WithTimeout(context.Background(), rollbackTimeout)
		_, _ = p.conn.Exec(ctx, "ROLLBACK")
		cancel()
	}
	p.conn.Release()
}

func (db *DB) pgWriteOnce(ctx context.Context, fn func(agentowl.Tx) error) error {
	c, err := db.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	db.pgStats.writes.Add(1)
	p := &pgTx{db: db, conn: c}
	defer p.end()
	err = fn(&tx{db: db, pg: p})
	if err == nil {
		err = p.commit(ctx)
	}
	if err != nil && c.Conn().IsClosed() && ctx.Err() == nil {
		return &errConnLost{err}
	}
	return err
}

// pgDropLost drops the pool's connections after one was found lost: a
// restart, failover or pg_terminate_backend has most likely killed the
// others too, and each would otherwise fail one more operation (the store
// test TestLostConnections). Idle connections go at once, those in use when
// released. The operation itself is not run again: the server may have
// done part of it before the connection went (a write waiting on a lock
// when its backend was terminated), and the caller is told it is
// unavailable.
func (db *DB) pgDropLost(err error) {
	var lost *errConnLost
	if db.pool != nil && errors.As(err, &lost) {
		db.pool.Reset()
	}
}

// pgRead runs a Read's statements each on its own (READ COMMITTED) on one
// connection: no BEGIN and ROLLBACK around them.
type pgRead struct {
	db   *DB
	conn *pgxpool.Conn
}

func (db *DB) pgRead(ctx context.Context, fn func(agentowl.Tx) error) error {
	c, err := db.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer c.Release()
	err = fn(&tx{db: db, pg: pgRead{db, c}})
	if err != nil && c.Conn().IsClosed() && ctx.Err() == nil {
		return &errConnLost{err}
	}
	return err
}

func (p pgRead) exec(ctx context.Context, query string, args ...any) (sql.Result, error) {
	tag, err := p.conn.Exec(ctx, query, args...)
	if err != nil {
		return nil, p.db.dialect.Classify(err)
	}
	return pgResult(tag.RowsAffected()), nil
}

func (p pgRead) query(ctx context.Context, query string, args ...any) (rows, error) {
	r, err := p.conn.Query(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	return &pgRows{r: r}, nil
}

func (p pgRead) queryRow(ctx context.Context, query string, args ...any) row {
	rs, err := p.query(ctx, query, args...)
	if err != nil {
		return errRow{err}
	}
	return &firstRow{rows: rs}
}

// rollbackTimeout bounds the ROLLBACK of a failed write, which runs after
// the caller's context may have ended.
const rollbackTimeout = 5 * time.Second

// pgResult is a command's rows affected as a sql.Result.
type pgResult int64

func (r pgResult) LastInsertId() (int64, error) { return 0, errors.New("postgres: no LastInsertId") }
func (r pgResult) RowsAffected() (int64, error) { return int64(r), nil }

// pgRows adapts pgx.Rows to rows; done, when set, closes the batch the rows
// came from.
type pgRows struct {
	r      pgx.Rows
	done   func() error
	closed bool
	err    error // of the first Close, returned by every later one
}

func (r *pgRows) Next() bool             { return r.r.Next() }
func (r *pgRows) Scan(dest ...any) error { return r.r.Scan(dest...) }
func (r *pgRows) Err() error             { return r.r.Err() }

func (r *pgRows) Close() error {
	if r.closed {
		return r.err
	}
	r.closed = true
	r.r.Close()
	r.err = r.r.Err()
	if r.done != nil {
		if derr := r.done(); r.err == nil {
			r.err = derr
		}
	}
	return r.err
}

type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }
