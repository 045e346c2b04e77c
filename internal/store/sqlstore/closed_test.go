package sqlstore_test

import (
	"testing"
	"time"

	"github.com/agentowl/agentowl"
	"github.com/agentowl/agentowl/internal/store/storetest"
)

// A Read after Close fails at once instead of waiting forever for a
// connection (the background attestation signer, for one, may still read
// while a server shuts down).
func TestReadAfterCloseFails(t *testing.T) {
	storetest.Each(t, func(t *testing.T, b storetest.Backend) {
		st := b.Open(t)
		if err := st.Close(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() {
			done <- st.Read(t.Context(), func(tx agentowl.Tx) error {
				_, err := tx.AttestationKeyList(t.Context())
				return err
			})
		}()
		select {
		case err := <-done:
			if err == nil {
				t.Fatal("a Read after Close succeeded")
			}
		case <-time.After(30 * time.Second):
			t.Fatal("a Read after Close still waits after 30 s")
		}
	})
}
