package sqlite_test

import (
	"testing"

	"github.com/pressly/goose/v3"

	"github.com/agentowl/agentowl/internal/store/sqlite"
	"github.com/agentowl/agentowl/internal/store/storetest"
)

// Tampering with the audit log in the database is found (storetest).
func TestAuditChainTampering(t *testing.T) {
	t.Parallel()
	storetest.AuditChainTampering(t, storetest.Backends(t)[0])
}

// Migration 30 chains the entries an earlier version wrote.
func TestAuditChainUpgrade(t *testing.T) {
	t.Parallel()
	_, db, open := upgradeDB(t)
	storetest.AuditChainUpgrade(t, goose.DialectSQLite3, db, sqlite.Migrations(), open)
}

// BenchmarkAuditChain: what chaining costs an audited write (BENCHMARKS.md).
func BenchmarkAuditChain(b *testing.B) { storetest.BenchAuditChain(b, storetest.Backends(b)[0]) }
