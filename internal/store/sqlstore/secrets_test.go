package sqlstore_test

import (
	"context"
	"database/sql"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentowl/agentowl"
	"github.com/agentowl/agentowl/internal/secret"
	"github.com/agentowl/agentowl/internal/secret/secrettest"
	"github.com/agentowl/agentowl/internal/store/storetest"
	"github.com/agentowl/agentowl/webhook"
)

// A store opened with a key other than the one that sealed its secrets is
// refused before it seals anything: values still queued by migration 11
// stay queued, and the right key then seals them. Opened without a key, it
// reads no sealed secret.
func TestOpenChecksTheKeyBeforeSealing(t *testing.T) {
	storetest.Each(t, func(t *testing.T, b storetest.Backend) {
		ctx := context.Background()
		open := storetest.Open
		url, right, wrong := b.URL(t), secrettest.NewBox(t), secrettest.NewBox(t)

		// An instance whose receiver secret is queued in plain text, as
		// migration 11 leaves a row written before it.
		st, err := open(ctx, url, right)
		if err != nil {
			t.Fatal(err)
		}
		now := time.Now().UTC().Truncate(time.Second)
		tenant := &agentowl.Tenant{ID: agentowl.NewID(""), Name: "t-" + agentowl.NewID("")[:8], CreatedAt: now}
		plain := webhook.NewSecret()
		receiver := &agentowl.Receiver{Type: "webhook", URL: "https://receiver.example/aap", RegistrationID: agentowl.NewID(""), SigningSecret: plain}
		inst := &agentowl.Instance{ID: agentowl.NewID(""), TenantID: tenant.ID, Name: "i", ProvisionerTokenID: agentowl.NewID(""),
			Receiver: receiver, ApprovalValidity: time.Hour, CreatedAt: now}
		if err := st.Write(ctx, func(tx agentowl.Tx) error {
			return errors.Join(tx.TenantCreate(ctx, tenant), tx.InstanceCreate(ctx, inst))
		}); err != nil {
			t.Fatal(err)
		}
		st.Close()
		raw := rawDB(t, b.Name, url)
		rawExec(t, raw, b.Name, `UPDATE instances SET delivery_secret_sealed = NULL WHERE id = ?`, inst.ID)
		rawExec(t, raw, b.Name, `INSERT INTO secrets_to_seal (table_name, column_name, row_id, value) VALUES ('instances', 'delivery_secret_sealed', ?, ?)`,
			inst.ID, []byte(plain))

		if st, err := open(ctx, url, wrong); !errors.Is(err, secret.ErrKeyMismatch) {
			if err == nil {
				st.Close()
			}
			t.Fatalf("open with another key: %v, want secret.ErrKeyMismatch", err)
		}
		var queued int
		if err := raw.QueryRow(`SELECT count(*) FROM secrets_to_seal`).Scan(&queued); err != nil || queued != 1 {
			t.Fatalf("after the refused open %d values are queued (%v), want the 1 still there", queued, err)
		}

		st = storetest.OpenURL(t, url, right)
		var got *agentowl.Instance
		if err := st.Read(ctx, func(tx agentowl.Tx) (err error) { got, err = tx.InstanceGet(ctx, inst.ID); return err }); err != nil {
			t.Fatal(err)
		}
		if got.Receiver == nil || got.Receiver.SigningSecret != plain {
			t.Fatalf("after the upgrade the instance's delivery is %+v, want its secret back", got.Receiver)
		}
		if err := raw.QueryRow(`SELECT count(*) FROM secrets_to_seal`).Scan(&queued); err != nil || queued != 0 {
			t.Errorf("%d values still queued (%v)", queued, err)
		}

		// Opened without the key (offline administration), the store
		// refuses to read the secret rather than return it empty.
		keyless, err := open(ctx, url, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer keyless.Close()
		if err := keyless.Read(ctx, func(tx agentowl.Tx) error { _, err := tx.InstanceGet(ctx, inst.ID); return err }); err == nil {
			t.Error("a store opened without the key read an instance with a sealed secret")
		}
	})
}

// Every secret a record carries is sealed at rest for its table, column
// and row (storetest.SealedAtRest), on both dialects.
func TestSealedAtRest(t *testing.T) {
	storetest.Each(t, func(t *testing.T, b storetest.Backend) {
		storetest.SealedAtRest(t, b)
	})
}

// rawDB opens the database at url past the store.
func rawDB(t *testing.T, backend, url string) *sql.DB {
	t.Helper()
	driver, dsn := "pgx", url
	if backend == "sqlite" {
		driver, dsn = "sqlite", "file:"+url
	}
	db, err := sql.Open(driver, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// rawExec runs query, its ? placeholders numbered for PostgreSQL.
func rawExec(t *testing.T, db *sql.DB, backend, query string, args ...any) {
	t.Helper()
	if backend == "postgres" {
		for i := 1; strings.Contains(query, "?"); i++ {
			query = strings.Replace(query, "?", "$"+strconv.Itoa(i), 1)
		}
	}
	if _, err := db.Exec(query, args...); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
}
