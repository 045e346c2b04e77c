package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"testing"
)

// failedRows is a query whose Next failed: database/sql reports that in
// Err, and Close then returns nil.
type failedRows struct{ err error }

func (r *failedRows) Next() bool        { return false }
func (r *failedRows) Scan(...any) error { return nil }
func (r *failedRows) Err() error        { return r.err }
func (r *failedRows) Close() error      { return nil }

// TestFirstRowFailureIsNotEmpty: a query that failed (a cancelled context)
// is that failure, not "no row", which callers answer as not found.
func TestFirstRowFailureIsNotEmpty(t *testing.T) {
	err := (&firstRow{rows: &failedRows{err: context.Canceled}}).Scan()
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Scan = %v, want context.Canceled", err)
	}
	if err := (&firstRow{rows: &failedRows{}}).Scan(); !errors.Is(err, sql.ErrNoRows) {
		t.Fatalf("Scan of no rows = %v, want sql.ErrNoRows", err)
	}
}
