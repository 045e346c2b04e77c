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

	"github.com/jackc/pgx/v5/pgconn"
	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver

	"github.com/agentowl/agentowl/aap"
	"github.com/agentowl/agentowl/aap/internal/sqldb"
	"github.com/agentowl/agentowl/internal/migrate"
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
	if err := migrate.Postgres(ctx, db, migrations, "migrations", "aap_goose_version"); err != nil {
		db.Close()
		return nil, fmt.Errorf("aap postgres: migrate: %w", err)
	}
	d := sqldb.Dialect{Numbered: true, SkipLocked: " FOR UPDATE SKIP LOCKED", IsUniqueViolation: isUniqueViolation}
	return sqldb.New(d, db, db, false), nil
}

func isUniqueViolation(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "23505"
}
