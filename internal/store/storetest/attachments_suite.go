package storetest

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/agentowl/agentowl"
)

// attachmentTests are the conformance subtests of retained attachments
// (agentowl.AttachmentStore); Exercise runs them with the others.
var attachmentTests = []suiteCase[*env]{
	{"AttachmentRoundTrip", testAttachmentRoundTrip},
	{"AttachmentInvariants", testAttachmentInvariants},
	{"AttachmentMissing", testAttachmentMissing},
	{"AttachmentDue", testAttachmentDue},
	{"AttachmentUploads", testAttachmentUploads},
	{"RetainedBytes", testRetainedBytes},
	{"RetainedBytesConcurrent", testRetainedBytesConcurrent},
	{"PurgeEventsWithAttachments", testPurgeEventsWithAttachments},
}

func newAttachment(ev *agentowl.Event, pos int, at time.Time) *agentowl.Attachment {
	id := wid("att")
	return &agentowl.Attachment{
		ID: id, TenantID: ev.TenantID, EventID: ev.ID, Position: pos, Name: fmt.Sprintf("report-%d.pdf", pos), Size: int64(1000 + pos),
		SHA256: hashOf(id), ContentID: "<part" + id + "@example.com>", DeclaredType: "application/pdf", SniffedType: "application/pdf",
		BlobKey: ev.TenantID + "/upl_x." + id, CreatedAt: at, ExpiresAt: at.Add(7 * 24 * time.Hour),
	}
}

func blockedAttachment(ev *agentowl.Event, pos int, at time.Time, reason string) *agentowl.Attachment {
	a := newAttachment(ev, pos, at)
	a.SHA256, a.BlobKey, a.Blocked = nil, "", reason
	return a
}

func (e *env) attachments(t *testing.T, as ...*agentowl.Attachment) {
	t.Helper()
	e.write(t, func(tx agentowl.Tx) error {
		for _, a := range as {
			if err := tx.AttachmentCreate(e.ctx, a); err != nil {
				return err
			}
		}
		return nil
	})
}

func (e *env) getAttachment(t *testing.T, id string) *agentowl.Attachment {
	t.Helper()
	return read(t, e, func(tx agentowl.Tx) (*agentowl.Attachment, error) { return tx.AttachmentGet(e.ctx, id) })
}

func testAttachmentRoundTrip(t *testing.T, e *env) {
	tn := e.tenant(t)
	_, _, ev := e.thread(t, tn.ID)
	_, _, other := e.thread(t, tn.ID)
	second, first := newAttachment(ev, 1, e.now), newAttachment(ev, 0, e.now)
	first.Inline, first.Name = true, "Bild – ünïcødé.png"
	blocked := blockedAttachment(ev, 2, e.now, "file_too_large")
	blocked.ContentID, blocked.DeclaredType, blocked.SniffedType = "", "application/octet-stream", "text/plain; charset=utf-8"
	e.attachments(t, second, first, blocked, newAttachment(other, 0, e.now))

	equal(t, "stored attachment", e.getAttachment(t, first.ID), first)
	equal(t, "blocked attachment", e.getAttachment(t, blocked.ID), blocked)
	list := read(t, e, func(tx agentowl.Tx) ([]*agentowl.Attachment, error) { return tx.AttachmentListByEvent(e.ctx, ev.ID) })
	equal(t, "an event's attachments by position", list, []*agentowl.Attachment{first, second, blocked})
	none := read(t, e, func(tx agentowl.Tx) ([]*agentowl.Attachment, error) {
		return tx.AttachmentListByEvent(e.ctx, "evt_none")
	})
	equal(t, "attachments of an event without any", len(none), 0)
	wantErr(t, "AttachmentGet unknown", e.readErr(func(tx agentowl.Tx) error {
		_, err := tx.AttachmentGet(e.ctx, "att_missing")
		return err
	}), agentowl.ErrNotFound)

	dup := newAttachment(ev, 1, e.now)
	wantErr(t, "a second attachment at a position", e.writeErr(func(tx agentowl.Tx) error { return tx.AttachmentCreate(e.ctx, dup) }),
		agentowl.ErrConflict)
	sameKey := newAttachment(ev, 5, e.now)
	sameKey.BlobKey = first.BlobKey
	wantErr(t, "a second attachment with a blob key", e.writeErr(func(tx agentowl.Tx) error { return tx.AttachmentCreate(e.ctx, sameKey) }),
		agentowl.ErrConflict)
}

// The schema refuses records that break the model: a blocked part with
// bytes, a stored part without a hash, an expiry not after creation.
func testAttachmentInvariants(t *testing.T, e *env) {
	tn := e.tenant(t)
	_, _, ev := e.thread(t, tn.ID)
	for name, mutate := range map[string]func(a *agentowl.Attachment){
		"blocked with a blob key":    func(a *agentowl.Attachment) { a.Blocked = "quota" },
		"stored without a hash":      func(a *agentowl.Attachment) { a.SHA256 = nil },
		"neither stored nor blocked": func(a *agentowl.Attachment) { a.BlobKey, a.SHA256 = "", nil },
		"expiring at its creation":   func(a *agentowl.Attachment) { a.ExpiresAt = a.CreatedAt },
		"negative size":              func(a *agentowl.Attachment) { a.Size = -1 },
		"blocked yet deleted": func(a *agentowl.Attachment) {
			a.BlobKey, a.SHA256, a.Blocked, a.DeletedAt = "", nil, "quota", ptr(a.CreatedAt)
		},
	} {
		a := newAttachment(ev, 0, e.now)
		mutate(a)
		if err := e.writeErr(func(tx agentowl.Tx) error { return tx.AttachmentCreate(e.ctx, a) }); err == nil {
			t.Errorf("%s: stored", name)
		}
	}
}

func testAttachmentMissing(t *testing.T, e *env) {
	tn := e.tenant(t)
	_, _, ev := e.thread(t, tn.ID)
	a, blocked := newAttachment(ev, 0, e.now), blockedAttachment(ev, 1, e.now, "quota")
	e.attachments(t, a, blocked)
	equal(t, "new", a.Availability(e.now), agentowl.AttachmentAvailable)
	e.write(t, func(tx agentowl.Tx) error { return tx.AttachmentSetMissing(e.ctx, a.ID, e.now.Add(time.Minute)) })
	e.write(t, func(tx agentowl.Tx) error { return tx.AttachmentSetMissing(e.ctx, a.ID, e.now.Add(time.Hour)) })
	got := e.getAttachment(t, a.ID)
	equal(t, "missing since the first report", got.MissingAt, ptr(e.now.Add(time.Minute)))
	equal(t, "missing attachment", got.Availability(e.now.Add(time.Minute)), agentowl.AttachmentMissing)
	equal(t, "missing attachment past its expiry", got.Availability(got.ExpiresAt), agentowl.AttachmentExpired)
	e.write(t, func(tx agentowl.Tx) error { return tx.AttachmentSetMissing(e.ctx, blocked.ID, e.now) })
	got = e.getAttachment(t, blocked.ID)
	equal(t, "a blocked part is never missing", got.MissingAt, (*time.Time)(nil))
	equal(t, "blocked attachment", got.Availability(e.now), agentowl.AttachmentBlocked)
	equal(t, "blocked attachment past its expiry", got.Availability(got.ExpiresAt.Add(time.Hour)), agentowl.AttachmentBlocked)
}

func testAttachmentDue(t *testing.T, e *env) {
	tn := e.tenant(t)
	_, _, ev := e.thread(t, tn.ID)
	early, late, later := newAttachment(ev, 0, e.now), newAttachment(ev, 1, e.now), newAttachment(ev, 2, e.now)
	early.ExpiresAt, late.ExpiresAt, later.ExpiresAt = e.now.Add(time.Hour), e.now.Add(2*time.Hour), e.now.Add(3*time.Hour)
	blocked := blockedAttachment(ev, 3, e.now, "file_too_large")
	blocked.ExpiresAt = e.now.Add(time.Minute)
	e.attachments(t, later, early, late, blocked)
	due := func(now time.Time, limit int) []string {
		as := read(t, e, func(tx agentowl.Tx) ([]*agentowl.Attachment, error) { return tx.AttachmentDue(e.ctx, now, limit) })
		ids := []string{}
		for _, a := range as {
			ids = append(ids, a.ID)
		}
		return ids
	}
	equal(t, "due before any expiry", due(e.now.Add(59*time.Minute), 10), []string{})
	equal(t, "due at an expiry instant", due(e.now.Add(time.Hour), 10), []string{early.ID})
	equal(t, "due, earliest first, limited", due(e.now.Add(5*time.Hour), 2), []string{early.ID, late.ID})

	e.write(t, func(tx agentowl.Tx) error { return tx.AttachmentSetDeleted(e.ctx, early.ID, e.now.Add(5*time.Hour)) })
	wantErr(t, "deleting twice", e.writeErr(func(tx agentowl.Tx) error {
		return tx.AttachmentSetDeleted(e.ctx, early.ID, e.now.Add(6*time.Hour))
	}), agentowl.ErrNotFound)
	wantErr(t, "deleting a blocked part's bytes", e.writeErr(func(tx agentowl.Tx) error {
		return tx.AttachmentSetDeleted(e.ctx, blocked.ID, e.now.Add(6*time.Hour))
	}), agentowl.ErrNotFound)
	equal(t, "due after a deletion", due(e.now.Add(5*time.Hour), 10), []string{late.ID, later.ID})
	got := e.getAttachment(t, early.ID)
	equal(t, "deleted at", got.DeletedAt, ptr(e.now.Add(5*time.Hour)))
	equal(t, "deleted bytes are expired", got.Availability(e.now.Add(5*time.Hour)), agentowl.AttachmentExpired)
}

func testAttachmentUploads(t *testing.T, e *env) {
	tn := e.tenant(t)
	a := &agentowl.AttachmentUpload{ID: wid("upl"), TenantID: tn.ID, StartedAt: e.now}
	b := &agentowl.AttachmentUpload{ID: wid("upl"), TenantID: tn.ID, StartedAt: e.now.Add(time.Minute)}
	c := &agentowl.AttachmentUpload{ID: wid("upl"), TenantID: tn.ID, StartedAt: e.now.Add(2 * time.Minute)}
	e.write(t, func(tx agentowl.Tx) error {
		for _, u := range []*agentowl.AttachmentUpload{b, a, c} {
			if err := tx.AttachmentUploadCreate(e.ctx, u); err != nil {
				return err
			}
		}
		return nil
	})
	wantErr(t, "an upload ID twice", e.writeErr(func(tx agentowl.Tx) error { return tx.AttachmentUploadCreate(e.ctx, a) }),
		agentowl.ErrConflict)
	stale := func(before time.Time, limit int) []*agentowl.AttachmentUpload {
		return read(t, e, func(tx agentowl.Tx) ([]*agentowl.AttachmentUpload, error) {
			return tx.AttachmentUploadStale(e.ctx, before, limit)
		})
	}
	equal(t, "stale at the first start", len(stale(e.now, 10)), 0)
	equal(t, "stale after two, oldest first", stale(e.now.Add(90*time.Second), 10), []*agentowl.AttachmentUpload{a, b})
	equal(t, "stale, limited", stale(e.now.Add(time.Hour), 1), []*agentowl.AttachmentUpload{a})

	// a commits; b is abandoned, so it can no longer commit.
	e.write(t, func(tx agentowl.Tx) error { return tx.AttachmentUploadCommit(e.ctx, a.ID) })
	wantErr(t, "committing twice", e.writeErr(func(tx agentowl.Tx) error { return tx.AttachmentUploadCommit(e.ctx, a.ID) }),
		agentowl.ErrNotFound)
	wantErr(t, "abandoning a committed upload", e.writeErr(func(tx agentowl.Tx) error {
		return tx.AttachmentUploadAbandon(e.ctx, a.ID, e.now)
	}), agentowl.ErrNotFound)
	e.write(t, func(tx agentowl.Tx) error { return tx.AttachmentUploadAbandon(e.ctx, b.ID, e.now.Add(time.Hour)) })
	wantErr(t, "abandoning twice", e.writeErr(func(tx agentowl.Tx) error { return tx.AttachmentUploadAbandon(e.ctx, b.ID, e.now) }),
		agentowl.ErrNotFound)
	wantErr(t, "committing an abandoned upload", e.writeErr(func(tx agentowl.Tx) error { return tx.AttachmentUploadCommit(e.ctx, b.ID) }),
		agentowl.ErrNotFound)
	b.AbandonedAt = ptr(e.now.Add(time.Hour))
	equal(t, "an abandoned upload is stale at once", stale(e.now, 10), []*agentowl.AttachmentUpload{b})
	equal(t, "stale after a commit", stale(e.now.Add(time.Hour), 10), []*agentowl.AttachmentUpload{b, c})
	e.write(t, func(tx agentowl.Tx) error { return tx.AttachmentUploadDelete(e.ctx, b.ID) })
	wantErr(t, "deleting an upload twice", e.writeErr(func(tx agentowl.Tx) error { return tx.AttachmentUploadDelete(e.ctx, b.ID) }),
		agentowl.ErrNotFound)
	equal(t, "stale after the delete", stale(e.now.Add(time.Hour), 10), []*agentowl.AttachmentUpload{c})
}

func testRetainedBytes(t *testing.T, e *env) {
	tn, other := e.tenant(t), e.tenant(t)
	usage := func(id string) int64 {
		return read(t, e, func(tx agentowl.Tx) (int64, error) { return tx.RetainedBytes(e.ctx, id) })
	}
	reserve := func(id string, n, limit int64) bool {
		t.Helper()
		var ok bool
		e.write(t, func(tx agentowl.Tx) (err error) {
			ok, err = tx.RetainedBytesReserve(e.ctx, id, n, limit)
			return err
		})
		return ok
	}
	equal(t, "usage of a tenant that never stored", usage(tn.ID), int64(0))
	equal(t, "a first reservation over the limit", reserve(tn.ID, 101, 100), false)
	equal(t, "usage after a refused first reservation", usage(tn.ID), int64(0))
	equal(t, "reserve 60 of 100", reserve(tn.ID, 60, 100), true)
	equal(t, "reserve 40 more of 100", reserve(tn.ID, 40, 100), true)
	equal(t, "reserve 1 more of 100", reserve(tn.ID, 1, 100), false)
	equal(t, "reserve 0 at the limit", reserve(tn.ID, 0, 100), true)
	equal(t, "usage at the limit", usage(tn.ID), int64(100))
	equal(t, "another tenant's reservation", reserve(other.ID, 100, 100), true)
	e.write(t, func(tx agentowl.Tx) error { return tx.RetainedBytesRelease(e.ctx, tn.ID, 30) })
	equal(t, "usage after a release", usage(tn.ID), int64(70))
	equal(t, "reserve 30 after the release", reserve(tn.ID, 30, 100), true)
	e.write(t, func(tx agentowl.Tx) error { return tx.RetainedBytesRelease(e.ctx, tn.ID, 1000) })
	equal(t, "usage never goes below zero", usage(tn.ID), int64(0))
	e.write(t, func(tx agentowl.Tx) error { return tx.RetainedBytesRelease(e.ctx, "no-such-tenant", 10) })
	equal(t, "the other tenant's usage", usage(other.ID), int64(100))
}

// Concurrent reservations of one tenant never pass its limit together.
func testRetainedBytesConcurrent(t *testing.T, e *env) {
	tn := e.tenant(t)
	const workers, each, limit = 8, 10, 35
	var wg sync.WaitGroup
	granted := make(chan bool, workers)
	for range workers {
		wg.Go(func() {
			var ok bool
			err := e.s.Write(e.ctx, func(tx agentowl.Tx) (err error) {
				ok, err = tx.RetainedBytesReserve(e.ctx, tn.ID, each, limit)
				return err
			})
			if err != nil {
				t.Errorf("reserve: %v", err)
			}
			granted <- ok
		})
	}
	wg.Wait()
	close(granted)
	n := 0
	for ok := range granted {
		if ok {
			n++
		}
	}
	equal(t, "reservations granted", n, limit/each)
	equal(t, "usage", read(t, e, func(tx agentowl.Tx) (int64, error) { return tx.RetainedBytes(e.ctx, tn.ID) }), int64(n*each))
}

// Event retention takes an event with its attachment records only once
// none of them keeps bytes in the object store.
func testPurgeEventsWithAttachments(t *testing.T, e *env) {
	tn := e.tenant(t)
	_, _, ev := e.thread(t, tn.ID)
	stored, blocked := newAttachment(ev, 0, e.now), blockedAttachment(ev, 1, e.now, "quota")
	e.attachments(t, stored, blocked)
	e.purgeEvents(t, e.now.Add(time.Hour))
	if e.eventGone(t, ev.ID) {
		t.Fatal("an event whose attachment keeps bytes was purged")
	}
	e.write(t, func(tx agentowl.Tx) error { return tx.AttachmentSetDeleted(e.ctx, stored.ID, e.now) })
	e.purgeEvents(t, e.now.Add(time.Hour))
	if !e.eventGone(t, ev.ID) {
		t.Fatal("an event whose attachments keep no bytes was not purged")
	}
	left := read(t, e, func(tx agentowl.Tx) ([]*agentowl.Attachment, error) { return tx.AttachmentListByEvent(e.ctx, ev.ID) })
	equal(t, "attachment records of a purged event", len(left), 0)
}
