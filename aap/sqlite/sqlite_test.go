package sqlite_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/agentowl/agentowl/aap"
	"github.com/agentowl/agentowl/aap/internal/storetest"
	"github.com/agentowl/agentowl/aap/sqlite"
)

func TestStore(t *testing.T) {
	storetest.Run(t, func(t *testing.T) aap.Store {
		s, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "aap.db"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	})
}

// The database holds signing secrets: it is created 0600 in a 0700 directory.
func TestFileModes(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	path := filepath.Join(dir, "aap.db")
	s, err := sqlite.Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for p, want := range map[string]os.FileMode{path: 0o600, dir: 0o700 | os.ModeDir} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode() != want {
			t.Errorf("%s has mode %v, want %v", p, fi.Mode(), want)
		}
	}
}
