package agentowl_test

import (
	"testing"
	"time"

	"github.com/agentowl/agentowl"
)

// TestTokenActive pins when a bearer token authenticates: not revoked, and
// before its expiry instant when it has one (a token without an expiry
// lasts until revoked).
func TestTokenActive(t *testing.T) {
	t.Parallel()
	expiry := time.Date(2026, 10, 6, 12, 0, 0, 0, time.UTC)
	revoked := expiry.Add(-time.Hour)
	for _, c := range []struct {
		name string
		tok  agentowl.Token
		now  time.Time
		want bool
	}{
		{"no expiry", agentowl.Token{}, expiry.Add(100 * 365 * 24 * time.Hour), true},
		{"1ns before expiry", agentowl.Token{ExpiresAt: &expiry}, expiry.Add(-time.Nanosecond), true},
		{"at the expiry instant", agentowl.Token{ExpiresAt: &expiry}, expiry, false},
		{"after expiry", agentowl.Token{ExpiresAt: &expiry}, expiry.Add(time.Hour), false},
		{"revoked, no expiry", agentowl.Token{RevokedAt: &revoked}, revoked.Add(-time.Hour), false},
		{"revoked, before expiry", agentowl.Token{ExpiresAt: &expiry, RevokedAt: &revoked}, revoked, false},
	} {
		if got := c.tok.Active(c.now); got != c.want {
			t.Errorf("%s: Active = %v, want %v", c.name, got, c.want)
		}
	}
}
