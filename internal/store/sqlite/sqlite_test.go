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

func TestIdentityUpgrade(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "agentowl.db")
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=foreign_keys(1)")
	if err != nil {
		t.Fatal(err)
	}
	storetest.IdentityUpgrade(t, goose.DialectSQLite3, db, sqlite.Migrations(), func() store.Store {
		s, err := sqlite.Open(context.Background(), path, secrettest.NewBox(t))
		if err != nil {
			t.Fatalf("open after the upgrade: %v", err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	})
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
