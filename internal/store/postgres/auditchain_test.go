package postgres_test

import (
	"testing"

	"github.com/pressly/goose/v3"

	"github.com/agentowl/agentowl/internal/store/postgres"
	"github.com/agentowl/agentowl/internal/store/storetest"
)

// Tampering with the audit log in the database is found (storetest).
func TestAuditChainTampering(t *testing.T) {
	t.Parallel()
	if storetest.PostgresURL(t) == "" {
		t.Skip("AGENTOWL_TEST_DATABASE_URL is not set")
	}
	storetest.AuditChainTampering(t, storetest.Backends(t)[1])
}

// Migration 30 chains the entries an earlier version wrote.
func TestAuditChainUpgrade(t *testing.T) {
	t.Parallel()
	db, open := upgradeDB(t)
	storetest.AuditChainUpgrade(t, goose.DialectPostgres, db, postgres.Migrations(), open)
}

// BenchmarkAuditChain: what chaining costs an audited write (BENCHMARKS.md).
func BenchmarkAuditChain(b *testing.B) {
	if storetest.PostgresURL(b) == "" {
		b.Skip("AGENTOWL_TEST_DATABASE_URL is not set")
	}
	storetest.BenchAuditChain(b, storetest.Backends(b)[1])
}
