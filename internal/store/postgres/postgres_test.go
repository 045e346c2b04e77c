package postgres_test

import (
	"testing"

	"github.com/agentowl/agentowl/internal/store/storetest"
)

func TestConformance(t *testing.T) {
	t.Parallel()
	if storetest.PostgresURL(t) == "" {
		t.Skip("AGENTOWL_TEST_DATABASE_URL is not set: skipping the PostgreSQL conformance suite")
	}
	storetest.Exercise(t, storetest.OpenPostgres)
}
