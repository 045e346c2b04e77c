package sqlite_test

import (
	"testing"

	"github.com/agentowl/agentowl/internal/store/storetest"
)

func TestConformance(t *testing.T) {
	t.Parallel()
	storetest.Exercise(t, storetest.OpenSQLite)
}
