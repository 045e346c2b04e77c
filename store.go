package agentowl

// The store seam (store*.go): the persistence interfaces the use-cases
// depend on, declared beside the records they persist, as the domain's
// ports. internal/store/sqlstore implements them for SQLite and PostgreSQL
// with the same behaviour, proven by the internal/store/storetest
// conformance suite. Stores hold SQL and never business rules. The
// interfaces live here rather than in a package of their own so that the
// faces (httpapi, console, CLI) depend on the domain and the use-cases
// only, never on persistence (architecture_test.go).

import (
	"context"
	"errors"
	"time"
)

// Sentinel errors. Stores interpret driver errors by type or code, never by
// message, and return these.
var (
	// ErrNotFound: no row matched.
	ErrNotFound = errors.New("store: not found")
	// ErrConflict: a uniqueness constraint rejected the write, or a guarded
	// update matched no row in the expected state.
	ErrConflict = errors.New("store: conflict")
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
	IdentityStore
	ProviderStore
	AuditStore
	AuditChainStore
	KeyRotationStore
	CounterStore
	OutboxStore
	SlotStore
	EngineStore
	EndpointStore
	AgentWorkStore
	AttentionStore
	AttachmentStore
	EmailThreadStore
	MaintenanceStore
	OperationStore
	NotificationStore
	ConsoleSessionStore
	ConversationStore
	MailDomainStore
	AttestationStore
	OperatorViewStore
	ConsoleViewStore
}

// Counters are the fixed-window counters behind the rate limits shared by
// replicas (internal/ratelimit). Implemented by Tx.
type CounterStore interface {
	// CounterAdd adds delta to the counter of key in the window starting at
	// windowStart and returns the new total.
	CounterAdd(ctx context.Context, key string, windowStart time.Time, delta int64) (int64, error)
}
