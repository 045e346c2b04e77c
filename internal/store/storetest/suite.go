package storetest

import (
	"context"
	"crypto/sha256"
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

// suiteCase is one subtest of a table, run on the fresh E each subtest gets:
// the conformance suite's env (each area's file lists its own, workTests,
// outboxTests, …) or an upgrade's database. An alias, so a table written
// with the literal struct type is one too.
type suiteCase[E any] = struct {
	name string
	run  func(t *testing.T, e E)
}

// runParallel runs each case as a parallel subtest on what fresh makes for it.
func runParallel[E any](t *testing.T, cases []suiteCase[E], fresh func(t *testing.T) E) {
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.run(t, fresh(t))
		})
	}
}

// Exercise runs the conformance suite: every agentowl.Tx method against a fresh,
// empty store from open per subtest. Both backends must pass it unchanged.
func Exercise(t *testing.T, open func(t testing.TB) agentowl.Store) {
	tests := []suiteCase[*env]{
		{"Dialect", testDialect},
		{"Tenants", testTenants},
		{"Operators", testOperators},
		{"Tokens", testTokens},
		{"TokenRevokeByInstance", testTokenRevokeByInstance},
		{"Instances", testInstances},
		{"Idempotency", testIdempotency},
		{"RequestRoundTrip", testRequestRoundTrip},
		{"RequestIdempotencyKey", testRequestIdempotencyKey},
		{"RequestResolve", testRequestResolve},
		{"RequestResolveConcurrent", testRequestResolveConcurrent},
		{"WritesFailTogether", testWritesFailTogether},
		{"RequestGetShared", testRequestGetShared},
		{"RequestList", testRequestList},
		{"RequestPendingIDs", testRequestPendingIDs},
		{"RequestDueForExpiry", testRequestDueForExpiry},
		{"Policies", testPolicies},
		{"Audit", testAudit},
		{"Purge", testPurge},
		{"WriteRollsBack", testWriteRollsBack},
	}
	tests = append(tests, outboxTests...)
	tests = append(tests, workTests...)
	tests = append(tests, attachmentTests...)
	tests = append(tests, opsTests...)
	tests = append(tests, notifyTests...)
	tests = append(tests, conversationTests...)
	tests = append(tests, domainTests...)
	tests = append(tests, attestationTests...)
	tests = append(tests, viewTests...)
	tests = append(tests, consoleViewTests...)
	tests = append(tests, auditChainTests...)
	runParallel(t, tests, func(t *testing.T) *env { return setup(t, open) })
}

// env is the per-test bundle: a fresh store and a microsecond-precision UTC
// "now" that every timestamp of the test derives from.
type env struct {
	s   agentowl.Store
	ctx context.Context
	now time.Time
}

func setup(t *testing.T, open func(t testing.TB) agentowl.Store) *env {
	t.Helper()
	return &env{s: open(t), ctx: t.Context(), now: time.Now().UTC().Truncate(time.Microsecond)}
}

// ---- assertions

// write runs fn in a write transaction and fails the test on error. fn must
// not call t.Fatal: a Write whose fn does not return is never rolled back.
func (e *env) write(t *testing.T, fn func(tx agentowl.Tx) error) {
	t.Helper()
	if err := e.s.Write(e.ctx, fn); err != nil {
		t.Fatalf("write: %v", err)
	}
}

// writeErr runs fn in its own write transaction and returns its error, so
// that an expected failure aborts only that transaction.
func (e *env) writeErr(fn func(tx agentowl.Tx) error) error {
	return e.s.Write(e.ctx, fn)
}

// readErr runs fn in a read transaction and returns its error.
func (e *env) readErr(fn func(tx agentowl.Tx) error) error {
	return e.s.Read(e.ctx, fn)
}

// readPair runs fn in a read transaction and returns its values and error.
func readPair[A, B any](e *env, fn func(tx agentowl.Tx) (A, B, error)) (A, B, error) {
	var a A
	var b B
	err := e.s.Read(e.ctx, func(tx agentowl.Tx) (err error) {
		a, b, err = fn(tx)
		return err
	})
	return a, b, err
}

// read runs fn in a read transaction and returns its value, failing the test
// on error.
func read[T any](t *testing.T, e *env, fn func(tx agentowl.Tx) (T, error)) T {
	t.Helper()
	var v T
	err := e.s.Read(e.ctx, func(tx agentowl.Tx) error {
		var err error
		v, err = fn(tx)
		return err
	})
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	return v
}

func wantErr(t *testing.T, what string, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("%s: got error %v, want %v", what, err, target)
	}
}

func equal(t *testing.T, what string, got, want any) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%s:\n got  %s\n want %s", what, show(got), show(want))
	}
}

// show renders v with pointers followed, which %v does not do below the top.
func show(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("%+v", v)
	}
	return string(b)
}

// mapped is f of each of rs, in order; never nil, so that no records and
// an empty want compare equal.
func mapped[R, V any](rs []R, f func(R) V) []V {
	out := make([]V, 0, len(rs))
	for _, r := range rs {
		out = append(out, f(r))
	}
	return out
}

// ids returns the IDs of requests in order.
func ids(rs []*agentowl.ApprovalRequest) []string {
	return mapped(rs, func(r *agentowl.ApprovalRequest) string { return r.ID })
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	if s == nil {
		s = []string{}
	}
	return s
}

// ---- factories: valid objects with random IDs; callers adjust fields.

func name(prefix string) string { return prefix + "-" + agentowl.NewID("")[:8] }

func hashOf(s string) []byte {
	sum := sha256.Sum256([]byte(s))
	return sum[:]
}

func ptr[T any](v T) *T { return &v }

func newTenant(at time.Time) *agentowl.Tenant {
	return &agentowl.Tenant{ID: agentowl.NewID(""), Name: name("tenant"), CreatedAt: at}
}

func newOperator(tenantID string, at time.Time) *agentowl.Operator {
	return &agentowl.Operator{ID: agentowl.NewID(""), TenantID: tenantID, Name: name("op"), Role: agentowl.RoleMember, CreatedAt: at}
}

func newInstance(tenantID string, at time.Time) *agentowl.Instance {
	return &agentowl.Instance{
		ID: agentowl.NewID(""), TenantID: tenantID, Name: name("agent"), ProvisionerTokenID: agentowl.NewID(""),
		ApprovalValidity: 15 * time.Minute, CreatedAt: at,
	}
}

func newDelivery() *agentowl.Receiver {
	return &agentowl.Receiver{
		Type: agentowl.DeliveryTypeWebhook, URL: "https://hooks.example.com/aap?x=" + agentowl.NewID(""),
		RegistrationID: agentowl.NewID(""), SigningSecret: "whsec_" + agentowl.NewID(""),
	}
}

func newToken(kind agentowl.TokenKind, tenantID string, at time.Time) *agentowl.Token {
	return &agentowl.Token{
		ID: agentowl.NewID(""), Kind: kind, Hash: agentowl.HashToken(agentowl.NewTokenSecret(kind)),
		TenantID: tenantID, Label: name("label"), CreatedAt: at,
	}
}

func newInstanceToken(in *agentowl.Instance, at time.Time) *agentowl.Token {
	tok := newToken(agentowl.TokenInstance, in.TenantID, at)
	tok.InstanceID = in.ID
	return tok
}

// newRequest returns a pending request with every optional field set.
func newRequest(in *agentowl.Instance, created time.Time) *agentowl.ApprovalRequest {
	id := agentowl.NewID("")
	return &agentowl.ApprovalRequest{
		ID: id, TenantID: in.TenantID, InstanceID: in.ID, IdempotencyKey: agentowl.NewID(""), InputHash: hashOf(id),
		Tool: "payments.refund", Arguments: json.RawMessage(`{"amount":4900.0,"b":[1,2]}`), Timeout: "30m",
		AgentReasoning: ptr("customer asked twice"), Context: json.RawMessage(`{"user": "ann",  "n": 1e3}`),
		Status: agentowl.StatusPending, CreatedAt: created, DeadlineAt: created.Add(30 * time.Minute),
	}
}

func denied(at time.Time) *agentowl.Decision {
	return &agentowl.Decision{Status: agentowl.StatusDenied, Note: "not this one", DecidedAt: at, DecidedBy: "operator:ann"}
}

func approved(at time.Time) *agentowl.Decision {
	return &agentowl.Decision{
		Status: agentowl.StatusApproved, Note: "ok", DecidedAt: at, ExpiresAt: at.Add(15 * time.Minute), DecidedBy: "operator:bob",
	}
}

func newIdempotency(at time.Time) *agentowl.Idempotency {
	return &agentowl.Idempotency{
		Owner: agentowl.NewID(""), Operation: "instance.create", Key: agentowl.NewID(""), InputHash: hashOf(agentowl.NewID("")),
		ResourceID: agentowl.NewID(""), Response: []byte(`{"id":"x","secret":"sealed\u0000bytes"}`),
		CreatedAt: at, RetainUntil: at.Add(agentowl.RetentionAfterDecision),
	}
}

func newPolicy(tenantID, instanceID string, priority int, created time.Time) *agentowl.Policy {
	return &agentowl.Policy{
		ID: agentowl.NewID(""), TenantID: tenantID, InstanceID: instanceID, Name: name("rule"), Tool: "payments.refund",
		Condition: `arguments.amount < 5000`, Effect: agentowl.EffectApprove, Note: "small refunds", Priority: priority,
		CreatedAt: created,
	}
}

// ---- creators: persist a factory object in its own transaction.

func (e *env) tenant(t *testing.T) *agentowl.Tenant {
	t.Helper()
	v := newTenant(e.now)
	e.write(t, func(tx agentowl.Tx) error { return tx.TenantCreate(e.ctx, v) })
	return v
}

func (e *env) instance(t *testing.T, tenantID string, at time.Time) *agentowl.Instance {
	t.Helper()
	v := newInstance(tenantID, at)
	e.write(t, func(tx agentowl.Tx) error { return tx.InstanceCreate(e.ctx, v) })
	return v
}

func (e *env) request(t *testing.T, in *agentowl.Instance, created time.Time) *agentowl.ApprovalRequest {
	t.Helper()
	v := newRequest(in, created)
	e.write(t, func(tx agentowl.Tx) error { return tx.RequestCreate(e.ctx, v) })
	return v
}

// resolve records d on r in its own transaction and mirrors it onto r.
func (e *env) resolve(t *testing.T, r *agentowl.ApprovalRequest, d *agentowl.Decision, retainUntil time.Time) {
	t.Helper()
	e.write(t, func(tx agentowl.Tx) error { return tx.RequestResolve(e.ctx, r.ID, d, retainUntil) })
	r.Status, r.Decision = d.Status, d
}

func (e *env) getRequest(t *testing.T, id string) *agentowl.ApprovalRequest {
	t.Helper()
	return read(t, e, func(tx agentowl.Tx) (*agentowl.ApprovalRequest, error) { return tx.RequestGet(e.ctx, id) })
}

// ---- tests

func testDialect(t *testing.T, e *env) {
	if d := e.s.Dialect(); d != "sqlite" && d != "postgres" {
		t.Fatalf("Dialect() = %q, want sqlite or postgres", d)
	}
	if err := e.s.Ping(e.ctx); err != nil {
		t.Fatalf("Ping: %v", err)
	}
}

func testTenants(t *testing.T, e *env) {
	b, a, c := newTenant(e.now), newTenant(e.now.Add(time.Second)), newTenant(e.now.Add(2*time.Second))
	b.Name, a.Name, c.Name = "b-"+b.Name, "a-"+a.Name, "c-"+c.Name
	b.System = true
	e.write(t, func(tx agentowl.Tx) error {
		for _, v := range []*agentowl.Tenant{b, a, c} {
			if err := tx.TenantCreate(e.ctx, v); err != nil {
				return err
			}
		}
		return nil
	})

	sameName := newTenant(e.now)
	sameName.Name = a.Name
	wantErr(t, "create with a taken name", e.writeErr(func(tx agentowl.Tx) error { return tx.TenantCreate(e.ctx, sameName) }), agentowl.ErrConflict)
	sameID := newTenant(e.now)
	sameID.ID = a.ID
	wantErr(t, "create with a taken ID", e.writeErr(func(tx agentowl.Tx) error { return tx.TenantCreate(e.ctx, sameID) }), agentowl.ErrConflict)
	secondSystem := newTenant(e.now)
	secondSystem.System = true
	wantErr(t, "create a second system tenant", e.writeErr(func(tx agentowl.Tx) error { return tx.TenantCreate(e.ctx, secondSystem) }), agentowl.ErrConflict)

	equal(t, "get by name", read(t, e, func(tx agentowl.Tx) (*agentowl.Tenant, error) { return tx.TenantGetByName(e.ctx, a.Name) }), a)
	equal(t, "get by ID", read(t, e, func(tx agentowl.Tx) (*agentowl.Tenant, error) { return tx.TenantGetByID(e.ctx, c.ID) }), c)
	wantErr(t, "get unknown name", e.readErr(func(tx agentowl.Tx) error {
		_, err := tx.TenantGetByName(e.ctx, name("missing"))
		return err
	}), agentowl.ErrNotFound)
	wantErr(t, "get unknown ID", e.readErr(func(tx agentowl.Tx) error {
		_, err := tx.TenantGetByID(e.ctx, agentowl.NewID(""))
		return err
	}), agentowl.ErrNotFound)
	equal(t, "list by name", read(t, e, func(tx agentowl.Tx) ([]*agentowl.Tenant, error) { return tx.TenantList(e.ctx) }),
		[]*agentowl.Tenant{a, b, c})
}

func testOperators(t *testing.T, e *env) {
	tenY, tenX, lonely := e.tenant(t), e.tenant(t), e.tenant(t)
	bob, ann := newOperator(tenY.ID, e.now), newOperator(tenY.ID, e.now.Add(time.Second))
	bob.Name, ann.Name, bob.Role = "b-"+bob.Name, "a-"+ann.Name, agentowl.RoleAdmin
	bobX := newOperator(tenX.ID, e.now) // the same name in another tenant is another operator
	bobX.Name = bob.Name
	e.write(t, func(tx agentowl.Tx) error {
		return errors.Join(tx.OperatorCreate(e.ctx, bob), tx.OperatorCreate(e.ctx, ann), tx.OperatorCreate(e.ctx, bobX))
	})

	dup := newOperator(tenY.ID, e.now)
	dup.Name = ann.Name
	wantErr(t, "create with a name taken in the tenant", e.writeErr(func(tx agentowl.Tx) error { return tx.OperatorCreate(e.ctx, dup) }), agentowl.ErrConflict)
	equal(t, "get by name", read(t, e, func(tx agentowl.Tx) (*agentowl.Operator, error) {
		return tx.OperatorGetByName(e.ctx, tenY.ID, ann.Name)
	}), ann)
	equal(t, "get by name in the other tenant", read(t, e, func(tx agentowl.Tx) (*agentowl.Operator, error) {
		return tx.OperatorGetByName(e.ctx, tenX.ID, bob.Name)
	}), bobX)
	equal(t, "get by ID", read(t, e, func(tx agentowl.Tx) (*agentowl.Operator, error) { return tx.OperatorGetByID(e.ctx, bob.ID) }), bob)
	wantErr(t, "another tenant's operator by name", e.readErr(func(tx agentowl.Tx) error {
		_, err := tx.OperatorGetByName(e.ctx, tenX.ID, ann.Name)
		return err
	}), agentowl.ErrNotFound)
	wantErr(t, "get unknown ID", e.readErr(func(tx agentowl.Tx) error {
		_, err := tx.OperatorGetByID(e.ctx, agentowl.NewID(""))
		return err
	}), agentowl.ErrNotFound)

	e.write(t, func(tx agentowl.Tx) error { return tx.OperatorSetRole(e.ctx, ann.ID, agentowl.RoleAdmin) })
	ann.Role = agentowl.RoleAdmin
	wantErr(t, "set the role of an unknown operator", e.writeErr(func(tx agentowl.Tx) error {
		return tx.OperatorSetRole(e.ctx, agentowl.NewID(""), agentowl.RoleAdmin)
	}), agentowl.ErrNotFound)
	equal(t, "operators of tenant by name", read(t, e, func(tx agentowl.Tx) ([]*agentowl.Operator, error) {
		return tx.OperatorListByTenant(e.ctx, tenY.ID)
	}), []*agentowl.Operator{ann, bob})
	if got := read(t, e, func(tx agentowl.Tx) ([]*agentowl.Operator, error) { return tx.OperatorListByTenant(e.ctx, lonely.ID) }); len(got) != 0 {
		t.Fatalf("operators of a tenant without operators: %s", show(got))
	}
	op, scope, err := readPair(e, func(tx agentowl.Tx) (*agentowl.Operator, *agentowl.Membership, error) {
		return tx.OperatorMembership(e.ctx, bobX.ID)
	})
	if err != nil || *op != *bobX {
		t.Fatalf("scope of an operator: %v %v", err, op)
	}
	equal(t, "scope", scope, &agentowl.Membership{OperatorID: bobX.ID, TenantID: tenX.ID, TenantName: tenX.Name, Role: agentowl.RoleMember})
	wantErr(t, "scope of an unknown operator", e.readErr(func(tx agentowl.Tx) error {
		_, _, err := tx.OperatorMembership(e.ctx, agentowl.NewID(""))
		return err
	}), agentowl.ErrNotFound)

	// An operator token belongs to its operator's tenant, by the schema.
	cross := newToken(agentowl.TokenOperator, tenX.ID, e.now)
	cross.OperatorID = bob.ID
	if err := e.writeErr(func(tx agentowl.Tx) error { return tx.TokenCreate(e.ctx, cross) }); err == nil {
		t.Fatal("a token of one tenant for an operator of another was stored")
	}
}

func testTokens(t *testing.T, e *env) {
	ten, other := e.tenant(t), e.tenant(t)
	op := newOperator(ten.ID, e.now)
	e.write(t, func(tx agentowl.Tx) error { return tx.OperatorCreate(e.ctx, op) })
	i1, i2 := e.instance(t, ten.ID, e.now), e.instance(t, ten.ID, e.now)

	opTok := newToken(agentowl.TokenOperator, ten.ID, e.now)
	opTok.OperatorID, opTok.ExpiresAt = op.ID, ptr(e.now.Add(24*time.Hour))
	prov := newToken(agentowl.TokenProvisioner, ten.ID, e.now.Add(1*time.Second))
	inst1b := newInstanceToken(i1, e.now.Add(3*time.Second)) // created out of order on purpose
	inst1a := newInstanceToken(i1, e.now.Add(2*time.Second))
	inst2 := newInstanceToken(i2, e.now.Add(4*time.Second))
	otherProv := newToken(agentowl.TokenProvisioner, other.ID, e.now)
	all := []*agentowl.Token{opTok, prov, inst1b, inst1a, inst2, otherProv}
	e.write(t, func(tx agentowl.Tx) error {
		for _, v := range all {
			if err := tx.TokenCreate(e.ctx, v); err != nil {
				return err
			}
		}
		return nil
	})

	dupHash := newToken(agentowl.TokenProvisioner, ten.ID, e.now)
	dupHash.Hash = prov.Hash
	wantErr(t, "create with a taken hash", e.writeErr(func(tx agentowl.Tx) error { return tx.TokenCreate(e.ctx, dupHash) }), agentowl.ErrConflict)

	for _, v := range all {
		equal(t, "get by hash", read(t, e, func(tx agentowl.Tx) (*agentowl.Token, error) { return tx.TokenGetByHash(e.ctx, v.Hash) }), v)
		equal(t, "get by ID", read(t, e, func(tx agentowl.Tx) (*agentowl.Token, error) { return tx.TokenGetByID(e.ctx, v.ID) }), v)
	}
	wantErr(t, "get unknown hash", e.readErr(func(tx agentowl.Tx) error {
		_, err := tx.TokenGetByHash(e.ctx, hashOf(agentowl.NewID("")))
		return err
	}), agentowl.ErrNotFound)
	wantErr(t, "get unknown ID", e.readErr(func(tx agentowl.Tx) error {
		_, err := tx.TokenGetByID(e.ctx, agentowl.NewID(""))
		return err
	}), agentowl.ErrNotFound)

	list := func(p agentowl.TokenListParams) []*agentowl.Token {
		t.Helper()
		return read(t, e, func(tx agentowl.Tx) ([]*agentowl.Token, error) { return tx.TokenList(e.ctx, p) })
	}
	equal(t, "list instance tokens", list(agentowl.TokenListParams{TenantID: ten.ID, Kind: agentowl.TokenInstance}),
		[]*agentowl.Token{inst1a, inst1b, inst2})
	equal(t, "list one instance's tokens", list(agentowl.TokenListParams{TenantID: ten.ID, Kind: agentowl.TokenInstance, InstanceID: i1.ID}),
		[]*agentowl.Token{inst1a, inst1b})
	equal(t, "list operator tokens", list(agentowl.TokenListParams{TenantID: ten.ID, Kind: agentowl.TokenOperator, OperatorID: op.ID}),
		[]*agentowl.Token{opTok})
	if got := list(agentowl.TokenListParams{TenantID: ten.ID, Kind: agentowl.TokenOperator, OperatorID: agentowl.NewID("")}); len(got) != 0 {
		t.Fatalf("list tokens of another operator: %s", show(got))
	}
	equal(t, "list provisioner tokens", list(agentowl.TokenListParams{TenantID: ten.ID, Kind: agentowl.TokenProvisioner}),
		[]*agentowl.Token{prov})
	equal(t, "list other tenant's tokens", list(agentowl.TokenListParams{TenantID: other.ID, Kind: agentowl.TokenProvisioner}),
		[]*agentowl.Token{otherProv})

	first, later := e.now.Add(time.Hour), e.now.Add(2*time.Hour)
	e.write(t, func(tx agentowl.Tx) error { return tx.TokenRevoke(e.ctx, prov.ID, first) })
	e.write(t, func(tx agentowl.Tx) error { return tx.TokenRevoke(e.ctx, prov.ID, later) })
	prov.RevokedAt = &first
	equal(t, "revoked twice keeps the first time, found by hash", read(t, e, func(tx agentowl.Tx) (*agentowl.Token, error) {
		return tx.TokenGetByHash(e.ctx, prov.Hash)
	}), prov)
	wantErr(t, "revoke unknown", e.writeErr(func(tx agentowl.Tx) error { return tx.TokenRevoke(e.ctx, agentowl.NewID(""), first) }), agentowl.ErrNotFound)
	equal(t, "others untouched", read(t, e, func(tx agentowl.Tx) (*agentowl.Token, error) { return tx.TokenGetByID(e.ctx, opTok.ID) }), opTok)
}

func testTokenRevokeByInstance(t *testing.T, e *env) {
	ten := e.tenant(t)
	i1, i2 := e.instance(t, ten.ID, e.now), e.instance(t, ten.ID, e.now)
	a, b, c := newInstanceToken(i1, e.now), newInstanceToken(i1, e.now.Add(time.Second)), newInstanceToken(i2, e.now)
	prov := newToken(agentowl.TokenProvisioner, ten.ID, e.now)
	e.write(t, func(tx agentowl.Tx) error {
		return errors.Join(tx.TokenCreate(e.ctx, a), tx.TokenCreate(e.ctx, b), tx.TokenCreate(e.ctx, c), tx.TokenCreate(e.ctx, prov))
	})
	early, late := e.now.Add(time.Minute), e.now.Add(time.Hour)
	e.write(t, func(tx agentowl.Tx) error { return tx.TokenRevoke(e.ctx, a.ID, early) })
	e.write(t, func(tx agentowl.Tx) error { return tx.TokenRevokeByInstance(e.ctx, i1.ID, late) })
	a.RevokedAt, b.RevokedAt = &early, &late
	for _, want := range []*agentowl.Token{a, b, c, prov} {
		equal(t, "token after revoking instance 1", read(t, e, func(tx agentowl.Tx) (*agentowl.Token, error) {
			return tx.TokenGetByID(e.ctx, want.ID)
		}), want)
	}
}

func testInstances(t *testing.T, e *env) {
	ten, other := e.tenant(t), e.tenant(t)
	plain := newInstance(ten.ID, e.now.Add(time.Second))
	withDelivery := newInstance(ten.ID, e.now)
	withDelivery.Receiver = newDelivery()
	foreign := newInstance(other.ID, e.now)
	e.write(t, func(tx agentowl.Tx) error {
		return errors.Join(tx.InstanceCreate(e.ctx, plain), tx.InstanceCreate(e.ctx, withDelivery), tx.InstanceCreate(e.ctx, foreign))
	})
	get := func(id string) *agentowl.Instance {
		t.Helper()
		return read(t, e, func(tx agentowl.Tx) (*agentowl.Instance, error) { return tx.InstanceGet(e.ctx, id) })
	}
	equal(t, "get without delivery", get(plain.ID), plain)
	equal(t, "get with delivery", get(withDelivery.ID), withDelivery)

	var locked *agentowl.Instance
	e.write(t, func(tx agentowl.Tx) error {
		var err error
		locked, err = tx.InstanceGetForUpdate(e.ctx, plain.ID)
		return err
	})
	equal(t, "get for update", locked, plain)
	e.write(t, func(tx agentowl.Tx) error {
		var err error
		locked, err = tx.InstanceGetShared(e.ctx, plain.ID)
		return err
	})
	equal(t, "get shared", locked, plain)
	if e.s.Dialect() == "postgres" { // SQLite has one writer: nothing runs beside a write
		// Shared readers of one instance do not wait for each other.
		holding, release, done := make(chan struct{}), make(chan struct{}), make(chan error, 1)
		var once sync.Once
		go func() {
			done <- e.s.Write(e.ctx, func(tx agentowl.Tx) error {
				if _, err := tx.InstanceGetShared(e.ctx, plain.ID); err != nil {
					return err
				}
				once.Do(func() { close(holding) })
				<-release
				return nil
			})
		}()
		<-holding
		ctx, cancel := context.WithTimeout(e.ctx, 10*time.Second)
		err := e.s.Write(ctx, func(tx agentowl.Tx) error { _, err := tx.InstanceGetShared(ctx, plain.ID); return err })
		cancel()
		close(release)
		if err != nil {
			t.Fatalf("a second shared read of a share-locked instance: %v", err)
		}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}

	plain.Name, plain.ApprovalValidity, plain.Receiver = name("renamed"), 2*time.Hour, newDelivery()
	e.write(t, func(tx agentowl.Tx) error { return tx.InstanceUpdate(e.ctx, plain) })
	equal(t, "delivery set by update", get(plain.ID), plain)
	plain.Receiver = nil
	e.write(t, func(tx agentowl.Tx) error { return tx.InstanceUpdate(e.ctx, plain) })
	equal(t, "delivery cleared by update", get(plain.ID), plain)

	list := func(tenantID string) []*agentowl.Instance {
		t.Helper()
		return read(t, e, func(tx agentowl.Tx) ([]*agentowl.Instance, error) { return tx.InstanceList(e.ctx, tenantID) })
	}
	equal(t, "list oldest first", list(ten.ID), []*agentowl.Instance{withDelivery, plain})
	equal(t, "list other tenant", list(other.ID), []*agentowl.Instance{foreign})

	withDelivery.DeletedAt = ptr(e.now.Add(time.Minute))
	e.write(t, func(tx agentowl.Tx) error { return tx.InstanceUpdate(e.ctx, withDelivery) })
	equal(t, "deleted instance still readable", get(withDelivery.ID), withDelivery)
	equal(t, "list excludes deleted", list(ten.ID), []*agentowl.Instance{plain})

	unknown := newInstance(ten.ID, e.now)
	wantErr(t, "update unknown", e.writeErr(func(tx agentowl.Tx) error { return tx.InstanceUpdate(e.ctx, unknown) }), agentowl.ErrNotFound)
	wantErr(t, "get unknown", e.readErr(func(tx agentowl.Tx) error {
		_, err := tx.InstanceGet(e.ctx, unknown.ID)
		return err
	}), agentowl.ErrNotFound)
	wantErr(t, "get unknown for update", e.writeErr(func(tx agentowl.Tx) error {
		_, err := tx.InstanceGetForUpdate(e.ctx, unknown.ID)
		return err
	}), agentowl.ErrNotFound)
	wantErr(t, "get unknown shared", e.writeErr(func(tx agentowl.Tx) error {
		_, err := tx.InstanceGetShared(e.ctx, unknown.ID)
		return err
	}), agentowl.ErrNotFound)
}

func testIdempotency(t *testing.T, e *env) {
	r := newIdempotency(e.now)
	e.write(t, func(tx agentowl.Tx) error { return tx.IdempotencyCreate(e.ctx, r) })
	get := func(scope, op, key string) *agentowl.Idempotency {
		t.Helper()
		return read(t, e, func(tx agentowl.Tx) (*agentowl.Idempotency, error) { return tx.IdempotencyGet(e.ctx, scope, op, key) })
	}
	equal(t, "get", get(r.Owner, r.Operation, r.Key), r)

	dup := newIdempotency(e.now.Add(time.Second))
	dup.Owner, dup.Operation, dup.Key = r.Owner, r.Operation, r.Key
	wantErr(t, "create duplicate", e.writeErr(func(tx agentowl.Tx) error { return tx.IdempotencyCreate(e.ctx, dup) }), agentowl.ErrConflict)
	equal(t, "duplicate left the original", get(r.Owner, r.Operation, r.Key), r)

	otherOp := newIdempotency(e.now)
	otherOp.Owner, otherOp.Operation, otherOp.Key = r.Owner, "instance.update", r.Key
	otherScope := newIdempotency(e.now)
	otherScope.Key, otherScope.Operation = r.Key, r.Operation
	e.write(t, func(tx agentowl.Tx) error {
		return errors.Join(tx.IdempotencyCreate(e.ctx, otherOp), tx.IdempotencyCreate(e.ctx, otherScope))
	})
	equal(t, "same key, other operation", get(r.Owner, "instance.update", r.Key), otherOp)
	equal(t, "same key, other scope", get(otherScope.Owner, r.Operation, r.Key), otherScope)
	wantErr(t, "get unknown", e.readErr(func(tx agentowl.Tx) error {
		_, err := tx.IdempotencyGet(e.ctx, r.Owner, r.Operation, agentowl.NewID(""))
		return err
	}), agentowl.ErrNotFound)
}

func testRequestRoundTrip(t *testing.T, e *env) {
	ten := e.tenant(t)
	in := e.instance(t, ten.ID, e.now)

	full := newRequest(in, e.now)
	bare := newRequest(in, e.now)
	bare.AgentReasoning, bare.Context = nil, nil
	emptyReasoning := newRequest(in, e.now)
	emptyReasoning.AgentReasoning = ptr("")
	nullContext := newRequest(in, e.now)
	nullContext.Context = json.RawMessage(`null`)
	decidedAtCreation := newRequest(in, e.now)
	decidedAtCreation.Status, decidedAtCreation.Decision = agentowl.StatusApproved, &agentowl.Decision{
		Status: agentowl.StatusApproved, DecidedAt: e.now, ExpiresAt: e.now.Add(time.Hour), DecidedBy: "policy:" + agentowl.NewID(""),
	}
	deniedAtCreation := newRequest(in, e.now)
	deniedAtCreation.Status, deniedAtCreation.Decision = agentowl.StatusDenied, denied(e.now)

	for _, want := range []*agentowl.ApprovalRequest{full, bare, emptyReasoning, nullContext, decidedAtCreation, deniedAtCreation} {
		e.write(t, func(tx agentowl.Tx) error { return tx.RequestCreate(e.ctx, want) })
		got := e.getRequest(t, want.ID)
		equal(t, "request round trip", got, want)
		if string(got.Arguments) != string(want.Arguments) {
			t.Fatalf("arguments bytes: got %q, want %q", got.Arguments, want.Arguments)
		}
		if (got.Context == nil) != (want.Context == nil) || string(got.Context) != string(want.Context) {
			t.Fatalf("context bytes: got %q (nil %v), want %q (nil %v)", got.Context, got.Context == nil, want.Context, want.Context == nil)
		}
		if (got.AgentReasoning == nil) != (want.AgentReasoning == nil) {
			t.Fatalf("agent reasoning presence: got %v, want %v", got.AgentReasoning != nil, want.AgentReasoning != nil)
		}
		if got.CreatedAt.Location() != time.UTC || got.DeadlineAt.Location() != time.UTC {
			t.Fatalf("times not in UTC: %v, %v", got.CreatedAt.Location(), got.DeadlineAt.Location())
		}
	}
	wantErr(t, "get unknown", e.readErr(func(tx agentowl.Tx) error {
		_, err := tx.RequestGet(e.ctx, agentowl.NewID(""))
		return err
	}), agentowl.ErrNotFound)
}

func testRequestIdempotencyKey(t *testing.T, e *env) {
	ten := e.tenant(t)
	i1, i2 := e.instance(t, ten.ID, e.now), e.instance(t, ten.ID, e.now)
	r1 := e.request(t, i1, e.now)

	again := newRequest(i1, e.now)
	again.IdempotencyKey = r1.IdempotencyKey
	wantErr(t, "same key on the same instance", e.writeErr(func(tx agentowl.Tx) error { return tx.RequestCreate(e.ctx, again) }), agentowl.ErrConflict)
	sameID := newRequest(i2, e.now)
	sameID.ID = r1.ID
	wantErr(t, "taken request ID", e.writeErr(func(tx agentowl.Tx) error { return tx.RequestCreate(e.ctx, sameID) }), agentowl.ErrConflict)

	r2 := newRequest(i2, e.now)
	r2.IdempotencyKey = r1.IdempotencyKey
	e.write(t, func(tx agentowl.Tx) error { return tx.RequestCreate(e.ctx, r2) })

	byKey := func(instanceID, key string) *agentowl.ApprovalRequest {
		t.Helper()
		return read(t, e, func(tx agentowl.Tx) (*agentowl.ApprovalRequest, error) {
			return tx.RequestGetByKey(e.ctx, instanceID, key)
		})
	}
	equal(t, "by key on instance 1", byKey(i1.ID, r1.IdempotencyKey), r1)
	equal(t, "by key on instance 2", byKey(i2.ID, r1.IdempotencyKey), r2)
	wantErr(t, "unknown key", e.readErr(func(tx agentowl.Tx) error {
		_, err := tx.RequestGetByKey(e.ctx, i1.ID, agentowl.NewID(""))
		return err
	}), agentowl.ErrNotFound)

	// RequestForCreate answers as the three lookups do.
	forCreate := func(instanceID, key string) *agentowl.CreateCheck {
		t.Helper()
		var c *agentowl.CreateCheck
		e.write(t, func(tx agentowl.Tx) (err error) { c, err = tx.RequestForCreate(e.ctx, instanceID, key); return err })
		return c
	}
	c := forCreate(i2.ID, r1.IdempotencyKey)
	equal(t, "existing request, for a creation", c.Existing, r2)
	equal(t, "instance, for a creation", c.Instance, read(t, e, func(tx agentowl.Tx) (*agentowl.Instance, error) { return tx.InstanceGet(e.ctx, i2.ID) }))
	if c = forCreate(i1.ID, agentowl.NewID("")); c.Existing != nil || c.Instance == nil || c.Instance.ID != i1.ID {
		t.Fatalf("a new key: %+v", c)
	}
	if c = forCreate(agentowl.NewID(""), r1.IdempotencyKey); c.Existing != nil || c.Instance != nil || c.Policies != nil {
		t.Fatalf("an unknown instance: %+v", c)
	}
}

func testRequestResolve(t *testing.T, e *env) {
	ten := e.tenant(t)
	in := e.instance(t, ten.ID, e.now)
	r := e.request(t, in, e.now)

	e.resolve(t, r, denied(e.now.Add(time.Minute)), e.now.Add(time.Minute+agentowl.RetentionAfterDecision))
	equal(t, "denied", e.getRequest(t, r.ID), r)

	wantErr(t, "second resolve", e.writeErr(func(tx agentowl.Tx) error {
		return tx.RequestResolve(e.ctx, r.ID, approved(e.now.Add(2*time.Minute)), e.now.Add(agentowl.RetentionAfterDecision))
	}), agentowl.ErrConflict)
	equal(t, "second resolve changed nothing", e.getRequest(t, r.ID), r)
	wantErr(t, "resolve unknown", e.writeErr(func(tx agentowl.Tx) error {
		return tx.RequestResolve(e.ctx, agentowl.NewID(""), denied(e.now), e.now.Add(agentowl.RetentionAfterDecision))
	}), agentowl.ErrNotFound)

	ok := e.request(t, in, e.now)
	e.resolve(t, ok, approved(e.now.Add(time.Second)), e.now.Add(agentowl.RetentionAfterDecision))
	got := e.getRequest(t, ok.ID)
	equal(t, "approved", got, ok)
	if !got.Decision.ExpiresAt.Equal(e.now.Add(time.Second + 15*time.Minute)) {
		t.Fatalf("approval expires_at = %v", got.Decision.ExpiresAt)
	}

	expired := e.request(t, in, e.now)
	e.resolve(t, expired, &agentowl.Decision{Status: agentowl.StatusExpired, DecidedAt: expired.DeadlineAt, DecidedBy: "deadline"},
		expired.DeadlineAt.Add(agentowl.RetentionAfterDecision))
	equal(t, "expired without note", e.getRequest(t, expired.ID), expired)

	cancelled := e.request(t, in, e.now)
	e.resolve(t, cancelled, &agentowl.Decision{Status: agentowl.StatusCancelled, DecidedAt: e.now.Add(time.Second)},
		e.now.Add(agentowl.RetentionAfterDecision))
	equal(t, "cancelled without note or decider", e.getRequest(t, cancelled.ID), cancelled)
}

// testRequestGetShared: the request and its instance in one read, as
// RequestGet and InstanceGet return them.
func testRequestGetShared(t *testing.T, e *env) {
	ten := e.tenant(t)
	in := e.instance(t, ten.ID, e.now)
	r := e.request(t, in, e.now)
	for _, write := range []bool{false, true} {
		var got *agentowl.ApprovalRequest
		var inst *agentowl.Instance
		fn := func(tx agentowl.Tx) (err error) {
			got, inst, err = tx.RequestGetShared(e.ctx, r.ID)
			return err
		}
		if write {
			e.write(t, fn)
		} else if err := e.readErr(fn); err != nil {
			t.Fatal(err)
		}
		equal(t, "request", got, r)
		equal(t, "instance", inst, read(t, e, func(tx agentowl.Tx) (*agentowl.Instance, error) { return tx.InstanceGet(e.ctx, in.ID) }))
	}
	wantErr(t, "unknown request", e.writeErr(func(tx agentowl.Tx) error {
		_, _, err := tx.RequestGetShared(e.ctx, agentowl.NewID(""))
		return err
	}), agentowl.ErrNotFound)

	// RequestGetSharedRecord: the same, with the request's record of an
	// operation and key as IdempotencyGet finds it.
	rec := &agentowl.Idempotency{Owner: r.ID, Operation: "decide", Key: "d1", InputHash: []byte{1}, ResourceID: "d1",
		Response: []byte("{}"), CreatedAt: e.now, RetainUntil: e.now.Add(time.Hour)}
	e.write(t, func(tx agentowl.Tx) error { return tx.IdempotencyCreate(e.ctx, rec) })
	for _, key := range []string{"d1", "d2"} {
		var got *agentowl.ApprovalRequest
		var gotRec *agentowl.Idempotency
		e.write(t, func(tx agentowl.Tx) (err error) {
			got, _, gotRec, err = tx.RequestGetSharedRecord(e.ctx, r.ID, "decide", key)
			return err
		})
		equal(t, "request with its record", got, r)
		if key == "d1" {
			equal(t, "the record", gotRec, rec)
		} else if gotRec != nil {
			t.Fatalf("no record for %s: %+v", key, gotRec)
		}
	}
	wantErr(t, "unknown request with a record", e.writeErr(func(tx agentowl.Tx) error {
		_, _, _, err := tx.RequestGetSharedRecord(e.ctx, agentowl.NewID(""), "decide", "d1")
		return err
	}), agentowl.ErrNotFound)
}

// testWritesFailTogether: a write whose statement fails leaves nothing of
// its transaction behind, also when the PostgreSQL store held the earlier
// writes back to send them with the COMMIT (sqlstore/pgx.go), and a
// statement after a held-back write sees it.
func testWritesFailTogether(t *testing.T, e *env) {
	ten := e.tenant(t)
	in := e.instance(t, ten.ID, e.now)
	decided := e.request(t, in, e.now)
	e.resolve(t, decided, denied(e.now), e.now.Add(agentowl.RetentionAfterDecision))
	audits := func() int {
		return len(read(t, e, func(tx agentowl.Tx) ([]*agentowl.AuditEntry, error) {
			return tx.AuditList(e.ctx, agentowl.AuditListParams{TenantID: ten.ID, Limit: 100})
		}))
	}
	entry := func() *agentowl.AuditEntry {
		return &agentowl.AuditEntry{TenantID: ten.ID, At: e.now, Actor: "operator:ann", Action: "approval.decide", Target: "x"}
	}
	absent := func(what string, r *agentowl.ApprovalRequest) {
		t.Helper()
		wantErr(t, what, e.readErr(func(tx agentowl.Tx) error { _, err := tx.RequestGet(e.ctx, r.ID); return err }), agentowl.ErrNotFound)
	}

	for _, c := range []struct {
		what string
		fail func(tx agentowl.Tx) error
		want error
	}{
		{"duplicate insert", func(tx agentowl.Tx) error { return tx.RequestCreate(e.ctx, decided) }, agentowl.ErrConflict},
		{"resolve of a decided request", func(tx agentowl.Tx) error {
			return tx.RequestResolve(e.ctx, decided.ID, approved(e.now), e.now)
		}, agentowl.ErrConflict},
		{"resolve of an unknown request", func(tx agentowl.Tx) error {
			return tx.RequestResolve(e.ctx, agentowl.NewID(""), approved(e.now), e.now)
		}, agentowl.ErrNotFound},
		{"update of unknown work", func(tx agentowl.Tx) error {
			return tx.WorkUpdate(e.ctx, &agentowl.Work{ID: agentowl.NewID(""), Status: "accepted"})
		}, agentowl.ErrNotFound},
		{"caller's error", func(agentowl.Tx) error { return errCaller }, errCaller},
	} {
		fresh := newRequest(in, e.now)
		before := audits()
		err := e.writeErr(func(tx agentowl.Tx) error {
			if err := tx.RequestCreate(e.ctx, fresh); err != nil {
				return err
			}
			if err := tx.AuditAppend(e.ctx, entry()); err != nil {
				return err
			}
			if err := c.fail(tx); err != nil {
				return err
			}
			return tx.AuditAppend(e.ctx, entry())
		})
		wantErr(t, c.what, err, c.want)
		absent(c.what+": the request written before", fresh)
		if n := audits(); n != before {
			t.Fatalf("%s: %d audit entries, want %d", c.what, n, before)
		}
	}

	// A read after a held-back write sees it, and an ID read back with the
	// commit is there once Write returns.
	fresh := newRequest(in, e.now)
	a := entry()
	e.write(t, func(tx agentowl.Tx) error {
		if err := tx.RequestCreate(e.ctx, fresh); err != nil {
			return err
		}
		if err := tx.AuditAppend(e.ctx, a); err != nil {
			return err
		}
		got, err := tx.RequestGet(e.ctx, fresh.ID)
		if err != nil {
			return err
		}
		equal(t, "read after the insert", got, fresh)
		return tx.RequestResolve(e.ctx, fresh.ID, denied(e.now), e.now.Add(agentowl.RetentionAfterDecision))
	})
	if a.ID == 0 {
		t.Fatal("audit entry ID not set after the commit")
	}
	if got := e.getRequest(t, fresh.ID); got.Status != agentowl.StatusDenied {
		t.Fatalf("request after insert and resolve in one write: %s", got.Status)
	}
}

var errCaller = errors.New("the caller's own failure")

// atOnce runs f(0) … f(n-1) in n goroutines released together, so that
// they race, and returns each one's error once all have returned.
func atOnce(n int, f func(i int) error) []error {
	errs := make([]error, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			errs[i] = f(i)
		})
	}
	close(start)
	wg.Wait()
	return errs
}

func testRequestResolveConcurrent(t *testing.T, e *env) {
	ten := e.tenant(t)
	in := e.instance(t, ten.ID, e.now)
	r := e.request(t, in, e.now)

	const n = 16
	errs := atOnce(n, func(i int) error {
		d := denied(e.now.Add(time.Second))
		d.DecidedBy = fmt.Sprintf("operator:%d", i)
		return e.s.Write(e.ctx, func(tx agentowl.Tx) error {
			return tx.RequestResolve(e.ctx, r.ID, d, e.now.Add(agentowl.RetentionAfterDecision))
		})
	})

	winner := -1
	for i, err := range errs {
		switch {
		case err == nil && winner >= 0:
			t.Fatalf("resolvers %d and %d both succeeded", winner, i)
		case err == nil:
			winner = i
		case !errors.Is(err, agentowl.ErrConflict):
			t.Fatalf("resolver %d: got %v, want nil or ErrConflict", i, err)
		}
	}
	if winner < 0 {
		t.Fatal("no resolver succeeded")
	}
	if got := e.getRequest(t, r.ID).Decision; got == nil || got.DecidedBy != fmt.Sprintf("operator:%d", winner) {
		t.Fatalf("stored decision %s, want the winner's (operator:%d)", show(got), winner)
	}
}

func testRequestList(t *testing.T, e *env) {
	ten, other := e.tenant(t), e.tenant(t)
	i1, i2, j := e.instance(t, ten.ID, e.now), e.instance(t, ten.ID, e.now), e.instance(t, other.ID, e.now)
	at := func(s int) time.Time { return e.now.Add(time.Duration(s) * time.Second) }
	r1 := e.request(t, i1, at(1))
	r2 := e.request(t, i2, at(2))
	r3 := e.request(t, i1, at(3))
	r4 := e.request(t, i1, at(4))
	r5 := e.request(t, i2, at(5))
	e.request(t, j, at(6))
	e.resolve(t, r3, denied(at(10)), at(10).Add(agentowl.RetentionAfterDecision))
	e.resolve(t, r5, denied(at(11)), at(11).Add(agentowl.RetentionAfterDecision))

	list := func(p agentowl.RequestListParams) []*agentowl.ApprovalRequest {
		t.Helper()
		return read(t, e, func(tx agentowl.Tx) ([]*agentowl.ApprovalRequest, error) { return tx.RequestList(e.ctx, p) })
	}
	for _, c := range []struct {
		what string
		p    agentowl.RequestListParams
		want []*agentowl.ApprovalRequest
	}{
		{"tenant", agentowl.RequestListParams{TenantID: ten.ID, Limit: 10}, []*agentowl.ApprovalRequest{r5, r4, r3, r2, r1}},
		{"instance", agentowl.RequestListParams{TenantID: ten.ID, InstanceID: i1.ID, Limit: 10}, []*agentowl.ApprovalRequest{r4, r3, r1}},
		{"status", agentowl.RequestListParams{TenantID: ten.ID, Status: agentowl.StatusPending, Limit: 10}, []*agentowl.ApprovalRequest{r4, r2, r1}},
		{"instance and status", agentowl.RequestListParams{TenantID: ten.ID, InstanceID: i1.ID, Status: agentowl.StatusDenied, Limit: 10}, []*agentowl.ApprovalRequest{r3}},
		{"limit", agentowl.RequestListParams{TenantID: ten.ID, Limit: 2}, []*agentowl.ApprovalRequest{r5, r4}},
		{"filters and limit", agentowl.RequestListParams{TenantID: ten.ID, InstanceID: i1.ID, Status: agentowl.StatusPending, Limit: 1}, []*agentowl.ApprovalRequest{r4}},
		{"instance of another tenant", agentowl.RequestListParams{TenantID: ten.ID, InstanceID: j.ID, Limit: 10}, nil},
		{"no match", agentowl.RequestListParams{TenantID: ten.ID, Status: agentowl.StatusApproved, Limit: 10}, nil},
	} {
		got := list(c.p)
		equal(t, "list by "+c.what+" (IDs)", ids(got), ids(c.want))
		for i := range got {
			equal(t, "list by "+c.what+" (rows)", got[i], c.want[i])
		}
	}
}

func testRequestPendingIDs(t *testing.T, e *env) {
	ten := e.tenant(t)
	i1, i2 := e.instance(t, ten.ID, e.now), e.instance(t, ten.ID, e.now)
	a, b, done := e.request(t, i1, e.now), e.request(t, i1, e.now.Add(time.Second)), e.request(t, i1, e.now)
	c := e.request(t, i2, e.now)
	e.resolve(t, done, denied(e.now.Add(time.Minute)), e.now.Add(agentowl.RetentionAfterDecision))

	pending := func(instanceID string) []string {
		t.Helper()
		return sorted(read(t, e, func(tx agentowl.Tx) ([]string, error) { return tx.RequestPendingIDs(e.ctx, instanceID) }))
	}
	equal(t, "instance 1", pending(i1.ID), sorted([]string{a.ID, b.ID}))
	equal(t, "instance 2", pending(i2.ID), []string{c.ID})
	equal(t, "unknown instance", pending(agentowl.NewID("")), []string{})
}

func testRequestDueForExpiry(t *testing.T, e *env) {
	ten, other := e.tenant(t), e.tenant(t)
	in, foreign := e.instance(t, ten.ID, e.now), e.instance(t, other.ID, e.now)
	withDeadline := func(in *agentowl.Instance, d time.Duration) *agentowl.ApprovalRequest {
		t.Helper()
		r := newRequest(in, e.now.Add(-time.Hour))
		r.DeadlineAt = e.now.Add(d)
		e.write(t, func(tx agentowl.Tx) error { return tx.RequestCreate(e.ctx, r) })
		return r
	}
	a := withDeadline(in, -3*time.Minute)
	atNow := withDeadline(in, 0)
	b := withDeadline(in, -2*time.Minute)
	f := withDeadline(foreign, -1*time.Minute)
	withDeadline(in, time.Microsecond)
	resolved := withDeadline(in, -5*time.Minute)
	e.resolve(t, resolved, denied(e.now.Add(-10*time.Minute)), e.now.Add(agentowl.RetentionAfterDecision))

	due := func(now time.Time, limit int) []string {
		t.Helper()
		got := read(t, e, func(tx agentowl.Tx) ([]string, error) { return tx.RequestDueForExpiry(e.ctx, now, limit) })
		if got == nil {
			got = []string{}
		}
		return got
	}
	equal(t, "all due, oldest deadline first", due(e.now, 10), []string{a.ID, b.ID, f.ID, atNow.ID})
	equal(t, "limit", due(e.now, 2), []string{a.ID, b.ID})
	equal(t, "earlier now", due(e.now.Add(-150*time.Second), 10), []string{a.ID})
	equal(t, "nothing due yet", due(e.now.Add(-time.Hour), 10), []string{})
}

func testPolicies(t *testing.T, e *env) {
	ten, other := e.tenant(t), e.tenant(t)
	i1, i2 := e.instance(t, ten.ID, e.now), e.instance(t, ten.ID, e.now)
	at := func(s int) time.Time { return e.now.Add(time.Duration(s) * time.Second) }

	tp1 := newPolicy(ten.ID, "", 1, at(0))
	tp1.Condition, tp1.Tool, tp1.Effect, tp1.Note = "", "*", agentowl.EffectDeny, ""
	tp2 := newPolicy(ten.ID, "", 5, at(2))
	tp3 := newPolicy(ten.ID, "", 5, at(1)) // same priority as tp2, older
	ip1 := newPolicy(ten.ID, i1.ID, 10, at(0))
	ip2 := newPolicy(ten.ID, i1.ID, 2, at(0))
	jp := newPolicy(ten.ID, i2.ID, 0, at(0))
	up := newPolicy(other.ID, "", 0, at(0))
	e.write(t, func(tx agentowl.Tx) error {
		for _, p := range []*agentowl.Policy{tp1, tp2, tp3, ip1, ip2, jp, up} {
			if err := tx.PolicyCreate(e.ctx, p); err != nil {
				return err
			}
		}
		return nil
	})

	get := func(id string) *agentowl.Policy {
		t.Helper()
		return read(t, e, func(tx agentowl.Tx) (*agentowl.Policy, error) { return tx.PolicyGet(e.ctx, id) })
	}
	equal(t, "tenant rule", get(tp1.ID), tp1)
	equal(t, "instance rule", get(ip1.ID), ip1)

	list := func(tenantID, instanceID string) []*agentowl.Policy {
		t.Helper()
		return read(t, e, func(tx agentowl.Tx) ([]*agentowl.Policy, error) { return tx.PolicyList(e.ctx, tenantID, instanceID) })
	}
	equal(t, "instance 1 rules then tenant rules", list(ten.ID, i1.ID), []*agentowl.Policy{ip2, ip1, tp1, tp3, tp2})
	equal(t, "instance 2 rules then tenant rules", list(ten.ID, i2.ID), []*agentowl.Policy{jp, tp1, tp3, tp2})
	equal(t, "all of the tenant's rules", list(ten.ID, ""), []*agentowl.Policy{jp, ip2, ip1, tp1, tp3, tp2})
	equal(t, "other tenant", list(other.ID, ""), []*agentowl.Policy{up})
	// A creation reads its instance's rules by the same rule.
	for _, in := range []*agentowl.Instance{i1, i2} {
		var c *agentowl.CreateCheck
		e.write(t, func(tx agentowl.Tx) (err error) { c, err = tx.RequestForCreate(e.ctx, in.ID, "k"); return err })
		equal(t, "rules read for a creation", c.Policies, list(ten.ID, in.ID))
	}

	e.write(t, func(tx agentowl.Tx) error { return tx.PolicyDelete(e.ctx, tp1.ID) })
	wantErr(t, "get deleted", e.readErr(func(tx agentowl.Tx) error {
		_, err := tx.PolicyGet(e.ctx, tp1.ID)
		return err
	}), agentowl.ErrNotFound)
	wantErr(t, "delete again", e.writeErr(func(tx agentowl.Tx) error { return tx.PolicyDelete(e.ctx, tp1.ID) }), agentowl.ErrNotFound)
	equal(t, "list after delete", list(ten.ID, i1.ID), []*agentowl.Policy{ip2, ip1, tp3, tp2})
}

func testAudit(t *testing.T, e *env) {
	ten, other := e.tenant(t), e.tenant(t)
	entry := func(tenantID string, s int) *agentowl.AuditEntry {
		return &agentowl.AuditEntry{
			TenantID: tenantID, At: e.now.Add(time.Duration(s) * time.Second), Actor: "operator:ann", Action: "policy.create",
			Target: agentowl.NewID(""), RequestID: agentowl.NewID(""),
			Details: map[string]any{"amount": 4900.5, "name": "refunds", "nested": map[string]any{"ok": true}, "list": []any{1.0, "two"}},
		}
	}
	e1, e2, u1, e3 := entry(ten.ID, 0), entry(ten.ID, 1), entry(other.ID, 0), entry(ten.ID, 2)
	for _, v := range []*agentowl.AuditEntry{e1, e2, u1, e3} {
		e.write(t, func(tx agentowl.Tx) error { return tx.AuditAppend(e.ctx, v) })
	}
	if !(0 < e1.ID && e1.ID < e2.ID && e2.ID < u1.ID && u1.ID < e3.ID) {
		t.Fatalf("IDs not increasing: %d %d %d %d", e1.ID, e2.ID, u1.ID, e3.ID)
	}
	list := func(tenantID string, limit int) []*agentowl.AuditEntry {
		t.Helper()
		return read(t, e, func(tx agentowl.Tx) ([]*agentowl.AuditEntry, error) {
			return tx.AuditList(e.ctx, agentowl.AuditListParams{TenantID: tenantID, Limit: limit})
		})
	}
	equal(t, "newest first", list(ten.ID, 10), []*agentowl.AuditEntry{e3, e2, e1})
	equal(t, "limit", list(ten.ID, 2), []*agentowl.AuditEntry{e3, e2})
	equal(t, "other tenant", list(other.ID, 10), []*agentowl.AuditEntry{u1})

	bare := entry(other.ID, 3)
	bare.Details = nil
	e.write(t, func(tx agentowl.Tx) error { return tx.AuditAppend(e.ctx, bare) })
	if got := list(other.ID, 1); len(got) != 1 || got[0].ID != bare.ID || len(got[0].Details) != 0 {
		t.Fatalf("entry without details: %s", show(got))
	}
}

func testPurge(t *testing.T, e *env) {
	now := e.now
	ago := func(d time.Duration) time.Time { return now.Add(-d) }
	const day = 24 * time.Hour
	ten := e.tenant(t)
	live := e.instance(t, ten.ID, ago(30*day))

	// Requests: terminal ones go once retain_until is reached; pending stay.
	gonePast, goneAtNow, kept, pending := e.request(t, live, ago(9*day)), e.request(t, live, ago(9*day)),
		e.request(t, live, ago(9*day)), e.request(t, live, ago(9*day))
	e.resolve(t, gonePast, denied(ago(8*day)), ago(time.Second))
	e.resolve(t, goneAtNow, denied(ago(7*day)), now)
	e.resolve(t, kept, denied(ago(day)), now.Add(time.Hour))
	decidedOld, decidedRecent := newRequest(live, ago(9*day)), newRequest(live, ago(6*day))
	decidedOld.Status, decidedOld.Decision = agentowl.StatusDenied, denied(ago(8*day))
	decidedRecent.Status, decidedRecent.Decision = agentowl.StatusDenied, denied(ago(6*day))
	e.write(t, func(tx agentowl.Tx) error {
		return errors.Join(tx.RequestCreate(e.ctx, decidedOld), tx.RequestCreate(e.ctx, decidedRecent))
	})

	// Idempotency keys go once retain_until is reached.
	keyPast, keyAtNow, keyKept := newIdempotency(ago(8*day)), newIdempotency(ago(8*day)), newIdempotency(ago(day))
	keyPast.RetainUntil, keyAtNow.RetainUntil, keyKept.RetainUntil = ago(time.Second), now, now.Add(time.Second)
	e.write(t, func(tx agentowl.Tx) error {
		return errors.Join(tx.IdempotencyCreate(e.ctx, keyPast), tx.IdempotencyCreate(e.ctx, keyAtNow), tx.IdempotencyCreate(e.ctx, keyKept))
	})

	// Deleted instances go after seven days once nothing refers to them.
	deleted := func(d time.Duration) *agentowl.Instance {
		t.Helper()
		in := newInstance(ten.ID, ago(30*day))
		in.DeletedAt = ptr(ago(d))
		e.write(t, func(tx agentowl.Tx) error { return tx.InstanceCreate(e.ctx, in) })
		return in
	}
	bare := deleted(8 * day)
	bareRule := newPolicy(ten.ID, bare.ID, 0, ago(30*day))
	revoked := deleted(8 * day)
	revokedTok := newInstanceToken(revoked, ago(30*day))
	withOldRequest := deleted(8 * day)
	oldRequest := e.request(t, withOldRequest, ago(9*day))
	e.resolve(t, oldRequest, &agentowl.Decision{Status: agentowl.StatusCancelled, DecidedAt: ago(8 * day), DecidedBy: "instance-deleted"}, ago(day))
	withRequest := deleted(8 * day)
	heldRequest := e.request(t, withRequest, ago(9*day))
	e.resolve(t, heldRequest, &agentowl.Decision{Status: agentowl.StatusCancelled, DecidedAt: ago(day), DecidedBy: "instance-deleted"}, now.Add(time.Hour))
	recent := deleted(day)
	recentRule := newPolicy(ten.ID, recent.ID, 0, ago(30*day))
	activeTok := deleted(8 * day)
	unrevokedTok := newInstanceToken(activeTok, ago(30*day))
	recentRevoke := deleted(8 * day)
	recentRevokeTok := newInstanceToken(recentRevoke, ago(30*day))
	liveTok := newInstanceToken(live, ago(30*day))
	provTok := newToken(agentowl.TokenProvisioner, ten.ID, ago(30*day))
	e.write(t, func(tx agentowl.Tx) error {
		return errors.Join(tx.PolicyCreate(e.ctx, bareRule), tx.PolicyCreate(e.ctx, recentRule),
			tx.TokenCreate(e.ctx, revokedTok), tx.TokenCreate(e.ctx, unrevokedTok), tx.TokenCreate(e.ctx, recentRevokeTok),
			tx.TokenCreate(e.ctx, liveTok), tx.TokenCreate(e.ctx, provTok))
	})
	e.write(t, func(tx agentowl.Tx) error {
		return errors.Join(tx.TokenRevokeByInstance(e.ctx, revoked.ID, ago(8*day)),
			tx.TokenRevokeByInstance(e.ctx, recentRevoke.ID, ago(day)),
			tx.TokenRevokeByInstance(e.ctx, live.ID, ago(20*day)), tx.TokenRevoke(e.ctx, provTok.ID, ago(20*day)))
	})

	n := e.purge(t, now)
	// 4 requests, 2 keys, 1 token, 1 policy, 3 instances.
	if n != 11 {
		t.Fatalf("Purge reported %d rows, want 11", n)
	}

	check := func(what string, gone bool, fn func(tx agentowl.Tx) error) {
		t.Helper()
		err := e.readErr(fn)
		switch {
		case gone && !errors.Is(err, agentowl.ErrNotFound):
			t.Fatalf("%s: want purged, got %v", what, err)
		case !gone && err != nil:
			t.Fatalf("%s: want kept, got %v", what, err)
		}
	}
	requestGone := func(what string, gone bool, r *agentowl.ApprovalRequest) {
		t.Helper()
		check("request "+what, gone, func(tx agentowl.Tx) error { _, err := tx.RequestGet(e.ctx, r.ID); return err })
	}
	keyGone := func(what string, gone bool, k *agentowl.Idempotency) {
		t.Helper()
		check("key "+what, gone, func(tx agentowl.Tx) error {
			_, err := tx.IdempotencyGet(e.ctx, k.Owner, k.Operation, k.Key)
			return err
		})
	}
	instanceGone := func(what string, gone bool, in *agentowl.Instance) {
		t.Helper()
		check("instance "+what, gone, func(tx agentowl.Tx) error { _, err := tx.InstanceGet(e.ctx, in.ID); return err })
	}
	tokenGone := func(what string, gone bool, k *agentowl.Token) {
		t.Helper()
		check("token "+what, gone, func(tx agentowl.Tx) error { _, err := tx.TokenGetByID(e.ctx, k.ID); return err })
	}
	policyGone := func(what string, gone bool, p *agentowl.Policy) {
		t.Helper()
		check("policy "+what, gone, func(tx agentowl.Tx) error { _, err := tx.PolicyGet(e.ctx, p.ID); return err })
	}
	requestGone("retained until the past", true, gonePast)
	requestGone("retained until now", true, goneAtNow)
	requestGone("retained until later", false, kept)
	requestGone("pending", false, pending)
	requestGone("decided at creation long ago", true, decidedOld)
	requestGone("decided at creation recently", false, decidedRecent)
	requestGone("of a deleted instance, retained until the past", true, oldRequest)
	requestGone("of a deleted instance, retained until later", false, heldRequest)
	keyGone("retained until the past", true, keyPast)
	keyGone("retained until now", true, keyAtNow)
	keyGone("retained until later", false, keyKept)
	instanceGone("live", false, live)
	instanceGone("deleted long ago, unreferenced", true, bare)
	policyGone("of an instance deleted long ago", true, bareRule)
	instanceGone("deleted long ago, token revoked long ago", true, revoked)
	tokenGone("revoked long ago, of an instance deleted long ago", true, revokedTok)
	instanceGone("deleted long ago, its request purged now", true, withOldRequest)
	instanceGone("deleted long ago, request retained", false, withRequest)
	instanceGone("deleted recently", false, recent)
	policyGone("of an instance deleted recently", false, recentRule)
	instanceGone("deleted long ago, token not revoked", false, activeTok)
	tokenGone("not revoked, of a deleted instance", false, unrevokedTok)
	instanceGone("deleted long ago, token revoked recently", false, recentRevoke)
	tokenGone("revoked recently, of an instance deleted long ago", false, recentRevokeTok)
	tokenGone("revoked long ago, of a live instance", false, liveTok)
	tokenGone("provisioner revoked long ago", false, provTok)

	if n := e.purge(t, now); n != 0 {
		t.Fatalf("second Purge at the same time reported %d rows, want 0", n)
	}
}

func testWriteRollsBack(t *testing.T, e *env) {
	ten := e.tenant(t)
	in := e.instance(t, ten.ID, e.now)
	pending := e.request(t, in, e.now)
	tok := newInstanceToken(in, e.now)
	e.write(t, func(tx agentowl.Tx) error { return tx.TokenCreate(e.ctx, tok) })

	newTen := newTenant(e.now)
	newIn := newInstance(newTen.ID, e.now)
	newReq := newRequest(newIn, e.now)
	newKey := newIdempotency(e.now)
	newRule := newPolicy(newTen.ID, "", 0, e.now)
	newTok := newToken(agentowl.TokenProvisioner, newTen.ID, e.now)
	op := newOperator(ten.ID, e.now)
	boom := errors.New("boom")
	err := e.writeErr(func(tx agentowl.Tx) error {
		for _, step := range []func() error{
			func() error { return tx.TenantCreate(e.ctx, newTen) },
			func() error { return tx.OperatorCreate(e.ctx, op) },
			func() error { return tx.InstanceCreate(e.ctx, newIn) },
			func() error { return tx.RequestCreate(e.ctx, newReq) },
			func() error { return tx.IdempotencyCreate(e.ctx, newKey) },
			func() error { return tx.PolicyCreate(e.ctx, newRule) },
			func() error { return tx.TokenCreate(e.ctx, newTok) },
			func() error {
				return tx.AuditAppend(e.ctx, &agentowl.AuditEntry{TenantID: ten.ID, At: e.now, Actor: "a", Action: "b", Target: "c"})
			},
			func() error {
				return tx.RequestResolve(e.ctx, pending.ID, denied(e.now), e.now.Add(agentowl.RetentionAfterDecision))
			},
			func() error { return tx.TokenRevoke(e.ctx, tok.ID, e.now) },
			func() error {
				in2 := *in
				in2.Name = "changed"
				return tx.InstanceUpdate(e.ctx, &in2)
			},
		} {
			if err := step(); err != nil {
				return fmt.Errorf("step failed before the deliberate error: %w", err)
			}
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("Write returned %v, want the fn's error", err)
	}

	notFound := func(what string, fn func(tx agentowl.Tx) error) {
		t.Helper()
		wantErr(t, what+" after rollback", e.readErr(fn), agentowl.ErrNotFound)
	}
	notFound("tenant", func(tx agentowl.Tx) error { _, err := tx.TenantGetByID(e.ctx, newTen.ID); return err })
	notFound("operator", func(tx agentowl.Tx) error { _, err := tx.OperatorGetByID(e.ctx, op.ID); return err })
	notFound("instance", func(tx agentowl.Tx) error { _, err := tx.InstanceGet(e.ctx, newIn.ID); return err })
	notFound("request", func(tx agentowl.Tx) error { _, err := tx.RequestGet(e.ctx, newReq.ID); return err })
	notFound("idempotency key", func(tx agentowl.Tx) error {
		_, err := tx.IdempotencyGet(e.ctx, newKey.Owner, newKey.Operation, newKey.Key)
		return err
	})
	notFound("policy", func(tx agentowl.Tx) error { _, err := tx.PolicyGet(e.ctx, newRule.ID); return err })
	notFound("token", func(tx agentowl.Tx) error { _, err := tx.TokenGetByID(e.ctx, newTok.ID); return err })

	equal(t, "tenants after rollback", read(t, e, func(tx agentowl.Tx) ([]*agentowl.Tenant, error) { return tx.TenantList(e.ctx) }),
		[]*agentowl.Tenant{ten})
	if got := read(t, e, func(tx agentowl.Tx) ([]*agentowl.Operator, error) { return tx.OperatorListByTenant(e.ctx, ten.ID) }); len(got) != 0 {
		t.Fatalf("operator survived rollback: %s", show(got))
	}
	if got := read(t, e, func(tx agentowl.Tx) ([]*agentowl.AuditEntry, error) {
		return tx.AuditList(e.ctx, agentowl.AuditListParams{TenantID: ten.ID, Limit: 10})
	}); len(got) != 0 {
		t.Fatalf("audit entry survived rollback: %s", show(got))
	}
	equal(t, "request after rollback", e.getRequest(t, pending.ID), pending)
	equal(t, "token after rollback", read(t, e, func(tx agentowl.Tx) (*agentowl.Token, error) { return tx.TokenGetByID(e.ctx, tok.ID) }), tok)
	equal(t, "instance after rollback", read(t, e, func(tx agentowl.Tx) (*agentowl.Instance, error) { return tx.InstanceGet(e.ctx, in.ID) }), in)
}
