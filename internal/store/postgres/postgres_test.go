package postgres_test

import (
	"context"
	"database/sql"
	"testing"

	"github.com/pressly/goose/v3"

	"github.com/agentowl/agentowl/internal/secret/secrettest"
	"github.com/agentowl/agentowl/internal/store"
	"github.com/agentowl/agentowl/internal/store/postgres"
	"github.com/agentowl/agentowl/internal/store/storetest"
)

func TestConformance(t *testing.T) {
	t.Parallel()
	if storetest.PostgresURL(t) == "" {
		t.Skip("AGENTOWL_TEST_DATABASE_URL is not set: skipping the PostgreSQL conformance suite")
	}
	storetest.Exercise(t, storetest.OpenPostgres)
}

func TestIdentityUpgrade(t *testing.T) {
	t.Parallel()
	if storetest.PostgresURL(t) == "" {
		t.Skip("AGENTOWL_TEST_DATABASE_URL is not set")
	}
	url := storetest.FreshPostgresURL(t)
	db, err := sql.Open("pgx", url)
	if err != nil {
		t.Fatal(err)
	}
	storetest.IdentityUpgrade(t, goose.DialectPostgres, db, postgres.Migrations(), func() store.Store {
		s, err := postgres.Open(context.Background(), url, secrettest.NewBox(t))
		if err != nil {
			t.Fatalf("open after the upgrade: %v", err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	})
}
