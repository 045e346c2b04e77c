package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"

	"github.com/agentowl/agentowl/internal/store"
)

// maxBatch bounds how many writes share one commit.
const maxBatch = 128

// batcher group-commits writes for a single-writer database. With
// synchronous=FULL every commit waits for an fsync; writes that arrive while
// one commit is in progress are run in the next transaction, each inside its
// own savepoint, so one failing write rolls back only itself and the others
// still commit together. No caller is answered before its commit is durable.
type batcher struct {
	db      *DB
	conn    *conn // the held writer connection, when statements are cached
	queue   chan *pendingWrite
	stop    chan struct{}
	stopped sync.WaitGroup
	once    sync.Once
	once2   sync.Once
}

type pendingWrite struct {
	ctx  context.Context
	fn   func(store.Tx) error
	done chan error
}

func newBatcher(db *DB, c *conn) *batcher {
	b := &batcher{db: db, conn: c, queue: make(chan *pendingWrite, 1024), stop: make(chan struct{})}
	b.stopped.Add(1)
	go b.loop()
	return b
}

var errClosed = errors.New("store: closed")

func (b *batcher) write(ctx context.Context, fn func(store.Tx) error) error {
	w := &pendingWrite{ctx: ctx, fn: fn, done: make(chan error, 1)}
	select {
	case b.queue <- w:
	case <-b.stop:
		return errClosed
	case <-ctx.Done():
		return ctx.Err()
	}
	// Once queued, wait for the outcome even if ctx ends: the write may
	// already be committed, and the caller must not report otherwise.
	return <-w.done
}

func (b *batcher) close() {
	b.once.Do(func() { close(b.stop) })
	b.stopped.Wait()
	if b.conn != nil {
		b.once2.Do(b.conn.close)
	}
}

func (b *batcher) loop() {
	defer b.stopped.Done()
	for {
		var first *pendingWrite
		select {
		case first = <-b.queue:
		case <-b.stop:
			for {
				select {
				case w := <-b.queue:
					w.done <- errClosed
				default:
					return
				}
			}
		}
		batch := []*pendingWrite{first}
	fill:
		for len(batch) < maxBatch {
			select {
			case w := <-b.queue:
				batch = append(batch, w)
			default:
				break fill
			}
		}
		b.commit(batch)
	}
}

// commit runs a batch in one transaction. A failure of the transaction
// itself (begin, savepoint, commit) fails every write of the batch.
func (b *batcher) commit(batch []*pendingWrite) {
	results := make([]error, len(batch))
	err := func() error {
		var sqlTx *sql.Tx
		var err error
		if b.conn != nil {
			sqlTx, err = b.conn.c.BeginTx(context.Background(), nil)
		} else {
			sqlTx, err = b.db.writer.BeginTx(context.Background(), nil)
		}
		if err != nil {
			return err
		}
		t := &tx{db: b.db, tx: sqlTx, conn: b.conn}
		for i, w := range batch {
			if err := w.ctx.Err(); err != nil {
				results[i] = err
				continue
			}
			if _, err := sqlTx.Exec("SAVEPOINT w"); err != nil {
				_ = sqlTx.Rollback()
				return err
			}
			if results[i] = w.fn(t); results[i] != nil {
				if _, err := sqlTx.Exec("ROLLBACK TO w"); err != nil {
					_ = sqlTx.Rollback()
					return fmt.Errorf("rollback to savepoint: %w", err)
				}
			}
			if _, err := sqlTx.Exec("RELEASE w"); err != nil {
				_ = sqlTx.Rollback()
				return err
			}
		}
		return sqlTx.Commit()
	}()
	for i, w := range batch {
		if err != nil {
			w.done <- err
		} else {
			w.done <- results[i]
		}
	}
}
