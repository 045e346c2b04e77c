package sqlite

import (
	"fmt"
	"os"
	"sync"
)

// walFile syncs the database's WAL for the store's durability
// (sqlstore.GroupCommit.Sync): the writer commits with synchronous=NORMAL,
// which writes a commit's frames to the WAL without syncing them, and a
// sync of the file afterwards makes them, and every frame written before,
// durable. SQLite syncs the WAL header itself when it restarts the WAL, and
// a checkpoint syncs the WAL before it copies frames into the database file,
// so frames this sync has not yet covered are never the only copy that a
// checkpoint relies on.
type walFile struct {
	path string
	mu   sync.Mutex
	f    *os.File
}

// sync flushes the WAL file to disk. SQLite keeps the file while any
// connection is open; should it have been replaced all the same, the file
// now at the path is opened and synced, never a stale one.
func (w *walFile) sync() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	fi, err := os.Stat(w.path)
	if err != nil {
		return fmt.Errorf("sqlite: WAL: %w", err)
	}
	if w.f != nil {
		if cur, err := w.f.Stat(); err != nil || !os.SameFile(cur, fi) {
			w.f.Close()
			w.f = nil
		}
	}
	if w.f == nil {
		if w.f, err = os.Open(w.path); err != nil {
			return fmt.Errorf("sqlite: WAL: %w", err)
		}
	}
	if err := datasync(w.f); err != nil {
		return fmt.Errorf("sqlite: syncing the WAL: %w", err)
	}
	return nil
}

func (w *walFile) close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.f != nil {
		w.f.Close()
		w.f = nil
	}
}
