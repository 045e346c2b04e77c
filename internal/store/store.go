// Package store defines the persistence interfaces of AgentOwl. The sqlite
// and postgres packages implement them with the same behaviour, proven by the
// storetest conformance suite. Stores hold SQL and never business rules.
package store

import (
	"context"
	"errors"
	"time"

	"github.com/agentowl/agentowl"
)

// Sentinel errors. Stores interpret driver errors by type or code, never by
// message, and return these.
var (
	// ErrNotFound: no row matched.
	ErrNotFound = errors.New("store: not found")
	// ErrConflict: a uniqueness constraint rejected the write, or a guarded
	// update matched no row in the expected state.
	ErrConflict = errors.New("store: conflict")
	// ErrUnavailable is agentowl.ErrUnavailable: the faces tell it from other
	// failures without importing the store.
	ErrUnavailable = agentowl.ErrUnavailable
)

// Store opens transactions. Write transactions are serializable with respect
// to each other for the rows they touch. Reads must not write; each
// statement of a Read sees a consistent view of committed data, but on
// PostgreSQL two statements of one Read may see different commits (READ
// COMMITTED, without a transaction), so a Read must not rely on two of its
// statements agreeing.
type Store interface {
	// Read runs fn's read-only statements.
	Read(ctx context.Context, fn func(Tx) error) error
	// Write runs fn in a read-write transaction and commits if fn returns nil.
	// fn may be retried on a serialization failure, so it must not have side
	// effects outside tx. An insert's ErrConflict or an update's
	// ErrNotFound may come from Write rather than from the method that
	// wrote: the PostgreSQL store sends such writes with the transaction's
	// next statement or its COMMIT (sqlstore/pgx.go), and the transaction
	// then fails as a whole.
	Write(ctx context.Context, fn func(Tx) error) error
	// Ping reports whether the database can take a write now: it runs an
	// empty write transaction. Returns ErrUnavailable when it cannot.
	Ping(ctx context.Context) error
	// Dialect names the backend: "sqlite" or "postgres".
	Dialect() string
	Close() error
}

// Tx is one transaction's view of every aggregate: one small interface
// per area, each implemented by the sqlstore package for both dialects.
type Tx interface {
	Identity
	Provider
	Audit
	KeyRotation
	Counters
	Outbox
	Slots
	Engines
	Endpoints
	AgentWork
	Attention
	Attachments
	EmailThreads
	Maintenance
	Operations
	Notifications
	ConsoleSessions
	Conversations
	MailDomains
}

// Counters are the fixed-window counters behind the rate limits shared by
// replicas (internal/ratelimit). Implemented by Tx.
type Counters interface {
	// CounterAdd adds delta to the counter of key in the window starting at
	// windowStart and returns the new total.
	CounterAdd(ctx context.Context, key string, windowStart time.Time, delta int64) (int64, error)
}
