// Package migrate applies a component's embedded goose migrations, the same
// way for the server's stores and the harness kit's.
package migrate

import (
	"context"
	"database/sql"
	"fmt"
	"hash/fnv"
	"io/fs"

	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"
)

// SQLite applies the migrations in dir of fsys to db, recording them in
// table (goose's default when "").
func SQLite(ctx context.Context, db *sql.DB, fsys fs.FS, dir, table string) error {
	return up(ctx, goose.DialectSQLite3, db, fsys, dir, table)
}

// Postgres is SQLite for PostgreSQL, under a session advisory lock keyed by
// table and the current schema: replicas sharing a schema migrate one at a
// time, and databases with several schemas (one per test run) do not wait on
// each other.
func Postgres(ctx context.Context, db *sql.DB, fsys fs.FS, dir, table string) error {
	var schema string
	if err := db.QueryRowContext(ctx, "SELECT coalesce(current_schema(), '')").Scan(&schema); err != nil {
		return err
	}
	h := fnv.New64a()
	h.Write([]byte("agentowl-migrate:" + table + ":" + schema))
	locker, err := lock.NewPostgresSessionLocker(lock.WithLockID(int64(h.Sum64()>>1)), lock.WithLockTimeout(1, 300))
	if err != nil {
		return err
	}
	return up(ctx, goose.DialectPostgres, db, fsys, dir, table, goose.WithSessionLocker(locker))
}

func up(ctx context.Context, d goose.Dialect, db *sql.DB, fsys fs.FS, dir, table string, opts ...goose.ProviderOption) error {
	sub, err := fs.Sub(fsys, dir)
	if err != nil {
		return err
	}
	if table != "" {
		opts = append(opts, goose.WithTableName(table))
	}
	p, err := goose.NewProvider(d, db, sub, opts...)
	if err != nil {
		return err
	}
	if _, err := p.Up(ctx); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	return nil
}
