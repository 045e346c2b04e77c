// Package postgres opens the PostgreSQL store, which several `agentowl serve`
// replicas may share.
package postgres

import (
	"context"
	"database/sql/driver"
	"embed"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/agentowl/agentowl"
	"github.com/agentowl/agentowl/internal/migrate"
	"github.com/agentowl/agentowl/internal/secret"
	"github.com/agentowl/agentowl/internal/store/migrations"
	"github.com/agentowl/agentowl/internal/store/sqlstore"
)

// own are the migrations whose PostgreSQL differs from the other dialect's by
// more than a type name; the rest are internal/store/migrations.
//
//go:embed migrations/*.sql
var own embed.FS

// dialect is what PostgreSQL needs of the shared SQL.
var dialect = sqlstore.Dialect{Name: "postgres", Numbered: true, StrPos: "strpos", ForUpdate: " FOR UPDATE", ForShare: " FOR KEY SHARE",
	SkipLocked: " FOR UPDATE SKIP LOCKED", Classify: classify, Retryable: retryable, Unavailable: unavailable}

// MaxConns is how many connections a replica's store holds. On a small
// machine PostgreSQL does more with a few busy backends than with many
// switching between each other: 16 connections per replica decided more
// per second than 32 in BENCHMARKS.md's runs.
const MaxConns = 16

// Open connects to url (a postgres:// URL; extra parameters such as
// search_path become session settings), applies the embedded migrations under
// an advisory lock so concurrent replicas migrate once, prepares the
// database's secrets for box (sqlstore.PrepareSecrets: a database whose
// secrets another key sealed is refused with secret.ErrKeyMismatch) and
// returns the store. A nil box opens it for offline administration, as
// sqlite.Open does.
func Open(ctx context.Context, url string, box *secret.Box) (agentowl.Store, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, err
	}
	cfg.MaxConns = MaxConns
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, err
	}
	// Migrations and the secrets check take database/sql; the store's
	// reads and writes use the pool natively (sqlstore/pgx.go).
	db := stdlib.OpenDBFromPool(pool)
	closeAll := func() { db.Close(); pool.Close() }
	if err := db.PingContext(ctx); err != nil {
		closeAll()
		return nil, fmt.Errorf("postgres: %w", err)
	}
	m, err := migrations.Postgres(own, "migrations")
	if err == nil {
		err = migrate.Postgres(ctx, db, m, ".", "")
	}
	if err != nil {
		closeAll()
		return nil, err
	}
	if box != nil {
		if _, err := sqlstore.PrepareSecrets(ctx, dialect, db, box, time.Now()); err != nil {
			closeAll()
			return nil, err
		}
	}
	return sqlstore.NewPgx(dialect, box, pool, db), nil
}

// Migrations are the migrations the store runs (migrations.Postgres), for tools
// and upgrade tests that need the schema of an earlier version.
func Migrations() fs.FS { return migrations.Must(migrations.Postgres(own, "migrations")) }

func classify(err error) error {
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "23505" { // unique_violation
		return fmt.Errorf("%w: %v", agentowl.ErrConflict, err)
	}
	return err
}

func retryable(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (pe.Code == "40001" || pe.Code == "40P01")
}

// unavailable reports whether err means the database cannot answer now,
// by type and code: a connection that could not be made, was refused, lost
// or terminated (class 08, 57P01-57P03, too_many_connections), and
// contention (serialization failure, deadlock) that outlasted the write
// retries. The store drops its pool's connections when it finds one lost
// (sqlstore.DB.pgDropLost), so a restart costs one failed operation, not one
// per pooled connection.
func unavailable(err error) bool {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false // the caller gave up; the database may be fine
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch {
		case strings.HasPrefix(pe.Code, "08"), // connection_exception and its subclasses
			pe.Code == "57P01", pe.Code == "57P02", pe.Code == "57P03", // admin_shutdown, crash_shutdown, cannot_connect_now
			pe.Code == "53300",                     // too_many_connections
			pe.Code == "40001", pe.Code == "40P01": // still failing after the write retries
			return true
		}
		return false
	}
	var ce *pgconn.ConnectError
	var ne net.Error
	return errors.As(err, &ce) || errors.As(err, &ne) || errors.Is(err, driver.ErrBadConn) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || pgconn.SafeToRetry(err)
}
