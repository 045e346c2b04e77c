// Package secret seals the secrets AgentOwl stores and must read back later
// (receiver and endpoint signing secrets, decision bearer secrets, binding
// signing secrets): they are sent or used to sign, so unlike tokens they
// cannot be kept as hashes. Each sealed value is bound to the table, column
// and row it is stored in, so a value copied to another row or column does
// not open. Keys come from the caller: the package holds no state.
package secret

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
)

// KeySize is the length of a key: AES-256.
const KeySize = 32

// formatV1 is the first byte of every value sealed by this version:
// AES-256-GCM, a 12-byte random nonce, the 16-byte tag at the end, and the
// associated data of v1AD. A later key or format gets another first byte,
// so values sealed before it can still be told apart and opened.
const formatV1 byte = 1

// ErrKeyMismatch is returned by stores opened with a key other than the one
// that sealed their secrets: nothing they hold could be opened.
var ErrKeyMismatch = errors.New("secret: the key differs from the one that sealed this database's secrets")

// Box seals and opens stored secrets under one key. It is safe for
// concurrent use.
type Box struct {
	aead  cipher.AEAD
	check []byte
}

// New returns a Box for key, which must be KeySize random bytes (NewKey).
func New(key []byte) (*Box, error) {
	if len(key) != KeySize {
		return nil, fmt.Errorf("secret: the key must be exactly %d bytes, not %d", KeySize, len(key))
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte("agentowl/secret-key-check/v1"))
	return &Box{aead: aead, check: mac.Sum(nil)}, nil
}

// NewKey returns a fresh random key.
func NewKey() []byte {
	key := make([]byte, KeySize)
	if _, err := rand.Read(key); err != nil {
		panic(err) // crypto/rand does not fail on supported platforms
	}
	return key
}

// KeyCheck is a value derived from the key that reveals nothing about it:
// a store records it with the first key it is opened with and refuses any
// other (ErrKeyMismatch), so a replica given another key fails at start
// instead of at its first delivery.
func (b *Box) KeyCheck() []byte { return b.check }

// Seal encrypts plaintext for storage in column of row rowID of table.
func (b *Box) Seal(table, column, rowID string, plaintext []byte) ([]byte, error) {
	out := make([]byte, 1+b.aead.NonceSize(), 1+b.aead.NonceSize()+len(plaintext)+b.aead.Overhead())
	out[0] = formatV1
	if _, err := rand.Read(out[1:]); err != nil {
		return nil, err
	}
	return b.aead.Seal(out, out[1:], plaintext, v1AD(table, column, rowID)), nil
}

// Open decrypts a value Seal sealed for the same table, column and row. It
// fails for a value sealed for another place or under another key, and for
// a value altered in any way.
func (b *Box) Open(table, column, rowID string, sealed []byte) ([]byte, error) {
	n := b.aead.NonceSize()
	if len(sealed) < 1+n+b.aead.Overhead() || sealed[0] != formatV1 {
		return nil, fmt.Errorf("secret: %s.%s of %s is not a sealed value of a known format", table, column, rowID)
	}
	plain, err := b.aead.Open(nil, sealed[1:1+n], sealed[1+n:], v1AD(table, column, rowID))
	if err != nil {
		return nil, fmt.Errorf("secret: %s.%s of %s does not open: %w", table, column, rowID, err)
	}
	return plain, nil
}

// v1AD is the associated data of a v1 value: the format and the place,
// each part length-prefixed so no two places share an encoding.
func v1AD(table, column, rowID string) []byte {
	ad := []byte{formatV1}
	for _, s := range []string{table, column, rowID} {
		ad = binary.AppendUvarint(ad, uint64(len(s)))
		ad = append(ad, s...)
	}
	return ad
}

// OpenUnversioned decrypts a value sealed before values carried a format
// byte (AgentOwl before migration 11): the nonce, then AES-256-GCM with
// purpose (such as "endpoint:<id>:signing") as associated data. Only the
// start-up step that re-seals those values calls it.
func (b *Box) OpenUnversioned(purpose string, sealed []byte) ([]byte, error) {
	n := b.aead.NonceSize()
	if len(sealed) < n+b.aead.Overhead() {
		return nil, fmt.Errorf("secret: the value sealed for %s is too short", purpose)
	}
	plain, err := b.aead.Open(nil, sealed[:n], sealed[n:], []byte(purpose))
	if err != nil {
		return nil, fmt.Errorf("secret: the value sealed for %s does not open: %w", purpose, err)
	}
	return plain, nil
}
