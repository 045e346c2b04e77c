package sqlstore

import (
	"context"
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
	mu      sync.RWMutex
	closed  bool
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
	// Enqueue under the read lock so close cannot slip between the check
	// and the send: the loop drains everything queued before it stops.
	b.mu.RLock()
	if b.closed {
		b.mu.RUnlock()
		return errClosed
	}
	select {
	case b.queue <- w:
		b.mu.RUnlock()
	case <-ctx.Done():
		b.mu.RUnlock()
		return ctx.Err()
	}
	// Once queued, wait for the outcome even if ctx ends: the write may
	// already be committed, and the caller must not report otherwise.
	return <-w.done
}

func (b *batcher) close() {
	b.once.Do(func() {
		b.mu.Lock()
		b.closed = true
		b.mu.Unlock()
		close(b.stop)
	})
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
			t = &tx{db: b.db, tx: sqlTx}
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
	for i, w := range batch {
		if err != nil {
			w.done <- err
		} else {
			w.done <- results[i]
		}
	}
}
