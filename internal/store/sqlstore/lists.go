package sqlstore

import (
	"context"
	"strings"

	"github.com/agentowl/agentowl"
)

// listLimit is a page's size: n, or 100 when the caller left it 0.
func listLimit(n int) int {
	if n <= 0 {
		return 100
	}
	return n
}

// after adds the keyset condition of a newest-first list ordered by
// created_at DESC, id: the rows after cursor c, if any.
func after(where []string, args []any, c *agentowl.Cursor) ([]string, []any) {
	if c == nil {
		return where, args
	}
	return append(where, "(created_at < ? OR (created_at = ? AND id > ?))"), append(args, ts(c.At), ts(c.At), c.ID)
}

// eq adds the condition col = v when v is set: a list's optional filter.
func eq[S ~string](where []string, args []any, col string, v S) ([]string, []any) {
	if v == "" {
		return where, args
	}
	return append(where, col+" = ?"), append(args, string(v))
}

// listNewest reads a page of a table newest first (created_at DESC, id):
// the rows where all of where holds, after cursor c if any, at most limit
// (listLimit) of them.
func listNewest[T any](ctx context.Context, t *tx, cols, table string, where []string, args []any, c *agentowl.Cursor,
	limit int, scan func(scanner) (T, error)) ([]T, error) {
	where, args = after(where, args, c)
	rows, err := t.query(ctx, `SELECT `+cols+` FROM `+table+` WHERE `+strings.Join(where, " AND ")+
		` ORDER BY created_at DESC, id LIMIT ?`, append(args, listLimit(limit))...)
	return all(rows, err, scan)
}
