package sqlite

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentowl/agentowl"
	"github.com/agentowl/agentowl/internal/store"
)

// heldSync holds the WAL sync once armed, so a test can act while a commit
// is in the WAL but not yet synced.
type heldSync struct {
	armed    atomic.Bool
	entered  chan struct{}
	release  chan struct{}
	released atomic.Bool
	once     sync.Once
}

func (h *heldSync) sync(next func() error) error {
	if h.armed.Load() {
		h.once.Do(func() { close(h.entered) })
		<-h.release
	}
	return next()
}

func createTenant(st store.Store, name string) error {
	return st.Write(context.Background(), func(tx store.Tx) error {
		return tx.TenantCreate(context.Background(), &agentowl.Tenant{ID: "ten_" + name, Name: name, CreatedAt: time.Now()})
	})
}

// A write is answered only after the WAL sync that follows its commit, and
// a read that may have seen that commit only after the same sync: while the
// sync is held, neither returns; ReadUnsynced does.
func TestWritesAndReadsWaitForTheWALSync(t *testing.T) {
	h := &heldSync{entered: make(chan struct{}), release: make(chan struct{})}
	st, err := open(context.Background(), t.TempDir()+"/agentowl.db", nil, Config{}, h.sync)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	h.armed.Store(true)

	var wg sync.WaitGroup
	var writeEarly, readEarly atomic.Bool
	wg.Go(func() {
		if err := createTenant(st, "acme"); err != nil {
			t.Errorf("write: %v", err)
		}
		writeEarly.Store(!h.released.Load())
	})
	<-h.entered // the tenant is committed; its sync is held
	read := make(chan struct{})
	wg.Go(func() {
		var got *agentowl.Tenant
		err := st.Read(context.Background(), func(tx store.Tx) (err error) {
			got, err = tx.TenantGetByName(context.Background(), "acme")
			close(read)
			return err
		})
		if err != nil || got.ID != "ten_acme" {
			t.Errorf("read: %v %v", got, err)
		}
		readEarly.Store(!h.released.Load())
	})
	<-read
	// A read that only prepares a write does not wait (were it to, this
	// would never return while the sync is held).
	var peeked *agentowl.Tenant
	if err := st.ReadUnsynced(context.Background(), func(tx store.Tx) (err error) {
		peeked, err = tx.TenantGetByName(context.Background(), "acme")
		return err
	}); err != nil || peeked.ID != "ten_acme" {
		t.Fatalf("unsynced read: %v %v", peeked, err)
	}
	for range 100 {
		runtime.Gosched() // a read that does not wait returns now
	}
	h.released.Store(true)
	close(h.release)
	wg.Wait()
	if writeEarly.Load() {
		t.Error("the write was answered before its WAL sync")
	}
	if readEarly.Load() {
		t.Error("a read of the commit was answered before its WAL sync")
	}
}

// A failed WAL sync leaves unknown what reached the disk: the write it
// covered, every later write and every read fail with ErrUnavailable.
func TestFailedWALSyncBreaksTheStore(t *testing.T) {
	var fail atomic.Bool
	st, err := open(context.Background(), t.TempDir()+"/agentowl.db", nil, Config{}, func(next func() error) error {
		if fail.Load() {
			return errors.New("EIO")
		}
		return next()
	})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := createTenant(st, "before"); err != nil {
		t.Fatal(err)
	}
	fail.Store(true)
	if err := createTenant(st, "acme"); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("write covered by the failed sync: %v, want ErrUnavailable", err)
	}
	fail.Store(false) // a later sync would succeed: the store stays broken all the same
	if err := createTenant(st, "later"); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("later write: %v, want ErrUnavailable", err)
	}
	err = st.Read(context.Background(), func(tx store.Tx) error {
		_, err := tx.TenantGetByName(context.Background(), "before")
		return err
	})
	if !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("read: %v, want ErrUnavailable", err)
	}
	if err := st.Ping(context.Background()); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("ping: %v, want ErrUnavailable", err)
	}
}

// The checkpointer, which copies WAL frames into the database file, syncs
// the WAL before and the file after (synchronous=FULL), whatever the writer
// commits with.
func TestCheckpointerSyncs(t *testing.T) {
	st, err := Open(context.Background(), t.TempDir()+"/agentowl.db", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var mode int
	if err := st.(*checkpointed).ckpt.db.QueryRow("PRAGMA synchronous").Scan(&mode); err != nil || mode != 2 {
		t.Fatalf("checkpointer synchronous = %d (%v), want 2 (FULL)", mode, err)
	}
}
