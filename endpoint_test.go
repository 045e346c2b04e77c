package agentowl_test

import (
	"testing"
	"time"

	"github.com/agentowl/agentowl"
)

// TestRuntimeCredentialActive pins when a runtime credential
// authenticates: not revoked, and before its expiry instant (at it, no
// more). A revocation ends it whatever its time.
func TestRuntimeCredentialActive(t *testing.T) {
	t.Parallel()
	expiry := time.Date(2026, 10, 6, 12, 0, 0, 0, time.UTC)
	revokedAt := expiry.Add(-time.Hour)
	later := expiry.Add(24 * time.Hour)
	for _, c := range []struct {
		name string
		c    agentowl.RuntimeCredential
		now  time.Time
		want bool
	}{
		{"live, a day before expiry", agentowl.RuntimeCredential{ExpiresAt: expiry}, expiry.Add(-24 * time.Hour), true},
		{"live, 1ns before expiry", agentowl.RuntimeCredential{ExpiresAt: expiry}, expiry.Add(-time.Nanosecond), true},
		{"at the expiry instant", agentowl.RuntimeCredential{ExpiresAt: expiry}, expiry, false},
		{"after expiry", agentowl.RuntimeCredential{ExpiresAt: expiry}, expiry.Add(time.Nanosecond), false},
		{"revoked, before expiry", agentowl.RuntimeCredential{ExpiresAt: expiry, RevokedAt: &revokedAt}, revokedAt.Add(time.Minute), false},
		{"revoked, asked before the revocation time", agentowl.RuntimeCredential{ExpiresAt: expiry, RevokedAt: &later}, revokedAt, false},
		{"no expiry set", agentowl.RuntimeCredential{}, expiry, false},
	} {
		if got := c.c.Active(c.now); got != c.want {
			t.Errorf("%s: Active = %v, want %v", c.name, got, c.want)
		}
	}
}
