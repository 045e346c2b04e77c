package httpapi_test

import (
	"context"
	"database/sql"
	"net/http"
	"net/url"
	"path/filepath"
	"testing"
	"time"

	"github.com/agentowl/agentowl/internal/server/servertest"
	"github.com/agentowl/agentowl/internal/store/storetest"
)

// wantUnavailable asserts a 503 unavailable with Retry-After.
func wantUnavailable(t *testing.T, what string, r *response) {
	t.Helper()
	if r.Status != http.StatusServiceUnavailable || r.ErrorCode(t) != "unavailable" || r.Header.Get("Retry-After") == "" {
		t.Fatalf("%s: got %d %s (Retry-After %q), want 503 unavailable with Retry-After", what, r.Status, r.Body,
			r.Header.Get("Retry-After"))
	}
}

// patchValidity changes an instance through the operator API: a write of
// the instance's row.
func patchValidity(h *opHarness, id, validity string) *response {
	h.t.Helper()
	return h.admin("PATCH", opTenant+"/instances/"+id, map[string]any{"approval_validity": validity})
}

// A database that cannot answer is 503 unavailable with Retry-After, and
// the next request after it recovers succeeds. SQLite: another process holds
// the write lock past the (short, configured) busy timeout; /readyz is not
// ready meanwhile.
func TestStoreUnavailableSQLite(t *testing.T) {
	t.Parallel()
	sc := servertest.Config(t, storetest.Backends(t)[0])
	sc.SQLiteBusyTimeout = 20 * time.Millisecond
	path := filepath.Join(sc.DataDir, "agentowl.db")
	e := start(t, sc)
	h := newOpHarness(t, e)
	id, _ := h.instance()

	other, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	ctx := context.Background()
	lock, err := other.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	if _, err := lock.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}
	wantUnavailable(t, "write while another process holds the lock", patchValidity(h, id, "10m"))
	wantUnavailable(t, "/readyz while another process holds the lock", e.do("GET", "/readyz", "", nil))
	if _, err := lock.ExecContext(ctx, "ROLLBACK"); err != nil {
		t.Fatal(err)
	}
	h.ok(patchValidity(h, id, "10m"), http.StatusOK)
	h.ok(e.do("GET", "/readyz", "", nil), http.StatusOK)
}

// PostgreSQL: the server's backends of this store are terminated
// (pg_terminate_backend) while a write waits on a row lock; the write is
// 503, and the next request, on connections made afresh, succeeds.
func TestStoreUnavailablePostgres(t *testing.T) {
	t.Parallel()
	if storetest.PostgresURL(t) == "" {
		t.Skip("AGENTOWL_TEST_DATABASE_URL is not set")
	}
	u, err := url.Parse(storetest.FreshPostgresURL(t))
	if err != nil {
		t.Fatal(err)
	}
	// A name of this store's own connections, so that only they are
	// terminated: other tests share the database.
	app := "agentowl-test-" + u.Query().Get("search_path")
	q := u.Query()
	q.Set("application_name", app)
	u.RawQuery = q.Encode()
	sc := servertest.Config(t, storetest.Backends(t)[0])
	sc.DatabaseURL = u.String()
	e := start(t, sc)
	h := newOpHarness(t, e)
	id, _ := h.instance()

	admin, err := sql.Open("pgx", storetest.PostgresURL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	ctx := context.Background()
	tx, err := admin.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback() //nolint:errcheck // released below
	if _, err := tx.ExecContext(ctx, "SELECT id FROM "+u.Query().Get("search_path")+".instances WHERE id = $1 FOR UPDATE", id); err != nil {
		t.Fatal(err)
	}
	done := make(chan *response, 1)
	go func() { done <- patchValidity(h, id, "10m") }()
	eventually(t, syncLimit, "the write to wait on the row lock", func() bool {
		var n int
		err := admin.QueryRowContext(ctx, "SELECT count(*) FROM pg_stat_activity WHERE application_name = $1 AND wait_event_type = 'Lock'", app).Scan(&n)
		return err == nil && n > 0
	})
	if _, err := admin.ExecContext(ctx, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1", app); err != nil {
		t.Fatal(err)
	}
	wantUnavailable(t, "write whose backend was terminated", <-done)
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	// The server's background loops meet the other dead connections of the
	// pool too; requests succeed again once they are gone (the store test
	// TestLostConnections checks that only the first operation per dead
	// connection fails).
	eventually(t, syncLimit, "requests to succeed again", func() bool {
		return patchValidity(h, id, "10m").Status == http.StatusOK
	})
	h.ok(e.do("GET", "/readyz", "", nil), http.StatusOK)
}
