package approval

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"errors"
)

// An instance creation replay must return the original credential, yet
// credentials are stored only as hashes. The original response is therefore
// kept sealed (AES-256-GCM) under a key derived from the provisioner token's
// secret and the idempotency key: only the caller who can legitimately replay
// can open it, and a database dump alone reveals no credential.

func sealKey(secret, idemKey string) []byte {
	h := sha256.New()
	h.Write([]byte("agentowl/instance-replay/v1\x00"))
	h.Write([]byte(secret))
	h.Write([]byte{0})
	h.Write([]byte(idemKey))
	return h.Sum(nil)
}

func seal(secret, idemKey string, plaintext []byte) ([]byte, error) {
	gcm, err := newGCM(sealKey(secret, idemKey))
	if err != nil {
		return nil, err
	}
	nonce := make([]byte, gcm.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return nil, err
	}
	return gcm.Seal(nonce, nonce, plaintext, nil), nil
}

func unseal(secret, idemKey string, sealed []byte) ([]byte, error) {
	gcm, err := newGCM(sealKey(secret, idemKey))
	if err != nil {
		return nil, err
	}
	if len(sealed) < gcm.NonceSize() {
		return nil, errors.New("approval: sealed response too short")
	}
	return gcm.Open(nil, sealed[:gcm.NonceSize()], sealed[gcm.NonceSize():], nil)
}

func newGCM(key []byte) (cipher.AEAD, error) {
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
}
