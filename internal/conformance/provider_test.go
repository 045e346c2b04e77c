package conformance

import (
	"context"
	"testing"

	"github.com/agentowl/agentowl/internal/store/storetest"
)

// TestProviderAgentOwl: AgentOwl passes every provider check, on each
// store.
func TestProviderAgentOwl(t *testing.T) {
	t.Parallel()
	for _, b := range storetest.Backends(t) {
		t.Run(b.Name, func(t *testing.T) {
			t.Parallel()
			async, opts := asyncSetup(t)
			a := startAgentOwl(t, b, opts)
			rep, err := CheckProvider(context.Background(), ProviderConfig{URL: a.url, ProvisionerToken: a.prov,
				Decider: a.decider(), Contract: testContract(t), Async: async})
			if err != nil {
				t.Fatal(err)
			}
			requireOutcome(t, rep, nil, nil)
		})
	}
}
