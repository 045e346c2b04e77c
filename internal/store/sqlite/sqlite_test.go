package sqlite_test

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"testing"

	"github.com/pressly/goose/v3"

	"github.com/agentowl/agentowl/internal/secret/secrettest"
	"github.com/agentowl/agentowl/internal/store"
	"github.com/agentowl/agentowl/internal/store/sqlite"
	"github.com/agentowl/agentowl/internal/store/storetest"
)

func TestConformance(t *testing.T) {
	t.Parallel()
	storetest.Exercise(t, storetest.OpenSQLite)
}

// upgradeDB is an upgrade test's empty database file at path, open
// without the store, and the store opener that finishes the upgrade.
func upgradeDB(t *testing.T) (path string, db *sql.DB, open func() store.Store) {
	t.Helper()
	path = filepath.Join(t.TempDir(), "agentowl.db")
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=foreign_keys(1)")
	if err != nil {
		t.Fatal(err)
	}
	return path, db, func() store.Store {
		s, err := sqlite.Open(context.Background(), path, secrettest.NewBox(t))
		if err != nil {
			t.Fatalf("open after the upgrade: %v", err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
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
