// Package migrations holds the store's schema migrations that SQLite and
// PostgreSQL run alike, once, and joins them with each dialect's own.
//
// A migration here is written in PostgreSQL's spelling; SQLite runs it with
// the whole words BIGINT read as INTEGER and BYTEA as BLOB (ToSQLite), and
// nothing else changed. A migration that needs more than those two words to
// differ lives in internal/store/sqlite/migrations and
// internal/store/postgres/migrations instead, one file in each under the
// same version. Each version is in one place: here or in both dialects'
// directories, never both (TestVersions).
package migrations

import (
	"embed"
	"fmt"
	"io/fs"
	"regexp"
	"strconv"
	"strings"
	"testing/fstest"
)

//go:embed *.sql
var shared embed.FS

// sqliteWords are the type names that SQLite spells differently; \b keeps
// them to whole words, so BIGINTS or a column named bytea_x stay.
var sqliteWords = regexp.MustCompile(`\b(BIGINT|BYTEA)\b`)

// ToSQLite turns a shared migration into what SQLite runs: BIGINT becomes
// INTEGER (SQLite's rowid-sized integer, the same 64 bits) and BYTEA BLOB.
func ToSQLite(sql []byte) []byte {
	return sqliteWords.ReplaceAllFunc(sql, func(w []byte) []byte {
		if string(w) == "BIGINT" {
			return []byte("INTEGER")
		}
		return []byte("BLOB")
	})
}

// SQLite returns the migrations SQLite runs, in one flat directory: the
// shared ones through ToSQLite and the *.sql files in dir of own, the SQLite
// store's.
func SQLite(own fs.FS, dir string) (fs.FS, error) { return join(own, dir, ToSQLite) }

// Postgres returns the migrations PostgreSQL runs: the shared ones as
// written and the *.sql files in dir of own, the PostgreSQL store's.
func Postgres(own fs.FS, dir string) (fs.FS, error) { return join(own, dir, nil) }

// Must is fsys, or a panic for err: for a store's Migrations, whose only
// error is a version in two places, which TestVersions catches first.
func Must(fsys fs.FS, err error) fs.FS {
	if err != nil {
		panic(err)
	}
	return fsys
}

// join is the shared migrations, translated when translate is not nil, and
// own's. A version in both is an error here, where TestVersions finds it,
// not only when goose refuses it as a store opens.
func join(own fs.FS, dir string, translate func([]byte) []byte) (fs.FS, error) {
	own, err := fs.Sub(own, dir)
	if err != nil {
		return nil, err
	}
	// fstest.MapFS is a plain in-memory fs.FS (the package imports no
	// testing machinery): one flat directory, all goose reads.
	files, versions := fstest.MapFS{}, map[int64]string{}
	add := func(fsys fs.FS, translate func([]byte) []byte) error {
		names, err := fs.Glob(fsys, "*.sql")
		if err != nil {
			return err
		}
		for _, name := range names {
			v, err := Version(name)
			if err != nil {
				return err
			}
			if other, ok := versions[v]; ok {
				return fmt.Errorf("migrations: version %d is both %s and %s", v, other, name)
			}
			versions[v] = name
			b, err := fs.ReadFile(fsys, name)
			if err != nil {
				return err
			}
			if translate != nil {
				b = translate(b)
			}
			files[name] = &fstest.MapFile{Data: b, Mode: 0o444}
		}
		return nil
	}
	if err := add(shared, translate); err != nil {
		return nil, err
	}
	if err := add(own, nil); err != nil {
		return nil, err
	}
	return files, nil
}

// Version is the version goose reads from a migration's file name: the
// number before the first underscore.
func Version(name string) (int64, error) {
	num, _, ok := strings.Cut(name, "_")
	v, err := strconv.ParseInt(num, 10, 64)
	if !ok || err != nil || v < 1 {
		return 0, fmt.Errorf("migrations: %q is not named NNNNN_name.sql", name)
	}
	return v, nil
}
