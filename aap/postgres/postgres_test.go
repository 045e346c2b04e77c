package postgres_test

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"net/url"
	"os"
	"testing"

	"github.com/agentowl/agentowl/aap"
	"github.com/agentowl/agentowl/aap/internal/storetest"
	"github.com/agentowl/agentowl/aap/postgres"
)

// TestStore runs the conformance suite in a fresh schema of
// AGENTOWL_TEST_DATABASE_URL (skipped without it, failed without it in CI).
func TestStore(t *testing.T) {
	base := os.Getenv("AGENTOWL_TEST_DATABASE_URL")
	if base == "" {
		if os.Getenv("CI") != "" {
			t.Fatal("CI is set but AGENTOWL_TEST_DATABASE_URL is not")
		}
		t.Skip("AGENTOWL_TEST_DATABASE_URL not set")
	}
	storetest.Run(t, func(t *testing.T) aap.Store {
		s, err := postgres.Open(context.Background(), freshSchema(t, base))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	})
}

func freshSchema(t *testing.T, base string) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	schema := "aap_t_" + hex.EncodeToString(b[:])
	admin, err := sql.Open("pgx", base)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	if _, err := admin.Exec("CREATE SCHEMA " + schema); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if db, err := sql.Open("pgx", base); err == nil {
			_, _ = db.Exec("DROP SCHEMA " + schema + " CASCADE")
			db.Close()
		}
	})
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}
