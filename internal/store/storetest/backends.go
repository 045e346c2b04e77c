// Package storetest opens real test databases and holds the conformance suite
// that every store implementation must pass.
package storetest

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver for schema set-up

	"github.com/agentowl/agentowl"
	"github.com/agentowl/agentowl/internal/secret"
	"github.com/agentowl/agentowl/internal/secret/secrettest"
	"github.com/agentowl/agentowl/internal/store/postgres"
	"github.com/agentowl/agentowl/internal/store/sqlite"
)

// Backend is one store kind a test runs against.
type Backend struct {
	Name string
	// Open returns a fresh, empty, migrated store closed at test end.
	Open func(t testing.TB) agentowl.Store
	// URL returns the database setting for a fresh store that Main would use:
	// a SQLite file path or a PostgreSQL URL with its own schema, empty and
	// already migrated (FreshSQLitePath, MigratedPostgresURL).
	URL func(t testing.TB) string
}

// Backends returns SQLite always, and PostgreSQL when
// AGENTOWL_TEST_DATABASE_URL is set. With CI set and no URL, the test fails
// rather than silently running on one backend.
func Backends(t testing.TB) []Backend {
	bs := []Backend{{Name: "sqlite", Open: OpenSQLite, URL: FreshSQLitePath}}
	if PostgresURL(t) != "" {
		bs = append(bs, Backend{Name: "postgres", Open: OpenPostgres, URL: MigratedPostgresURL})
	}
	return bs
}

// Each runs fn as a parallel subtest per backend (Backends), named after
// it: the opening of every test that runs on both stores.
func Each(t *testing.T, fn func(t *testing.T, b Backend)) {
	t.Helper()
	for _, b := range Backends(t) {
		t.Run(b.Name, func(t *testing.T) {
			t.Parallel()
			fn(t, b)
		})
	}
}

// PostgresURL returns AGENTOWL_TEST_DATABASE_URL, failing the test when CI
// is set and it is missing.
func PostgresURL(t testing.TB) string {
	u := os.Getenv("AGENTOWL_TEST_DATABASE_URL")
	if u == "" && os.Getenv("CI") != "" {
		t.Fatal("CI is set but AGENTOWL_TEST_DATABASE_URL is not: the PostgreSQL half of the suite cannot run")
	}
	if u == "" {
		t.Log("AGENTOWL_TEST_DATABASE_URL not set: running on SQLite only")
	}
	return u
}

// OpenSQLite opens a store in a temporary directory, its secrets sealed
// under a fresh key.
func OpenSQLite(t testing.TB) agentowl.Store {
	t.Helper()
	return OpenURL(t, FreshSQLitePath(t), secrettest.NewBox(t))
}

// FreshSQLitePath returns the path of an empty, migrated SQLite database in
// a temporary directory: a copy of a template migrated once per set of
// migrations. Migrating a fresh file costs each test a write transaction
// per migration; copying the template costs a file copy, and the store's
// own migration step then finds nothing to do.
func FreshSQLitePath(t testing.TB) string {
	t.Helper()
	src, err := sqliteTemplate()
	if err != nil {
		t.Fatalf("sqlite template: %v", err)
	}
	dst := filepath.Join(t.TempDir(), "agentowl.db")
	if err := copyFile(dst, src); err != nil {
		t.Fatalf("sqlite template: %v", err)
	}
	return dst
}

// sqliteTemplate migrates the template database once per test process, in
// a file named for the migrations it holds under the user's cache (or temp)
// directory, where later test processes find it. A template is written to
// a temporary name and renamed, so a concurrent process never copies half.
var sqliteTemplate = sync.OnceValues(func() (string, error) {
	h := sha256.New()
	err := fs.WalkDir(sqlite.Migrations(), ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(sqlite.Migrations(), path)
		fmt.Fprintf(h, "%s %d\n", path, len(b))
		h.Write(b)
		return err
	})
	if err != nil {
		return "", err
	}
	dir, err := os.UserCacheDir()
	if err != nil {
		dir = os.TempDir()
	}
	dir = filepath.Join(dir, "agentowl-test")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	path := filepath.Join(dir, "sqlite-"+hex.EncodeToString(h.Sum(nil)[:12])+".db")
	if _, err := os.Stat(path); err == nil {
		return path, nil
	}
	tmp, err := os.MkdirTemp(dir, "build-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	s, err := sqlite.Open(context.Background(), filepath.Join(tmp, "t.db"), nil)
	if err != nil {
		return "", err
	}
	if err := s.Close(); err != nil { // checkpoints the WAL into the file
		return "", err
	}
	return path, os.Rename(filepath.Join(tmp, "t.db"), path)
})

func copyFile(dst, src string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// OpenPostgres opens a store in a fresh schema of the test database, its
// secrets sealed under a fresh key.
func OpenPostgres(t testing.TB) agentowl.Store {
	t.Helper()
	return OpenURL(t, MigratedPostgresURL(t), secrettest.NewBox(t))
}

// Open opens the store at url (what Backend.URL returns: a SQLite path or a
// postgres:// URL), its secrets sealed by box, or keyless when box is nil.
func Open(ctx context.Context, url string, box *secret.Box) (agentowl.Store, error) {
	if isPostgres(url) {
		return postgres.Open(ctx, url, box)
	}
	return sqlite.Open(ctx, url, box)
}

func isPostgres(url string) bool {
	return strings.HasPrefix(url, "postgres://") || strings.HasPrefix(url, "postgresql://")
}

// OpenURL opens the store at url (Open) and closes it at test end.
func OpenURL(t testing.TB, url string, box *secret.Box) agentowl.Store {
	t.Helper()
	s, err := Open(context.Background(), url, box)
	if err != nil {
		t.Fatalf("open %s: %v", url, err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// FreshPostgresURL creates an empty schema, dropped at test end, and returns
// the test database URL with search_path set to it.
func FreshPostgresURL(t testing.TB) string {
	t.Helper()
	base := PostgresURL(t)
	if base == "" {
		t.Fatal("AGENTOWL_TEST_DATABASE_URL is not set")
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	schema := "t_" + hex.EncodeToString(b[:])
	admin, err := sql.Open("pgx", base)
	if err != nil {
		t.Fatalf("postgres: %v", err)
	}
	defer admin.Close()
	if _, err := admin.Exec("CREATE SCHEMA " + schema); err != nil {
		t.Fatalf("postgres: create schema: %v", err)
	}
	t.Cleanup(func() {
		db, err := sql.Open("pgx", base)
		if err == nil {
			_, _ = db.Exec("DROP SCHEMA " + schema + " CASCADE")
			db.Close()
		}
	})
	return withSearchPath(t, base, schema)
}
