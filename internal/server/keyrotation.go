package server

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/agentowl/agentowl"
	"github.com/agentowl/agentowl/internal/secret"
)

// Secret key rotation, for `agentowl secrets rotate-key` and `key-status`
// (docs/operating.md, "The secret key"). The store (sqlstore/rotate.go)
// re-seals in batches of one transaction, each re-reading its values
// locked and writing each back only if unchanged, so that several
// rotations, and replicas writing secrets meanwhile, never lose or
// double-seal a value; a rotation stopped anywhere continues when run
// again, from what the database holds.

// KeyStatus is where a database's secret key stands.
type KeyStatus struct {
	// Key, PreviousKey and RetiredKey identify (hex, the identifier sealed
	// values carry) the key that seals, the key a rotation under way
	// moves away from, and the key the last finished rotation retired;
	// "" for none.
	Key, PreviousKey, RetiredKey string
	// Sealed counts the stored secrets; Remaining those the current key
	// has not sealed yet.
	Sealed, Remaining int
}

// RotationUnderWay reports whether values sealed by a previous key may
// remain: the previous key is still needed.
func (s KeyStatus) RotationUnderWay() bool { return s.PreviousKey != "" }

func keyID(check []byte) string {
	if len(check) < secret.KeyIDSize {
		return ""
	}
	return hex.EncodeToString(check[:secret.KeyIDSize])
}

// SecretKeyStatus reads where st's secret key stands; it needs no key.
func SecretKeyStatus(ctx context.Context, st agentowl.Store) (KeyStatus, error) {
	var s agentowl.SecretKeyStatus
	err := st.Read(ctx, func(tx agentowl.Tx) (err error) { s, err = tx.SecretKeyStatus(ctx); return err })
	return KeyStatus{Key: keyID(s.Current), PreviousKey: keyID(s.Previous), RetiredKey: keyID(s.Retired),
		Sealed: s.Sealed, Remaining: s.Remaining}, err
}

// Rotation tunes RotateSecretKey.
type Rotation struct {
	// Batch is how many values one transaction re-seals; default 100.
	Batch int
	// Batches stops the rotation after that many batches (0: run to the
	// end); running it again continues.
	Batches int
	// Progress, if set, is told after each batch that re-sealed values.
	Progress func(batch, total int)
}

// maxRotationPasses bounds the passes over the sealed columns: a value
// sealed by the old key after a pass went by (a replica still running with
// only the old key) needs another; more than a few means one keeps doing so.
const maxRotationPasses = 3

// RotateSecretKey re-seals st's secrets under the current key of the box st
// was opened with (OpenStoreRotating) and ends the rotation once no value
// sealed by another key remains. done reports that: the old key can then
// be removed.
func RotateSecretKey(ctx context.Context, st agentowl.Store, r Rotation) (resealed int, done bool, err error) {
	if r.Batch == 0 {
		r.Batch = 100
	}
	if r.Batch < 0 {
		return 0, false, fmt.Errorf("a batch of %d values", r.Batch)
	}
	var cursor agentowl.ResealCursor
	passes := 1
	for n := 0; r.Batches == 0 || n < r.Batches; n++ {
		var k int
		var next agentowl.ResealCursor
		if err := st.Write(ctx, func(tx agentowl.Tx) (err error) {
			k, next, err = tx.SecretsReseal(ctx, cursor, r.Batch)
			return err
		}); err != nil {
			return resealed, false, fmt.Errorf("re-seal after %d values: %w", resealed, keyError(err))
		}
		resealed, cursor = resealed+k, next
		if k > 0 && r.Progress != nil {
			r.Progress(k, resealed)
		}
		if !cursor.Done {
			continue
		}
		if err := st.Write(ctx, func(tx agentowl.Tx) (err error) {
			done, err = tx.SecretKeyRotationFinish(ctx, time.Now())
			return err
		}); err != nil {
			return resealed, false, keyError(err)
		}
		if done {
			return resealed, true, nil
		}
		if passes++; passes > maxRotationPasses {
			return resealed, false, errors.New("values sealed by the old key keep appearing: a replica still runs with only the old key; " +
				"give every replica the new key as AGENTOWL_SECRET_KEY and the old one as AGENTOWL_SECRET_KEY_PREVIOUS, restart it, and run this again")
		}
		cursor = agentowl.ResealCursor{}
	}
	return resealed, false, nil
}
