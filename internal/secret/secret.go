// Package secret seals the secrets AgentOwl stores and must read back later
// (receiver and endpoint signing secrets, decision bearer secrets, binding
// signing secrets): they are sent or used to sign, so unlike tokens they
// cannot be kept as hashes. Each sealed value is bound to the table, column
// and row it is stored in, so a value copied to another row or column does
// not open. Keys come from the caller: the package holds no state.
//
// A Box holds one current key, which seals, and any previous keys, which
// only open: while the key is rotated, values sealed by the old key still
// open and every value sealed is sealed by the new one. A value names the
// key that sealed it (KeyID), so opening picks its key without trial and a
// store can tell which values the current key has not sealed yet.
package secret

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
)

// KeySize is the length of a key: AES-256.
const KeySize = 32

// KeyIDSize is the length of a key identifier: the first bytes of the
// key's check value, which reveals nothing about the key.
const KeyIDSize = 4

// The first byte of every sealed value names its format.
//
// formatV1 (AgentOwl before key rotation): AES-256-GCM, a 12-byte random
// nonce, the 16-byte tag at the end, and the associated data of ad. It
// does not name its key: each key of the Box is tried.
//
// formatV2: the format byte, then the KeyIDSize-byte identifier of the key
// that sealed it, then as v1; the associated data starts with the format
// byte and the key identifier.
const (
	formatV1 byte = 1
	formatV2 byte = 2
)

// Errors a store returns when the keys it is opened with do not fit the
// check values it recorded (see the store's PrepareSecrets).
var (
	// ErrKeyMismatch: no key given is one whose values the database holds.
	ErrKeyMismatch = errors.New("secret: the key differs from the one that sealed this database's secrets")
	// ErrKeyRetired: the key given is one a finished rotation retired.
	ErrKeyRetired = errors.New("secret: the key was retired by a finished key rotation")
	// ErrKeyRotating: the key given is the one a rotation under way moves
	// away from, given alone.
	ErrKeyRotating = errors.New("secret: the key is the previous key of a key rotation under way")
	// ErrPreviousKeyNeeded: a rotation is unfinished and the key it
	// rotates from, which still seals some values, was not given.
	ErrPreviousKeyNeeded = errors.New("secret: a key rotation is unfinished and its previous key was not given")
	// ErrRotationUnfinished: a new rotation was started (the database's
	// key given as a previous one) before the earlier one finished.
	ErrRotationUnfinished = errors.New("secret: an earlier key rotation is unfinished")
)

// key is one key of a Box.
type key struct {
	aead  cipher.AEAD
	check []byte
	id    [KeyIDSize]byte
}

// Box seals and opens stored secrets: it seals under its current key and
// opens under any of its keys. It is safe for concurrent use.
type Box struct {
	keys []*key // keys[0] is the current key
}

// New returns a Box that seals under key and opens under key and the
// previous keys; each must be KeySize random bytes (NewKey). A previous key
// equal to key is ignored.
func New(current []byte, previous ...[]byte) (*Box, error) {
	b := &Box{}
	for i, raw := range append([][]byte{current}, previous...) {
		if raw == nil && i > 0 {
			continue
		}
		if len(raw) != KeySize {
			return nil, fmt.Errorf("secret: the key must be exactly %d bytes, not %d", KeySize, len(raw))
		}
		k, err := newKey(raw)
		if err != nil {
			return nil, err
		}
		if b.has(k.check) {
			continue
		}
		b.keys = append(b.keys, k)
	}
	return b, nil
}

func newKey(raw []byte) (*key, error) {
	block, err := aes.NewCipher(raw)
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	mac := hmac.New(sha256.New, raw)
	mac.Write([]byte("agentowl/secret-key-check/v1"))
	k := &key{aead: aead, check: mac.Sum(nil)}
	copy(k.id[:], k.check)
	return k, nil
}

func (b *Box) has(check []byte) bool {
	for _, k := range b.keys {
		if bytes.Equal(k.check, check) {
			return true
		}
	}
	return false
}

// NewKey returns a fresh random key.
func NewKey() []byte {
	key := make([]byte, KeySize)
	if _, err := rand.Read(key); err != nil {
		panic(err) // crypto/rand does not fail on supported platforms
	}
	return key
}

// KeyCheck is a value derived from the current key that reveals nothing
// about it: a store records it with the first key it is opened with and
// refuses keys that open none of its values (ErrKeyMismatch), so a replica
// given another key fails at start instead of at its first delivery.
func (b *Box) KeyCheck() []byte { return b.keys[0].check }

// PreviousKeyChecks are the check values of the previous keys.
func (b *Box) PreviousKeyChecks() [][]byte {
	var out [][]byte
	for _, k := range b.keys[1:] {
		out = append(out, k.check)
	}
	return out
}

// HasKey reports whether check is the check value of one of b's keys.
func (b *Box) HasKey(check []byte) bool { return b.has(check) }

// SealedPrefix is how every value the current key seals begins: a store
// selects the values still to re-seal as those that do not begin so.
func (b *Box) SealedPrefix() []byte { return SealedPrefix(b.keys[0].check) }

// SealedPrefix is how the values sealed by the key with check value check
// (Box.KeyCheck) begin: a store that holds only check values tells by it
// which values the key sealed.
func SealedPrefix(check []byte) []byte {
	return append([]byte{formatV2}, check[:KeyIDSize]...)
}

// SealedByCurrent reports whether sealed names the current key as its key.
func (b *Box) SealedByCurrent(sealed []byte) bool {
	return bytes.HasPrefix(sealed, b.SealedPrefix())
}

// KeyID returns the identifier of the key a sealed value names, as hex,
// and false for a value of a format that names none.
func KeyID(sealed []byte) (string, bool) {
	if len(sealed) < 1+KeyIDSize || sealed[0] != formatV2 {
		return "", false
	}
	return hex.EncodeToString(sealed[1 : 1+KeyIDSize]), true
}

// Seal encrypts plaintext under the current key for storage in column of
// row rowID of table.
func (b *Box) Seal(table, column, rowID string, plaintext []byte) ([]byte, error) {
	k := b.keys[0]
	head := 1 + KeyIDSize
	n := k.aead.NonceSize()
	out := make([]byte, head+n, head+n+len(plaintext)+k.aead.Overhead())
	out[0] = formatV2
	copy(out[1:head], k.id[:])
	if _, err := rand.Read(out[head:]); err != nil {
		return nil, err
	}
	return k.aead.Seal(out, out[head:], plaintext, ad(out[:head], table, column, rowID)), nil
}

// Open decrypts a value Seal sealed for the same table, column and row,
// under the key the value names (values of the first format, which name
// none, under whichever of b's keys opens them). It fails for a value
// sealed for another place or under a key b does not hold, and for a value
// altered in any way.
func (b *Box) Open(table, column, rowID string, sealed []byte) ([]byte, error) {
	if len(sealed) == 0 {
		return nil, fmt.Errorf("secret: %s.%s of %s is not a sealed value of a known format", table, column, rowID)
	}
	var head int
	var candidates []*key
	switch sealed[0] {
	case formatV1:
		head, candidates = 1, b.keys
	case formatV2:
		head = 1 + KeyIDSize
		if len(sealed) < head {
			break
		}
		for _, k := range b.keys {
			if bytes.Equal(k.id[:], sealed[1:head]) {
				candidates = append(candidates, k)
			}
		}
		if len(candidates) == 0 {
			return nil, fmt.Errorf("secret: %s.%s of %s is sealed by key %x, which this server was not given",
				table, column, rowID, sealed[1:head])
		}
	}
	if candidates == nil {
		return nil, fmt.Errorf("secret: %s.%s of %s is not a sealed value of a known format", table, column, rowID)
	}
	var err error
	for _, k := range candidates {
		n := k.aead.NonceSize()
		if len(sealed) < head+n+k.aead.Overhead() {
			return nil, fmt.Errorf("secret: %s.%s of %s is not a sealed value of a known format", table, column, rowID)
		}
		var plain []byte
		plain, err = k.aead.Open(nil, sealed[head:head+n], sealed[head+n:], ad(sealed[:head], table, column, rowID))
		if err == nil {
			return plain, nil
		}
	}
	return nil, fmt.Errorf("secret: %s.%s of %s does not open: %w", table, column, rowID, err)
}

// ad is the associated data of a value: its header (the format byte, and
// for v2 the key identifier) and the place, each part length-prefixed so
// no two places share an encoding.
func ad(head []byte, table, column, rowID string) []byte {
	out := append([]byte(nil), head...)
	for _, s := range []string{table, column, rowID} {
		out = binary.AppendUvarint(out, uint64(len(s)))
		out = append(out, s...)
	}
	return out
}

// OpenUnversioned decrypts a value sealed before values carried a format
// byte (AgentOwl before migration 11): the nonce, then AES-256-GCM with
// purpose (such as "endpoint:<id>:signing") as associated data, under
// whichever of b's keys opens it. Only the start-up step that re-seals
// those values calls it.
func (b *Box) OpenUnversioned(purpose string, sealed []byte) ([]byte, error) {
	var err error
	for _, k := range b.keys {
		n := k.aead.NonceSize()
		if len(sealed) < n+k.aead.Overhead() {
			return nil, fmt.Errorf("secret: the value sealed for %s is too short", purpose)
		}
		var plain []byte
		if plain, err = k.aead.Open(nil, sealed[:n], sealed[n:], []byte(purpose)); err == nil {
			return plain, nil
		}
	}
	return nil, fmt.Errorf("secret: the value sealed for %s does not open: %w", purpose, err)
}
