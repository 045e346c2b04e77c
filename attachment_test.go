package agentowl_test

import (
	"testing"
	"time"

	"github.com/agentowl/agentowl"
)

// TestAvailabilityCanBecome pins how a download's answer may change: an
// available part may go missing or expire, a missing one expire; blocked
// and expired are final.
func TestAvailabilityCanBecome(t *testing.T) {
	t.Parallel()
	checkTransitions(t, []agentowl.Availability{agentowl.AttachmentAvailable, agentowl.AttachmentExpired,
		agentowl.AttachmentBlocked, agentowl.AttachmentMissing}, map[agentowl.Availability][]agentowl.Availability{
		agentowl.AttachmentAvailable: {agentowl.AttachmentMissing, agentowl.AttachmentExpired},
		agentowl.AttachmentExpired:   nil,
		agentowl.AttachmentBlocked:   nil,
		agentowl.AttachmentMissing:   {agentowl.AttachmentExpired},
	}, agentowl.Availability.CanBecome)
}

// TestAttachmentAvailability pins the order of the decision (blocked, then
// expired, then missing) and the expiry instant: a part is expired from
// ExpiresAt on, not after it, whether or not its bytes are gone.
func TestAttachmentAvailability(t *testing.T) {
	t.Parallel()
	expiry := time.Date(2026, 10, 6, 12, 0, 0, 0, time.UTC)
	before, after := expiry.Add(-time.Nanosecond), expiry.Add(time.Nanosecond)
	gone := expiry.Add(-time.Hour)
	stored := agentowl.Attachment{ID: "att_1", BlobKey: "k", ExpiresAt: expiry}
	blocked := agentowl.Attachment{ID: "att_2", Blocked: "quota", ExpiresAt: expiry}
	missing := stored
	missing.MissingAt = &gone
	deleted := stored
	deleted.DeletedAt = &gone
	blockedMissing := blocked
	blockedMissing.MissingAt = &gone
	for _, c := range []struct {
		name string
		a    agentowl.Attachment
		now  time.Time
		want agentowl.Availability
	}{
		{"stored, long before expiry", stored, expiry.Add(-24 * time.Hour), agentowl.AttachmentAvailable},
		{"stored, 1ns before expiry", stored, before, agentowl.AttachmentAvailable},
		{"stored, at the expiry instant", stored, expiry, agentowl.AttachmentExpired},
		{"stored, 1ns after expiry", stored, after, agentowl.AttachmentExpired},
		{"blocked, before expiry", blocked, before, agentowl.AttachmentBlocked},
		{"blocked, at expiry", blocked, expiry, agentowl.AttachmentBlocked},
		{"blocked, after expiry", blocked, after, agentowl.AttachmentBlocked},
		{"blocked and marked missing", blockedMissing, before, agentowl.AttachmentBlocked},
		{"missing, before expiry", missing, before, agentowl.AttachmentMissing},
		{"missing, at expiry", missing, expiry, agentowl.AttachmentExpired},
		{"deleted before expiry", deleted, before, agentowl.AttachmentMissing},
		{"deleted, at expiry", deleted, expiry, agentowl.AttachmentExpired},
	} {
		if got := c.a.Availability(c.now); got != c.want {
			t.Errorf("%s: Availability = %q, want %q", c.name, got, c.want)
		}
	}
}

// TestAttachmentExpired pins the expiry instant Availability, downloads
// and the retention sweep share: expired from ExpiresAt on.
func TestAttachmentExpired(t *testing.T) {
	t.Parallel()
	expiry := time.Date(2026, 10, 6, 12, 0, 0, 0, time.UTC)
	a := agentowl.Attachment{ExpiresAt: expiry}
	for _, c := range []struct {
		now  time.Time
		want bool
	}{
		{expiry.Add(-time.Hour), false},
		{expiry.Add(-time.Nanosecond), false},
		{expiry, true},
		{expiry.Add(time.Nanosecond), true},
		// The same instant in another zone is the same instant.
		{expiry.In(time.FixedZone("UTC+2", 2*60*60)), true},
	} {
		if got := a.Expired(c.now); got != c.want {
			t.Errorf("Expired(%s) = %v, want %v", c.now, got, c.want)
		}
	}
}

// TestAttachmentLifecycle walks a stored part through its life (found
// missing, then past its expiry, then deleted by the sweep) and checks
// that each change of its availability is one CanBecome allows.
func TestAttachmentLifecycle(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 10, 6, 12, 0, 0, 0, time.UTC)
	a := agentowl.Attachment{BlobKey: "k", CreatedAt: start, ExpiresAt: start.Add(48 * time.Hour)}
	prev := a.Availability(start)
	if prev != agentowl.AttachmentAvailable {
		t.Fatalf("a new stored part is %q", prev)
	}
	steps := []struct {
		at     time.Time
		change func(*agentowl.Attachment, time.Time)
		want   agentowl.Availability
	}{
		{start.Add(time.Hour), nil, agentowl.AttachmentAvailable},
		{start.Add(2 * time.Hour), func(a *agentowl.Attachment, now time.Time) { a.MissingAt = &now }, agentowl.AttachmentMissing},
		{a.ExpiresAt, nil, agentowl.AttachmentExpired},
		{a.ExpiresAt.Add(time.Hour), func(a *agentowl.Attachment, now time.Time) { a.DeletedAt = &now }, agentowl.AttachmentExpired},
	}
	for _, s := range steps {
		if s.change != nil {
			s.change(&a, s.at)
		}
		got := a.Availability(s.at)
		if got != s.want {
			t.Fatalf("at %s: %q, want %q", s.at, got, s.want)
		}
		if got != prev && !prev.CanBecome(got) {
			t.Errorf("at %s: %q became %q, which CanBecome refuses", s.at, prev, got)
		}
		prev = got
	}
}
