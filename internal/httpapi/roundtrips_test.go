package httpapi_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/agentowl/agentowl"
	"github.com/agentowl/agentowl/internal/server"
	"github.com/agentowl/agentowl/internal/store/storetest"
)

// TestWorkWriteRoundTrips: on PostgreSQL the runtime's callbacks and
// receipts and the operators' decisions are written in two round trips (sqlstore/pgx.go):
// the reads a write checks against go together in one (the work, locked,
// with its callbacks and attention items; a decision's item with its
// work, its decisions and its endpoint), and the inserts and updates go
// with COMMIT in the other. Each figure is the least of three writes on
// three works, since the server's own writes (its scheduler) may land in
// between.
func TestWorkWriteRoundTrips(t *testing.T) {
	onPostgres(t, func(t *testing.T, b storetest.Backend) { // SQLite has no round trips to count
		e := setupWorkServer(t, b, func(c *server.Config) { c.NoDelivery = true })
		e.addOperator(t, "second", "member") // notices fan out to more than one
		trips := writeTrips(t, e.server.Store())
		// least runs step on three fresh works and returns the fewest
		// round trips a step took.
		least := func(what string, prepare func(h *handedOff), step func(h *handedOff) *response, want int) int64 {
			t.Helper()
			n := int64(-1)
			for range 3 {
				h := e.handOffWithDecisions(t, "https://runtime.example/decisions")
				prepare(h)
				before := trips()
				r := step(h)
				after := trips()
				wantJSON(t, what, r, want)
				if d := after - before; n < 0 || d < n {
					n = d
				}
			}
			return n
		}
		none := func(*handedOff) {}
		question := func(h *handedOff) {
			receipt(t, "needs_input", e.needsInput(h, 1, questionRequest("q1", 1, e.expiry(time.Hour))))
		}
		answered := func(h *handedOff) {
			question(h)
			id := e.itemFor(t, h.workID, "q1", 1)["id"].(string)
			wantJSON(t, "answer", e.decide(id, map[string]any{"decision_id": "d-" + h.workID, "request_revision": 1,
				"decision": "answer", "answer": "blue"}, false), http.StatusCreated)
		}
		status := func(seq int, st string) func(h *handedOff) *response {
			return func(h *handedOff) *response {
				return e.post(h, h.token, callback(h.workID, fmt.Sprintf("%s:%d", h.workID, seq), seq, st))
			}
		}
		for _, c := range []struct {
			what    string
			prepare func(h *handedOff)
			step    func(h *handedOff) *response
			want    int
		}{
			{"a running callback", none, status(1, "running"), http.StatusOK},
			{"a needs_input callback (an item and its notices)", none, func(h *handedOff) *response {
				return e.needsInput(h, 1, questionRequest("q1", 1, e.expiry(time.Hour)))
			}, http.StatusOK},
			{"a new revision superseding an item", question, func(h *handedOff) *response {
				return e.needsInput(h, 2, questionRequest("q1", 2, e.expiry(time.Hour)))
			}, http.StatusOK},
			{"a completed callback resolving an answered item", answered, status(2, "completed"), http.StatusOK},
			{"an operator's answer, pushed to the runtime", question, func(h *handedOff) *response {
				id := e.itemFor(t, h.workID, "q1", 1)["id"].(string)
				return e.decide(id, map[string]any{"decision_id": "d1", "request_revision": 1, "decision": "answer",
					"answer": "blue"}, false)
			}, http.StatusCreated},
			{"an answer sent again", answered, func(h *handedOff) *response {
				id := e.itemFor(t, h.workID, "q1", 1)["id"].(string)
				return e.decide(id, map[string]any{"decision_id": "d-" + h.workID, "request_revision": 1, "decision": "answer",
					"answer": "blue"}, false)
			}, http.StatusOK},
			{"a runtime's receipt of a decision", answered, func(h *handedOff) *response {
				return e.do(http.MethodPost, "/runtime/v1/work/"+h.workID+"/decisions/d-"+h.workID+"/receipt", h.token, nil)
			}, http.StatusOK},
			{"a callback repeated", func(h *handedOff) { receipt(t, "first", status(1, "running")(h)) }, status(1, "running"),
				http.StatusOK},
		} {
			if n := least(c.what, c.prepare, c.step, c.want); n > 2 {
				t.Errorf("%s took %d round trips, want at most 2", c.what, n)
			}
		}
	})
}

// writeTrips returns a function that reads how many round trips the
// PostgreSQL store's writes have taken so far.
func writeTrips(t *testing.T, st agentowl.Store) func() int64 {
	t.Helper()
	counter, ok := st.(interface{ WriteRoundTrips() (writes, trips int64) })
	if !ok {
		t.Fatal("the PostgreSQL store does not count its round trips")
	}
	return func() int64 {
		_, n := counter.WriteRoundTrips()
		return n
	}
}

// onPostgres runs fn as a parallel subtest on the PostgreSQL backend, when
// one is configured (storetest.Backends), and not on SQLite.
func onPostgres(t *testing.T, fn func(t *testing.T, b storetest.Backend)) {
	for _, b := range storetest.Backends(t) {
		if b.Name == "postgres" {
			t.Run(b.Name, func(t *testing.T) {
				t.Parallel()
				fn(t, b)
			})
		}
	}
}
