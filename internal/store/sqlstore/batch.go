package sqlstore

import (
	"context"
	"fmt"
	"sync"

	"github.com/agentowl/agentowl"
	"github.com/agentowl/agentowl/internal/groupcommit"
)

// maxBatch bounds how many writes share one commit.
const maxBatch = 128

// batcher group-commits writes for a single-writer database. With
// synchronous=FULL every commit waits for an fsync; writes that arrive while
// one commit is in progress are run in the next transaction, each inside its
// own savepoint, so one failing write rolls back only itself and the others
// still commit together. No caller is answered before its commit is durable.
type batcher struct {
	db    *DB
	conn  *conn // the held writer connection, when statements are cached
	queue *groupcommit.Queue[*pendingWrite]
	once  sync.Once
}

type pendingWrite struct {
	ctx context.Context
	fn  func(agentowl.Tx) error
}

func newBatcher(db *DB, c *conn) *batcher {
	b := &batcher{db: db, conn: c}
	b.queue = groupcommit.New(maxBatch, b.commit)
	return b
}

func (b *batcher) write(ctx context.Context, fn func(agentowl.Tx) error) error {
	return b.queue.Do(ctx, &pendingWrite{ctx: ctx, fn: fn})
}

func (b *batcher) close() {
	b.queue.Close()
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
		if err := commit(); err != nil {
			_ = rollback()
			return err
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
