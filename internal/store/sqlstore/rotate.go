package sqlstore

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/agentowl/agentowl"
	"github.com/agentowl/agentowl/internal/secret"
)

// Secret key rotation. key_checks holds the check value of the key that
// seals (secretKeyCheck), during a rotation that of the key it moves away
// from (previousKeyCheck), and that of the key the last finished rotation
// retired (retiredKeyCheck). A store opened with a new key as current and
// the database's key as previous starts a rotation (checkKeys); from then
// on every value sealed is sealed by the new key, SecretsReseal re-seals
// the others in batches, and SecretKeyRotationFinish ends the rotation
// once none is left. Values name their key (secret.Box.SealedPrefix), so
// the values still to re-seal are found in SQL.

// keyChecks are the recorded check values of the secret key, by row name.
type keyChecks map[string][]byte

// keyChecks reads the secret key's key_checks rows, with lock locked for
// update on PostgreSQL so that concurrent starts and rotations take turns.
func (t *tx) keyChecks(ctx context.Context, lock bool) (keyChecks, error) {
	q := `SELECT name, check_value FROM key_checks WHERE name IN (?, ?, ?)`
	if lock {
		q += t.db.dialect.ForUpdate
	}
	rows, err := t.query(ctx, q, secretKeyCheck, previousKeyCheck, retiredKeyCheck)
	got, err := keyed[string, []byte](rows, err)
	return keyChecks(got), err
}

func (t *tx) setKeyCheck(ctx context.Context, name string, check []byte, now time.Time) error {
	_, err := t.exec(ctx, `INSERT INTO key_checks (name, check_value, created_at) VALUES (?, ?, ?)
		ON CONFLICT (name) DO UPDATE SET check_value = excluded.check_value, created_at = excluded.created_at`, name, check, ts(now))
	return err
}

// checkKeys checks that box's keys open this database's secrets, at start:
//
//   - a database with no key recorded records box's current key;
//   - box's current key is the database's key: it starts, unless a
//     rotation is unfinished and box lacks the key it moves away from
//     (secret.ErrPreviousKeyNeeded);
//   - box's current key is the one a finished rotation retired:
//     secret.ErrKeyRetired; the one a rotation under way moves away from:
//     secret.ErrKeyRotating;
//   - the database's key is one of box's previous keys: a rotation to
//     box's current key starts (secret.ErrRotationUnfinished if another
//     is still under way);
//   - otherwise box opens nothing: secret.ErrKeyMismatch.
func (t *tx) checkKeys(ctx context.Context, box *secret.Box, now time.Time) error {
	if _, err := t.exec(ctx, `INSERT INTO key_checks (name, check_value, created_at) VALUES (?, ?, ?)
		ON CONFLICT (name) DO NOTHING`, secretKeyCheck, box.KeyCheck(), ts(now)); err != nil {
		return err
	}
	kc, err := t.keyChecks(ctx, true)
	if err != nil {
		return err
	}
	current, previous, retired := kc[secretKeyCheck], kc[previousKeyCheck], kc[retiredKeyCheck]
	switch {
	case bytes.Equal(current, box.KeyCheck()):
		if previous != nil && !box.HasKey(previous) {
			return fmt.Errorf("%w (it is the key with check value %x…)", secret.ErrPreviousKeyNeeded, previous[:secret.KeyIDSize])
		}
		return nil
	case retired != nil && bytes.Equal(retired, box.KeyCheck()):
		return secret.ErrKeyRetired
	case previous != nil && bytes.Equal(previous, box.KeyCheck()):
		return secret.ErrKeyRotating
	case box.HasKey(current):
		if previous != nil {
			return secret.ErrRotationUnfinished
		}
		if err := t.setKeyCheck(ctx, previousKeyCheck, current, now); err != nil {
			return err
		}
		return t.setKeyCheck(ctx, secretKeyCheck, box.KeyCheck(), now)
	}
	return secret.ErrKeyMismatch
}

// prefixLen is the length of secret.Box.SealedPrefix.
const prefixLen = 1 + secret.KeyIDSize

// notSealedBy is the condition on column c of the values that do not begin
// with a prefix given as the next argument: those the current key did not
// seal.
func notSealedBy(c string) string {
	return c + ` IS NOT NULL AND substr(` + c + `, 1, ` + strconv.Itoa(prefixLen) + `) <> ?`
}

func (t *tx) SecretsReseal(ctx context.Context, after agentowl.ResealCursor, limit int) (int, agentowl.ResealCursor, error) {
	box := t.db.box
	if box == nil {
		return 0, after, errNoKey
	}
	if limit <= 0 {
		return 0, after, fmt.Errorf("sqlstore: a re-seal batch of %d values", limit)
	}
	places, prefix := sealedPlaces(), box.SealedPrefix()
	cur, n := after, 0
	for cur.Place < len(places) && n < limit {
		table, column := places[cur.Place][0], places[cur.Place][1]
		want := limit - n
		type value struct {
			id     string
			sealed []byte
		}
		rows, err := t.query(ctx, `SELECT id, `+column+` FROM `+table+` WHERE id > ? AND `+notSealedBy(column)+
			` ORDER BY id LIMIT ?`+t.db.dialect.ForUpdate, cur.After, prefix, want)
		values, err := all(rows, err, func(s scanner) (value, error) {
			var v value
			err := s.Scan(&v.id, &v.sealed)
			return v, err
		})
		if err != nil {
			return 0, after, err
		}
		for _, v := range values {
			plain, err := box.Open(table, column, v.id, v.sealed)
			if err != nil {
				return 0, after, err
			}
			sealed, err := box.Seal(table, column, v.id, plain)
			if err != nil {
				return 0, after, err
			}
			// Guarded: a value changed since it was read (on SQLite by
			// nothing, the writer being one; on PostgreSQL the row is
			// locked) is left as it is.
			res, err := t.exec(ctx, `UPDATE `+table+` SET `+column+` = ? WHERE id = ? AND `+column+` = ?`, sealed, v.id, v.sealed)
			if err != nil {
				return 0, after, err
			}
			if k, err := res.RowsAffected(); err != nil {
				return 0, after, err
			} else if k == 1 {
				n++
			}
		}
		if len(values) < want {
			cur = agentowl.ResealCursor{Place: cur.Place + 1}
		} else {
			cur.After = values[len(values)-1].id
		}
	}
	cur.Done = cur.Place >= len(places)
	return n, cur, nil
}

// countSealed counts the sealed values, and those that do not begin with
// prefix.
func (t *tx) countSealed(ctx context.Context, prefix []byte) (sealed, other int, err error) {
	for _, p := range sealedPlaces() {
		var all, rest int
		if err := t.queryRow(ctx, `SELECT count(`+p[1]+`), count(CASE WHEN substr(`+p[1]+`, 1, `+strconv.Itoa(prefixLen)+`) <> ? THEN 1 END) FROM `+p[0],
			prefix).Scan(&all, &rest); err != nil {
			return 0, 0, err
		}
		sealed, other = sealed+all, other+rest
	}
	return sealed, other, nil
}

func (t *tx) SecretKeyStatus(ctx context.Context) (agentowl.SecretKeyStatus, error) {
	var st agentowl.SecretKeyStatus
	kc, err := t.keyChecks(ctx, false)
	if err != nil {
		return st, err
	}
	st.Current, st.Previous, st.Retired = kc[secretKeyCheck], kc[previousKeyCheck], kc[retiredKeyCheck]
	if len(st.Current) < secret.KeyIDSize {
		return st, nil // no key recorded yet: nothing sealed
	}
	st.Sealed, st.Remaining, err = t.countSealed(ctx, secret.SealedPrefix(st.Current))
	return st, err
}

func (t *tx) SecretKeyRotationFinish(ctx context.Context, now time.Time) (bool, error) {
	kc, err := t.keyChecks(ctx, true)
	if err != nil {
		return false, err
	}
	current, previous := kc[secretKeyCheck], kc[previousKeyCheck]
	if previous == nil {
		return true, nil
	}
	if t.db.box != nil && !bytes.Equal(t.db.box.KeyCheck(), current) {
		return false, secret.ErrKeyMismatch
	}
	_, remaining, err := t.countSealed(ctx, secret.SealedPrefix(current))
	if err != nil || remaining > 0 {
		return false, err
	}
	if _, err := t.exec(ctx, `DELETE FROM key_checks WHERE name = ?`, previousKeyCheck); err != nil {
		return false, err
	}
	return true, t.setKeyCheck(ctx, retiredKeyCheck, previous, now)
}
