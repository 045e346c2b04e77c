package server

import (
	"testing"

	"github.com/agentowl/agentowl/internal/admission"
	"github.com/agentowl/agentowl/internal/store/postgres"
)

// TestAdmissionConcurrencyFollowsTheStore: on PostgreSQL a surface's
// writes run at most as many at once as the store has connections, unless
// the operator set the concurrency; SQLite keeps the admission default.
func TestAdmissionConcurrencyFollowsTheStore(t *testing.T) {
	for _, c := range []struct {
		dialect   string
		set, want int
	}{
		{"postgres", 0, postgres.MaxConns},
		{"postgres", 40, 40},
		{"sqlite", 0, 0}, // admission.DefaultConcurrency applies
		{"sqlite", 8, 8},
	} {
		if got := admissionFor(admission.Config{Concurrency: c.set}, c.dialect).Concurrency; got != c.want {
			t.Errorf("%s with %d set: concurrency %d, want %d", c.dialect, c.set, got, c.want)
		}
	}
}
