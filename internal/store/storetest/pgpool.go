package storetest

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/agentowl/agentowl/internal/store/postgres"
)

// MigratedPostgresURL returns the test database URL with search_path set to
// an empty, migrated schema of its own for the test. Migrating a schema
// costs PostgreSQL about half a second of DDL, paid by every test that
// opened a store; so a test process keeps the schemas its tests used and,
// when a test ends, empties its schema (TRUNCATE … RESTART IDENTITY) and
// hands it to the next test. A schema whose structure a test changed is
// dropped instead of reused. Pooled schemas are named for the test process
// (p_<pid>_…) and dropped by the first later process that finds their
// process gone.
func MigratedPostgresURL(t testing.TB) string {
	t.Helper()
	base := PostgresURL(t)
	if base == "" {
		t.Fatal("AGENTOWL_TEST_DATABASE_URL is not set")
	}
	p, err := pgPoolFor(base)
	if err != nil {
		t.Fatalf("postgres: %v", err)
	}
	schema, err := p.take()
	if err != nil {
		t.Fatalf("postgres: %v", err)
	}
	t.Cleanup(func() { p.give(schema) })
	return withSearchPath(t, base, schema)
}

func withSearchPath(t testing.TB, base, schema string) string {
	u, err := searchPath(base, schema)
	if err != nil {
		t.Fatalf("postgres url: %v", err)
	}
	return u
}

// searchPath is the database URL base with search_path set to schema.
func searchPath(base, schema string) (string, error) {
	u, err := url.Parse(base)
	if err != nil {
		return "", err
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String(), nil
}

// pgPool is one test process's pool of migrated schemas.
type pgPool struct {
	base  string
	admin *sql.DB
	mu    sync.Mutex
	free  []string
	// shape is the fingerprint of a freshly migrated schema's structure.
	shape string
}

var pgPools sync.Map // base URL → *pgPool

func pgPoolFor(base string) (*pgPool, error) {
	if p, ok := pgPools.Load(base); ok {
		return p.(*pgPool), nil
	}
	admin, err := sql.Open("pgx", base)
	if err != nil {
		return nil, err
	}
	admin.SetMaxOpenConns(2)
	p := &pgPool{base: base, admin: admin}
	p.sweep()
	actual, loaded := pgPools.LoadOrStore(base, p)
	if loaded {
		admin.Close()
	}
	return actual.(*pgPool), nil
}

// sweep drops the pooled schemas of test processes that are gone.
func (p *pgPool) sweep() {
	rows, err := p.admin.Query(`SELECT nspname FROM pg_namespace WHERE nspname LIKE 'p\_%'`)
	if err != nil {
		return
	}
	var stale []string
	for rows.Next() {
		var name string
		if rows.Scan(&name) != nil {
			continue
		}
		parts := strings.SplitN(name, "_", 3)
		pid, err := strconv.Atoi(parts[1])
		if len(parts) == 3 && err == nil && pid != os.Getpid() && errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) {
			stale = append(stale, name)
		}
	}
	rows.Close()
	for _, s := range stale {
		_, _ = p.admin.Exec("DROP SCHEMA IF EXISTS " + s + " CASCADE")
	}
}

func (p *pgPool) take() (string, error) {
	p.mu.Lock()
	if n := len(p.free); n > 0 {
		s := p.free[n-1]
		p.free = p.free[:n-1]
		p.mu.Unlock()
		return s, nil
	}
	p.mu.Unlock()
	var b [6]byte
	_, _ = rand.Read(b[:])
	schema := fmt.Sprintf("p_%d_%s", os.Getpid(), hex.EncodeToString(b[:]))
	if _, err := p.admin.Exec("CREATE SCHEMA " + schema); err != nil {
		return "", fmt.Errorf("create schema: %w", err)
	}
	u, err := searchPath(p.base, schema)
	if err != nil {
		return "", err
	}
	s, err := postgres.Open(context.Background(), u, nil)
	if err != nil {
		return "", err
	}
	if err := s.Close(); err != nil {
		return "", err
	}
	shape, _, err := p.inspect(schema)
	if err != nil {
		return "", err
	}
	p.mu.Lock()
	if p.shape == "" {
		p.shape = shape
	}
	p.mu.Unlock()
	return schema, nil
}

// give empties schema and pools it, or drops it when a test changed its
// structure or it cannot be emptied (a connection still holds a lock).
func (p *pgPool) give(schema string) {
	shape, empty, err := p.inspect(schema)
	if err == nil && shape == p.shape {
		err = p.reset(schema, empty)
		if err == nil {
			p.mu.Lock()
			p.free = append(p.free, schema)
			p.mu.Unlock()
			return
		}
	}
	_, _ = p.admin.Exec("DROP SCHEMA IF EXISTS " + schema + " CASCADE")
}

// reset runs the statements that empty schema, in one transaction that
// skips foreign-key checks (session_replication_role, which needs a
// superuser: without one the schema is dropped instead). DELETE rather than
// TRUNCATE: on tables this small, TRUNCATE's new files cost more than a
// fresh migration.
func (p *pgPool) reset(schema string, empty []string) error {
	tx, err := p.admin.Begin()
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if _, err := tx.Exec("SET LOCAL lock_timeout = '2s'"); err != nil {
		return err
	}
	if _, err := tx.Exec("SET LOCAL session_replication_role = replica"); err != nil {
		return err
	}
	if _, err := tx.Exec("SET LOCAL search_path = " + schema); err != nil {
		return err
	}
	for _, stmt := range empty {
		if _, err := tx.Exec(stmt); err != nil {
			return err
		}
	}
	return tx.Commit()
}

// inspect fingerprints schema's structure (its tables, columns, indexes,
// constraints, triggers and functions) and lists the statements that empty
// its tables and restart its sequences.
func (p *pgPool) inspect(schema string) (shape string, empty []string, err error) {
	rows, err := p.admin.Query(`
		SELECT 'c ' || table_name || '.' || column_name || ' ' || data_type || ' ' || is_nullable || ' ' || coalesce(column_default, '')
		  FROM information_schema.columns WHERE table_schema = $1
		UNION ALL SELECT 'i ' || indexdef FROM pg_indexes WHERE schemaname = $1
		UNION ALL SELECT 'k ' || conname || ' ' || pg_get_constraintdef(c.oid)
		  FROM pg_constraint c JOIN pg_namespace n ON n.oid = c.connamespace WHERE n.nspname = $1
		UNION ALL SELECT 't ' || tgname FROM pg_trigger g JOIN pg_class r ON r.oid = g.tgrelid
		  JOIN pg_namespace n ON n.oid = r.relnamespace WHERE n.nspname = $1 AND NOT g.tgisinternal
		UNION ALL SELECT 'f ' || proname FROM pg_proc f JOIN pg_namespace n ON n.oid = f.pronamespace WHERE n.nspname = $1
		UNION ALL SELECT 's ' || sequence_name FROM information_schema.sequences WHERE sequence_schema = $1
		ORDER BY 1`, schema)
	if err != nil {
		return "", nil, err
	}
	h := sha256.New()
	seen := map[string]bool{}
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			rows.Close()
			return "", nil, err
		}
		// Defaults name sequences with their schema: compare without it.
		h.Write([]byte(strings.ReplaceAll(line, schema+".", "") + "\n"))
		if name, ok := strings.CutPrefix(line, "c "); ok {
			table, _, _ := strings.Cut(name, ".")
			if table != "goose_db_version" && !seen[table] {
				seen[table] = true
				empty = append(empty, `DELETE FROM "`+table+`"`)
			}
		}
		if seq, ok := strings.CutPrefix(line, "s "); ok && !strings.HasPrefix(seq, "goose_db_version") {
			empty = append(empty, `ALTER SEQUENCE "`+seq+`" RESTART`)
		}
	}
	if err := rows.Close(); err != nil {
		return "", nil, err
	}
	if len(seen) == 0 {
		return "", nil, errors.New("the migrated schema has no tables")
	}
	return hex.EncodeToString(h.Sum(nil)), empty, nil
}
