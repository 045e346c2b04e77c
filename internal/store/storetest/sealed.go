package storetest

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/agentowl/agentowl"
	"github.com/agentowl/agentowl/internal/secret/secrettest"
)

// sealedColumn is a column that holds a secret sealed at rest, and a
// value of it the test wrote.
type sealedColumn struct {
	what, table, column, rowID, plain string
}

// SealedAtRest checks, on a fresh store of backend b, that every secret a
// record carries in plain text (an instance's receiver signing secret, an
// endpoint's signing and decision secrets, a binding's signing and
// provider secrets) is sealed at rest: its column holds no form of it
// (SecretForms), opens with the store's box for that table, column and row
// only, and reads back in plain text. A store opened without the key
// neither reads nor writes them.
func SealedAtRest(t *testing.T, b Backend) {
	t.Helper()
	url, box := b.URL(t), secrettest.NewBox(t)
	e := &env{s: OpenURL(t, url, box), ctx: t.Context(), now: time.Now().UTC().Truncate(time.Microsecond)}

	tn := e.tenant(t)
	inst := newInstance(tn.ID, e.now)
	inst.Receiver = newDelivery()
	e.write(t, func(tx agentowl.Tx) error { return tx.InstanceCreate(e.ctx, inst) })
	ep := newEndpoint(tn.ID, e.now)
	ep.SigningSecret = []byte("whsec_endpoint-" + agentowl.NewID(""))
	ep.DecisionURL, ep.DecisionSecret = "https://decide.example.com/d", []byte("bearer-"+agentowl.NewID(""))
	e.write(t, func(tx agentowl.Tx) error { return tx.EndpointCreate(e.ctx, ep) })
	hook := newBinding(ep, e.now)
	hook.SigningSecret = []byte("whsec_binding-" + agentowl.NewID(""))
	sms := newBinding(ep, e.now)
	sms.Channel, sms.ProviderSecret = "sms", []byte("twilio-"+agentowl.NewID(""))
	e.write(t, func(tx agentowl.Tx) error {
		return errors.Join(tx.BindingCreate(e.ctx, hook), tx.BindingCreate(e.ctx, sms))
	})

	columns := []sealedColumn{
		{"an instance's receiver signing secret", "instances", "delivery_secret_sealed", inst.ID, inst.Receiver.SigningSecret},
		{"an endpoint's signing secret", "endpoints", "signing_secret", ep.ID, string(ep.SigningSecret)},
		{"an endpoint's decision secret", "endpoints", "decision_secret", ep.ID, string(ep.DecisionSecret)},
		{"a binding's signing secret", "bindings", "signing_secret", hook.ID, string(hook.SigningSecret)},
		{"a binding's provider secret", "bindings", "provider_secret", sms.ID, string(sms.ProviderSecret)},
	}
	raw := openRaw(t, url)
	for _, c := range columns {
		stored := rawColumn(t, raw, url, c.table, c.column, c.rowID)
		if stored == nil {
			t.Errorf("%s: %s.%s of row %s is NULL", c.what, c.table, c.column, c.rowID)
			continue
		}
		for form, b := range SecretForms(c.plain) {
			if bytes.Contains(stored, b) {
				t.Errorf("%s: %s.%s holds its %s", c.what, c.table, c.column, form)
			}
		}
		if got, err := box.Open(c.table, c.column, c.rowID, stored); err != nil || string(got) != c.plain {
			t.Errorf("%s: %s.%s opens for its row as %q, %v; want %q", c.what, c.table, c.column, got, err, c.plain)
		}
		if _, err := box.Open(c.table, c.column, agentowl.NewID(""), stored); err == nil {
			t.Errorf("%s: %s.%s opens for another row", c.what, c.table, c.column)
		}
		if _, err := box.Open(c.table, c.column+"_elsewhere", c.rowID, stored); err == nil {
			t.Errorf("%s: %s.%s opens for another column", c.what, c.table, c.column)
		}
	}

	// Read back through the store, in plain text.
	gotInst := read(t, e, func(tx agentowl.Tx) (*agentowl.Instance, error) { return tx.InstanceGet(e.ctx, inst.ID) })
	equal(t, "instance read back", gotInst.Receiver, inst.Receiver)
	gotEP := read(t, e, func(tx agentowl.Tx) (*agentowl.Endpoint, error) { return tx.EndpointGet(e.ctx, ep.ID) })
	equal(t, "endpoint secrets read back", [][]byte{gotEP.SigningSecret, gotEP.DecisionSecret},
		[][]byte{ep.SigningSecret, ep.DecisionSecret})
	for _, want := range []*agentowl.Binding{hook, sms} {
		got := read(t, e, func(tx agentowl.Tx) (*agentowl.Binding, error) { return tx.BindingGet(e.ctx, want.ID) })
		equal(t, want.Channel+" binding secrets read back", [][]byte{got.SigningSecret, got.ProviderSecret},
			[][]byte{want.SigningSecret, want.ProviderSecret})
	}

	// Without the key, a record with a sealed secret is neither read nor
	// written; one without a secret still is.
	keyless, err := Open(e.ctx, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer keyless.Close()
	reads := map[string]func(tx agentowl.Tx) error{
		"an instance":         func(tx agentowl.Tx) error { _, err := tx.InstanceGet(e.ctx, inst.ID); return err },
		"an endpoint":         func(tx agentowl.Tx) error { _, err := tx.EndpointGet(e.ctx, ep.ID); return err },
		"a webhook binding":   func(tx agentowl.Tx) error { _, err := tx.BindingGet(e.ctx, hook.ID); return err },
		"an sms binding":      func(tx agentowl.Tx) error { _, err := tx.BindingGet(e.ctx, sms.ID); return err },
		"a binding's route":   func(tx agentowl.Tx) error { _, err := tx.BindingRoute(e.ctx, hook.ID, "", e.now, ""); return err },
		"a tenant's bindings": func(tx agentowl.Tx) error { _, err := tx.BindingList(e.ctx, tn.ID); return err },
	}
	for what, fn := range reads {
		if err := keyless.Read(e.ctx, fn); err == nil || errors.Is(err, agentowl.ErrNotFound) {
			t.Errorf("a store opened without the key read %s with a sealed secret: %v", what, err)
		}
	}
	other := newEndpoint(tn.ID, e.now)
	if err := keyless.Write(e.ctx, func(tx agentowl.Tx) error { return tx.EndpointCreate(e.ctx, other) }); err == nil {
		t.Error("a store opened without the key wrote an endpoint's secret")
	}
	plainHook := newBinding(ep, e.now)
	if err := keyless.Write(e.ctx, func(tx agentowl.Tx) error { return tx.BindingCreate(e.ctx, plainHook) }); err != nil {
		t.Errorf("a store opened without the key refused a binding without secrets: %v", err)
	}
}

// openRaw opens the database at url past the store.
func openRaw(t *testing.T, url string) *sql.DB {
	t.Helper()
	driver, dsn := "pgx", url
	if !isPostgres(url) {
		driver, dsn = "sqlite", "file:"+url+"?mode=ro"
	}
	db, err := sql.Open(driver, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// rawColumn reads column of row id of table as stored, nil for NULL.
func rawColumn(t *testing.T, db *sql.DB, url, table, column, id string) []byte {
	t.Helper()
	mark := "?"
	if isPostgres(url) {
		mark = "$1"
	}
	var v []byte
	if err := db.QueryRowContext(context.Background(), `SELECT `+column+` FROM `+table+` WHERE id = `+mark, id).Scan(&v); err != nil {
		t.Fatalf("%s.%s of row %s: %v", table, column, id, err)
	}
	return v
}
