package storetest

import (
	"database/sql"
	"fmt"
	"strings"
	"testing"
	"time"
)

// SeedHistory gives a store the history of n delivered events, past the
// store, for benchmarks that compare a long-running store with an empty
// one: it copies the store's first work item whose handoff was delivered,
// with its event, conversation, handoff message and attempts, n times
// (conversations ended, work completed), one INSERT … SELECT per table so
// that a million events take seconds. db is the store's database (SQLite
// or PostgreSQL, with the store's schema on its search path).
func SeedHistory(tb testing.TB, db *sql.DB, postgres bool, n int) {
	tb.Helper()
	var workID, eventID, convID, deliveryID string
	// The receiver may have the handoff a moment before its outcome is
	// recorded: wait for it.
	for tries := 0; ; tries++ {
		err := db.QueryRow(`SELECT w.id, w.event_id, w.conversation_id, w.delivery_id FROM work w
			JOIN outbox o ON o.id = w.delivery_id WHERE o.state = 'delivered' ORDER BY w.created_at LIMIT 1`).
			Scan(&workID, &eventID, &convID, &deliveryID)
		if err == nil {
			break
		}
		if tries == 1000 {
			tb.Fatalf("seed history: no delivered work to copy: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	const sfx = ` || '-h' || CAST(n.i AS TEXT)`
	for _, c := range []struct {
		table, key, id string
		set            map[string]string
	}{
		{"conversations", "id", convID, map[string]string{"id": "id" + sfx, "key": "NULL", "status": "'ended'", "ended_at": "last_event_at"}},
		{"events", "id", eventID, map[string]string{"id": "id" + sfx, "conversation_id": "conversation_id" + sfx, "dedupe_key": "NULL"}},
		{"work", "id", workID, map[string]string{"id": "id" + sfx, "event_id": "event_id" + sfx, "conversation_id": "conversation_id" + sfx,
			"delivery_id": "delivery_id" + sfx, "status": "'completed'", "sequence": "1", "ended_at": "updated_at"}},
		{"outbox", "id", deliveryID, map[string]string{"id": "id" + sfx, "subject": "subject" + sfx}},
		{"outbox_attempts", "event_id", deliveryID, map[string]string{"event_id": "event_id" + sfx}},
	} {
		cols, err := columns(db, postgres, c.table)
		if err != nil {
			tb.Fatalf("seed history: columns of %s: %v", c.table, err)
		}
		exprs := make([]string, len(cols))
		for i, col := range cols {
			exprs[i] = col
			if e, ok := c.set[col]; ok {
				exprs[i] = e
			}
		}
		q := fmt.Sprintf(`INSERT INTO %s (%s) WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < $1)
			SELECT %s FROM %s, n WHERE %s.%s = $2`, c.table, strings.Join(cols, ", "), strings.Join(exprs, ", "), c.table, c.table, c.key)
		if _, err := db.Exec(q, n, c.id); err != nil {
			tb.Fatalf("seed history: %s: %v", c.table, err)
		}
	}
	settle := "PRAGMA wal_checkpoint(TRUNCATE)"
	if postgres {
		settle = "VACUUM ANALYZE conversations, events, work, outbox, outbox_attempts"
	}
	if _, err := db.Exec(settle); err != nil {
		tb.Fatalf("seed history: %s: %v", settle, err)
	}
}

// columns lists table's columns in order.
func columns(db *sql.DB, postgres bool, table string) ([]string, error) {
	q := `SELECT name FROM pragma_table_info($1)`
	if postgres {
		q = `SELECT column_name FROM information_schema.columns WHERE table_schema = current_schema() AND table_name = $1
			ORDER BY ordinal_position`
	}
	return queryStrings(db, strings.Replace(q, "$1", "'"+table+"'", 1))
}
