package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/agentowl/agentowl"
)

// workTests are the conformance subtests of agent work (agentowl.AgentWorkStore);
// Exercise runs them with the others, each against a fresh store.
var workTests = []suiteCase[*env]{
	{"EndpointRoundTrip", testEndpointRoundTrip},
	{"EndpointNames", testEndpointNames},
	{"RuntimeCredentials", testRuntimeCredentials},
	{"RuntimeCredentialNewest", testRuntimeCredentialNewest},
	{"Bindings", testBindings},
	{"BindingChannels", testBindingChannels},
	{"EmailThreads", testEmailThreads},
	{"Conversations", testConversations},
	{"Events", testEvents},
	{"WorkRoundTrip", testWorkRoundTrip},
	{"WorkBatchReads", testWorkBatchReads},
	{"WorkList", testWorkList},
	{"WorkGenerations", testWorkGenerations},
	{"WorkUpdateConcurrent", testWorkUpdateConcurrent},
	{"Callbacks", testCallbacks},
	{"AttentionForDecision", testAttentionForDecision},
}

// ---- factories

func wid(prefix string) string { return prefix + "_" + agentowl.NewID("")[:13] }

func newEndpoint(tenantID string, at time.Time) *agentowl.Endpoint {
	return &agentowl.Endpoint{
		ID: wid("ep"), TenantID: tenantID, Name: name("endpoint"), URL: "https://runtime.example.com/hook?x=" + agentowl.NewID(""),
		AgentWork: true, SigningSecret: []byte("sealed\x00\xffsecret"), CreatedAt: at, UpdatedAt: at,
	}
}

func (e *env) endpoint(t *testing.T, tenantID string) *agentowl.Endpoint {
	t.Helper()
	v := newEndpoint(tenantID, e.now)
	e.write(t, func(tx agentowl.Tx) error { return tx.EndpointCreate(e.ctx, v) })
	return v
}

func newRuntimeCredential(ep *agentowl.Endpoint, at time.Time) *agentowl.RuntimeCredential {
	return &agentowl.RuntimeCredential{
		ID: wid("rtc"), TenantID: ep.TenantID, EndpointID: ep.ID, Hash: hashOf(agentowl.NewID("")), Label: name("label"),
		Scopes: []string{"callbacks:write", "decisions:read"}, CreatedAt: at, ExpiresAt: at.Add(30 * 24 * time.Hour),
	}
}

func newBinding(ep *agentowl.Endpoint, at time.Time) *agentowl.Binding {
	return &agentowl.Binding{
		ID: wid("bnd"), TenantID: ep.TenantID, Channel: "webhook", Name: name("binding"), EndpointID: ep.ID,
		TokenHash: hashOf(agentowl.NewID("")), CreatedAt: at,
	}
}

func (e *env) binding(t *testing.T, ep *agentowl.Endpoint) *agentowl.Binding {
	t.Helper()
	v := newBinding(ep, e.now)
	e.write(t, func(tx agentowl.Tx) error { return tx.BindingCreate(e.ctx, v) })
	return v
}

func newConversation(b *agentowl.Binding, key string, at time.Time) *agentowl.Conversation {
	return &agentowl.Conversation{ID: wid("conv"), TenantID: b.TenantID, BindingID: b.ID, Channel: b.Channel, Key: key,
		Status: agentowl.ConversationOpen, CreatedAt: at, LastEventAt: at}
}

func newEvent(c *agentowl.Conversation, at time.Time) *agentowl.Event {
	return &agentowl.Event{
		ID: wid("evt"), TenantID: c.TenantID, BindingID: c.BindingID, ConversationID: c.ID, Channel: "webhook",
		Sender: "crm", ReceivedAt: at, Headers: map[string][]string{"Content-Type": {"application/json"}, "X-Two": {"a", "b"}},
		Payload: json.RawMessage("{\"text\": \"hi\",  \"n\":4900.0}"), Attachments: json.RawMessage(`[]`),
	}
}

// thread persists an endpoint, binding, conversation and event.
func (e *env) thread(t *testing.T, tenantID string) (*agentowl.Endpoint, *agentowl.Conversation, *agentowl.Event) {
	t.Helper()
	ep := e.endpoint(t, tenantID)
	b := e.binding(t, ep)
	c := newConversation(b, "", e.now)
	ev := newEvent(c, e.now)
	e.write(t, func(tx agentowl.Tx) error {
		if err := tx.ConversationCreate(e.ctx, c); err != nil {
			return err
		}
		return tx.EventCreate(e.ctx, ev)
	})
	return ep, c, ev
}

// purgeEvents runs one batch of the events' retention for events received
// before before.
func (e *env) purgeEvents(t *testing.T, before time.Time) {
	t.Helper()
	e.write(t, func(tx agentowl.Tx) error {
		_, err := tx.PurgeBatch(e.ctx, agentowl.PurgeParams{Class: agentowl.PurgeEvents, Before: before, Limit: 100})
		return err
	})
}

// eventGone reports whether event id is no longer stored.
func (e *env) eventGone(t *testing.T, id string) bool {
	t.Helper()
	err := e.readErr(func(tx agentowl.Tx) error { _, err := tx.EventGet(e.ctx, id); return err })
	if err != nil && !errors.Is(err, agentowl.ErrNotFound) {
		t.Fatalf("get event %s: %v", id, err)
	}
	return err != nil
}

func newWork(ep *agentowl.Endpoint, ev *agentowl.Event, gen int, at time.Time) *agentowl.Work {
	return &agentowl.Work{
		ID: wid("work"), TenantID: ev.TenantID, EndpointID: ep.ID, ConversationID: ev.ConversationID, EventID: ev.ID,
		Generation: gen, DeliveryID: agentowl.NewID(""), CredentialID: wid("rtc"), Status: agentowl.WorkPending,
		CreatedAt: at, UpdatedAt: at,
	}
}

func (e *env) work(t *testing.T, w *agentowl.Work) *agentowl.Work {
	t.Helper()
	e.write(t, func(tx agentowl.Tx) error { return tx.WorkCreate(e.ctx, w) })
	return w
}

func (e *env) getWork(t *testing.T, id string) *agentowl.Work {
	t.Helper()
	return read(t, e, func(tx agentowl.Tx) (*agentowl.Work, error) { return tx.WorkGet(e.ctx, id) })
}

func workIDs(ws []*agentowl.Work) []string {
	return mapped(ws, func(w *agentowl.Work) string { return w.ID })
}

// ---- tests

func testEndpointRoundTrip(t *testing.T, e *env) {
	tn := e.tenant(t)
	ep := e.endpoint(t, tn.ID)
	got := read(t, e, func(tx agentowl.Tx) (*agentowl.Endpoint, error) { return tx.EndpointGet(e.ctx, ep.ID) })
	equal(t, "endpoint after create", got, ep)

	ep.Name, ep.URL, ep.AgentWork, ep.SigningSecret = name("renamed"), "https://other.example.com/", false, []byte("new")
	ep.DecisionURL, ep.DecisionSecret, ep.UpdatedAt = "https://decide.example.com/d", []byte("sealed-bearer"), e.now.Add(time.Minute)
	e.write(t, func(tx agentowl.Tx) error { return tx.EndpointUpdate(e.ctx, ep) })
	got = read(t, e, func(tx agentowl.Tx) (*agentowl.Endpoint, error) { return tx.EndpointGet(e.ctx, ep.ID) })
	equal(t, "endpoint after update", got, ep)

	ep.DecisionURL, ep.DecisionSecret = "", nil
	e.write(t, func(tx agentowl.Tx) error { return tx.EndpointUpdate(e.ctx, ep) })
	got = read(t, e, func(tx agentowl.Tx) (*agentowl.Endpoint, error) { return tx.EndpointGet(e.ctx, ep.ID) })
	equal(t, "endpoint with decision settings cleared", got, ep)

	ep.PausedAt = ptr(e.now.Add(2 * time.Minute))
	e.write(t, func(tx agentowl.Tx) error { return tx.EndpointUpdate(e.ctx, ep) })
	got = read(t, e, func(tx agentowl.Tx) (*agentowl.Endpoint, error) { return tx.EndpointGet(e.ctx, ep.ID) })
	equal(t, "paused endpoint", got, ep)
	ep.PausedAt = nil
	e.write(t, func(tx agentowl.Tx) error { return tx.EndpointUpdate(e.ctx, ep) })
	got = read(t, e, func(tx agentowl.Tx) (*agentowl.Endpoint, error) { return tx.EndpointGet(e.ctx, ep.ID) })
	equal(t, "resumed endpoint", got, ep)

	other := newEndpoint(tn.ID, e.now.Add(time.Second))
	e.write(t, func(tx agentowl.Tx) error { return tx.EndpointCreate(e.ctx, other) })
	e.endpoint(t, e.tenant(t).ID) // another tenant's
	list := read(t, e, func(tx agentowl.Tx) ([]*agentowl.Endpoint, error) { return tx.EndpointList(e.ctx, tn.ID) })
	equal(t, "endpoint list", len(list), 2)
	equal(t, "endpoint list order", []string{list[0].ID, list[1].ID}, []string{ep.ID, other.ID})

	other.DeletedAt = ptr(e.now.Add(time.Hour))
	e.write(t, func(tx agentowl.Tx) error { return tx.EndpointUpdate(e.ctx, other) })
	list = read(t, e, func(tx agentowl.Tx) ([]*agentowl.Endpoint, error) { return tx.EndpointList(e.ctx, tn.ID) })
	equal(t, "endpoint list without the deleted one", len(list), 1)
	got = read(t, e, func(tx agentowl.Tx) (*agentowl.Endpoint, error) { return tx.EndpointGet(e.ctx, other.ID) })
	equal(t, "deleted endpoint", got, other)

	wantErr(t, "EndpointGet unknown", e.readErr(func(tx agentowl.Tx) error {
		_, err := tx.EndpointGet(e.ctx, "ep_missing")
		return err
	}), agentowl.ErrNotFound)
	wantErr(t, "EndpointUpdate unknown", e.writeErr(func(tx agentowl.Tx) error {
		return tx.EndpointUpdate(e.ctx, newEndpoint(tn.ID, e.now))
	}), agentowl.ErrNotFound)
}

func testEndpointNames(t *testing.T, e *env) {
	tn := e.tenant(t)
	ep := e.endpoint(t, tn.ID)
	dup := newEndpoint(tn.ID, e.now)
	dup.Name = ep.Name
	wantErr(t, "a second live endpoint with the name", e.writeErr(func(tx agentowl.Tx) error { return tx.EndpointCreate(e.ctx, dup) }),
		agentowl.ErrConflict)
	elsewhere := newEndpoint(e.tenant(t).ID, e.now)
	elsewhere.Name = ep.Name
	e.write(t, func(tx agentowl.Tx) error { return tx.EndpointCreate(e.ctx, elsewhere) })

	second := e.endpoint(t, tn.ID)
	second.Name = ep.Name
	wantErr(t, "renaming onto a taken name", e.writeErr(func(tx agentowl.Tx) error { return tx.EndpointUpdate(e.ctx, second) }),
		agentowl.ErrConflict)

	ep.DeletedAt = ptr(e.now)
	e.write(t, func(tx agentowl.Tx) error { return tx.EndpointUpdate(e.ctx, ep) })
	e.write(t, func(tx agentowl.Tx) error { return tx.EndpointCreate(e.ctx, dup) }) // the name is free again
}

// testRuntimeCredentialNewest: the credential a work block names is
// chosen in SQL (RuntimeCredentialNewest, and BindingRoute's column); on
// every case it is the newest credential for which the Go rule holds:
// Active(now) and the scope among its scopes.
func testRuntimeCredentialNewest(t *testing.T, e *env) {
	tn := e.tenant(t)
	ep := e.endpoint(t, tn.ID)
	b := newBinding(ep, e.now)
	e.write(t, func(tx agentowl.Tx) error { return tx.BindingCreate(e.ctx, b) })
	const scope = "callbacks:write"
	at := func(s int) time.Time { return e.now.Add(time.Duration(s) * time.Second) }
	goRule := func(now time.Time) string {
		list := read(t, e, func(tx agentowl.Tx) ([]*agentowl.RuntimeCredential, error) {
			return tx.RuntimeCredentialList(e.ctx, ep.ID)
		})
		for _, c := range slices.Backward(list) {
			if c.Active(now) && slices.Contains(c.Scopes, scope) {
				return c.ID
			}
		}
		return ""
	}
	check := func(what string, now time.Time, want string) {
		t.Helper()
		got := read(t, e, func(tx agentowl.Tx) (string, error) { return tx.RuntimeCredentialNewest(e.ctx, ep.ID, scope, now) })
		route := read(t, e, func(tx agentowl.Tx) (*agentowl.Route, error) { return tx.BindingRoute(e.ctx, b.ID, scope, now, "") })
		if g := goRule(now); got != want || route.Credential != want || g != want {
			t.Fatalf("%s: SQL chose %q, BindingRoute %q, the Go rule %q; want %q", what, got, route.Credential, g, want)
		}
	}
	add := func(c *agentowl.RuntimeCredential) *agentowl.RuntimeCredential {
		e.write(t, func(tx agentowl.Tx) error { return tx.RuntimeCredentialCreate(e.ctx, c) })
		return c
	}
	check("no credential", at(0), "")
	old := add(newRuntimeCredential(ep, at(1)))
	check("the only one", at(2), old.ID)
	newer := add(newRuntimeCredential(ep, at(2)))
	check("the newer of two", at(3), newer.ID)
	// Newer ones that do not qualify are passed over.
	other := newRuntimeCredential(ep, at(3))
	other.Scopes = []string{"decisions:read", "callbacks:write:extra", "xcallbacks:write"}
	add(other)
	wild := newRuntimeCredential(ep, at(4))
	wild.Scopes = []string{"callbacks%write", "callbacks_write"} // look-alikes
	add(wild)
	revoked := add(newRuntimeCredential(ep, at(5)))
	e.write(t, func(tx agentowl.Tx) error { return tx.RuntimeCredentialRevoke(e.ctx, revoked.ID, at(6)) })
	check("scope only as a whole word, revoked ones passed over", at(7), newer.ID)
	short := newRuntimeCredential(ep, at(8))
	short.ExpiresAt = at(20)
	add(short)
	check("the newest, until it expires", at(19), short.ID)
	check("at its expiry, the one before", at(20), newer.ID)
	check("once every one has expired", newer.ExpiresAt, "")
	// Created in the same microsecond: the greater ID is the newer.
	twinA, twinB := newRuntimeCredential(ep, at(30)), newRuntimeCredential(ep, at(30))
	if twinA.ID > twinB.ID {
		twinA, twinB = twinB, twinA
	}
	add(twinB)
	add(twinA)
	check("of two created together, the greater ID", at(31), twinB.ID)
}

func testRuntimeCredentials(t *testing.T, e *env) {
	tn := e.tenant(t)
	ep, ep2 := e.endpoint(t, tn.ID), e.endpoint(t, tn.ID)
	a, b, c := newRuntimeCredential(ep, e.now), newRuntimeCredential(ep, e.now.Add(time.Second)), newRuntimeCredential(ep2, e.now)
	b.Scopes = []string{"callbacks:write"}
	e.write(t, func(tx agentowl.Tx) error {
		for _, v := range []*agentowl.RuntimeCredential{a, b, c} {
			if err := tx.RuntimeCredentialCreate(e.ctx, v); err != nil {
				return err
			}
		}
		return nil
	})
	got := read(t, e, func(tx agentowl.Tx) (*agentowl.RuntimeCredential, error) {
		return tx.RuntimeCredentialGetByHash(e.ctx, a.Hash)
	})
	equal(t, "credential by hash", got, a)
	got = read(t, e, func(tx agentowl.Tx) (*agentowl.RuntimeCredential, error) { return tx.RuntimeCredentialGet(e.ctx, b.ID) })
	equal(t, "credential by ID", got, b)
	list := read(t, e, func(tx agentowl.Tx) ([]*agentowl.RuntimeCredential, error) {
		return tx.RuntimeCredentialList(e.ctx, ep.ID)
	})
	equal(t, "endpoint credentials", list, []*agentowl.RuntimeCredential{a, b})

	dup := newRuntimeCredential(ep, e.now)
	dup.Hash = a.Hash
	wantErr(t, "a second credential with the same hash", e.writeErr(func(tx agentowl.Tx) error {
		return tx.RuntimeCredentialCreate(e.ctx, dup)
	}), agentowl.ErrConflict)

	at := e.now.Add(time.Minute)
	e.write(t, func(tx agentowl.Tx) error { return tx.RuntimeCredentialRevoke(e.ctx, a.ID, at) })
	e.write(t, func(tx agentowl.Tx) error { return tx.RuntimeCredentialRevoke(e.ctx, a.ID, at.Add(time.Hour)) }) // keeps the first time
	got = read(t, e, func(tx agentowl.Tx) (*agentowl.RuntimeCredential, error) { return tx.RuntimeCredentialGet(e.ctx, a.ID) })
	equal(t, "revoked_at", got.RevokedAt, &at)
	if got.Active(at) || !b.Active(at) || b.Active(b.ExpiresAt) {
		t.Fatal("Active must be false once revoked or at expiry")
	}
	wantErr(t, "revoking an unknown credential", e.writeErr(func(tx agentowl.Tx) error {
		return tx.RuntimeCredentialRevoke(e.ctx, "rtc_missing", at)
	}), agentowl.ErrNotFound)

	e.write(t, func(tx agentowl.Tx) error {
		return tx.RuntimeCredentialRevokeByEndpoint(e.ctx, ep.ID, at.Add(time.Hour))
	})
	list = read(t, e, func(tx agentowl.Tx) ([]*agentowl.RuntimeCredential, error) {
		return tx.RuntimeCredentialList(e.ctx, ep.ID)
	})
	equal(t, "a keeps its revocation time", list[0].RevokedAt, &at)
	equal(t, "b revoked with its endpoint", list[1].RevokedAt, ptr(at.Add(time.Hour)))
	got = read(t, e, func(tx agentowl.Tx) (*agentowl.RuntimeCredential, error) { return tx.RuntimeCredentialGet(e.ctx, c.ID) })
	equal(t, "another endpoint's credential is untouched", got.RevokedAt, (*time.Time)(nil))
}

func testBindings(t *testing.T, e *env) {
	tn := e.tenant(t)
	ep := e.endpoint(t, tn.ID)
	a := newBinding(ep, e.now)
	a.SigningSecret, a.HandoffDelay = []byte("sealed-whsec"), 90*time.Second
	e.write(t, func(tx agentowl.Tx) error { return tx.BindingCreate(e.ctx, a) })
	b := newBinding(ep, e.now.Add(time.Second))
	e.write(t, func(tx agentowl.Tx) error { return tx.BindingCreate(e.ctx, b) })
	got := read(t, e, func(tx agentowl.Tx) (*agentowl.Binding, error) { return tx.BindingGet(e.ctx, a.ID) })
	equal(t, "binding", got, a)
	routeWith := func(id, key string) (r *agentowl.Route, err error) {
		err = e.writeErr(func(tx agentowl.Tx) (err error) {
			r, err = tx.BindingRoute(e.ctx, id, "callbacks", e.now, key)
			return err
		})
		return r, err
	}
	route := func(id string) (*agentowl.Route, error) { return routeWith(id, "") }
	r, err := route(a.ID)
	if err != nil {
		t.Fatal(err)
	}
	equal(t, "binding of its route", r.Binding, a)
	equal(t, "endpoint of its route", r.Endpoint, read(t, e, func(tx agentowl.Tx) (*agentowl.Endpoint, error) { return tx.EndpointGet(e.ctx, ep.ID) }))
	equal(t, "credential of a route whose endpoint has none", r.Credential, "")
	if r.Open != nil {
		t.Fatalf("a route asked for no conversation: %+v", r.Open)
	}
	// With a key, the binding's open conversation of that key, as
	// ConversationGetOpenByKey finds it.
	open, ended, other := newConversation(a, "k1", e.now), newConversation(a, "k2", e.now), newConversation(b, "k3", e.now)
	e.write(t, func(tx agentowl.Tx) error {
		return errors.Join(tx.ConversationCreate(e.ctx, open), tx.ConversationCreate(e.ctx, ended), tx.ConversationCreate(e.ctx, other))
	})
	e.write(t, func(tx agentowl.Tx) error { return tx.ConversationEnd(e.ctx, ended.ID, e.now) })
	for _, c := range []struct {
		key  string
		want *agentowl.Conversation
	}{{"k1", open}, {"k2", nil}, {"k3", nil}, {"k9", nil}} {
		r, err := routeWith(a.ID, c.key)
		if err != nil {
			t.Fatal(err)
		}
		byKey := read(t, e, func(tx agentowl.Tx) (*agentowl.Conversation, error) {
			c, err := tx.ConversationGetOpenByKey(e.ctx, a.ID, c.key)
			if errors.Is(err, agentowl.ErrNotFound) {
				return nil, nil
			}
			return c, err
		})
		equal(t, "open conversation of key "+c.key, r.Open, c.want)
		equal(t, "the same as ConversationGetOpenByKey", r.Open, byKey)
	}
	_, err = route("bnd_missing")
	wantErr(t, "route of an unknown binding", err, agentowl.ErrNotFound)
	got = read(t, e, func(tx agentowl.Tx) (*agentowl.Binding, error) { return tx.BindingGetByToken(e.ctx, b.TokenHash) })
	equal(t, "binding by token", got, b)
	list := read(t, e, func(tx agentowl.Tx) ([]*agentowl.Binding, error) { return tx.BindingList(e.ctx, tn.ID) })
	equal(t, "binding list", list, []*agentowl.Binding{a, b})
	n := read(t, e, func(tx agentowl.Tx) (int, error) { return tx.BindingCountByEndpoint(e.ctx, ep.ID) })
	equal(t, "bindings routing to the endpoint", n, 2)

	at := e.now.Add(time.Minute)
	e.write(t, func(tx agentowl.Tx) error { return tx.BindingDelete(e.ctx, a.ID, at) })
	e.write(t, func(tx agentowl.Tx) error { return tx.BindingDelete(e.ctx, a.ID, at.Add(time.Hour)) })
	got = read(t, e, func(tx agentowl.Tx) (*agentowl.Binding, error) { return tx.BindingGet(e.ctx, a.ID) })
	equal(t, "deleted_at", got.DeletedAt, &at)
	if r, err := route(a.ID); err != nil || !reflect.DeepEqual(r.Binding.DeletedAt, &at) {
		t.Fatalf("route of a deleted binding: %v, %v; want it with deleted_at %v", r, err, at)
	}
	wantErr(t, "a deleted binding's token", e.readErr(func(tx agentowl.Tx) error {
		_, err := tx.BindingGetByToken(e.ctx, a.TokenHash)
		return err
	}), agentowl.ErrNotFound)
	n = read(t, e, func(tx agentowl.Tx) (int, error) { return tx.BindingCountByEndpoint(e.ctx, ep.ID) })
	equal(t, "live bindings after a deletion", n, 1)
	list = read(t, e, func(tx agentowl.Tx) ([]*agentowl.Binding, error) { return tx.BindingList(e.ctx, tn.ID) })
	equal(t, "binding list after a deletion", list, []*agentowl.Binding{b})
	wantErr(t, "deleting an unknown binding", e.writeErr(func(tx agentowl.Tx) error {
		return tx.BindingDelete(e.ctx, "bnd_missing", at)
	}), agentowl.ErrNotFound)
	dup := newBinding(ep, e.now)
	dup.TokenHash = b.TokenHash
	wantErr(t, "a second binding with the same token", e.writeErr(func(tx agentowl.Tx) error { return tx.BindingCreate(e.ctx, dup) }),
		agentowl.ErrConflict)
}

func testConversations(t *testing.T, e *env) {
	tn := e.tenant(t)
	ep := e.endpoint(t, tn.ID)
	b1, b2 := e.binding(t, ep), e.binding(t, ep)
	keyed := newConversation(b1, "ticket-7", e.now)
	e.write(t, func(tx agentowl.Tx) error { return tx.ConversationCreate(e.ctx, keyed) })
	got := read(t, e, func(tx agentowl.Tx) (*agentowl.Conversation, error) { return tx.ConversationGet(e.ctx, keyed.ID) })
	equal(t, "conversation", got, keyed)
	got = read(t, e, func(tx agentowl.Tx) (*agentowl.Conversation, error) {
		return tx.ConversationGetOpenByKey(e.ctx, b1.ID, "ticket-7")
	})
	equal(t, "conversation by key", got, keyed)
	wantErr(t, "the key of another binding", e.readErr(func(tx agentowl.Tx) error {
		_, err := tx.ConversationGetOpenByKey(e.ctx, b2.ID, "ticket-7")
		return err
	}), agentowl.ErrNotFound)

	wantErr(t, "a second open conversation with the key", e.writeErr(func(tx agentowl.Tx) error {
		return tx.ConversationCreate(e.ctx, newConversation(b1, "ticket-7", e.now))
	}), agentowl.ErrConflict)
	e.write(t, func(tx agentowl.Tx) error { // the same key on another binding, and keyless ones, are independent
		for _, c := range []*agentowl.Conversation{newConversation(b2, "ticket-7", e.now), newConversation(b1, "", e.now),
			newConversation(b1, "", e.now)} {
			if err := tx.ConversationCreate(e.ctx, c); err != nil {
				return err
			}
		}
		return nil
	})

	later := e.now.Add(time.Hour)
	e.write(t, func(tx agentowl.Tx) error {
		if err := tx.ConversationTouch(e.ctx, keyed.ID, later); err != nil {
			return err
		}
		return tx.ConversationSetSession(e.ctx, keyed.ID, "session-1")
	})
	keyed.LastEventAt, keyed.RuntimeSessionID = later, "session-1"
	got = read(t, e, func(tx agentowl.Tx) (*agentowl.Conversation, error) { return tx.ConversationGet(e.ctx, keyed.ID) })
	equal(t, "conversation after touch and session", got, keyed)
	wantErr(t, "touching an unknown conversation", e.writeErr(func(tx agentowl.Tx) error {
		return tx.ConversationTouch(e.ctx, "conv_missing", later)
	}), agentowl.ErrNotFound)

	// An ended conversation keeps its key but no longer holds it: a new
	// open one may take it.
	ended := later.Add(time.Minute)
	e.write(t, func(tx agentowl.Tx) error { return tx.ConversationEnd(e.ctx, keyed.ID, ended) })
	keyed.Status, keyed.EndedAt = agentowl.ConversationEnded, &ended
	got = read(t, e, func(tx agentowl.Tx) (*agentowl.Conversation, error) { return tx.ConversationGet(e.ctx, keyed.ID) })
	equal(t, "ended conversation", got, keyed)
	wantErr(t, "an ended conversation by key", e.readErr(func(tx agentowl.Tx) error {
		_, err := tx.ConversationGetOpenByKey(e.ctx, b1.ID, "ticket-7")
		return err
	}), agentowl.ErrNotFound)
	wantErr(t, "ending it again", e.writeErr(func(tx agentowl.Tx) error { return tx.ConversationEnd(e.ctx, keyed.ID, ended) }),
		agentowl.ErrConflict)
	wantErr(t, "ending an unknown conversation", e.writeErr(func(tx agentowl.Tx) error {
		return tx.ConversationEnd(e.ctx, "conv_missing", ended)
	}), agentowl.ErrNotFound)
	next := newConversation(b1, "ticket-7", ended)
	e.write(t, func(tx agentowl.Tx) error { return tx.ConversationCreate(e.ctx, next) })
	got = read(t, e, func(tx agentowl.Tx) (*agentowl.Conversation, error) {
		return tx.ConversationGetOpenByKey(e.ctx, b1.ID, "ticket-7")
	})
	equal(t, "the key's next open conversation", got, next)
	// The schema refuses an ended conversation without its end time.
	if err := e.writeErr(func(tx agentowl.Tx) error {
		c := newConversation(b2, "", e.now)
		c.Status = agentowl.ConversationEnded
		return tx.ConversationCreate(e.ctx, c)
	}); err == nil {
		t.Fatal("an ended conversation without its end time was stored")
	}
}

// testBindingChannels checks what each channel's binding holds: an smtp
// binding an address (unique among live bindings) and no token; the
// provider channels a sealed provider secret.
func testBindingChannels(t *testing.T, e *env) {
	tn := e.tenant(t)
	ep := e.endpoint(t, tn.ID)
	mail := newBinding(ep, e.now)
	mail.Channel, mail.TokenHash, mail.Address = "smtp", nil, "support@mail.example.com"
	e.write(t, func(tx agentowl.Tx) error { return tx.BindingCreate(e.ctx, mail) })
	got := read(t, e, func(tx agentowl.Tx) (*agentowl.Binding, error) {
		return tx.BindingGetByAddress(e.ctx, "support@mail.example.com")
	})
	equal(t, "binding by address", got, mail)
	wantErr(t, "an unknown address", e.readErr(func(tx agentowl.Tx) error {
		_, err := tx.BindingGetByAddress(e.ctx, "sales@mail.example.com")
		return err
	}), agentowl.ErrNotFound)
	taken := newBinding(ep, e.now)
	taken.Channel, taken.TokenHash, taken.Address = "smtp", nil, mail.Address
	wantErr(t, "a second live binding with the address", e.writeErr(func(tx agentowl.Tx) error {
		return tx.BindingCreate(e.ctx, taken)
	}), agentowl.ErrConflict)
	e.write(t, func(tx agentowl.Tx) error { return tx.BindingDelete(e.ctx, mail.ID, e.now) })
	wantErr(t, "a deleted binding's address", e.readErr(func(tx agentowl.Tx) error {
		_, err := tx.BindingGetByAddress(e.ctx, mail.Address)
		return err
	}), agentowl.ErrNotFound)
	e.write(t, func(tx agentowl.Tx) error { return tx.BindingCreate(e.ctx, taken) }) // the address is free again
	got = read(t, e, func(tx agentowl.Tx) (*agentowl.Binding, error) { return tx.BindingGetByAddress(e.ctx, mail.Address) })
	equal(t, "the address's new binding", got, taken)

	for _, ch := range []string{"cloudflare-email", "sms", "voice"} {
		b := newBinding(ep, e.now)
		b.Channel, b.ProviderSecret = ch, []byte("sealed\x00provider-"+ch)
		e.write(t, func(tx agentowl.Tx) error { return tx.BindingCreate(e.ctx, b) })
		got := read(t, e, func(tx agentowl.Tx) (*agentowl.Binding, error) { return tx.BindingGetByToken(e.ctx, b.TokenHash) })
		equal(t, ch+" binding", got, b)
	}
	for name, bad := range map[string]func(b *agentowl.Binding){
		"an unknown channel":                       func(b *agentowl.Binding) { b.Channel = "fax" },
		"an smtp binding without an address":       func(b *agentowl.Binding) { b.Channel, b.TokenHash = "smtp", nil },
		"an smtp binding with a token":             func(b *agentowl.Binding) { b.Channel, b.Address = "smtp", "x@example.com" },
		"a webhook binding with an address":        func(b *agentowl.Binding) { b.Address = "y@example.com" },
		"a webhook binding without a token":        func(b *agentowl.Binding) { b.TokenHash = nil },
		"an sms binding without its secret":        func(b *agentowl.Binding) { b.Channel = "sms" },
		"a webhook binding with a provider secret": func(b *agentowl.Binding) { b.ProviderSecret = []byte("s") },
		"a voice binding with a signing secret": func(b *agentowl.Binding) {
			b.Channel, b.ProviderSecret, b.SigningSecret = "voice", []byte("s"), []byte("w")
		},
	} {
		b := newBinding(ep, e.now)
		bad(b)
		if err := e.writeErr(func(tx agentowl.Tx) error { return tx.BindingCreate(e.ctx, b) }); err == nil {
			t.Errorf("the schema took %s", name)
		}
	}
}

func testEvents(t *testing.T, e *env) {
	tn := e.tenant(t)
	ep := e.endpoint(t, tn.ID)
	b := e.binding(t, ep)
	c := newConversation(b, "", e.now)
	ev := newEvent(c, e.now)
	ev.DedupeKey, ev.FollowUp = "msg-1", true
	e.write(t, func(tx agentowl.Tx) error {
		if err := tx.ConversationCreate(e.ctx, c); err != nil {
			return err
		}
		return tx.EventCreate(e.ctx, ev)
	})
	got := read(t, e, func(tx agentowl.Tx) (*agentowl.Event, error) { return tx.EventGet(e.ctx, ev.ID) })
	equal(t, "event (payload bytes kept exactly)", string(got.Payload), string(ev.Payload))
	equal(t, "event", got, ev)
	got = read(t, e, func(tx agentowl.Tx) (*agentowl.Event, error) { return tx.EventGetByDedupeKey(e.ctx, b.ID, "msg-1") })
	equal(t, "event by dedupe key", got.ID, ev.ID)

	dup := newEvent(c, e.now)
	dup.DedupeKey = "msg-1"
	wantErr(t, "a second event with the dedupe key", e.writeErr(func(tx agentowl.Tx) error { return tx.EventCreate(e.ctx, dup) }),
		agentowl.ErrConflict)
	e.write(t, func(tx agentowl.Tx) error { // keyless events never clash
		for range 2 {
			if err := tx.EventCreate(e.ctx, newEvent(c, e.now)); err != nil {
				return err
			}
		}
		return nil
	})
}

func testWorkRoundTrip(t *testing.T, e *env) {
	tn := e.tenant(t)
	ep, _, ev := e.thread(t, tn.ID)
	w := e.work(t, newWork(ep, ev, 1, e.now))
	equal(t, "work after create", e.getWork(t, w.ID), w)

	w.Status, w.Sequence, w.RuntimeSessionID, w.Callbacks = agentowl.WorkNeedsInput, 3, "sess", 2
	w.Requests, w.UpdatedAt = json.RawMessage(`[{"id":"q1","revision":1, "kind":"question"}]`), e.now.Add(time.Minute)
	e.write(t, func(tx agentowl.Tx) error { return tx.WorkUpdate(e.ctx, w) })
	var got *agentowl.Work
	e.write(t, func(tx agentowl.Tx) (err error) {
		got, err = tx.WorkGetForUpdate(e.ctx, w.ID)
		return err
	})
	equal(t, "work after update", got, w)

	w.Status, w.Sequence, w.Requests, w.Callbacks = agentowl.WorkCompleted, 9, nil, 3
	w.ResultSummary, w.ResultURL, w.EndedAt = "Report ready", "https://runtime.example/r/1", ptr(e.now.Add(time.Hour))
	e.write(t, func(tx agentowl.Tx) error { return tx.WorkUpdate(e.ctx, w) })
	equal(t, "completed work", e.getWork(t, w.ID), w)

	f := e.work(t, newWork(ep, ev, 2, e.now))
	f.Status, f.Sequence, f.Error, f.EndedAt = agentowl.WorkFailed, 1, json.RawMessage(`{"code":"boom"}`), ptr(e.now)
	e.write(t, func(tx agentowl.Tx) error { return tx.WorkUpdate(e.ctx, f) })
	equal(t, "failed work", e.getWork(t, f.ID), f)

	wantErr(t, "WorkGet unknown", e.readErr(func(tx agentowl.Tx) error {
		_, err := tx.WorkGet(e.ctx, "work_missing")
		return err
	}), agentowl.ErrNotFound)
	wantErr(t, "WorkUpdate unknown", e.writeErr(func(tx agentowl.Tx) error {
		return tx.WorkUpdate(e.ctx, newWork(ep, ev, 5, e.now))
	}), agentowl.ErrNotFound)
	// The schema refuses a terminal state without an end time.
	bad := *w
	bad.EndedAt = nil
	if err := e.writeErr(func(tx agentowl.Tx) error { return tx.WorkUpdate(e.ctx, &bad) }); err == nil {
		t.Fatal("a completed work without ended_at was accepted")
	}
}

func testWorkList(t *testing.T, e *env) {
	tn := e.tenant(t)
	ep, conv, ev := e.thread(t, tn.ID)
	ep2, conv2, ev2 := e.thread(t, tn.ID)
	a := e.work(t, newWork(ep, ev, 1, e.now))
	b := e.work(t, newWork(ep, ev, 2, e.now.Add(time.Second)))
	c := e.work(t, newWork(ep2, ev2, 1, e.now.Add(2*time.Second)))
	otherEP, _, evOther := e.thread(t, e.tenant(t).ID)
	e.work(t, newWork(otherEP, evOther, 1, e.now))
	b.Status, b.Sequence = agentowl.WorkRunning, 1
	e.write(t, func(tx agentowl.Tx) error { return tx.WorkUpdate(e.ctx, b) })

	list := func(p agentowl.WorkListParams) []string {
		p.TenantID = tn.ID
		return workIDs(read(t, e, func(tx agentowl.Tx) ([]*agentowl.Work, error) { return tx.WorkList(e.ctx, p) }))
	}
	equal(t, "all, newest first", list(agentowl.WorkListParams{}), []string{c.ID, b.ID, a.ID})
	equal(t, "status running", list(agentowl.WorkListParams{Status: agentowl.WorkRunning}), []string{b.ID})
	equal(t, "status pending", list(agentowl.WorkListParams{Status: agentowl.WorkPending}), []string{c.ID, a.ID})
	equal(t, "endpoint", list(agentowl.WorkListParams{EndpointID: ep2.ID}), []string{c.ID})
	equal(t, "conversation", list(agentowl.WorkListParams{ConversationID: conv.ID}), []string{b.ID, a.ID})
	equal(t, "conversation 2", list(agentowl.WorkListParams{ConversationID: conv2.ID}), []string{c.ID})
	equal(t, "limit", list(agentowl.WorkListParams{Limit: 2}), []string{c.ID, b.ID})
	byEvent := read(t, e, func(tx agentowl.Tx) ([]*agentowl.Work, error) { return tx.WorkByEvent(e.ctx, ev.ID) })
	equal(t, "work of an event, oldest first", workIDs(byEvent), []string{a.ID, b.ID})
}

func testWorkGenerations(t *testing.T, e *env) {
	tn := e.tenant(t)
	ep, _, ev := e.thread(t, tn.ID)
	ep2 := e.endpoint(t, tn.ID)
	maxGen := func(endpointID string) int {
		return read(t, e, func(tx agentowl.Tx) (int, error) { return tx.WorkMaxGeneration(e.ctx, ev.ID, endpointID) })
	}
	equal(t, "no work yet", maxGen(ep.ID), 0)
	first := e.work(t, newWork(ep, ev, 1, e.now))
	replay := newWork(ep, ev, 2, e.now)
	replay.ReplayOf = first.ID
	e.work(t, replay)
	equal(t, "replay round trip", e.getWork(t, replay.ID), replay)
	equal(t, "highest generation", maxGen(ep.ID), 2)
	equal(t, "another endpoint's generations", maxGen(ep2.ID), 0)
	wantErr(t, "a generation taken twice", e.writeErr(func(tx agentowl.Tx) error {
		return tx.WorkCreate(e.ctx, newWork(ep, ev, 2, e.now))
	}), agentowl.ErrConflict)
	e.work(t, newWork(ep2, ev, 1, e.now)) // the same event for another endpoint
}

// testWorkUpdateConcurrent checks that WorkGetForUpdate serializes writers:
// concurrent read-modify-write increments lose nothing.
func testWorkUpdateConcurrent(t *testing.T, e *env) {
	tn := e.tenant(t)
	ep, _, ev := e.thread(t, tn.ID)
	w := e.work(t, newWork(ep, ev, 1, e.now))
	const n = 16
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for range n {
		wg.Go(func() {
			errs <- e.s.Write(e.ctx, func(tx agentowl.Tx) error {
				cur, err := tx.WorkGetForUpdate(e.ctx, w.ID)
				if err != nil {
					return err
				}
				cur.Callbacks++
				return tx.WorkUpdate(e.ctx, cur)
			})
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("concurrent update: %v", err)
		}
	}
	equal(t, "callbacks after concurrent increments", e.getWork(t, w.ID).Callbacks, n)
}

func testCallbacks(t *testing.T, e *env) {
	tn := e.tenant(t)
	ep, _, ev := e.thread(t, tn.ID)
	w := e.work(t, newWork(ep, ev, 1, e.now))
	w2 := e.work(t, newWork(ep, ev, 2, e.now))
	mk := func(w *agentowl.Work, id string, seq int64, stale bool) *agentowl.Callback {
		body := []byte(fmt.Sprintf(`{"callback_id":%q,"sequence":%d,"raw":"\u0000"}`, id, seq))
		return &agentowl.Callback{
			WorkID: w.ID, CallbackID: id, Sequence: seq, Status: agentowl.WorkRunning, OccurredAt: "2026-10-06T12:00:00.000Z",
			RuntimeSessionID: "sess", Body: body, BodyHash: hashOf(string(body)), Stale: stale, WorkStatus: agentowl.WorkRunning,
			CredentialID: "rtc_x", RecordedAt: e.now,
		}
	}
	c5, c2, c9 := mk(w, "w:5", 5, false), mk(w, "w:2", 2, true), mk(w, "w:9", 9, false)
	c9.Status, c9.WorkStatus, c9.RuntimeSessionID = agentowl.WorkCompleted, agentowl.WorkCompleted, ""
	for _, c := range []*agentowl.Callback{c5, c2, c9, mk(w2, "w:5", 5, false)} {
		e.write(t, func(tx agentowl.Tx) error { return tx.CallbackCreate(e.ctx, c) })
	}
	got := read(t, e, func(tx agentowl.Tx) (*agentowl.Callback, error) { return tx.CallbackGet(e.ctx, w.ID, "w:2") })
	equal(t, "callback", got, c2)
	got = read(t, e, func(tx agentowl.Tx) (*agentowl.Callback, error) { return tx.CallbackGetBySequence(e.ctx, w.ID, 9) })
	equal(t, "callback by sequence", got, c9)
	wantErr(t, "unknown callback", e.readErr(func(tx agentowl.Tx) error {
		_, err := tx.CallbackGet(e.ctx, w.ID, "w:7")
		return err
	}), agentowl.ErrNotFound)
	// WorkForCallback: the work, both lookups at once (nil for the one not
	// found), and the work's items with those decided marked.
	inc := e.attention(t, newIncident(w, "", e.now))
	dec := e.decided(t, w, "", e.now.Add(time.Second))
	old := e.decided(t, w, "", e.now.Add(-time.Hour)) // its item resolved: read only when its request is named
	var oldItem *agentowl.AttentionItem
	e.write(t, func(tx agentowl.Tx) (err error) {
		if oldItem, err = tx.AttentionGet(e.ctx, old.AttentionID); err != nil {
			return err
		}
		oldItem.Status, oldItem.Resolution = agentowl.AttentionResolved, "outcome"
		return tx.AttentionUpdate(e.ctx, oldItem)
	})
	e.attention(t, newIncident(w2, "", e.now))
	for _, c := range []struct {
		id          string
		seq         int64
		byID, bySeq *agentowl.Callback
	}{
		{"w:2", 9, c2, c9}, {"w:2", 2, c2, c2}, {"w:7", 9, nil, c9}, {"w:2", 7, c2, nil}, {"w:7", 7, nil, nil},
	} {
		var chk *agentowl.CallbackCheck
		if err := e.writeErr(func(tx agentowl.Tx) (err error) {
			chk, err = tx.WorkForCallback(e.ctx, w.ID, c.id, c.seq, nil)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		equal(t, "work read for a callback", chk.Work, e.getWork(t, w.ID))
		if (chk.ByID == nil) != (c.byID == nil) || (chk.BySequence == nil) != (c.bySeq == nil) {
			t.Fatalf("WorkForCallback(%s, %d) = %v, %v", c.id, c.seq, chk.ByID, chk.BySequence)
		}
		if chk.ByID != nil {
			equal(t, "found by ID", chk.ByID, c.byID)
		}
		if chk.BySequence != nil {
			equal(t, "found by sequence", chk.BySequence, c.bySeq)
		}
		ids := []string{}
		for _, it := range chk.Items {
			ids = append(ids, it.ID)
		}
		equal(t, "the work's unresolved items, newest first", ids, []string{dec.AttentionID, inc.ID})
		equal(t, "decided items", chk.Decided, map[string]bool{dec.AttentionID: true})
	}
	var chk *agentowl.CallbackCheck
	e.write(t, func(tx agentowl.Tx) (err error) {
		chk, err = tx.WorkForCallback(e.ctx, w.ID, "w:7", 7, []string{oldItem.RequestID, "r-unknown"})
		return err
	})
	ids := []string{}
	for _, it := range chk.Items {
		ids = append(ids, it.ID)
	}
	equal(t, "with the revisions of a request named", ids, []string{dec.AttentionID, inc.ID, oldItem.ID})
	equal(t, "its resolved item as stored", chk.Items[2], oldItem)
	wantErr(t, "callbacks of unknown work", e.writeErr(func(tx agentowl.Tx) error {
		_, err := tx.WorkForCallback(e.ctx, "work_unknown", "w:2", 9, nil)
		return err
	}), agentowl.ErrNotFound)
	wantErr(t, "a callback ID taken twice", e.writeErr(func(tx agentowl.Tx) error {
		return tx.CallbackCreate(e.ctx, mk(w, "w:5", 6, false))
	}), agentowl.ErrConflict)
	wantErr(t, "a sequence taken twice", e.writeErr(func(tx agentowl.Tx) error {
		return tx.CallbackCreate(e.ctx, mk(w, "w:other", 5, false))
	}), agentowl.ErrConflict)

	list := read(t, e, func(tx agentowl.Tx) ([]*agentowl.Callback, error) { return tx.CallbackList(e.ctx, w.ID, 0) })
	equal(t, "callbacks in the order recorded", list, []*agentowl.Callback{c5, c2, c9})
	list = read(t, e, func(tx agentowl.Tx) ([]*agentowl.Callback, error) { return tx.CallbackList(e.ctx, w.ID, 2) })
	equal(t, "the latest callbacks, in the order recorded", list, []*agentowl.Callback{c2, c9})
}

// testEmailThreads checks the Message-IDs of email conversations, found
// only at their binding and tenant, and conversation participants.
func testEmailThreads(t *testing.T, e *env) {
	tn := e.tenant(t)
	ep := e.endpoint(t, tn.ID)
	b1, b2 := e.binding(t, ep), e.binding(t, ep)
	c1, c2 := newConversation(b1, "", e.now), newConversation(b1, "", e.now)
	ev1, ev2, ev3 := newEvent(c1, e.now), newEvent(c2, e.now), newEvent(c1, e.now)
	e.write(t, func(tx agentowl.Tx) error {
		for _, c := range []*agentowl.Conversation{c1, c2} {
			if err := tx.ConversationCreate(e.ctx, c); err != nil {
				return err
			}
		}
		for _, ev := range []*agentowl.Event{ev1, ev2, ev3} {
			if err := tx.EventCreate(e.ctx, ev); err != nil {
				return err
			}
		}
		for _, m := range []*agentowl.EmailMessage{
			{TenantID: tn.ID, BindingID: b1.ID, MessageID: "a@example.org", ConversationID: c1.ID, EventID: ev1.ID},
			{TenantID: tn.ID, BindingID: b1.ID, MessageID: "b@example.org", ConversationID: c2.ID, EventID: ev2.ID},
			{TenantID: tn.ID, BindingID: b1.ID, MessageID: "c@example.org", ConversationID: c1.ID, EventID: ev3.ID},
		} {
			if err := tx.EmailMessageCreate(e.ctx, m); err != nil {
				return err
			}
		}
		return nil
	})
	convs := func(tenantID, bindingID string, ids ...string) []string {
		t.Helper()
		got := read(t, e, func(tx agentowl.Tx) ([]string, error) { return tx.EmailConversations(e.ctx, tenantID, bindingID, ids) })
		slices.Sort(got)
		return got
	}
	both := []string{c1.ID, c2.ID}
	slices.Sort(both)
	equal(t, "one message", convs(tn.ID, b1.ID, "a@example.org"), []string{c1.ID})
	equal(t, "two messages of one conversation", convs(tn.ID, b1.ID, "a@example.org", "c@example.org", "x@example.org"), []string{c1.ID})
	equal(t, "messages of two conversations", convs(tn.ID, b1.ID, "a@example.org", "b@example.org"), both)
	equal(t, "another binding", len(convs(tn.ID, b2.ID, "a@example.org")), 0)
	equal(t, "another tenant", len(convs("t-other", b1.ID, "a@example.org")), 0)
	equal(t, "no IDs", len(convs(tn.ID, b1.ID)), 0)
	wantErr(t, "a binding's Message-ID twice", e.writeErr(func(tx agentowl.Tx) error {
		return tx.EmailMessageCreate(e.ctx, &agentowl.EmailMessage{TenantID: tn.ID, BindingID: b1.ID, MessageID: "a@example.org",
			ConversationID: c2.ID, EventID: ev2.ID})
	}), agentowl.ErrConflict)

	e.write(t, func(tx agentowl.Tx) error {
		for range 2 { // adding an address twice is no error
			if err := tx.ConversationParticipantAdd(e.ctx, c1.ID, "alice@example.org"); err != nil {
				return err
			}
		}
		return nil
	})
	has := func(c, addr string) bool {
		return read(t, e, func(tx agentowl.Tx) (bool, error) { return tx.ConversationHasParticipant(e.ctx, c, addr) })
	}
	if !has(c1.ID, "alice@example.org") || has(c2.ID, "alice@example.org") || has(c1.ID, "bob@example.org") {
		t.Fatal("participants are not kept per conversation")
	}
}

// testAttentionForDecision: the reads a decision is checked against, each
// answered as its own lookup would answer it, and nothing beyond the item
// for another tenant.
func testAttentionForDecision(t *testing.T, e *env) {
	tn, other := e.tenant(t), e.tenant(t)
	ep, _, ev := e.thread(t, tn.ID)
	w := e.work(t, newWork(ep, ev, 1, e.now))
	msg := newMessage(tn.ID, e.now)
	e.messages(t, msg)
	d := e.decided(t, w, msg.ID, e.now)
	var it *agentowl.AttentionItem
	e.write(t, func(tx agentowl.Tx) (err error) { it, err = tx.AttentionGet(e.ctx, d.AttentionID); return err })
	rev2 := *it
	rev2.ID, rev2.Revision, rev2.Status = wid("att"), 2, agentowl.AttentionOpen
	e.attention(t, &rev2)
	e.attention(t, newIncident(w, "", e.now)) // of the work, not of the request

	check := func(tenantID, attentionID, decisionID string, forUpdate bool) *agentowl.DecisionCheck {
		t.Helper()
		var c *agentowl.DecisionCheck
		e.write(t, func(tx agentowl.Tx) (err error) {
			c, err = tx.AttentionForDecision(e.ctx, tenantID, attentionID, decisionID, forUpdate)
			return err
		})
		return c
	}
	for _, lock := range []bool{false, true} {
		c := check(tn.ID, rev2.ID, d.ID, lock)
		equal(t, "item", c.Item, &rev2)
		equal(t, "work", c.Work, e.getWork(t, w.ID))
		equal(t, "endpoint", c.Endpoint.ID, ep.ID)
		equal(t, "the work's decision of that ID", c.ByID, d)
		if c.Decided != nil || c.Push != nil {
			t.Fatalf("revision 2 has no decision: %+v, %+v", c.Decided, c.Push)
		}
		ids := []string{}
		for _, r := range c.Revisions {
			ids = append(ids, r.ID)
		}
		slices.Sort(ids)
		want := []string{it.ID, rev2.ID}
		slices.Sort(want)
		equal(t, "the request's revisions", ids, want)
	}
	c := check(tn.ID, it.ID, "another", true)
	equal(t, "the item's decision", c.Decided, d)
	equal(t, "its push", c.Push, e.getMessage(t, msg.ID))
	if c.ByID != nil {
		t.Fatalf("no decision %q: %+v", "another", c.ByID)
	}
	// DecisionForReceipt: the work, the decision and its item.
	forReceipt := func(workID, decisionID string) (*agentowl.Work, *agentowl.WorkDecision, *agentowl.AttentionItem, error) {
		var rw *agentowl.Work
		var rd *agentowl.WorkDecision
		var ri *agentowl.AttentionItem
		err := e.writeErr(func(tx agentowl.Tx) (err error) {
			rw, rd, ri, err = tx.DecisionForReceipt(e.ctx, workID, decisionID)
			return err
		})
		return rw, rd, ri, err
	}
	rw, rd, ri, err := forReceipt(w.ID, d.ID)
	if err != nil {
		t.Fatal(err)
	}
	equal(t, "work of a receipt", rw, e.getWork(t, w.ID))
	equal(t, "decision of a receipt", rd, d)
	equal(t, "item of a receipt", ri, it)
	if rw, rd, ri, err = forReceipt(w.ID, "unknown"); err != nil || rw == nil || rd != nil || ri != nil {
		t.Fatalf("receipt of an unknown decision: %v %v %v %v", rw, rd, ri, err)
	}
	_, _, _, err = forReceipt("work_unknown", d.ID)
	wantErr(t, "receipt on unknown work", err, agentowl.ErrNotFound)

	c = check(other.ID, it.ID, d.ID, true)
	if c.Item == nil || c.Work != nil || c.Endpoint != nil || c.ByID != nil || c.Decided != nil || c.Push != nil || c.Revisions != nil {
		t.Fatalf("another tenant's item read beyond the item: %+v", c)
	}
	if c = check(tn.ID, "att_unknown", d.ID, true); c.Item != nil || c.Work != nil {
		t.Fatalf("unknown item: %+v", c)
	}
}

// testWorkBatchReads: a listed page's reads (WorkStatuses,
// WorkDecisionsByAttention) answer for the IDs named, skip unknown ones,
// and take more IDs than one IN list holds.
func testWorkBatchReads(t *testing.T, e *env) {
	tn := e.tenant(t)
	ep, _, ev := e.thread(t, tn.ID)
	a := e.work(t, newWork(ep, ev, 1, e.now))
	b := e.work(t, newWork(ep, ev, 2, e.now))
	b.Status, b.Sequence, b.UpdatedAt = agentowl.WorkRunning, 1, e.now
	e.write(t, func(tx agentowl.Tx) error { return tx.WorkUpdate(e.ctx, b) })
	d := e.decided(t, a, "", e.now)
	open := e.attention(t, newIncident(b, "", e.now))
	ids := []string{a.ID, b.ID, "work_missing"}
	for i := range 600 { // past one IN list
		ids = append(ids, fmt.Sprintf("work_none_%d", i))
	}
	var statuses map[string]agentowl.WorkStatus
	var decisions []*agentowl.WorkDecision
	if err := e.readErr(func(tx agentowl.Tx) (err error) {
		if statuses, err = tx.WorkStatuses(e.ctx, ids); err != nil {
			return err
		}
		decisions, err = tx.WorkDecisionsByAttention(e.ctx, []string{d.AttentionID, open.ID, "att_missing"})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if len(statuses) != 2 || statuses[a.ID] != agentowl.WorkPending || statuses[b.ID] != agentowl.WorkRunning {
		t.Fatalf("WorkStatuses = %v", statuses)
	}
	if len(decisions) != 1 || decisions[0].ID != d.ID || decisions[0].AttentionID != d.AttentionID {
		t.Fatalf("WorkDecisionsByAttention = %+v, want only %s", decisions, d.ID)
	}
}
