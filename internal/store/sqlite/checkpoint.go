package sqlite

import (
	"context"
	"database/sql"
	"sync"
	"time"

	"github.com/agentowl/agentowl"
	"github.com/agentowl/agentowl/internal/store/sqlstore"
)

// SQLite checkpoints the WAL (copies its committed pages into the database
// file and syncs it) in the connection whose commit took the WAL past
// wal_autocheckpoint pages: here, the single writer that group-commits
// every write, which meanwhile commits nothing. With 100 KiB email events
// that was a fifth of the writer's time (BENCHMARKS.md). A checkpointer
// on a connection of its own does it instead, a passive checkpoint soon
// after writes, concurrently with the writer (WAL readers and one
// checkpointer do not block the writer); the writer's own automatic
// checkpoint stays, at a larger size, only as the bound on the WAL should
// the checkpointer fall behind. Durability does not depend on either: a
// commit is durable once its WAL frames are synced.
const (
	// writerAutoCheckpoint is the writer's wal_autocheckpoint, in pages.
	writerAutoCheckpoint = 8000
	// checkpointEvery spaces the checkpointer's runs, so that a stream of
	// small commits is checkpointed (and the database file synced) about
	// this often, not after each: pages that every batch changes (index
	// pages, the newest table pages) are copied once per run. At 20 ms the
	// checkpointer took twice the CPU per ingress event (BENCHMARKS.md).
	checkpointEvery = 100 * time.Millisecond
)

// checkpointed is the store with its background checkpointer.
type checkpointed struct {
	*sqlstore.DB
	ckpt *checkpointer
}

// Write implements agentowl.Store: the write, then a nudge to the
// checkpointer.
func (s *checkpointed) Write(ctx context.Context, fn func(agentowl.Tx) error) error {
	err := s.DB.Write(ctx, fn)
	s.ckpt.nudge()
	return err
}

// Close implements agentowl.Store: the checkpointer stops first.
func (s *checkpointed) Close() error {
	s.ckpt.close()
	return s.DB.Close()
}

type checkpointer struct {
	db    *sql.DB
	wake  chan struct{}
	stop  chan struct{}
	done  chan struct{}
	once  sync.Once
	every time.Duration
}

// newCheckpointer starts checkpointing through db (one connection of its
// own to the database).
func newCheckpointer(db *sql.DB, every time.Duration) *checkpointer {
	db.SetMaxOpenConns(1)
	db.SetMaxIdleConns(1)
	c := &checkpointer{db: db, wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{}), every: every}
	go c.loop()
	return c
}

func (c *checkpointer) nudge() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

func (c *checkpointer) loop() {
	defer close(c.done)
	ctx := context.Background()
	for {
		select {
		case <-c.wake:
		case <-c.stop:
			return
		}
		// A failure (the database closing, a disk error) leaves the WAL to
		// the writer's own automatic checkpoint: nothing is lost by it.
		_, _ = c.db.ExecContext(ctx, "PRAGMA wal_checkpoint(PASSIVE)")
		select {
		case <-time.After(c.every):
		case <-c.stop:
			return
		}
	}
}

func (c *checkpointer) close() {
	c.once.Do(func() {
		close(c.stop)
		<-c.done
		c.db.Close()
	})
}
