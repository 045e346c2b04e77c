package storetest

import (
	"bytes"
	"database/sql"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"os"
	"strings"
	"testing"
)

// SecretForms are the forms a secret could be stored in: its text, its
// base64 (standard and raw URL) and its hex, and for a whsec_ secret the
// same of the key bytes it encodes (raw included).
func SecretForms(s string) map[string][]byte {
	forms := map[string][]byte{}
	add := func(what string, b []byte) {
		forms[what] = b
		forms[what+" in base64"] = []byte(base64.StdEncoding.EncodeToString(b))
		forms[what+" in raw URL base64"] = []byte(base64.RawURLEncoding.EncodeToString(b))
		forms[what+" in hex"] = []byte(hex.EncodeToString(b))
		forms[what+" in upper-case hex"] = []byte(strings.ToUpper(hex.EncodeToString(b)))
	}
	add("text", []byte(s))
	if rest, ok := strings.CutPrefix(s, "whsec_"); ok {
		if key, err := base64.StdEncoding.DecodeString(rest); err == nil {
			add("key bytes", key)
		}
	}
	return forms
}

// FindRaw reads the whole database at url (what Backend.URL returns) past
// the store and reports, by name, where any form (SecretForms) of each of
// secrets occurs. On SQLite it reads the database file and its -wal and
// -shm files as bytes, and every column of every table as stored; on
// PostgreSQL every row of every table of the schema, as text (bytea in
// hex).
func FindRaw(t testing.TB, url string, secrets map[string]string) map[string][]string {
	t.Helper()
	hits := map[string][]string{}
	search := func(where string, data []byte) {
		for name, s := range secrets {
			for form, b := range SecretForms(s) {
				if bytes.Contains(data, b) {
					hits[name] = append(hits[name], fmt.Sprintf("%s holds its %s", where, form))
				}
			}
		}
	}
	postgres := strings.HasPrefix(url, "postgres://") || strings.HasPrefix(url, "postgresql://")
	driver, dsn := "pgx", url
	if !postgres {
		driver, dsn = "sqlite", "file:"+url+"?mode=ro"
		for _, suffix := range []string{"", "-wal", "-shm"} {
			data, err := os.ReadFile(url + suffix)
			if os.IsNotExist(err) && suffix != "" {
				continue
			}
			if err != nil {
				t.Fatal(err)
			}
			search("file "+url+suffix, data)
		}
	}
	db, err := sql.Open(driver, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	listTables := `SELECT name FROM sqlite_schema WHERE type = 'table'`
	if postgres {
		listTables = `SELECT tablename FROM pg_tables WHERE schemaname = current_schema()`
	}
	tables, err := queryStrings(db, listTables)
	if err != nil {
		t.Fatal(err)
	}
	if len(tables) == 0 {
		t.Fatalf("no tables in %s", url)
	}
	for _, table := range tables {
		quoted := `"` + strings.ReplaceAll(table, `"`, `""`) + `"`
		if postgres {
			rows, err := queryStrings(db, `SELECT r::text FROM `+quoted+` AS r`)
			if err != nil {
				t.Fatal(err)
			}
			for i, row := range rows {
				search(fmt.Sprintf("row %d of table %s", i, table), []byte(row))
			}
			continue
		}
		rows, err := db.Query(`SELECT * FROM ` + quoted)
		if err != nil {
			t.Fatal(err)
		}
		cols, _ := rows.Columns()
		for i := 0; rows.Next(); i++ {
			values := make([]any, len(cols))
			ptrs := make([]any, len(cols))
			for j := range values {
				ptrs[j] = &values[j]
			}
			if err := rows.Scan(ptrs...); err != nil {
				t.Fatal(err)
			}
			for j, v := range values {
				data, ok := v.([]byte)
				if s, isString := v.(string); isString {
					data, ok = []byte(s), true
				}
				if ok {
					search(fmt.Sprintf("column %s of row %d of table %s", cols[j], i, table), data)
				}
			}
		}
		if err := rows.Close(); err != nil {
			t.Fatal(err)
		}
	}
	return hits
}

func queryStrings(db *sql.DB, query string) ([]string, error) {
	rows, err := db.Query(query)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, rows.Err()
}
