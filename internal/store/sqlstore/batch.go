package sqlstore

import (
	"context"
	"fmt"
	"sync"

	"github.com/agentowl/agentowl/internal/groupcommit"
	"github.com/agentowl/agentowl/internal/store"
)

// maxBatch bounds how many writes share one commit.
const maxBatch = 128

// batcher group-commits writes for a single-writer database. Writes that
// arrive while one commit is in progress are run in the next transaction,
// each inside its own savepoint, so one failing write rolls back only itself
// and the others still commit together. No caller is answered before its
// commit is durable: the commit syncs (synchronous=FULL), or, with a
// durability, a sync after it does (durable.go).
type batcher struct {
	db      *DB
	conn    *conn // the held writer connection, when statements are cached
	queue   *groupcommit.Queue[*pendingWrite]
	durable *durability // nil when each commit syncs
	once    sync.Once
}

type pendingWrite struct {
	ctx context.Context
	fn  func(store.Tx) error
	seq uint64 // the batch's commit, to wait for with a durability
}

// GroupCommit turns on group commit (New). Sync, when set, makes the
// commits durable: the database commits without syncing and Sync is called
// after, once for any number of commits (durable.go).
type GroupCommit struct {
	Sync func() error
}

func newBatcher(db *DB, c *conn, gc *GroupCommit) *batcher {
	b := &batcher{db: db, conn: c}
	if gc.Sync != nil {
		b.durable = newDurability(gc.Sync)
	}
	b.queue = groupcommit.New(maxBatch, b.commit)
	return b
}

func (b *batcher) write(ctx context.Context, fn func(store.Tx) error) error {
	if b.durable != nil {
		if err := b.durable.broken(); err != nil {
			return err
		}
	}
	w := &pendingWrite{ctx: ctx, fn: fn}
	err := b.queue.Do(ctx, w)
	if b.durable == nil || w.seq == 0 {
		return err // not committed (or committed and synced): nothing to wait for
	}
	// A write's refusal, too, may rest on what earlier writes of its batch
	// committed: it is answered once that is durable.
	if serr := b.durable.wait(w.seq); serr != nil {
		return serr
	}
	return err
}

func (b *batcher) close() {
	b.queue.Close()
	if b.durable != nil {
		b.durable.close()
	}
	if b.conn != nil {
		b.once.Do(b.conn.close)
	}
}

// commit runs a batch in one transaction. A failure of the transaction
// itself (begin, savepoint, commit) fails every write of the batch.
func (b *batcher) commit(batch []*pendingWrite) []error {
	results := make([]error, len(batch))
	bg := context.Background()
	var t *tx
	var exec func(q string) error
	var commit, rollback func() error
	if b.conn != nil {
		t = &tx{db: b.db, conn: b.conn}
		exec = func(q string) error {
			st, err := b.conn.prepared(bg, q) // transaction control is parsed once too
			if err == nil {
				_, err = st.ExecContext(bg)
			}
			return err
		}
		commit = func() error { return exec("COMMIT") }
		rollback = func() error { return exec("ROLLBACK") }
	}
	err := func() error {
		if t != nil {
			if err := exec("BEGIN IMMEDIATE"); err != nil {
				return err
			}
		} else {
			sqlTx, err := b.db.writer.BeginTx(bg, nil)
			if err != nil {
				return err
			}
			t = &tx{db: b.db, run: sqlTx}
			exec = func(q string) error { _, err := sqlTx.ExecContext(bg, q); return err }
			commit, rollback = sqlTx.Commit, sqlTx.Rollback
		}
		for i, w := range batch {
			if err := w.ctx.Err(); err != nil {
				results[i] = err
				continue
			}
			if err := exec("SAVEPOINT w"); err != nil {
				_ = rollback()
				return err
			}
			if results[i] = w.fn(t); results[i] != nil {
				if err := exec("ROLLBACK TO w"); err != nil {
					_ = rollback()
					return fmt.Errorf("rollback to savepoint: %w", err)
				}
			}
			if err := exec("RELEASE w"); err != nil {
				_ = rollback()
				return err
			}
		}
		if b.durable == nil {
			if err := commit(); err != nil {
				_ = rollback()
				return err
			}
			return nil
		}
		seq, err := b.durable.commit(commit)
		if err != nil {
			_ = rollback()
			return err
		}
		for _, w := range batch {
			w.seq = seq
		}
		return nil
	}()
	if err != nil {
		for i := range results {
			results[i] = err
		}
	}
	return results
}
