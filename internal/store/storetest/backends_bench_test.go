package storetest

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/agentowl/agentowl/internal/secret/secrettest"
	"github.com/agentowl/agentowl/internal/store/postgres"
	"github.com/agentowl/agentowl/internal/store/sqlite"
)

// BenchmarkOpenFreshStore is what every test that takes a store pays
// before its first statement: migrating an empty database ("migrate", as
// before the templates) or taking a migrated one ("template": a copy of the
// SQLite template file, or an emptied PostgreSQL schema from the pool).
func BenchmarkOpenFreshStore(b *testing.B) {
	ctx := context.Background()
	b.Run("sqlite/migrate", func(b *testing.B) {
		for b.Loop() {
			s, err := sqlite.Open(ctx, filepath.Join(b.TempDir(), "agentowl.db"), secrettest.NewBox(b))
			if err != nil {
				b.Fatal(err)
			}
			s.Close()
		}
	})
	b.Run("sqlite/template", func(b *testing.B) {
		for b.Loop() {
			OpenSQLite(b).Close()
		}
	})
	if PostgresURL(b) == "" {
		return
	}
	b.Run("postgres/migrate", func(b *testing.B) {
		for b.Loop() {
			s, err := postgres.Open(ctx, FreshPostgresURL(b), secrettest.NewBox(b))
			if err != nil {
				b.Fatal(err)
			}
			s.Close()
		}
	})
	b.Run("postgres/template", func(b *testing.B) {
		p, err := pgPoolFor(PostgresURL(b))
		if err != nil {
			b.Fatal(err)
		}
		for b.Loop() { // a test's whole life: take, open, close, give back
			schema, err := p.take()
			if err != nil {
				b.Fatal(err)
			}
			s, err := postgres.Open(ctx, withSearchPath(b, p.base, schema), secrettest.NewBox(b))
			if err != nil {
				b.Fatal(err)
			}
			s.Close()
			p.give(schema)
		}
	})
}
