package approval_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/agentowl/agentowl"
	"github.com/agentowl/agentowl/internal/approval"
	"github.com/agentowl/agentowl/internal/store/storetest"
)

// roundTrips is the PostgreSQL store's count of write transactions and
// their round trips (sqlstore.DB.WriteRoundTrips).
type roundTrips interface{ WriteRoundTrips() (writes, trips int64) }

// TestConcurrentCreateAndDecide runs the two hot approval writes with
// racing callers on both stores: every creation with one idempotency key
// returns the same request, one of them as the original and the rest as
// replays, and of the operators deciding that request at once exactly one
// wins while the others are told it was decided. On PostgreSQL it also
// counts the round trips of each write, which the store pipelines
// (sqlstore/pgx.go): a creation and a decision at most two each (one
// statement per round trip took seven each).
func TestConcurrentCreateAndDecide(t *testing.T) {
	storetest.Each(t, func(t *testing.T, b storetest.Backend) {
		ctx := context.Background()
		st, appr, _, agent, admin := attested(t, b, false)
		in := &agentowl.CreateRequestInput{Tool: "refund", Arguments: json.RawMessage(`{"amount":5}`), Timeout: "1h",
			TimeoutDur: time.Hour}
		counter, _ := st.(roundTrips)
		trips := func() int64 {
			if counter == nil {
				return 0
			}
			_, n := counter.WriteRoundTrips()
			return n
		}

		// One creation alone, counted.
		before := trips()
		first, err := appr.CreateRequest(ctx, agent, "key-0", in)
		if err != nil || first.Replayed {
			t.Fatalf("create: %+v, %v", first, err)
		}
		if n := trips() - before; counter != nil && n > 2 {
			t.Errorf("a creation took %d round trips, want at most 2", n)
		}

		const n = 12
		var wg sync.WaitGroup
		created := make([]*approval.CreateResult, n)
		errs := make([]error, n)
		start := make(chan struct{})
		for i := range n {
			wg.Go(func() {
				<-start
				created[i], errs[i] = appr.CreateRequest(ctx, agent, "key-1", in)
			})
		}
		close(start)
		wg.Wait()
		originals := 0
		for i := range n {
			if errs[i] != nil {
				t.Fatalf("creation %d: %v", i, errs[i])
			}
			if created[i].Request.ID != created[0].Request.ID {
				t.Fatalf("creation %d returned request %s, creation 0 %s", i, created[i].Request.ID, created[0].Request.ID)
			}
			if !created[i].Replayed {
				originals++
			}
		}
		if originals != 1 {
			t.Fatalf("%d creations were originals, want 1", originals)
		}

		// One decision alone, counted.
		before = trips()
		if _, err := appr.Decide(ctx, admin, "acme", first.Request.ID, approval.DecideParams{Approve: true}); err != nil {
			t.Fatal(err)
		}
		if n := trips() - before; counter != nil && n > 2 {
			t.Errorf("a decision took %d round trips, want at most 2", n)
		}

		// One decision from the Needs-attention inbox, and its replay,
		// counted.
		other, err := appr.CreateRequest(ctx, agent, "key-2", in)
		if err != nil {
			t.Fatal(err)
		}
		df := &agentowl.DecisionFile{DecisionID: "d1", RequestRevision: 1, Decision: "approve",
			ExpectedActionDigest: approval.ActionDigest(other.Request), HasDigest: true}
		for _, what := range []string{"an inbox decision", "its replay"} {
			before = trips()
			if _, err := appr.DecideAttention(ctx, admin, "acme", other.Request.ID, df, true); err != nil {
				t.Fatalf("%s: %v", what, err)
			}
			if n := trips() - before; counter != nil && n > 2 {
				t.Errorf("%s took %d round trips, want at most 2", what, n)
			}
		}

		id := created[0].Request.ID
		start = make(chan struct{})
		decided := make([]*agentowl.ApprovalRequest, n)
		for i := range n {
			wg.Go(func() {
				<-start
				decided[i], errs[i] = appr.Decide(ctx, admin, "acme", id, approval.DecideParams{Approve: i%2 == 0,
					Note: fmt.Sprint("operator ", i)})
			})
		}
		close(start)
		wg.Wait()
		winner := -1
		for i := range n {
			switch code := agentowl.ErrorCode(errs[i]); {
			case errs[i] == nil && winner >= 0:
				t.Fatalf("decisions %d and %d both won", winner, i)
			case errs[i] == nil:
				winner = i
			case code != agentowl.ECodeAlreadyTerminal && code != agentowl.ECodeAlreadyDecided:
				t.Fatalf("decision %d: %v, want already decided", i, errs[i])
			}
		}
		if winner < 0 {
			t.Fatal("no decision won")
		}
		var got *agentowl.ApprovalRequest
		if got, err = appr.GetRequest(ctx, agent, id, 0); err != nil {
			t.Fatal(err)
		}
		if got.Decision == nil || got.Decision.Note != decided[winner].Decision.Note || got.Status != decided[winner].Status {
			t.Fatalf("stored decision %+v, the winner's %+v", got.Decision, decided[winner].Decision)
		}
	})
}
