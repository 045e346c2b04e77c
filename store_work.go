package agentowl

import (
	"context"
	"time"
)

// Persistence of agent work (docs/agent-work.md): endpoints and their
// runtime credentials, ingress bindings, conversations and events, work and
// callbacks. The records and their state rules are the domain's
// (endpoint.go, conversation.go, work.go at the module root); the store
// only persists them.

// Route is a binding with where its events go (BindingRoute).
type Route struct {
	Binding  *Binding
	Endpoint *Endpoint
	// Credential is the endpoint's RuntimeCredentialNewest ("" if none).
	Credential string
	// Open is the binding's open conversation with the key asked for (nil
	// if none, or none asked for).
	Open *Conversation
}

// CallbackCheck is what WorkForCallback reads.
type CallbackCheck struct {
	Work *Work
	// ByID and BySequence are the work's callbacks with the new one's ID
	// and with its sequence (nil when none).
	ByID, BySequence *Callback
	// Items are the work's attention items that are not resolved and
	// every revision of the requests asked for, newest first; Decided the
	// IDs of the unresolved ones that have a decision. A work's resolved
	// items of other requests, which may be many, are not read.
	Items   []*AttentionItem
	Decided map[string]bool
}

// WorkListParams filters WorkList; results are newest first.
type WorkListParams struct {
	TenantID       string
	Status         WorkStatus // optional
	EndpointID     string     // optional
	ConversationID string     // optional
	After          *Cursor    // optional: the next page
	Limit          int
}

// AgentWork is the persistence of work and the runtime's callbacks about
// it, implemented by Tx. Callers
// are internal/work and internal/ingress; every method returns ErrNotFound
// when no row matches and ErrConflict when a uniqueness rule rejects a
// write, as noted.
type AgentWorkStore interface {
	// WorkCreate inserts work; ErrConflict if the event already has work of
	// that generation for the endpoint.
	WorkCreate(ctx context.Context, w *Work) error
	WorkGet(ctx context.Context, id string) (*Work, error)
	// WorkStatuses returns the status of each work named that exists, in
	// one read.
	WorkStatuses(ctx context.Context, ids []string) (map[string]WorkStatus, error)
	// WorkGetForUpdate is WorkGet that also serializes the caller with
	// other writers of the work (row lock on PostgreSQL).
	WorkGetForUpdate(ctx context.Context, id string) (*Work, error)
	// WorkUpdate writes the runtime state: status, sequence, session,
	// result, requests, error, callback count, updated and ended times.
	WorkUpdate(ctx context.Context, w *Work) error
	WorkList(ctx context.Context, p WorkListParams) ([]*Work, error)
	// WorkByEvent returns an event's work, oldest first.
	WorkByEvent(ctx context.Context, eventID string) ([]*Work, error)
	// WorkMaxGeneration returns the highest generation of an event's work
	// for an endpoint (0 if none).
	WorkMaxGeneration(ctx context.Context, eventID, endpointID string) (int, error)
	// CallbackCreate inserts a callback; ErrConflict if the work already has
	// a callback with its ID or its sequence.
	CallbackCreate(ctx context.Context, c *Callback) error
	CallbackGet(ctx context.Context, workID, callbackID string) (*Callback, error)
	CallbackGetBySequence(ctx context.Context, workID string, sequence int64) (*Callback, error)
	// WorkForCallback reads what a new callback (callbackID, sequence,
	// carrying the requests of IDs requests) is checked and applied
	// against, in one round trip on PostgreSQL: the work, as
	// WorkGetForUpdate (ErrNotFound when it is not there), and then, once
	// the work is locked, its callbacks and attention items.
	WorkForCallback(ctx context.Context, workID, callbackID string, sequence int64, requests []string) (*CallbackCheck, error)
	// CallbackList returns a work's latest limit callbacks in the order
	// recorded.
	CallbackList(ctx context.Context, workID string, limit int) ([]*Callback, error)
}

// Endpoints is the persistence of endpoints, their runtime credentials and
// the ingress bindings that route to them, implemented by Tx. Callers are
// internal/work and internal/ingress; ErrNotFound when no row matches,
// ErrConflict when a uniqueness rule rejects a write, as noted.
type EndpointStore interface {
	// EndpointCreate inserts an endpoint; ErrConflict if the tenant has a
	// live endpoint of the same name.
	EndpointCreate(ctx context.Context, e *Endpoint) error
	// EndpointGet returns an endpoint, deleted or not.
	EndpointGet(ctx context.Context, id string) (*Endpoint, error)
	// EndpointUpdate writes every mutable field (name, URL, agent work,
	// secrets, decision settings, updated and deleted times); ErrConflict
	// on a taken name.
	EndpointUpdate(ctx context.Context, e *Endpoint) error
	// EndpointList returns a tenant's live endpoints, oldest first.
	EndpointList(ctx context.Context, tenantID string) ([]*Endpoint, error)
	RuntimeCredentialCreate(ctx context.Context, c *RuntimeCredential) error
	// RuntimeCredentialGetByHash finds a credential, active or not.
	RuntimeCredentialGetByHash(ctx context.Context, hash []byte) (*RuntimeCredential, error)
	RuntimeCredentialGet(ctx context.Context, id string) (*RuntimeCredential, error)
	// RuntimeCredentialList returns an endpoint's credentials, oldest first.
	RuntimeCredentialList(ctx context.Context, endpointID string) ([]*RuntimeCredential, error)
	// RuntimeCredentialNewest returns the ID of the endpoint's newest
	// credential that is active at now (RuntimeCredential.Active) and has
	// scope, or "" when none has: the credential a work block names.
	RuntimeCredentialNewest(ctx context.Context, endpointID, scope string, now time.Time) (string, error)
	// RuntimeCredentialRevoke sets revoked_at if unset; ErrNotFound if no
	// such credential.
	RuntimeCredentialRevoke(ctx context.Context, id string, at time.Time) error
	// RuntimeCredentialRevokeByEndpoint revokes every live credential of an
	// endpoint.
	RuntimeCredentialRevokeByEndpoint(ctx context.Context, endpointID string, at time.Time) error
	// BindingCreate inserts a binding; ErrConflict if its token hash is
	// taken, or its address by a live binding.
	BindingCreate(ctx context.Context, b *Binding) error
	// BindingGet returns a binding, deleted or not.
	BindingGet(ctx context.Context, id string) (*Binding, error)
	// BindingRoute returns a binding, deleted or not, with the endpoint it
	// routes to and that endpoint's RuntimeCredentialNewest for scope at
	// now, in one statement, and, when openKey is not "", the binding's
	// open conversation with that key as ConversationGetOpenByKey finds it
	// (Route.Open), in the same round trip on PostgreSQL: what an inbound
	// event's write reads.
	BindingRoute(ctx context.Context, id, scope string, now time.Time, openKey string) (*Route, error)
	// BindingGetByToken finds a live binding by its token hash.
	BindingGetByToken(ctx context.Context, tokenHash []byte) (*Binding, error)
	// BindingGetByAddress finds the live smtp binding with a (lower-case)
	// receiving address.
	BindingGetByAddress(ctx context.Context, address string) (*Binding, error)
	// BindingList returns a tenant's live bindings, oldest first.
	BindingList(ctx context.Context, tenantID string) ([]*Binding, error)
	// BindingDelete sets deleted_at if unset.
	BindingDelete(ctx context.Context, id string, at time.Time) error
	// BindingCountByEndpoint counts live bindings routing to an endpoint.
	BindingCountByEndpoint(ctx context.Context, endpointID string) (int, error)
}
