package sqlite_test

import (
	"testing"

	"github.com/agentowl/agentowl/internal/store/storetest"
)

// Tampering with the audit log in the database is found (storetest).
func TestAuditChainTampering(t *testing.T) {
	t.Parallel()
	storetest.AuditChainTampering(t, storetest.Backends(t)[0])
}

// BenchmarkAuditChain: what chaining costs an audited write (BENCHMARKS.md).
func BenchmarkAuditChain(b *testing.B) { storetest.BenchAuditChain(b, storetest.Backends(b)[0]) }
