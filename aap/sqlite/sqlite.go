// Package sqlite is the default store of the aap harness kit: one SQLite
// file (modernc.org/sqlite, pure Go) in WAL mode with synchronous=FULL, so a
// saved execution or an acknowledged event survives kill -9 and power loss.
// Concurrent writes are group-committed. Migrations are embedded.
package sqlite

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	sqlite "modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/agentowl/agentowl/aap"
	"github.com/agentowl/agentowl/aap/internal/sqldb"
	"github.com/agentowl/agentowl/internal/migrate"
)

//go:embed migrations/*.sql
var migrations embed.FS

// Open opens (creating if needed, with mode 0600 in a 0700 directory: it
// holds signing secrets) the database file at path, applies the embedded
// migrations and checks that WAL mode took effect. Several processes may
// open the same file.
func Open(ctx context.Context, path string) (aap.Store, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	f.Close()
	q := url.Values{}
	for _, p := range []string{"journal_mode(WAL)", "synchronous(FULL)", "foreign_keys(1)", "busy_timeout(10000)"} {
		q.Add("_pragma", p)
	}
	dsn := "file:" + path + "?" + q.Encode()
	writer, err := sql.Open("sqlite", dsn+"&_txlock=immediate")
	if err != nil {
		return nil, err
	}
	writer.SetMaxOpenConns(1)
	writer.SetMaxIdleConns(1)
	writer.SetConnMaxLifetime(0)
	if err := migrate.SQLite(ctx, writer, migrations, "migrations", "aap_goose_version"); err != nil {
		writer.Close()
		return nil, fmt.Errorf("aap sqlite: migrate: %w", err)
	}
	var mode string
	if err := writer.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil || !strings.EqualFold(mode, "wal") {
		writer.Close()
		return nil, fmt.Errorf("aap sqlite: journal mode is %q, want wal (%v)", mode, err)
	}
	reader, err := sql.Open("sqlite", dsn)
	if err != nil {
		writer.Close()
		return nil, err
	}
	reader.SetMaxOpenConns(8)
	reader.SetMaxIdleConns(8)
	return sqldb.New(sqldb.Dialect{IsUniqueViolation: isUniqueViolation}, writer, reader, true), nil
}

func isUniqueViolation(err error) bool {
	var se *sqlite.Error
	if errors.As(err, &se) {
		switch se.Code() {
		case sqlite3.SQLITE_CONSTRAINT_UNIQUE, sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY:
			return true
		}
	}
	return false
}
