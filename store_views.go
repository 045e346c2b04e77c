package agentowl

import (
	"context"
	"time"
)

// OperatorViewStore holds the reads of the operator views that tell an
// item's whole story (docs/console.md): the message that started a work
// and its conversation's earlier messages, a line of each listed work's
// message, the conversation list's first messages and open work, and
// Needs attention's counts and urgency order. Read-only; implemented by
// Tx. Callers are internal/ingress and internal/inbox.
type OperatorViewStore interface {
	// EventListEarlier returns up to limit events of a conversation
	// received before before (by received time, then ID), newest first.
	EventListEarlier(ctx context.Context, conversationID string, before Cursor, limit int) ([]*Event, error)
	// EventDigestsByWork returns, by work ID, the event each of works
	// handles, its Payload cut to at most EventDigestBytes and without
	// Headers; unknown works are left out.
	EventDigestsByWork(ctx context.Context, works []string) (map[string]*Event, error)
	// ConversationDigests returns, by conversation ID, each conversation's
	// first event (as EventDigestsByWork cuts it) and its work not ended;
	// unknown conversations and those without events are left out.
	ConversationDigests(ctx context.Context, conversations []string) (map[string]*ConversationDigest, error)
	// AttentionCounts counts a tenant's unresolved items per kind and
	// status, and among them those whose expiry is at or before soon.
	AttentionCounts(ctx context.Context, tenantID string, soon time.Time) ([]AttentionCount, error)
	// AttentionListDated lists a tenant's items of p.Status (open,
	// acknowledged or AttentionUnresolved) that expire, soonest expiry
	// first, then by ID; p.After is the last item of the previous page
	// (its expiry and ID). p.WorkID is ignored.
	AttentionListDated(ctx context.Context, p AttentionListParams) ([]*AttentionItem, error)
	// AttentionListUndated lists the items of p.Status that never expire
	// (incidents), newest first, then by ID, after p.After as AttentionList.
	AttentionListUndated(ctx context.Context, p AttentionListParams) ([]*AttentionItem, error)
	// RequestListPendingByDeadline lists a tenant's pending AAP requests
	// whose deadline is after now, soonest deadline first, then by ID;
	// after, when set, is the last request of the previous page (its
	// deadline and ID).
	RequestListPendingByDeadline(ctx context.Context, tenantID string, now time.Time, after *Cursor, limit int) ([]*ApprovalRequest, error)
	// RequestCountPending counts a tenant's pending AAP requests whose
	// deadline is after now: all, acknowledged ones, and those due at or
	// before soon.
	RequestCountPending(ctx context.Context, tenantID string, now, soon time.Time) (RequestCounts, error)
}

// EventDigestBytes bounds the payload an event digest carries: enough for
// the subject, addresses and first lines of a message, never its whole
// body (a list page reads one per row).
const EventDigestBytes = 32 << 10

// ConversationDigest is what the conversation list shows of a
// conversation beyond its record.
type ConversationDigest struct {
	// First is its first event, cut as a digest.
	First *Event
	// OpenWork counts its work not ended.
	OpenWork int
}

// AttentionCount is how many unresolved items of one kind and status a
// tenant has, and how many of them expire soon.
type AttentionCount struct {
	Kind   string
	Status AttentionStatus
	N      int
	Soon   int
}

// RequestCounts counts pending AAP requests (RequestCountPending).
type RequestCounts struct {
	Pending, Acknowledged, Soon int
}
