package postgres_test

import (
	"context"
	"database/sql"
	"errors"
	"net/url"
	"sync"
	"testing"

	"github.com/agentowl/agentowl"
	"github.com/agentowl/agentowl/internal/secret/secrettest"
	"github.com/agentowl/agentowl/internal/store/postgres"
	"github.com/agentowl/agentowl/internal/store/storetest"
)

// backend is storetest's PostgreSQL backend. Without a test database the
// test is skipped (storetest.PostgresURL fails it in CI instead).
func backend(tb testing.TB) storetest.Backend {
	tb.Helper()
	if storetest.PostgresURL(tb) == "" {
		tb.Skip("AGENTOWL_TEST_DATABASE_URL is not set")
	}
	return storetest.Backends(tb)[1]
}

func TestConformance(t *testing.T) {
	t.Parallel()
	storetest.Exercise(t, backend(t).Open)
}

// The migrations that move existing data keep it (storetest.Upgrades).
func TestUpgrades(t *testing.T) {
	t.Parallel()
	storetest.Upgrades(t, backend(t))
}

// When the server drops every backend of a store at once (a restart, a
// failover, pg_terminate_backend), an operation that meets a dead
// connection answers agentowl.ErrUnavailable, never another error, and the
// operations after it succeed on new connections instead of each failing on
// another dead one.
func TestLostConnections(t *testing.T) {
	t.Parallel()
	if storetest.PostgresURL(t) == "" {
		t.Skip("AGENTOWL_TEST_DATABASE_URL is not set")
	}
	u, err := url.Parse(storetest.FreshPostgresURL(t))
	if err != nil {
		t.Fatal(err)
	}
	app := "agentowl-test-" + u.Query().Get("search_path") // this store's connections alone
	q := u.Query()
	q.Set("application_name", app)
	u.RawQuery = q.Encode()
	ctx := context.Background()
	st, err := postgres.Open(ctx, u.String(), secrettest.NewBox(t))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	// Fill the pool: writes held open together use a connection each.
	const conns = 8
	var inside sync.WaitGroup
	inside.Add(conns)
	release := make(chan struct{})
	var wg sync.WaitGroup
	for range conns {
		wg.Go(func() {
			_ = st.Write(ctx, func(agentowl.Tx) error {
				inside.Done()
				<-release
				return nil
			})
		})
	}
	inside.Wait()
	close(release)
	wg.Wait()

	admin, err := sql.Open("pgx", storetest.PostgresURL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	var killed int
	if err := admin.QueryRowContext(ctx, "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = $1", app).Scan(&killed); err != nil {
		t.Fatal(err)
	}
	if killed < conns {
		t.Fatalf("terminated %d backends, want the pool's %d", killed, conns)
	}
	failed := 0
	for i := range conns {
		err := st.Ping(ctx)
		switch {
		case err == nil:
		case errors.Is(err, agentowl.ErrUnavailable):
			failed++
		default:
			t.Fatalf("ping %d after the backends were terminated: %v, want nil or store.ErrUnavailable", i, err)
		}
	}
	if failed > 1 {
		t.Fatalf("%d of %d operations failed after the backends were terminated, want at most the first", failed, conns)
	}
}
