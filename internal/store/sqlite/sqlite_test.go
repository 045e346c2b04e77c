package sqlite_test

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pressly/goose/v3"

	"github.com/agentowl/agentowl"
	"github.com/agentowl/agentowl/internal/secret/secrettest"
	"github.com/agentowl/agentowl/internal/store/sqlite"
	"github.com/agentowl/agentowl/internal/store/storetest"
)

func TestConformance(t *testing.T) {
	t.Parallel()
	storetest.Exercise(t, storetest.OpenSQLite)
}

// upgradeDB is an upgrade test's empty database file at path, open
// without the store, and the store opener that finishes the upgrade.
func upgradeDB(t *testing.T) (path string, db *sql.DB, open func() agentowl.Store) {
	t.Helper()
	path = filepath.Join(t.TempDir(), "agentowl.db")
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=foreign_keys(1)")
	if err != nil {
		t.Fatal(err)
	}
	return path, db, func() agentowl.Store {
		s, err := sqlite.Open(context.Background(), path, secrettest.NewBox(t))
		if err != nil {
			t.Fatalf("open after the upgrade: %v", err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
}

// Migration 23 assigns each mail domain used by one tenant to it.
func TestMailDomainsUpgrade(t *testing.T) {
	t.Parallel()
	_, db, open := upgradeDB(t)
	storetest.MailDomainsUpgrade(t, goose.DialectSQLite3, db, sqlite.Migrations(), open)
}

func TestIdentityUpgrade(t *testing.T) {
	t.Parallel()
	_, db, open := upgradeDB(t)
	storetest.IdentityUpgrade(t, goose.DialectSQLite3, db, sqlite.Migrations(), open)
}

// A database file an earlier version created with group and other bits is
// tightened to 0600 when opened.
func TestOpenTightensAnExistingFile(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "agentowl.db")
	box := secrettest.NewBox(t)
	s, err := sqlite.Open(context.Background(), path, box)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	if s, err = sqlite.Open(context.Background(), path, box); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode after reopening: %v %v", fi.Mode(), err)
	}
}

// Migration 12 keeps every binding and conversation and what refers to them.
func TestChannelsUpgrade(t *testing.T) {
	t.Parallel()
	path, db, open := upgradeDB(t)
	storetest.ChannelsUpgrade(t, goose.DialectSQLite3, db, sqlite.Migrations(), open)
	// Nothing refers to a row the rebuild lost.
	check, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer check.Close()
	rows, err := check.Query("PRAGMA foreign_key_check")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	if rows.Next() {
		t.Error("foreign key violations after the upgrade")
	}
}

// Committed pages reach the database file without waiting for the writer's
// automatic checkpoint (8,000 pages): the background checkpointer copies
// them soon after the writes.
func TestWritesAreCheckpointedInTheBackground(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "agentowl.db")
	ctx := context.Background()
	s, err := sqlite.Open(ctx, path, secrettest.NewBox(t))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	size := func() int64 {
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		return fi.Size()
	}
	before := size()
	at := time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)
	for i := range 20 {
		err := s.Write(ctx, func(tx agentowl.Tx) error {
			for j := range 100 {
				if _, err := tx.CounterAdd(ctx, fmt.Sprintf("checkpoint-test-%d-%d-%s", i, j, strings.Repeat("k", 100)), at, 1); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	// About 100 pages were committed to the WAL, far below the writer's
	// automatic checkpoint.
	for deadline := time.Now().Add(10 * time.Second); size() <= before; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("database file still %d bytes 10s after the writes: not checkpointed", before)
		}
	}
}
