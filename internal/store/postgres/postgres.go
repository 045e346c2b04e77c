// Package postgres opens the PostgreSQL store, which several `agentowl serve`
// replicas may share.
package postgres

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/agentowl/agentowl/internal/migrate"
	"github.com/agentowl/agentowl/internal/secret"
	"github.com/agentowl/agentowl/internal/store"
	"github.com/agentowl/agentowl/internal/store/sqlstore"
)

//go:embed migrations/*.sql
var migrations embed.FS

// dialect is what PostgreSQL needs of the shared SQL.
var dialect = sqlstore.Dialect{Name: "postgres", Numbered: true, ForUpdate: " FOR UPDATE", ForShare: " FOR KEY SHARE",
	SkipLocked: " FOR UPDATE SKIP LOCKED", Classify: classify, Retryable: retryable}

// Open connects to url (a postgres:// URL; extra parameters such as
// search_path become session settings), applies the embedded migrations under
// an advisory lock so concurrent replicas migrate once, prepares the
// database's secrets for box (sqlstore.PrepareSecrets: a database whose
// secrets another key sealed is refused with secret.ErrKeyMismatch) and
// returns the store. A nil box opens it for offline administration, as
// sqlite.Open does.
func Open(ctx context.Context, url string, box *secret.Box) (store.Store, error) {
	db, err := sql.Open("pgx", url)
	if err != nil {
		return nil, err
	}
	// On a small machine PostgreSQL does more with a few busy backends than
	// with many switching between each other: 16 connections per replica
	// decided more per second than 32 in BENCHMARKS.md's runs.
	db.SetMaxOpenConns(16)
	db.SetMaxIdleConns(16)
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("postgres: %w", err)
	}
	if err := migrate.Postgres(ctx, db, migrations, "migrations", ""); err != nil {
		db.Close()
		return nil, err
	}
	if box != nil {
		if _, err := sqlstore.PrepareSecrets(ctx, dialect, db, box, time.Now()); err != nil {
			db.Close()
			return nil, err
		}
	}
	store, err := sqlstore.New(dialect, box, db, db, false, 0)
	if err != nil {
		db.Close()
		return nil, err
	}
	return store, nil
}

// Migrations are the embedded migrations, for tools and upgrade tests that
// need the schema of an earlier version.
func Migrations() fs.FS {
	sub, err := fs.Sub(migrations, "migrations")
	if err != nil {
		panic(err) // the directory is embedded
	}
	return sub
}

func classify(err error) error {
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "23505" { // unique_violation
		return fmt.Errorf("%w: %v", store.ErrConflict, err)
	}
	return err
}

func retryable(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (pe.Code == "40001" || pe.Code == "40P01")
}

var _ = stdlib.GetDefaultDriver // registers the "pgx" database/sql driver
