// Package sqlite opens the embedded SQLite store: the zero-set-up default,
// one process, durable commits (WAL, synchronous=FULL).
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

	"github.com/agentowl/agentowl/internal/migrate"
	"github.com/agentowl/agentowl/internal/store"
	"github.com/agentowl/agentowl/internal/store/sqlstore"
)

// readConns is how many reader connections the store holds.
const readConns = 8

//go:embed migrations/*.sql
var migrations embed.FS

// Open opens (creating if needed) the database file at path, applies the
// embedded migrations and checks that the durability settings took effect.
func Open(ctx context.Context, path string) (store.Store, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, err
	}
	pragmas := []string{"journal_mode(WAL)", "synchronous(FULL)", "foreign_keys(1)", "busy_timeout(10000)"}
	q := url.Values{}
	for _, p := range pragmas {
		q.Add("_pragma", p)
	}
	writerDSN := "file:" + path + "?" + q.Encode() + "&_txlock=immediate"
	readerDSN := "file:" + path + "?" + q.Encode()
	writer, err := sql.Open("sqlite", writerDSN)
	if err != nil {
		return nil, err
	}
	writer.SetMaxOpenConns(1)
	writer.SetMaxIdleConns(1)
	writer.SetConnMaxLifetime(0)
	if err := migrate.SQLite(ctx, writer, migrations, "migrations", ""); err != nil {
		writer.Close()
		return nil, err
	}
	var mode string
	if err := writer.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil || !strings.EqualFold(mode, "wal") {
		writer.Close()
		return nil, fmt.Errorf("sqlite: journal mode is %q, want wal (%v)", mode, err)
	}
	reader, err := sql.Open("sqlite", readerDSN)
	if err != nil {
		writer.Close()
		return nil, err
	}
	reader.SetMaxOpenConns(readConns)
	reader.SetMaxIdleConns(readConns)
	db, err := sqlstore.New(sqlstore.Dialect{Name: "sqlite", Classify: classify, CacheStatements: true}, writer, reader, true, readConns)
	if err != nil {
		return nil, err
	}
	return db, nil
}

// classify turns constraint violations into store.ErrConflict by result code.
func classify(err error) error {
	var se *sqlite.Error
	if errors.As(err, &se) {
		switch se.Code() {
		case sqlite3.SQLITE_CONSTRAINT_UNIQUE, sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY:
			return fmt.Errorf("%w: %v", store.ErrConflict, err)
		}
	}
	return err
}
