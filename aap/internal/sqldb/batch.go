package sqldb

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
)

// maxBatch bounds how many writes share one commit.
const maxBatch = 256

// batcher group-commits writes to a single-writer database. With
// synchronous=FULL each commit waits for an fsync; writes that arrive while a
// commit is in progress run together in the next transaction, each in its
// own savepoint, so a failing write rolls back only itself. No caller is
// answered before the commit that holds its write is durable.
type batcher struct {
	db     *sql.DB
	queue  chan *pending
	stop   chan struct{}
	exited chan struct{} // closed when loop has returned
	once   sync.Once
}

type pending struct {
	ctx    context.Context
	fn     func(context.Context, *sql.Tx) error
	result chan error
}

var errClosed = errors.New("aap store: closed")

func newBatcher(db *sql.DB) *batcher {
	b := &batcher{db: db, queue: make(chan *pending, 4*maxBatch), stop: make(chan struct{}), exited: make(chan struct{})}
	go b.loop()
	return b
}

func (b *batcher) write(ctx context.Context, fn func(context.Context, *sql.Tx) error) error {
	p := &pending{ctx: ctx, fn: fn, result: make(chan error, 1)}
	select {
	case b.queue <- p:
	case <-b.stop:
		return errClosed
	case <-ctx.Done():
		return ctx.Err()
	}
	// Once queued, the outcome is awaited even if ctx ends: the write may be
	// committed, and the caller must not believe otherwise. A write queued
	// while the store closes may never be picked up: then it did not happen.
	select {
	case err := <-p.result:
		return err
	case <-b.exited:
		select {
		case err := <-p.result:
			return err
		default:
			return errClosed
		}
	}
}

func (b *batcher) close() {
	b.once.Do(func() { close(b.stop) })
	<-b.exited
}

func (b *batcher) loop() {
	defer close(b.exited)
	for {
		var first *pending
		select {
		case first = <-b.queue:
		case <-b.stop:
			for {
				select {
				case p := <-b.queue:
					p.result <- errClosed
				default:
					return
				}
			}
		}
		batch := []*pending{first}
	fill:
		for len(batch) < maxBatch {
			select {
			case p := <-b.queue:
				batch = append(batch, p)
			default:
				break fill
			}
		}
		b.commit(batch)
	}
}

// commit runs a batch in one transaction. If the transaction itself fails
// (begin, savepoint, commit), every write of the batch fails.
func (b *batcher) commit(batch []*pending) {
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
	for i, p := range batch {
		if err != nil {
			p.result <- err
		} else {
			p.result <- results[i]
		}
	}
}
