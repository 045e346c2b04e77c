package sqlstore_test

import (
	"testing"

	"github.com/agentowl/agentowl/internal/store/storetest"
)

// TestAttestationKeySealedAtRest: an attestation key's private key is
// sealed like every stored secret, on both dialects.
func TestAttestationKeySealedAtRest(t *testing.T) {
	for _, b := range storetest.Backends(t) {
		t.Run(b.Name, func(t *testing.T) {
			storetest.AttestationKeySealedAtRest(t, b)
		})
	}
}
