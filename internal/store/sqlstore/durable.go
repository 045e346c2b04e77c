package sqlstore

import (
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/agentowl/agentowl/internal/store"
)

// durability makes group commits durable after the fact, so that the
// writer never waits for the disk. With SQLite's synchronous=FULL the single
// writer stood idle through every commit's fsync (a third of its time for
// SMS webhooks, more for 100 KiB email). Instead the writer commits without
// syncing (synchronous=NORMAL) and goes on to the next batch while a syncer
// syncs the WAL; one sync covers every batch committed before it began.
//
// What stays true, as with FULL:
//   - A write is answered only once a sync that began after its commit has
//     returned: its WAL frames are on disk.
//   - A read is answered only once everything it may have seen is durable:
//     it waits for the syncs of every commit begun before it ended. Nobody
//     outside the process sees a state that a power loss could take back.
//   - A failed sync breaks the store: what the failed sync covered may or may
//     not be on disk, and a later sync can report success without it. Every
//     write and read after it fails with store.ErrUnavailable (the readiness
//     probe with them) until the process restarts and SQLite recovers the
//     WAL, as PostgreSQL stops on a failed fsync.
//
// The writer's gain is the time the statements of a batch take, which now
// pass during the sync of the batch before instead of after it.
type durability struct {
	sync func() error
	// begun counts commits that have begun: a commit is visible to readers
	// from some moment inside COMMIT, so readers wait for the count as it is
	// when they end. committed counts commits that have ended (successfully
	// or not): a sync covers those that had ended when it began.
	begun, committed atomic.Uint64
	kick             chan struct{}
	stop             chan struct{}
	done             chan struct{}

	mu     sync.Mutex
	synced uint64
	err    error
	// changed is closed, and replaced, when synced or err changes.
	changed chan struct{}
}

func newDurability(sync func() error) *durability {
	d := &durability{sync: sync, kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{}),
		changed: make(chan struct{})}
	go d.loop()
	return d
}

// commit runs the commit of one batch and returns its sequence number, to
// wait for when the commit succeeded. It first waits for the sync of the
// commit before, during which the batch's statements ran: one commit per
// sync, as when each commit synced. Committing without that wait made the
// batches three times smaller and as many commits more, each writing the
// pages every batch changes (index pages, the newest table pages) to the WAL
// again, which cost more CPU than the wait it saved.
func (d *durability) commit(run func() error) (uint64, error) {
	if err := d.wait(d.committed.Load()); err != nil {
		return 0, err
	}
	seq := d.begun.Add(1)
	err := run()
	d.committed.Store(seq)
	select {
	case d.kick <- struct{}{}:
	default: // a sync is already due; it will cover this commit or the next will
	}
	return seq, err
}

// wait returns once commit seq is durable, or the error that broke the store.
func (d *durability) wait(seq uint64) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	for d.synced < seq && d.err == nil {
		ch := d.changed
		d.mu.Unlock()
		<-ch
		d.mu.Lock()
	}
	return d.err
}

// seen returns once every commit a read that ends now may have seen is
// durable.
func (d *durability) seen() error { return d.wait(d.begun.Load()) }

// broken is the error that broke the store, if any.
func (d *durability) broken() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.err
}

func (d *durability) loop() {
	defer close(d.done)
	for {
		select {
		case <-d.kick:
		case <-d.stop:
			d.syncCommitted() // the last batches, committed before the queue closed
			return
		}
		d.syncCommitted()
	}
}

func (d *durability) syncCommitted() {
	target := d.committed.Load()
	d.mu.Lock()
	done := d.synced >= target || d.err != nil
	d.mu.Unlock()
	if done {
		return
	}
	err := d.sync()
	d.mu.Lock()
	if err != nil {
		d.err = fmt.Errorf("%w: syncing the SQLite WAL failed; restart the server: %w", store.ErrUnavailable, err)
	} else {
		d.synced = target
	}
	close(d.changed)
	d.changed = make(chan struct{})
	d.mu.Unlock()
}

// close syncs what was committed and stops; call it after the last commit.
func (d *durability) close() {
	close(d.stop)
	<-d.done
}
