package agentowl

import (
	"context"
	"time"
)

// KeyRotation re-seals the stored secrets under the store's current
// secret key (internal/secret: the key a store is opened with seals; its
// previous keys only open) and ends the rotation once no value sealed by
// another key remains. Implemented by Tx. (The key check values themselves
// are checked when a store opens: sqlstore.PrepareSecrets.)
type KeyRotationStore interface {
	// SecretsReseal re-seals up to limit sealed values the current key did
	// not seal, in the sealed columns' order from after on, and returns
	// how many it re-sealed and where the next batch starts (Done when
	// every column has been gone through). Each value is re-read locked
	// in the transaction and written back only if unchanged, so replicas
	// and concurrent rotations re-seal each value at most once and never
	// overwrite a secret changed meanwhile. A value no key of the store
	// opens fails the batch.
	SecretsReseal(ctx context.Context, after ResealCursor, limit int) (resealed int, next ResealCursor, err error)
	// SecretKeyStatus reports the recorded key check values and how many
	// sealed values the current key did not seal.
	SecretKeyStatus(ctx context.Context) (SecretKeyStatus, error)
	// SecretKeyRotationFinish ends the rotation when no value sealed by
	// another key remains: the previous key's check value moves from
	// "previous" to "retired", so a store opened with only the current key
	// starts and one opened with only the retired key is refused
	// (secret.ErrKeyRetired). It reports whether the rotation is over
	// (true as well when none was under way).
	SecretKeyRotationFinish(ctx context.Context, now time.Time) (bool, error)
}

// ResealCursor is where a batch of SecretsReseal starts: the zero value
// at the beginning.
type ResealCursor struct {
	// Place is the index of the sealed column in the store's declaration.
	Place int
	// After is the last row id done in that column.
	After string
	// Done: every column has been gone through.
	Done bool
}

// SecretKeyStatus is the state of the secret keys of a database.
type SecretKeyStatus struct {
	// Current is the check value of the key that seals; Previous that of
	// the key a rotation moves away from (nil when none is under way);
	// Retired that of the key the last finished rotation retired.
	Current, Previous, Retired []byte
	// Sealed counts the sealed values; Remaining those the current key
	// did not seal (sealed by a previous key or in a format that names no
	// key).
	Sealed, Remaining int
}
