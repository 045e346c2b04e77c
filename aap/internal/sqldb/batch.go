package sqldb

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/agentowl/agentowl/internal/groupcommit"
)

// maxBatch bounds how many writes share one commit.
const maxBatch = 256

// batcher group-commits writes to a single-writer database. With
// synchronous=FULL each commit waits for an fsync; writes that arrive while a
// commit is in progress run together in the next transaction, each in its
// own savepoint, so a failing write rolls back only itself. No caller is
// answered before the commit that holds its write is durable.
type batcher struct {
	db    *sql.DB
	queue *groupcommit.Queue[*pending]
}

type pending struct {
	ctx context.Context
	fn  func(context.Context, *sql.Tx) error
}

func newBatcher(db *sql.DB) *batcher {
	b := &batcher{db: db}
	b.queue = groupcommit.New(maxBatch, b.commit)
	return b
}

func (b *batcher) write(ctx context.Context, fn func(context.Context, *sql.Tx) error) error {
	return b.queue.Do(ctx, &pending{ctx: ctx, fn: fn})
}

func (b *batcher) close() { b.queue.Close() }

// commit runs a batch in one transaction. If the transaction itself fails
// (begin, savepoint, commit), every write of the batch fails.
func (b *batcher) commit(batch []*pending) []error {
	results := make([]error, len(batch))
	err := func() error {
		tx, err := b.db.BeginTx(context.Background(), nil)
		if err != nil {
			return err
		}
		for i, p := range batch {
			if err := p.ctx.Err(); err != nil {
				results[i] = err
				continue
			}
			if _, err := tx.Exec("SAVEPOINT w"); err != nil {
				_ = tx.Rollback()
				return err
			}
			if results[i] = p.fn(context.WithoutCancel(p.ctx), tx); results[i] != nil {
				if _, err := tx.Exec("ROLLBACK TO w"); err != nil {
					_ = tx.Rollback()
					return fmt.Errorf("rollback to savepoint: %w", err)
				}
			}
			if _, err := tx.Exec("RELEASE w"); err != nil {
				_ = tx.Rollback()
				return err
			}
		}
		return tx.Commit()
	}()
	if err != nil {
		for i := range results {
			results[i] = err
		}
	}
	return results
}
