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
	"time"

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

// Config tunes the SQLite store.
type Config struct {
	// BusyTimeout is how long a statement waits for a lock another process
	// holds (SQLITE_BUSY) before the store answers store.ErrUnavailable.
	// Defaults to 10s.
	BusyTimeout time.Duration
}

func (c Config) withDefaults() Config {
	if c.BusyTimeout <= 0 {
		c.BusyTimeout = 10 * time.Second
	}
	return c
}

// Open opens (creating if needed) the database file at path with the
// default Config.
func Open(ctx context.Context, path string) (store.Store, error) {
	return OpenWith(ctx, path, Config{})
}

// OpenWith opens (creating if needed) the database file at path, applies
// the embedded migrations and checks that the durability settings took
// effect.
func OpenWith(ctx context.Context, path string, cfg Config) (store.Store, error) {
	cfg = cfg.withDefaults()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, err
	}
	pragmas := []string{"journal_mode(WAL)", "synchronous(FULL)", "foreign_keys(1)",
		fmt.Sprintf("busy_timeout(%d)", cfg.BusyTimeout.Milliseconds())}
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
	db, err := sqlstore.New(sqlstore.Dialect{Name: "sqlite", Classify: classify, Unavailable: unavailable, CacheStatements: true},
		writer, reader, true, readConns)
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

// unavailable reports whether err is SQLite's busy or locked result (an
// extended code's primary part): another connection or process held a lock
// past the busy timeout.
func unavailable(err error) bool {
	var se *sqlite.Error
	if !errors.As(err, &se) {
		return false
	}
	switch se.Code() & 0xff {
	case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED:
		return true
	}
	return false
}
