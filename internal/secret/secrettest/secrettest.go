// Package secrettest helps tests of stored secrets.
package secrettest

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/binary"
	"testing"

	"github.com/agentowl/agentowl/internal/secret"
)

// SealUnversioned seals plaintext as AgentOwl did before sealed values
// carried a format byte (before migration 11): a 12-byte nonce, then
// AES-256-GCM with purpose (such as "endpoint:<id>:signing") as associated
// data. Upgrade tests write such values to check they are re-sealed.
func SealUnversioned(key []byte, purpose string, plaintext []byte) []byte {
	aead := gcm(key)
	nonce := make([]byte, aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		panic(err)
	}
	return aead.Seal(nonce, nonce, plaintext, []byte(purpose))
}

// NewBox returns a Box under a fresh random key.
func NewBox(t testing.TB) *secret.Box {
	t.Helper()
	box, err := secret.New(secret.NewKey())
	if err != nil {
		t.Fatal(err)
	}
	return box
}

// SealV1 seals plaintext for table, column and row as AgentOwl did before
// sealed values named their key (format byte 1): the format byte, a 12-byte
// nonce, then AES-256-GCM with the format byte and the length-prefixed
// place as associated data. Rotation tests write such values to check they
// open and are re-sealed.
func SealV1(key []byte, table, column, rowID string, plaintext []byte) []byte {
	aead := gcm(key)
	out := make([]byte, 1+aead.NonceSize())
	out[0] = 1
	if _, err := rand.Read(out[1:]); err != nil {
		panic(err)
	}
	ad := []byte{1}
	for _, s := range []string{table, column, rowID} {
		ad = binary.AppendUvarint(ad, uint64(len(s)))
		ad = append(ad, s...)
	}
	return aead.Seal(out, out[1:], plaintext, ad)
}

// gcm is AES-256-GCM under key, as every format of the sealed values uses.
func gcm(key []byte) cipher.AEAD {
	block, err := aes.NewCipher(key)
	if err != nil {
		panic(err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		panic(err)
	}
	return aead
}
