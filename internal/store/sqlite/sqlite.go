// Package sqlite opens the embedded SQLite store: the zero-set-up default,
// one process, durable commits (WAL, synchronous=FULL).
package sqlite

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	sqlite "modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/agentowl/agentowl"
	"github.com/agentowl/agentowl/internal/migrate"
	"github.com/agentowl/agentowl/internal/secret"
	"github.com/agentowl/agentowl/internal/store/migrations"
	"github.com/agentowl/agentowl/internal/store/sqlstore"
)

// readConns is how many reader connections the store holds.
const readConns = 8

// own are the migrations whose SQLite differs from the other dialect's by
// more than a type name; the rest are internal/store/migrations.
//
//go:embed migrations/*.sql
var own embed.FS

// dialect is what SQLite needs of the shared SQL.
var dialect = sqlstore.Dialect{Name: "sqlite", Classify: classify, Unavailable: unavailable, CacheStatements: true, StrPos: "instr"}

// Config tunes the SQLite store.
type Config struct {
	// BusyTimeout is how long a statement waits for a lock another process
	// holds (SQLITE_BUSY) before the store answers agentowl.ErrUnavailable.
	// Defaults to 10s.
	BusyTimeout time.Duration
}

func (c Config) withDefaults() Config {
	if c.BusyTimeout <= 0 {
		c.BusyTimeout = 10 * time.Second
	}
	return c
}

// Open opens the database file at path with the default Config (OpenWith).
func Open(ctx context.Context, path string, box *secret.Box) (agentowl.Store, error) {
	return OpenWith(ctx, path, box, Config{})
}

// OpenWith opens (creating if needed) the database file at path, applies the
// embedded migrations, checks that the durability settings took effect and
// prepares its secrets for box (sqlstore.PrepareSecrets: a database whose
// secrets another key sealed is refused with secret.ErrKeyMismatch). A nil
// box opens it for offline administration, which touches no sealed secret:
// the key is not checked and anything migration 11 queued waits for the
// next open with the key.
//
// The file holds sealed secrets, token hashes and every tenant's data: it
// is created with mode 0600 before SQLite opens it (SQLite would create it
// 0644, and its -wal and -shm files take the database file's mode), and its
// directory, when missing, 0700.
func OpenWith(ctx context.Context, path string, box *secret.Box, cfg Config) (agentowl.Store, error) {
	cfg = cfg.withDefaults()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	f.Close()
	// A file an earlier version created 0644 is tightened too; its -wal and
	// -shm files follow its mode when SQLite next creates them.
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		if fi, err := os.Stat(p); err == nil && fi.Mode().Perm()&0o077 != 0 {
			if err := os.Chmod(p, 0o600); err != nil {
				return nil, err
			}
		}
	}
	pragmas := []string{"journal_mode(WAL)", "synchronous(FULL)", "foreign_keys(1)",
		fmt.Sprintf("busy_timeout(%d)", cfg.BusyTimeout.Milliseconds())}
	q := url.Values{}
	for _, p := range pragmas {
		q.Add("_pragma", p)
	}
	readerDSN := "file:" + path + "?" + q.Encode()
	// The one writer connection keeps a larger page cache than SQLite's
	// 2 MiB default: every write walks the B-trees of its table's indexes,
	// and once the tables hold a long history (a million delivered events)
	// their inner pages no longer fit in 2 MiB, so each write re-reads and
	// re-parses them from the OS cache (BENCHMARKS.md, "Cost with history").
	q.Add("_pragma", "cache_size(-65536)") // KiB: 64 MiB
	// The writer also keeps its statement journals in memory: every write
	// of a group commit runs in its own savepoint (sqlstore's batcher), and
	// SQLite journals each page a savepoint changes that an earlier write of
	// the batch already changed. In a temporary file that was a write
	// system call per page, on the single writer's critical path (about a
	// third of its time per ingress event, BENCHMARKS.md). The journal lives
	// for one batch, so it is bounded by the batch. Readers keep the
	// default: their sorts may spill to files.
	writerDSN := "file:" + path + "?" + q.Encode() + "&_pragma=temp_store(MEMORY)" +
		fmt.Sprintf("&_pragma=wal_autocheckpoint(%d)", writerAutoCheckpoint) + "&_txlock=immediate"
	writer, err := sql.Open("sqlite", writerDSN)
	if err != nil {
		return nil, err
	}
	writer.SetMaxOpenConns(1)
	writer.SetMaxIdleConns(1)
	writer.SetConnMaxLifetime(0)
	if err := prepare(ctx, writer, box); err != nil {
		writer.Close()
		return nil, err
	}
	reader, err := sql.Open("sqlite", readerDSN)
	if err != nil {
		writer.Close()
		return nil, err
	}
	reader.SetMaxOpenConns(readConns)
	reader.SetMaxIdleConns(readConns)
	db, err := sqlstore.New(dialect, box, writer, reader, true, readConns)
	if err != nil {
		writer.Close()
		reader.Close()
		return nil, err
	}
	ckpt, err := sql.Open("sqlite", readerDSN)
	if err != nil {
		db.Close()
		return nil, err
	}
	return &checkpointed{DB: db, ckpt: newCheckpointer(ckpt, checkpointEvery)}, nil
}

// prepare migrates the database, checks its journal mode and prepares its
// secrets, on the writer before anything else uses it.
func prepare(ctx context.Context, writer *sql.DB, box *secret.Box) (err error) {
	// Migrations (index builds) and VACUUM size their temporary data by the
	// database: they keep it in files, not in memory.
	if _, err := writer.ExecContext(ctx, "PRAGMA temp_store=FILE"); err != nil {
		return err
	}
	defer func() {
		if _, e := writer.ExecContext(ctx, "PRAGMA temp_store=MEMORY"); err == nil {
			err = e
		}
	}()
	m, err := migrations.SQLite(own, "migrations")
	if err != nil {
		return err
	}
	if err := migrate.SQLite(ctx, writer, m, ".", ""); err != nil {
		return err
	}
	var mode string
	if err := writer.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil || !strings.EqualFold(mode, "wal") {
		return fmt.Errorf("sqlite: journal mode is %q, want wal (%v)", mode, err)
	}
	if box == nil {
		return nil
	}
	sealed, err := sqlstore.PrepareSecrets(ctx, dialect, writer, box, time.Now())
	if err != nil || sealed == 0 {
		return err
	}
	// The values just sealed were in plain text (or in the earlier format)
	// in pages SQLite has since freed, in the file and in the WAL: rewrite
	// the file without free pages and empty the WAL, once, on the upgrade.
	if _, err := writer.ExecContext(ctx, "VACUUM"); err != nil {
		return err
	}
	_, err = writer.ExecContext(ctx, "PRAGMA wal_checkpoint(TRUNCATE)")
	return err
}

// Migrations are the migrations the store runs (migrations.SQLite), for tools
// and upgrade tests that need the schema of an earlier version.
func Migrations() fs.FS { return migrations.Must(migrations.SQLite(own, "migrations")) }

// classify turns constraint violations into agentowl.ErrConflict by result code.
func classify(err error) error {
	var se *sqlite.Error
	if errors.As(err, &se) {
		switch se.Code() {
		case sqlite3.SQLITE_CONSTRAINT_UNIQUE, sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY:
			return fmt.Errorf("%w: %v", agentowl.ErrConflict, err)
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
