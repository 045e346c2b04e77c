package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/agentowl/agentowl"
	"github.com/agentowl/agentowl/internal/secret"
)

// Stored secrets are sealed by one secret.Box, each bound to the table,
// column and row that holds it, so a sealed value copied elsewhere does not
// open. They are sealed and opened here, at the store's edge, and nowhere
// else: the records (agentowl.Instance, Endpoint, Binding) carry their
// secrets in plain text in memory, and the declarations below list every
// sealed column of each. The insert, update and scan code of a record
// writes and reads its sealed columns through its declaration, and
// PrepareSecrets (migration 11's queue) seals by the same list.

// sealedField is one sealed column of the records of type R: the table and
// column that hold it, and how a record carries its plain value.
type sealedField[R any] struct {
	table, column string
	// get returns v's plain value; ok is false when v has none (NULL).
	get func(v *R) (plain []byte, ok bool)
	// set gives v the plain value opened from a non-NULL column.
	set func(v *R, plain []byte)
}

// sealedFields are the sealed columns of a record, in the order its
// column lists end with them.
type sealedFields[R any] []sealedField[R]

// The sealed fields of every record: the only secrets the store seals.
var (
	// An instance's receiver signing secret, present with its receiver.
	instanceSecrets = sealedFields[agentowl.Instance]{{
		table: "instances", column: "delivery_secret_sealed",
		get: func(v *agentowl.Instance) ([]byte, bool) {
			if v.Receiver == nil {
				return nil, false
			}
			return []byte(v.Receiver.SigningSecret), true
		},
		set: func(v *agentowl.Instance, plain []byte) {
			if v.Receiver != nil {
				v.Receiver.SigningSecret = string(plain)
			}
		},
	}}
	endpointSecrets = sealedFields[agentowl.Endpoint]{
		bytesField("endpoints", "signing_secret", func(v *agentowl.Endpoint) *[]byte { return &v.SigningSecret }),
		bytesField("endpoints", "decision_secret", func(v *agentowl.Endpoint) *[]byte { return &v.DecisionSecret }),
	}
	bindingSecrets = sealedFields[agentowl.Binding]{
		bytesField("bindings", "signing_secret", func(v *agentowl.Binding) *[]byte { return &v.SigningSecret }),
		bytesField("bindings", "provider_secret", func(v *agentowl.Binding) *[]byte { return &v.ProviderSecret }),
	}
)

// sealedPlaces are the (table, column) of every sealed field.
func sealedPlaces() [][2]string {
	var places [][2]string
	places = append(places, instanceSecrets.places()...)
	places = append(places, endpointSecrets.places()...)
	places = append(places, bindingSecrets.places()...)
	return append(places, attestationKeySecrets.places()...)
}

// bytesField is a sealed field a record carries as a []byte, nil for none.
func bytesField[R any](table, column string, field func(*R) *[]byte) sealedField[R] {
	return sealedField[R]{table: table, column: column,
		get: func(v *R) ([]byte, bool) { p := *field(v); return p, p != nil },
		set: func(v *R, plain []byte) {
			if plain == nil {
				plain = []byte{} // the column is set: keep "a secret" apart from "none"
			}
			*field(v) = plain
		}}
}

func (f sealedFields[R]) places() [][2]string {
	out := make([][2]string, len(f))
	for i, s := range f {
		out[i] = [2]string{s.table, s.column}
	}
	return out
}

// cols is f's column list, to end a record's column list with.
func (f sealedFields[R]) cols() string {
	names := make([]string, len(f))
	for i, s := range f {
		names[i] = s.column
	}
	return strings.Join(names, ", ")
}

// assignments is f's "column = ?" list of an UPDATE, in f's order.
func (f sealedFields[R]) assignments() string {
	names := make([]string, len(f))
	for i, s := range f {
		names[i] = s.column + " = ?"
	}
	return strings.Join(names, ", ")
}

// seal returns the stored values of v's sealed fields (row rowID), in f's
// order: sealed, or nil (NULL) for a field v has no value of.
func (f sealedFields[R]) seal(db *DB, rowID string, v *R) ([]any, error) {
	args := make([]any, len(f))
	for i, s := range f {
		plain, ok := s.get(v)
		if !ok {
			continue
		}
		sealed, err := db.seal(s.table, s.column, rowID, plain)
		if err != nil {
			return nil, err
		}
		args[i] = sealed
	}
	return args, nil
}

// scanned holds a record's sealed columns as read, for open.
type scanned [][]byte

// dest returns the Scan destinations of f's columns, and what they fill.
func (f sealedFields[R]) dest() ([]any, scanned) {
	raw := make(scanned, len(f))
	dest := make([]any, len(f))
	for i := range raw {
		dest[i] = &raw[i]
	}
	return dest, raw
}

// open gives v (row rowID) the plain values of its sealed columns as read
// into raw; a NULL column leaves its field unset.
func (f sealedFields[R]) open(db *DB, rowID string, v *R, raw scanned) error {
	for i, s := range f {
		if raw[i] == nil {
			continue
		}
		plain, err := db.open(s.table, s.column, rowID, raw[i])
		if err != nil {
			return err
		}
		s.set(v, plain)
	}
	return nil
}

// marks is n comma-separated placeholders.
func marks(n int) string { return strings.TrimSuffix(strings.Repeat("?, ", n), ", ") }

// errNoKey is returned for a secret the store must seal or open when it was
// opened without the key.
var errNoKey = errors.New("sqlstore: the store was opened without the secret key")

// seal and open seal the store's secrets with its box.
func (db *DB) seal(table, column, rowID string, plaintext []byte) ([]byte, error) {
	if db.box == nil {
		return nil, errNoKey
	}
	return db.box.Seal(table, column, rowID, plaintext)
}

func (db *DB) open(table, column, rowID string, sealed []byte) ([]byte, error) {
	if db.box == nil {
		return nil, errNoKey
	}
	return db.box.Open(table, column, rowID, sealed)
}

// The key_checks rows of the secret key (rotate.go): the key that seals
// secrets, the key a rotation moves away from while values it sealed
// remain, and the key the last finished rotation retired.
const (
	secretKeyCheck   = "secret-key"
	previousKeyCheck = "secret-key-previous"
	retiredKeyCheck  = "secret-key-retired"
)

// resealStatements store a value queued in secrets_to_seal once sealed,
// by its table and column, for every sealed field declared above: the
// queue names places, it never supplies SQL.
var resealStatements = func() map[[2]string]string {
	m := map[[2]string]string{}
	for _, p := range sealedPlaces() {
		m[p] = `UPDATE ` + p[0] + ` SET ` + p[1] + ` = ? WHERE id = ?`
	}
	return m
}()

// PrepareSecrets makes this database's secrets usable with box, in one
// transaction on db: it checks that box holds the keys that sealed them
// (checkKeys: recording the current key's check value on first use, and
// starting a key rotation when the database's key is one of box's
// previous keys; secret.ErrKeyMismatch and its kin otherwise), then seals
// in place every value migration 11 queued in secrets_to_seal (plain text,
// or sealed in the earlier format) and empties the queue. Checking first
// keeps a replica given the wrong key from sealing anything under it. It
// reports how many values it sealed. The dialect packages call it right
// after migrating, before New.
func PrepareSecrets(ctx context.Context, d Dialect, db *sql.DB, box *secret.Box, now time.Time) (int, error) {
	sqlTx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return 0, err
	}
	t := &tx{db: &DB{dialect: d, box: box}, run: sqlTx}
	n, err := t.prepareSecrets(ctx, now)
	if err != nil {
		_ = sqlTx.Rollback()
		return 0, err
	}
	return n, sqlTx.Commit()
}

type queuedSecret struct {
	table, column, rowID string
	value                []byte
	purpose              sql.NullString // set when value is sealed in the earlier format
}

func (t *tx) prepareSecrets(ctx context.Context, now time.Time) (int, error) {
	box := t.db.box
	if err := t.checkKeys(ctx, box, now); err != nil {
		return 0, err
	}
	rows, err := t.query(ctx, `SELECT table_name, column_name, row_id, value, unversioned_purpose FROM secrets_to_seal`+
		t.db.dialect.ForUpdate)
	queued, err := all(rows, err, func(s scanner) (queuedSecret, error) {
		var q queuedSecret
		err := s.Scan(&q.table, &q.column, &q.rowID, &q.value, &q.purpose)
		return q, err
	})
	if err != nil {
		return 0, err
	}
	for _, q := range queued {
		update, ok := resealStatements[[2]string{q.table, q.column}]
		if !ok {
			return 0, fmt.Errorf("secrets_to_seal names %s.%s, which holds no secret", q.table, q.column)
		}
		plain := q.value
		if q.purpose.Valid {
			if plain, err = box.OpenUnversioned(q.purpose.String, q.value); err != nil {
				return 0, err
			}
		}
		sealed, err := box.Seal(q.table, q.column, q.rowID, plain)
		if err != nil {
			return 0, err
		}
		if _, err := t.exec(ctx, update, sealed, q.rowID); err != nil {
			return 0, err
		}
		if _, err := t.exec(ctx, `DELETE FROM secrets_to_seal WHERE table_name = ? AND column_name = ? AND row_id = ?`,
			q.table, q.column, q.rowID); err != nil {
			return 0, err
		}
	}
	return len(queued), nil
}
