package httpapi_test

import (
	"context"
	"database/sql"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/agentowl/agentowl"
	"github.com/agentowl/agentowl/internal/server"
	"github.com/agentowl/agentowl/internal/store/storetest"
)

// TestDecisionReadsItemAfterWorkLock: an operator's decision that waits for
// its work's lock, held by a write that resolves the item (as a callback
// ending the work does), reads the item as that write left it and is
// refused, rather than deciding an item of ended work. PostgreSQL only:
// SQLite runs one write at a time, so the decision cannot start while the
// other write runs.
func TestDecisionReadsItemAfterWorkLock(t *testing.T) {
	onPostgres(t, func(t *testing.T, b storetest.Backend) {
		e := setupWorkServer(t, b, func(c *server.Config) { c.NoDelivery = true })
		h := e.handOffWithDecisions(t, "")
		receipt(t, "needs_input", e.needsInput(h, 1, questionRequest("q1", 1, e.expiry(time.Hour))))
		id := e.itemFor(t, h.workID, "q1", 1)["id"].(string)
		ctx := context.Background()
		locked, release := make(chan struct{}), make(chan struct{})
		lockedOnce := sync.OnceFunc(func() { close(locked) })
		ended := make(chan error, 1)
		go func() {
			ended <- e.server.Store().Write(ctx, func(tx agentowl.Tx) error {
				if _, err := tx.WorkGetForUpdate(ctx, h.workID); err != nil {
					return err
				}
				lockedOnce()
				<-release
				it, err := tx.AttentionGet(ctx, id)
				if err != nil {
					return err
				}
				now := e.clock.Now()
				it.Status, it.Resolution, it.ResolvedAt, it.UpdatedAt = agentowl.AttentionResolved, "work_ended", &now, now
				return tx.AttentionUpdate(ctx, it)
			})
		}()
		<-locked
		answered := make(chan *response, 1)
		go func() {
			answered <- e.decide(id, map[string]any{"decision_id": "d1", "request_revision": 1, "decision": "answer",
				"answer": "blue"}, false)
		}()
		waitForLockWait(t, `%FROM work WHERE id = (SELECT work_id FROM attention_items%`)
		close(release)
		if err := <-ended; err != nil {
			t.Fatal(err)
		}
		expectRefused(t, "a decision on an item resolved while it waited", <-answered, http.StatusConflict, "already_terminal")
	})
}

// waitForLockWait polls PostgreSQL until a statement like pattern waits
// for a lock (synchronization, not a timing assertion).
func waitForLockWait(t *testing.T, pattern string) {
	t.Helper()
	db, err := sql.Open("pgx", storetest.PostgresURL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		var n int
		if err := db.QueryRow(`SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE $1`,
			pattern).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			return
		}
	}
	t.Fatalf("no statement like %q waited for a lock within a minute", pattern)
}
