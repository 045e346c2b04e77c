package agentowl

import (
	"context"
	"time"
)

// Persistence of in-app notifications (docs/console.md) and web console
// sessions. The records are the domain's (notification.go and session.go at
// the module root).

// NotificationFanOut is a cause to notify every operator of a tenant of,
// except those who muted its kind or its endpoint.
type NotificationFanOut struct {
	TenantID   string
	CauseKey   string
	Kind       string
	Cause      string
	Subject    string
	EndpointID string
	Title      string
	CreatedAt  time.Time
	// IDPrefix is a fresh random prefix of this fan-out's notification IDs:
	// each recipient's notice is the prefix and a sequence number.
	IDPrefix string
}

// NotificationListParams selects one recipient's notices, newest first.
type NotificationListParams struct {
	OperatorID string
	UnreadOnly bool
	After      *Cursor // optional: the next page
	Limit      int
}

// Notifications is the persistence of notices and preferences.
type NotificationStore interface {
	// NotificationFanOut records f for every recipient; a recipient who
	// already has a notice with f's CauseKey gets none (a unique key, never
	// a check-then-insert). added, when not nil, is set to how many notices
	// it added by the time the write returns: the PostgreSQL store sends
	// the insert with the transaction's next statement or its commit.
	NotificationFanOut(ctx context.Context, f *NotificationFanOut, added *int) error
	NotificationList(ctx context.Context, p NotificationListParams) ([]*Notification, error)
	// NotificationGet returns one notice of a recipient; ErrNotFound if the
	// recipient has no notice of that ID.
	NotificationGet(ctx context.Context, operatorID, id string) (*Notification, error)
	// NotificationUnread counts a recipient's unread notices.
	NotificationUnread(ctx context.Context, operatorID string) (int, error)
	// NotificationMarkRead sets read_at on a recipient's unread notices:
	// those of ids, or every one when ids is nil. It returns how many.
	NotificationMarkRead(ctx context.Context, operatorID string, ids []string, at time.Time) (int, error)
	// NotificationMutes returns a recipient's mutes.
	NotificationMutes(ctx context.Context, operatorID string) ([]NotificationMute, error)
	// NotificationSetMutes replaces a recipient's mutes.
	NotificationSetMutes(ctx context.Context, tenantID, operatorID string, mutes []NotificationMute) error
}

// ConsoleSessions is the persistence of console sessions and login links.
type ConsoleSessionStore interface {
	ConsoleSessionCreate(ctx context.Context, s *ConsoleSessionRecord) error
	// ConsoleSessionGetByHash finds a session or link with the token that
	// vouches for it; ErrNotFound if none.
	ConsoleSessionGetByHash(ctx context.Context, hash []byte) (*ConsoleSessionRecord, *Token, error)
	// ConsoleSessionTouch records activity at at.
	ConsoleSessionTouch(ctx context.Context, id string, at time.Time) error
	// ConsoleSessionUse marks a login link used; ErrConflict if it already
	// was (a link signs in once).
	ConsoleSessionUse(ctx context.Context, id string, at time.Time) error
	// ConsoleSessionRevoke sets revoked_at if unset.
	ConsoleSessionRevoke(ctx context.Context, id string, at time.Time) error
}
