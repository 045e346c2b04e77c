package storetest

import (
	"context"
	"database/sql"
	"errors"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pressly/goose/v3"

	"github.com/agentowl/agentowl"
	"github.com/agentowl/agentowl/internal/secret/secrettest"
	"github.com/agentowl/agentowl/internal/store/postgres"
	"github.com/agentowl/agentowl/internal/store/sqlite"
)

// Upgrades runs the upgrade tests on backend b: each migrates an empty
// database to an earlier version, writes that version's data past the
// store, then opens the store, which applies the remaining migrations, and
// checks what they made of the data.
func Upgrades(t *testing.T, b Backend) {
	runParallel(t, []suiteCase[upgradeDB]{
		{"Identity", identityUpgrade},
		{"Channels", channelsUpgrade},
		{"MailDomains", mailDomainsUpgrade},
		{"AuditChain", auditChainUpgrade},
	}, func(t *testing.T) upgradeDB { return newUpgradeDB(t, b) })
}

// upgradeDB is an upgrade test's database: empty, open past the store (db)
// and at url, with the migrations of its dialect.
type upgradeDB struct {
	dialect    goose.Dialect
	migrations fs.FS
	db         *sql.DB
	url        string
}

func newUpgradeDB(t *testing.T, b Backend) upgradeDB {
	t.Helper()
	u := upgradeDB{dialect: goose.DialectSQLite3, migrations: sqlite.Migrations(), url: filepath.Join(t.TempDir(), "agentowl.db")}
	driver, dsn := "sqlite", "file:"+u.url+"?_pragma=foreign_keys(1)"
	if b.Name == "postgres" {
		u.dialect, u.migrations, u.url = goose.DialectPostgres, postgres.Migrations(), FreshPostgresURL(t)
		driver, dsn = "pgx", u.url
	}
	db, err := sql.Open(driver, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	u.db = db
	return u
}

// open opens the store on the upgrade's database, which applies the
// remaining migrations; it is closed at test end.
func (u upgradeDB) open(t *testing.T) agentowl.Store {
	t.Helper()
	return OpenURL(t, u.url, secrettest.NewBox(t))
}

// migrateTo applies the store's migrations up to version on u's database:
// the database as a release of that version left it, for an upgrade test to
// fill with that version's data.
func migrateTo(t *testing.T, u upgradeDB, version int64) context.Context {
	t.Helper()
	p, err := goose.NewProvider(u.dialect, u.db, u.migrations)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.UpTo(t.Context(), version); err != nil {
		t.Fatalf("migrate to %d: %v", version, err)
	}
	return context.Background()
}

// writeOldData fills a database of an earlier version with stmts, then
// closes it for the store to open (and migrate).
func writeOldData(t *testing.T, ctx context.Context, db *sql.DB, stmts []string) {
	t.Helper()
	for _, q := range stmts {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatalf("old data: %v\n%s", err, q)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}

// identityUpgrade checks migration 00010 (operators per tenant) on data of
// the old model.
//
// The old data holds the black-box test's takeover: "admin" is admin of
// default and acme, and a member of evil with a token minted there.
func identityUpgrade(t *testing.T, u upgradeDB) {
	t.Helper()
	ctx := migrateTo(t, u, 9)
	writeOldData(t, ctx, u.db, []string{
		// acme was bootstrapped first; a tenant admin created "default" later.
		`INSERT INTO tenants (id, name, created_at) VALUES ('t-acme', 'acme', 1), ('t-def', 'default', 2), ('t-evil', 'evil', 3)`,
		`INSERT INTO operators (id, name, created_at) VALUES ('op-admin', 'admin', 1), ('op-mia', 'mia', 2), ('op-lonely', 'lonely', 3)`,
		`INSERT INTO memberships (operator_id, tenant_id, role) VALUES
			('op-admin', 't-def', 'admin'), ('op-admin', 't-acme', 'admin'), ('op-admin', 't-evil', 'member'), ('op-mia', 't-acme', 'member')`,
		`INSERT INTO tokens (id, kind, hash, tenant_id, operator_id, label, created_at) VALUES
			('tok-def', 'operator', 'h1', 't-def', 'op-admin', '', 1),
			('tok-evil', 'operator', 'h2', 't-evil', 'op-admin', '', 2),
			('tok-mia', 'operator', 'h3', 't-acme', 'op-mia', '', 3),
			('tok-lonely', 'operator', 'h4', 't-def', 'op-lonely', '', 4),
			('tok-cross', 'operator', 'h5', 't-def', 'op-mia', '', 5)`,
		`INSERT INTO tokens (id, kind, hash, tenant_id, label, created_at) VALUES ('tok-prov', 'provisioner', 'h6', 't-def', '', 6)`,
	})

	s := u.open(t)
	e := &env{s: s, ctx: ctx}
	scope := func(tokenID string) *agentowl.Membership {
		t.Helper()
		var m *agentowl.Membership
		err := s.Read(ctx, func(tx agentowl.Tx) error {
			tok, err := tx.TokenGetByID(ctx, tokenID)
			if err != nil {
				return err
			}
			if _, m, err = tx.OperatorMembership(ctx, tok.OperatorID); err == nil && m.TenantID != tok.TenantID {
				t.Errorf("token %s of tenant %s acts in %s", tokenID, tok.TenantID, m.TenantID)
			}
			return err
		})
		if err != nil {
			t.Fatalf("scope of %s: %v", tokenID, err)
		}
		return m
	}
	for tok, want := range map[string]agentowl.Membership{
		"tok-def":  {TenantID: "t-def", TenantName: "default", Role: agentowl.RoleAdmin},
		"tok-evil": {TenantID: "t-evil", TenantName: "evil", Role: agentowl.RoleMember},
		"tok-mia":  {TenantID: "t-acme", TenantName: "acme", Role: agentowl.RoleMember},
	} {
		got := scope(tok)
		want.OperatorID = got.OperatorID
		equal(t, "scope of "+tok, *got, want)
	}
	// The operator keeps its ID in its first tenant (smallest tenant ID,
	// t-acme).
	if got := scope("tok-def").OperatorID; got == "op-admin" || got == scope("tok-evil").OperatorID {
		t.Errorf("default's admin has ID %q", got)
	}
	admins := read(t, e, func(tx agentowl.Tx) ([]*agentowl.Operator, error) { return tx.OperatorListByTenant(ctx, "t-acme") })
	if len(admins) != 2 || admins[0].ID != "op-admin" || admins[0].Role != agentowl.RoleAdmin || admins[1].ID != "op-mia" {
		t.Errorf("acme's operators: %s", show(admins))
	}
	// Tokens whose operator had no role in the issuing tenant are gone;
	// the operator without memberships too.
	for _, id := range []string{"tok-lonely", "tok-cross"} {
		if err := e.readErr(func(tx agentowl.Tx) error { _, err := tx.TokenGetByID(ctx, id); return err }); !errors.Is(err, agentowl.ErrNotFound) {
			t.Errorf("token %s after the upgrade: %v", id, err)
		}
	}
	if err := e.readErr(func(tx agentowl.Tx) error { _, err := tx.OperatorGetByID(ctx, "op-lonely"); return err }); !errors.Is(err, agentowl.ErrNotFound) {
		t.Errorf("operator without memberships after the upgrade: %v", err)
	}
	if got := read(t, e, func(tx agentowl.Tx) (*agentowl.Token, error) { return tx.TokenGetByID(ctx, "tok-prov") }); got.Kind != agentowl.TokenProvisioner {
		t.Errorf("provisioner token after the upgrade: %+v", got)
	}
	// The system tenant is the first one created, whatever its name.
	for _, tn := range read(t, e, func(tx agentowl.Tx) ([]*agentowl.Tenant, error) { return tx.TenantList(ctx) }) {
		if tn.System != (tn.Name == "acme") {
			t.Errorf("tenant %s has system=%v", tn.Name, tn.System)
		}
	}
	// Tokens of an operator who had roles in several tenants are revoked
	// (the defect could have minted them); the others stay active.
	for id, revoked := range map[string]bool{"tok-def": true, "tok-evil": true, "tok-mia": false, "tok-prov": false} {
		tok := read(t, e, func(tx agentowl.Tx) (*agentowl.Token, error) { return tx.TokenGetByID(ctx, id) })
		if (tok.RevokedAt != nil) != revoked {
			t.Errorf("token %s revoked at %v, want revoked=%v", id, tok.RevokedAt, revoked)
		}
	}
}

// channelsUpgrade checks migration 00012 (channels) on data of version 11:
// bindings and conversations, which SQLite rebuilds, keep every row and
// every reference to them (events, work); a conversation of the unused
// closed state becomes ended.
func channelsUpgrade(t *testing.T, u upgradeDB) {
	t.Helper()
	ctx := migrateTo(t, u, 11)
	for _, q := range []string{
		`INSERT INTO tenants (id, name, created_at) VALUES ('t-1', 'acme', 1)`,
		`INSERT INTO endpoints (id, tenant_id, name, url, agent_work, signing_secret, created_at, updated_at)
			VALUES ('ep-1', 't-1', 'runtime', 'https://runtime.example.com/', 1, 'sealed', 1, 1)`,
		`INSERT INTO bindings (id, tenant_id, channel, name, endpoint_id, token_hash, signing_secret, created_at)
			VALUES ('bnd-1', 't-1', 'webhook', 'crm', 'ep-1', 'hash-1', 'sealed-whsec', 2)`,
		`INSERT INTO bindings (id, tenant_id, channel, name, endpoint_id, token_hash, created_at, deleted_at)
			VALUES ('bnd-2', 't-1', 'webhook', 'old', 'ep-1', 'hash-2', 3, 4)`,
		`INSERT INTO conversations (id, tenant_id, binding_id, key, status, runtime_session_id, created_at, last_event_at)
			VALUES ('conv-1', 't-1', 'bnd-1', 'ticket-7', 'open', 'session-1', 5, 6),
			('conv-2', 't-1', 'bnd-2', NULL, 'closed', NULL, 7, 8)`,
		`INSERT INTO events (id, tenant_id, binding_id, conversation_id, channel, sender, received_at, headers, payload,
			attachments, dedupe_key, follow_up) VALUES ('evt-1', 't-1', 'bnd-1', 'conv-1', 'webhook', 'crm', 5, '{}', PAYLOAD, '[]', 'k-1', 0)`,
		`INSERT INTO work (id, tenant_id, endpoint_id, conversation_id, event_id, generation, delivery_id, status, sequence,
			callbacks, created_at, updated_at) VALUES ('work-1', 't-1', 'ep-1', 'conv-1', 'evt-1', 1, 'd-1', 'pending', 0, 0, 5, 5)`,
	} {
		var args []any
		if strings.Contains(q, "PAYLOAD") { // bytes: a parameter of the dialect's form
			q, args = strings.Replace(q, "PAYLOAD", map[bool]string{true: "$1", false: "?"}[u.dialect == goose.DialectPostgres], 1),
				[]any{[]byte("{}")}
		}
		if _, err := u.db.ExecContext(ctx, q, args...); err != nil {
			t.Fatalf("old data: %v\n%s", err, q)
		}
	}
	s := u.open(t)
	e := &env{s: s, ctx: ctx}
	// The rebuild keeps the binding's sealed signing secret as stored. It is
	// a stand-in the store would not open, so it is checked past the store,
	// then cleared for the store to read the rest of the row.
	var kept []byte
	if err := u.db.QueryRowContext(ctx, `SELECT signing_secret FROM bindings WHERE id = 'bnd-1'`).Scan(&kept); err != nil ||
		string(kept) != "sealed-whsec" {
		t.Errorf("the webhook binding's signing secret after the upgrade: %q, %v", kept, err)
	}
	if _, err := u.db.ExecContext(ctx, `UPDATE bindings SET signing_secret = NULL WHERE id = 'bnd-1'`); err != nil {
		t.Fatal(err)
	}
	if u.dialect == goose.DialectSQLite3 {
		// Nothing refers to a row SQLite's rebuild lost; PostgreSQL
		// checks its foreign keys on every statement.
		rows, err := u.db.QueryContext(ctx, "PRAGMA foreign_key_check")
		if err != nil {
			t.Fatal(err)
		}
		if rows.Next() {
			t.Error("foreign key violations after the upgrade")
		}
		rows.Close()
	}
	if err := u.db.Close(); err != nil {
		t.Fatal(err)
	}
	b := read(t, e, func(tx agentowl.Tx) (*agentowl.Binding, error) { return tx.BindingGet(ctx, "bnd-1") })
	equal(t, "webhook binding after the upgrade", b, &agentowl.Binding{ID: "bnd-1", TenantID: "t-1", Channel: "webhook", Name: "crm",
		EndpointID: "ep-1", TokenHash: []byte("hash-1"), CreatedAt: fromMicros(2)})
	if d := read(t, e, func(tx agentowl.Tx) (*agentowl.Binding, error) { return tx.BindingGet(ctx, "bnd-2") }); d.DeletedAt == nil {
		t.Error("the deleted binding lost its deletion")
	}
	c := read(t, e, func(tx agentowl.Tx) (*agentowl.Conversation, error) {
		return tx.ConversationGetOpenByKey(ctx, "bnd-1", "ticket-7")
	})
	equal(t, "open conversation after the upgrade", c, &agentowl.Conversation{ID: "conv-1", TenantID: "t-1", BindingID: "bnd-1",
		Channel: "webhook", Key: "ticket-7", Status: agentowl.ConversationOpen, RuntimeSessionID: "session-1",
		CreatedAt: fromMicros(5), LastEventAt: fromMicros(6)})
	ended := fromMicros(8)
	c = read(t, e, func(tx agentowl.Tx) (*agentowl.Conversation, error) { return tx.ConversationGet(ctx, "conv-2") })
	equal(t, "closed conversation after the upgrade", c, &agentowl.Conversation{ID: "conv-2", TenantID: "t-1", BindingID: "bnd-2",
		Channel: "webhook", Status: agentowl.ConversationEnded, CreatedAt: fromMicros(7), LastEventAt: ended, EndedAt: &ended})
	if ev := read(t, e, func(tx agentowl.Tx) (*agentowl.Event, error) { return tx.EventGet(ctx, "evt-1") }); ev.ConversationID != "conv-1" {
		t.Errorf("event after the upgrade: %+v", ev)
	}
	if w := read(t, e, func(tx agentowl.Tx) (*agentowl.Work, error) { return tx.WorkGet(ctx, "work-1") }); w.ConversationID != "conv-1" {
		t.Errorf("work after the upgrade: %+v", w)
	}
	// The rebuilt tables are still referenced: an event of a missing
	// conversation is refused.
	orphan := &agentowl.Event{ID: "evt-2", TenantID: "t-1", BindingID: "bnd-1", ConversationID: "conv-missing", Channel: "webhook",
		ReceivedAt: fromMicros(9), Payload: []byte("{}")}
	if err := e.writeErr(func(tx agentowl.Tx) error { return tx.EventCreate(ctx, orphan) }); err == nil {
		t.Error("an event of a missing conversation was stored after the upgrade")
	}
}

// fromMicros is a stored time: Unix microseconds, UTC.
func fromMicros(us int64) time.Time { return time.UnixMicro(us).UTC() }
