// Package webhook signs and verifies Standard Webhooks messages
// (HMAC-SHA256, "v1" signatures over id.timestamp.body) with whsec_ secrets.
// It is the one implementation shared by the AgentOwl provider, the receiver
// kit and agent runtimes. It depends on the standard library only.
package webhook

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Header names of the Standard Webhooks scheme.
const (
	HeaderID        = "webhook-id"
	HeaderTimestamp = "webhook-timestamp"
	HeaderSignature = "webhook-signature"
)

// DefaultTolerance is how far a message timestamp may be from the receiver's
// clock: five minutes, as AAP requires.
const DefaultTolerance = 5 * time.Minute

const secretPrefix = "whsec_"

// Errors returned by ParseSecret and Verify.
var (
	ErrInvalidSecret    = errors.New("webhook: secret must be whsec_ followed by base64 of at least 24 bytes")
	ErrMissingHeaders   = errors.New("webhook: missing webhook-id, webhook-timestamp or webhook-signature header")
	ErrInvalidTimestamp = errors.New("webhook: webhook-timestamp is not a Unix time in seconds")
	ErrTimestampSkew    = errors.New("webhook: webhook-timestamp is too far from the current time")
	ErrNoValidSignature = errors.New("webhook: no valid v1 signature")
)

// Key is a decoded signing key.
type Key []byte

// ParseSecret decodes a whsec_ secret into its key bytes.
func ParseSecret(secret string) (Key, error) {
	enc, ok := strings.CutPrefix(secret, secretPrefix)
	if !ok {
		return nil, ErrInvalidSecret
	}
	key, err := base64.StdEncoding.DecodeString(enc)
	if err != nil || len(key) < 24 || len(key) > 64 {
		return nil, ErrInvalidSecret
	}
	return Key(key), nil
}

// NewSecret returns a fresh whsec_ secret of 32 random bytes in canonical
// padded base64, as AAP requires.
func NewSecret() string {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand does not fail on supported platforms
	}
	return secretPrefix + base64.StdEncoding.EncodeToString(b[:])
}

// Sign returns the v1 signature of a message: base64 of the HMAC-SHA256 of
// "id.timestamp.body" over the exact body bytes.
func (k Key) Sign(id string, ts time.Time, body []byte) string {
	return "v1," + base64.StdEncoding.EncodeToString(k.mac(id, strconv.FormatInt(ts.Unix(), 10), body))
}

func (k Key) mac(id, ts string, body []byte) []byte {
	m := hmac.New(sha256.New, k)
	m.Write([]byte(id))
	m.Write([]byte{'.'})
	m.Write([]byte(ts))
	m.Write([]byte{'.'})
	m.Write(body)
	return m.Sum(nil)
}

// SetHeaders sets the three signature headers for one delivery attempt.
func (k Key) SetHeaders(h http.Header, id string, ts time.Time, body []byte) {
	h.Set(HeaderID, id)
	h.Set(HeaderTimestamp, strconv.FormatInt(ts.Unix(), 10))
	h.Set(HeaderSignature, k.Sign(id, ts, body))
}

// Verify checks a received message against the key: the three headers are
// present, the timestamp is within tolerance of now, and one of the
// space-separated signatures is a valid v1 signature of the exact body bytes,
// compared in constant time. It returns the message ID.
func (k Key) Verify(h http.Header, body []byte, now time.Time, tolerance time.Duration) (string, error) {
	id, tsText, sigs := h.Get(HeaderID), h.Get(HeaderTimestamp), h.Get(HeaderSignature)
	if id == "" || tsText == "" || sigs == "" {
		return "", ErrMissingHeaders
	}
	// Plain decimal digits only: ParseInt also takes "+…" and leading
	// zeros, which would let one signed timestamp be written several
	// ways (Standard Webhooks: an integer of Unix seconds).
	if !decimal(tsText) {
		return "", ErrInvalidTimestamp
	}
	sec, err := strconv.ParseInt(tsText, 10, 64)
	if err != nil || sec < 0 {
		return "", ErrInvalidTimestamp
	}
	if d := now.Sub(time.Unix(sec, 0)); d > tolerance || d < -tolerance {
		return "", ErrTimestampSkew
	}
	want := k.mac(id, tsText, body)
	for _, s := range strings.Fields(sigs) {
		version, enc, ok := strings.Cut(s, ",")
		if !ok || version != "v1" {
			continue
		}
		got, err := base64.StdEncoding.DecodeString(enc)
		if err == nil && hmac.Equal(got, want) {
			return id, nil
		}
	}
	return "", ErrNoValidSignature
}

// decimal reports whether s is an unsigned decimal number without leading
// zeros ("0" itself is one).
func decimal(s string) bool {
	if s == "" || len(s) > 1 && s[0] == '0' {
		return false
	}
	for i := range len(s) {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
