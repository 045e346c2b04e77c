package migrations_test

import (
	"bytes"
	"io/fs"
	"slices"
	"testing"
	"testing/fstest"

	"github.com/agentowl/agentowl/internal/store/migrations"
	"github.com/agentowl/agentowl/internal/store/postgres"
	"github.com/agentowl/agentowl/internal/store/sqlite"
)

func TestToSQLite(t *testing.T) {
	for in, want := range map[string]string{
		"at BIGINT NOT NULL, body BYTEA":     "at INTEGER NOT NULL, body BLOB",
		"(BIGINT)\nBYTEA,BIGINT":             "(INTEGER)\nBLOB,INTEGER",
		"BIGSERIAL BIGINTS XBYTEA BIGINT_at": "BIGSERIAL BIGINTS XBYTEA BIGINT_at",
		"bigint bytea 'TEXT' INTEGER BLOB":   "bigint bytea 'TEXT' INTEGER BLOB",
	} {
		if got := string(migrations.ToSQLite([]byte(in))); got != want {
			t.Errorf("ToSQLite(%q) = %q, want %q", in, got, want)
		}
	}
}

// unused are the versions no migration has: a new migration takes the next
// number after the highest, so that no other gap opens.
var unused = []int64{14, 18}

// Both dialects run every version, and only those from 1 to the newest.
func TestVersions(t *testing.T) {
	sv, pv := versions(t, sqlite.Migrations()), versions(t, postgres.Migrations())
	if !slices.Equal(sv, pv) {
		t.Fatalf("SQLite runs versions %v, PostgreSQL %v", sv, pv)
	}
	var want []int64
	for v := int64(1); v <= sv[len(sv)-1]; v++ {
		if !slices.Contains(unused, v) {
			want = append(want, v)
		}
	}
	if !slices.Equal(sv, want) {
		t.Errorf("versions %v, want %v: a migration is missing, or a new one skipped a number", sv, want)
	}
}

func versions(t *testing.T, fsys fs.FS) []int64 {
	t.Helper()
	names, err := fs.Glob(fsys, "*.sql")
	if err != nil {
		t.Fatal(err)
	}
	var vs []int64
	for _, name := range names {
		v, err := migrations.Version(name)
		if err != nil {
			t.Fatal(err)
		}
		vs = append(vs, v)
	}
	slices.Sort(vs)
	return vs
}

// A migration kept per dialect differs by more than ToSQLite's words;
// otherwise it belongs in the shared directory, written once.
func TestDialectFilesDiffer(t *testing.T) {
	sq, pg := sqlite.Migrations(), postgres.Migrations()
	names, err := fs.Glob(pg, "*.sql")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		if _, err := fs.Stat(shared(), name); err == nil {
			continue
		}
		p, err1 := fs.ReadFile(pg, name)
		s, err2 := fs.ReadFile(sq, name)
		if err1 != nil || err2 != nil {
			t.Fatalf("%s: %v %v", name, err1, err2)
		}
		if bytes.Equal(migrations.ToSQLite(p), s) {
			t.Errorf("%s is the same in both dialects but for ToSQLite: move it to internal/store/migrations", name)
		}
	}
}

// shared is the shared migrations alone: what Postgres joins to no files.
func shared() fs.FS {
	m, err := migrations.Postgres(fstest.MapFS{}, ".")
	if err != nil {
		panic(err)
	}
	return m
}

// A dialect's file under a shared version is refused when the migrations
// are joined, not first when goose meets the two as a store opens.
func TestVersionInBothPlaces(t *testing.T) {
	own := fstest.MapFS{"migrations/00002_outbox_again.sql": {Data: []byte("-- +goose Up\nSELECT 1;\n")}}
	if _, err := migrations.SQLite(own, "migrations"); err == nil {
		t.Error("SQLite joined a dialect file under a shared version")
	}
	if _, err := migrations.Postgres(own, "migrations"); err == nil {
		t.Error("PostgreSQL joined a dialect file under a shared version")
	}
	if _, err := migrations.Postgres(fstest.MapFS{"m/core.sql": {}}, "m"); err == nil {
		t.Error("joined a file whose name has no version")
	}
}

// The joined directory is a well-behaved fs.FS: goose globs and reads it,
// storetest walks it for the SQLite template's name.
func TestJoinedFS(t *testing.T) {
	for _, m := range []fs.FS{sqlite.Migrations(), postgres.Migrations()} {
		if err := fstest.TestFS(m, "00001_core.sql", "00002_outbox.sql", "00026_audit_chain.sql"); err != nil {
			t.Error(err)
		}
	}
}
