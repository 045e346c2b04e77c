package inbox

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/agentowl/agentowl"
	"github.com/agentowl/agentowl/internal/access"
	"github.com/agentowl/agentowl/internal/approval"
)

// Needs attention by urgency (docs/console.md): the open items that expire
// first come first (runtime requests and AAP requests, soonest expiry
// first, then by attention ID), then those that never expire (incidents),
// newest first; and the counts per kind and status.

// SoonWindow is how close an expiry marks an item as expiring soon.
const SoonWindow = 15 * time.Minute

// Count is how many unresolved items of one kind and status there are,
// and how many of them expire within SoonWindow.
type Count struct {
	Kind   string
	Status agentowl.AttentionStatus
	N      int
	Soon   int
}

// Counts are the tenant's unresolved items counted.
type Counts struct {
	// Rows are per kind and status, by kind then status.
	Rows []Count
	// Total counts every unresolved item; Soon those that expire within
	// SoonWindow.
	Total, Soon int
}

// Counts counts the tenant's unresolved items: runtime requests and
// incidents, and AAP requests still pending. Members may.
func (s *Service) Counts(ctx context.Context, p *access.Principal, tenant string) (*Counts, error) {
	soon := s.clock.Now().Add(SoonWindow)
	rows, err := s.work.CountAttention(ctx, p, tenant, soon)
	if err != nil {
		return nil, err
	}
	rc, err := s.approval.CountPending(ctx, p, tenant, soon)
	if err != nil {
		return nil, err
	}
	byKey := map[string]*Count{}
	out := &Counts{}
	add := func(kind string, st agentowl.AttentionStatus, n, soon int) {
		if n == 0 {
			return
		}
		k := kind + "/" + string(st)
		if byKey[k] == nil {
			out.Rows = append(out.Rows, Count{Kind: kind, Status: st})
			byKey[k] = &out.Rows[len(out.Rows)-1]
		}
		c := byKey[k]
		c.N, c.Soon = c.N+n, c.Soon+soon
		out.Total, out.Soon = out.Total+n, out.Soon+soon
	}
	// Rows is appended to while byKey points into it: size it first.
	out.Rows = make([]Count, 0, len(rows)+2)
	for _, r := range rows {
		add(r.Kind, r.Status, r.N, r.Soon)
	}
	// The soon AAP requests are counted as open ones: a request's
	// acknowledgement does not change its deadline.
	add("approval", agentowl.AttentionOpen, rc.Pending-rc.Acknowledged, min(rc.Soon, rc.Pending-rc.Acknowledged))
	add("approval", agentowl.AttentionAcknowledged, rc.Acknowledged, rc.Soon-min(rc.Soon, rc.Pending-rc.Acknowledged))
	slices.SortFunc(out.Rows, func(a, b Count) int {
		if c := strings.Compare(a.Kind, b.Kind); c != 0 {
			return c
		}
		return strings.Compare(string(b.Status), string(a.Status)) // open before acknowledged
	})
	return out, nil
}

// UrgentCursor is a position in the urgency order: in its dated part
// (At is the expiry) or its undated part (At is the creation; no ID: its
// start).
type UrgentCursor struct {
	Dated bool
	agentowl.Cursor
}

// String is the cursor as a page token.
func (c UrgentCursor) String() string {
	switch {
	case c.Dated:
		return "d" + c.Cursor.String()
	case c.ID == "":
		return "u"
	}
	return "u" + c.Cursor.String()
}

// ParseUrgentCursor reads a page token made by UrgentCursor.String.
func ParseUrgentCursor(s string) (*UrgentCursor, bool) {
	if s == "" || (s[0] != 'd' && s[0] != 'u') {
		return nil, false
	}
	if s == "u" {
		return &UrgentCursor{}, true
	}
	c, ok := agentowl.ParseCursor(s[1:])
	if !ok {
		return nil, false
	}
	return &UrgentCursor{Dated: s[0] == 'd', Cursor: *c}, true
}

// ListUrgent lists a page of the tenant's unresolved items of status (open,
// acknowledged, or unresolved: both) by urgency, and the cursor of the
// next page (nil at the end). Members may.
func (s *Service) ListUrgent(ctx context.Context, p *access.Principal, tenant string, status agentowl.AttentionStatus, after *UrgentCursor, limit int) ([]*Item, *UrgentCursor, error) {
	switch status {
	case agentowl.AttentionOpen, agentowl.AttentionAcknowledged, agentowl.AttentionUnresolved:
	default:
		return nil, nil, agentowl.FieldError(agentowl.ECodeInvalidField, "status", "By urgency lists open and acknowledged items only.")
	}
	if limit <= 0 {
		limit = 50
	}
	var out []*Item
	if after == nil || after.Dated {
		var from *agentowl.Cursor
		if after != nil {
			from = &after.Cursor
		}
		items, more, err := s.dated(ctx, p, tenant, status, from, limit)
		if err != nil {
			return nil, nil, err
		}
		if more {
			last := items[len(items)-1]
			return items, &UrgentCursor{Dated: true, Cursor: agentowl.Cursor{At: expiry(last), ID: attentionID(last)}}, nil
		}
		out, after = items, nil
	}
	left := limit - len(out)
	if left == 0 {
		return out, &UrgentCursor{}, nil
	}
	var from *agentowl.Cursor
	if after != nil && after.ID != "" {
		from = &after.Cursor
	}
	views, err := s.work.ListAttentionByUrgency(ctx, p, tenant, false, agentowl.AttentionListParams{Status: status, After: from, Limit: left})
	if err != nil {
		return nil, nil, err
	}
	for _, v := range views {
		out = append(out, &Item{Work: v})
	}
	if len(views) == left {
		last := views[len(views)-1].Item
		return out, &UrgentCursor{Cursor: agentowl.Cursor{At: last.CreatedAt, ID: last.ID}}, nil
	}
	return out, nil, nil
}

func expiry(it *Item) time.Time {
	if it.Approval != nil {
		return it.Approval.ExpiresAt
	}
	return *it.Work.Item.ExpiresAt
}

func attentionID(it *Item) string {
	if it.Approval != nil {
		return it.Approval.ID
	}
	return it.Work.Item.ID
}

// dated merges the items that expire, runtime requests and AAP requests,
// soonest first, then by attention ID: up to limit after from, and whether
// more may follow.
func (s *Service) dated(ctx context.Context, p *access.Principal, tenant string, status agentowl.AttentionStatus, from *agentowl.Cursor, limit int) ([]*Item, bool, error) {
	views, err := s.work.ListAttentionByUrgency(ctx, p, tenant, true, agentowl.AttentionListParams{Status: status, After: from, Limit: limit + 1})
	if err != nil {
		return nil, false, err
	}
	more := len(views) > limit
	items := make([]*Item, 0, len(views))
	for _, v := range views {
		items = append(items, &Item{Work: v})
	}
	reqs, err := s.approval.PendingByDeadline(ctx, p, tenant, deadlineCursor(from), limit+1)
	if err != nil {
		return nil, false, err
	}
	more = more || len(reqs) > limit
	acks, err := s.acks(ctx, reqs)
	if err != nil {
		return nil, false, err
	}
	now := s.clock.Now()
	for _, q := range reqs {
		ack := acks[q.ID]
		if (status == agentowl.AttentionOpen && ack != nil) || (status == agentowl.AttentionAcknowledged && ack == nil) {
			continue
		}
		items = append(items, &Item{Approval: approvalItem(q, ack, now)})
	}
	slices.SortStableFunc(items, func(a, b *Item) int {
		if c := expiry(a).Compare(expiry(b)); c != 0 {
			return c
		}
		return strings.Compare(attentionID(a), attentionID(b))
	})
	if len(items) > limit {
		items, more = items[:limit], true
	}
	return items, more, nil
}

// deadlineCursor is the position among AAP requests (by deadline, then
// request ID) after attention cursor c (by expiry, then attention ID): as
// requestCursor, in ascending order. A request's attention ID is the
// prefix and its ID, so at c.At come the requests whose prefixed IDs sort
// after c.ID.
func deadlineCursor(c *agentowl.Cursor) *agentowl.Cursor {
	switch {
	case c == nil:
		return nil
	case strings.HasPrefix(c.ID, approval.AttentionPrefix):
		return &agentowl.Cursor{At: c.At, ID: strings.TrimPrefix(c.ID, approval.AttentionPrefix)}
	case c.ID < approval.AttentionPrefix:
		// Every request at c.At comes after: start a microsecond earlier
		// with an ID above every request ID (UUIDs: hex digits and dashes).
		return &agentowl.Cursor{At: c.At.Add(-time.Microsecond), ID: "~"}
	}
	return &agentowl.Cursor{At: c.At, ID: "~"}
}
