package sqlite_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentowl/agentowl"
	"github.com/agentowl/agentowl/internal/secret/secrettest"
	"github.com/agentowl/agentowl/internal/store/sqlite"
	"github.com/agentowl/agentowl/internal/store/storetest"
)

func TestConformance(t *testing.T) {
	t.Parallel()
	storetest.Exercise(t, storetest.OpenSQLite)
}

// The migrations that move existing data keep it (storetest.Upgrades).
func TestUpgrades(t *testing.T) {
	t.Parallel()
	storetest.Upgrades(t, storetest.Backends(t)[0])
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
