package store

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/agentowl/agentowl"
)

// Records of in-app notifications (docs/console.md) and web console
// sessions. The rules live in internal/notify and internal/access.

// Notification is one notice to one recipient about one cause.
type Notification struct {
	ID         string // ntf_…
	TenantID   string
	OperatorID string
	// CauseKey names the state change it reports, such as
	// "work.completed:work_…"; unique per recipient.
	CauseKey string
	// Kind is result, failure or input (what preferences mute by).
	Kind string
	// Cause is the state change: work_completed, incident, needs_input or
	// approval_pending.
	Cause string
	// Subject is what the deep link opens: "work:<id>" or "attention:<id>".
	Subject string
	// EndpointID is the endpoint the cause belongs to ("" for none).
	EndpointID string
	Title      string
	CreatedAt  time.Time
	ReadAt     *time.Time
}

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

// Cursor is a keyset position in a newest-first list: the rows after it
// are those created before At, or at At with an ID greater than ID.
type Cursor struct {
	At time.Time
	ID string
}

// String is the cursor as an opaque page token: "<unix micros>.<id>".
func (c Cursor) String() string { return strconv.FormatInt(c.At.UnixMicro(), 10) + "." + c.ID }

// ParseCursor reads a page token made by Cursor.String; ok is false for
// anything else.
func ParseCursor(s string) (c *Cursor, ok bool) {
	at, id, found := strings.Cut(s, ".")
	micros, err := strconv.ParseInt(at, 10, 64)
	if !found || err != nil || micros < 0 || id == "" || len(s) > 256 {
		return nil, false
	}
	return &Cursor{At: time.UnixMicro(micros).UTC(), ID: id}, true
}

// NotificationListParams selects one recipient's notices, newest first.
type NotificationListParams struct {
	OperatorID string
	UnreadOnly bool
	After      *Cursor // optional: the next page
	Limit      int
}

// NotificationMute is one muted kind or endpoint of a recipient.
type NotificationMute struct {
	Scope string // kind or endpoint
	Value string
}

// Notifications is the persistence of notices and preferences.
type Notifications interface {
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

// ConsoleSessionKind tells a signed-in session from a login link.
type ConsoleSessionKind string

// Console session kinds.
const (
	ConsoleSession   ConsoleSessionKind = "session"
	ConsoleLoginLink ConsoleSessionKind = "link"
)

// ConsoleSessionRecord is a web console session or a one-time login link.
// Only the SHA-256 of its secret is stored.
type ConsoleSessionRecord struct {
	ID         string
	Kind       ConsoleSessionKind
	Hash       []byte
	TenantID   string
	OperatorID string
	// TokenID is the operator token that vouches for it: the session lives
	// only while that token is active.
	TokenID    string
	CreatedAt  time.Time
	LastSeenAt time.Time
	ExpiresAt  time.Time
	UsedAt     *time.Time
	RevokedAt  *time.Time
}

// ConsoleSessions is the persistence of console sessions and login links.
type ConsoleSessions interface {
	ConsoleSessionCreate(ctx context.Context, s *ConsoleSessionRecord) error
	// ConsoleSessionGetByHash finds a session or link with the token that
	// vouches for it; ErrNotFound if none.
	ConsoleSessionGetByHash(ctx context.Context, hash []byte) (*ConsoleSessionRecord, *agentowl.Token, error)
	// ConsoleSessionTouch records activity at at.
	ConsoleSessionTouch(ctx context.Context, id string, at time.Time) error
	// ConsoleSessionUse marks a login link used; ErrConflict if it already
	// was (a link signs in once).
	ConsoleSessionUse(ctx context.Context, id string, at time.Time) error
	// ConsoleSessionRevoke sets revoked_at if unset.
	ConsoleSessionRevoke(ctx context.Context, id string, at time.Time) error
}
