package agentowl

import "time"

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
