package console_test

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentowl/agentowl"
	"github.com/agentowl/agentowl/internal/store/storetest"
)

// BenchmarkConsolePages: the server's time to render Needs attention and
// Agent work (first page, and a page deep in the list through its keyset
// cursor) for a tenant with 10,000 work items and 10,000 open attention
// items, Needs attention by urgency with its counts (the default view), and
// a conversation of 500 events (its first page and its last), measured as
// the HTTP exchange on loopback with a signed-in session. It reports p50
// and p99 in milliseconds (BENCHMARKS.md).
//
//	go test ./internal/console -run '^$' -bench ConsolePages -benchtime 200x
func BenchmarkConsolePages(b *testing.B) {
	for _, be := range storetest.Backends(b) {
		b.Run(be.Name, func(b *testing.B) {
			s := start(b, be, nil)
			seed(b, s, 10_000)
			c := s.client()
			c.signIn(s.admin)
			for _, pg := range []struct{ name, path string }{
				{"attention", "/console/t/default/attention?status=all"},
				{"attention-deep", "/console/t/default/attention?status=all&after=" + deepCursor(b, c, "/console/t/default/attention?status=all")},
				{"work", "/console/t/default/work"},
				{"work-deep", "/console/t/default/work?after=" + deepCursor(b, c, "/console/t/default/work")},
				{"attention-urgency", "/console/t/default/attention"},
				{"attention-urgency-deep", "/console/t/default/attention?after=" + cursorAfter(b, c, "/console/t/default/attention", moreItems, 30)},
				{"conversation-500", "/console/t/default/conversations/conv_thread"},
				{"conversation-500-last", "/console/t/default/conversations/conv_thread?after=" + cursorAfter(b, c, "/console/t/default/conversations/conv_thread", laterEvents, 4)},
			} {
				b.Run(pg.name, func(b *testing.B) {
					if p := c.get(pg.path); p.Status != http.StatusOK || !strings.Contains(p.Body, "Older") && !strings.Contains(p.Body, "More items") &&
						!strings.Contains(p.Body, "evt_thread") {
						b.Fatalf("%s: %d", pg.path, p.Status)
					}
					lat := make([]time.Duration, 0, b.N)
					b.ResetTimer()
					for b.Loop() {
						start := time.Now()
						c.get(pg.path)
						lat = append(lat, time.Since(start))
					}
					slices.Sort(lat)
					b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
					b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
				})
			}
		})
	}
}

// seed writes n work items of one endpoint and one attention item per
// work (a question for every tenth, else an incident) straight into the
// store, 500 per transaction, a second apart.
func seed(b *testing.B, s *site, n int) {
	b.Helper()
	ctx := context.Background()
	st := s.srv.Store()
	now := time.Now().UTC().Add(-time.Duration(n) * time.Second).Truncate(time.Microsecond)
	var tenantID string
	ep := &agentowl.Endpoint{ID: "ep_bench", Name: "bench", URL: "https://runtime.example/hook", AgentWork: true,
		SigningSecret: []byte("x"), CreatedAt: now, UpdatedAt: now}
	bnd := &agentowl.Binding{ID: "bnd_bench", Channel: "webhook", Name: "bench", EndpointID: ep.ID, TokenHash: []byte(agentowl.NewID("")),
		CreatedAt: now}
	conv := &agentowl.Conversation{ID: "conv_bench", BindingID: bnd.ID, Status: "open", CreatedAt: now, LastEventAt: now}
	ev := &agentowl.Event{ID: "evt_bench", BindingID: bnd.ID, ConversationID: conv.ID, Channel: "webhook", Sender: "bench",
		ReceivedAt: now, Headers: map[string][]string{}, Payload: []byte(`{}`), Attachments: []byte(`[]`)}
	err := st.Write(ctx, func(tx agentowl.Tx) error {
		t, err := tx.TenantGetByName(ctx, "default")
		if err != nil {
			return err
		}
		tenantID = t.ID
		ep.TenantID, bnd.TenantID, conv.TenantID, ev.TenantID = t.ID, t.ID, t.ID, t.ID
		for _, f := range []func() error{
			func() error { return tx.EndpointCreate(ctx, ep) }, func() error { return tx.BindingCreate(ctx, bnd) },
			func() error { return tx.ConversationCreate(ctx, conv) }, func() error { return tx.EventCreate(ctx, ev) },
		} {
			if err := f(); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	// A conversation of 500 events.
	err = st.Write(ctx, func(tx agentowl.Tx) error {
		thread := &agentowl.Conversation{ID: "conv_thread", TenantID: tenantID, BindingID: bnd.ID, Channel: "webhook", Key: "thread",
			Status: "open", CreatedAt: now, LastEventAt: now.Add(500 * time.Millisecond)}
		if err := tx.ConversationCreate(ctx, thread); err != nil {
			return err
		}
		for i := range 500 {
			at := now.Add(time.Duration(i) * time.Millisecond)
			e := &agentowl.Event{ID: fmt.Sprintf("evt_thread%04d", i), TenantID: tenantID, BindingID: bnd.ID, ConversationID: thread.ID,
				Channel: "webhook", Sender: "crm", ReceivedAt: at, Headers: map[string][]string{"Content-Type": {"application/json"}},
				Payload:     []byte(fmt.Sprintf(`{"text": "Message %d of the thread: where is my order?", "order": "A-%d"}`, i, i)),
				Attachments: []byte(`[]`), FollowUp: i > 0}
			if err := tx.EventCreate(ctx, e); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	for from := 0; from < n; from += 500 {
		err := st.Write(ctx, func(tx agentowl.Tx) error {
			for i := from; i < min(from+500, n); i++ {
				at := now.Add(time.Duration(i) * time.Second)
				w := &agentowl.Work{ID: fmt.Sprintf("work_bench%06d", i), TenantID: tenantID, EndpointID: ep.ID, ConversationID: conv.ID,
					EventID: ev.ID, Generation: i + 1, DeliveryID: agentowl.NewID(""), Status: agentowl.WorkRunning, Sequence: 1, Callbacks: 1,
					CreatedAt: at, UpdatedAt: at}
				if err := tx.WorkCreate(ctx, w); err != nil {
					return err
				}
				it := &agentowl.AttentionItem{ID: fmt.Sprintf("att_bench%06d", i), TenantID: tenantID, Kind: "incident",
					Status: agentowl.AttentionOpen, WorkID: w.ID, EndpointID: ep.ID, Summary: "The runtime reported the work failed.",
					CreatedAt: at, UpdatedAt: at}
				if i%10 == 0 {
					exp := at.Add(24 * time.Hour)
					it.Kind, it.Summary, it.RequestID, it.Revision, it.Prompt = "question", "", "q", 1, "Which account?"
					it.AllowedDecisions, it.ExpiresAt, it.ContentHash, it.Request = []string{"answer"}, &exp, []byte("h"), []byte(`{}`)
				}
				if err := tx.AttentionCreate(ctx, it); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
}

// deepCursor follows a list's "older" links 100 pages deep (5,000 items
// in) and returns that page's cursor.
func deepCursor(b *testing.B, c *browserless, path string) string {
	b.Helper()
	next := ""
	for range 100 {
		p := path
		if next != "" {
			p += "&after=" + next
			if !strings.Contains(path, "?") {
				p = path + "?after=" + next
			}
		}
		page := c.get(p)
		i := strings.Index(page.Body, "after=")
		if i < 0 {
			b.Fatalf("no older page after %s", p)
		}
		next = page.Body[i+len("after=") : i+strings.IndexByte(page.Body[i:], '"')]
	}
	return next
}

var (
	moreItems   = regexp.MustCompile(`href="/console/t/default/attention\?[^"]*after=([^"&]+)">More items`)
	laterEvents = regexp.MustCompile(`href="/console/t/default/conversations/conv_thread\?after=([^"]+)">Later messages`)
)

// cursorAfter follows the next-page links that link matches on path
// (Needs attention's "More items", by urgency; a conversation's "Later
// messages") pages deep and returns that page's cursor.
func cursorAfter(b *testing.B, c *browserless, path string, link *regexp.Regexp, pages int) string {
	b.Helper()
	next := ""
	for range pages {
		page := c.get(path + "?after=" + next)
		m := link.FindStringSubmatch(page.Body)
		if m == nil {
			b.Fatalf("no next page of %s after %s", path, next)
		}
		next = m[1]
	}
	return next
}
