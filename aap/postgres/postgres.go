// Package postgres is the PostgreSQL store of the aap harness kit, for
// receivers and harnesses that run as several replicas or already have a
// PostgreSQL database. Migrations are embedded and applied under an advisory
// lock; its tables are prefixed aap_.
package postgres

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"hash/fnv"
	"io/fs"

	"github.com/jackc/pgx/v5/pgconn"
	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"

	"github.com/agentowl/agentowl/aap"
	"github.com/agentowl/agentowl/aap/internal/sqldb"
)

//go:embed migrations/*.sql
var migrations embed.FS

// Open connects to url (postgres://…; parameters such as search_path become
// session settings), applies the migrations and returns the store.
func Open(ctx context.Context, url string) (aap.Store, error) {
	db, err := sql.Open("pgx", url)
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(16)
	db.SetMaxIdleConns(16)
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("aap postgres: %w", err)
	}
	if err := migrate(ctx, db); err != nil {
		db.Close()
		return nil, fmt.Errorf("aap postgres: migrate: %w", err)
	}
	d := sqldb.Dialect{Numbered: true, SkipLocked: " FOR UPDATE SKIP LOCKED", IsUniqueViolation: isUniqueViolation}
	return sqldb.New(d, db, db, false), nil
}

func migrate(ctx context.Context, db *sql.DB) error {
	sub, err := fs.Sub(migrations, "migrations")
	if err != nil {
		return err
	}
	var schema string
	if err := db.QueryRowContext(ctx, "SELECT coalesce(current_schema(), '')").Scan(&schema); err != nil {
		return err
	}
	h := fnv.New64a()
	h.Write([]byte("aap-migrate:" + schema))
	locker, err := lock.NewPostgresSessionLocker(lock.WithLockID(int64(h.Sum64()>>1)), lock.WithLockTimeout(1, 300))
	if err != nil {
		return err
	}
	p, err := goose.NewProvider(goose.DialectPostgres, db, sub, goose.WithSessionLocker(locker), goose.WithTableName("aap_goose_version"))
	if err != nil {
		return err
	}
	_, err = p.Up(ctx)
	return err
}

func isUniqueViolation(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "23505"
}
