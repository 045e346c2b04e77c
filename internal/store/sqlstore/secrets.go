package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/agentowl/agentowl/internal/secret"
	"github.com/agentowl/agentowl/internal/store"
)

// Stored secrets are sealed by one secret.Box, each bound to the table,
// column and row that holds it. An instance's receiver signing secret is
// sealed here, at the store's edge, because its record is the domain type
// agentowl.Instance, which carries the secret in plain text in memory;
// endpoint and binding secrets reach the store already sealed by
// internal/work and internal/ingress.

// Where an instance's receiver signing secret is stored.
const (
	instancesTable       = "instances"
	deliverySecretColumn = "delivery_secret_sealed"
)

// errNoKey is returned for a secret the store must seal or open when it was
// opened without the key.
var errNoKey = errors.New("sqlstore: the store was opened without the secret key")

// seal and open seal the store's own secrets with its box.
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

// secretKeyCheck is the key_checks row of the key that seals secrets.
const secretKeyCheck = "secret-key"

// resealStatements store a value queued in secrets_to_seal once sealed,
// by its table and column: the queue names places, it never supplies SQL.
var resealStatements = map[[2]string]string{
	{instancesTable, deliverySecretColumn}: `UPDATE instances SET delivery_secret_sealed = ? WHERE id = ?`,
	{"endpoints", "signing_secret"}:        `UPDATE endpoints SET signing_secret = ? WHERE id = ?`,
	{"endpoints", "decision_secret"}:       `UPDATE endpoints SET decision_secret = ? WHERE id = ?`,
	{"bindings", "signing_secret"}:         `UPDATE bindings SET signing_secret = ? WHERE id = ?`,
}

// PrepareSecrets makes this database's secrets usable with box, in one
// transaction on db: it checks that box holds the key that sealed them
// (recording its check value on first use; secret.ErrKeyMismatch
// otherwise), then seals in place every value migration 11 queued in
// secrets_to_seal (plain text, or sealed in the earlier format) and
// empties the queue. Checking first keeps a replica given the wrong key
// from sealing anything under it. It reports how many values it sealed.
// The dialect packages call it right after migrating, before New.
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
	err := t.KeyCheck(ctx, secretKeyCheck, box.KeyCheck(), now)
	if errors.Is(err, store.ErrConflict) {
		return 0, secret.ErrKeyMismatch
	}
	if err != nil {
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
