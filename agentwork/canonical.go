package agentwork

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
)

// ErrTrailingData reports bytes after the JSON value given to Canonicalize.
var ErrTrailingData = errors.New("agentwork: data after the JSON value")

// Canonicalize returns the canonical form (see the package comment) of
// the one JSON value in data. Two texts that mean the same JSON have the
// same canonical form.
func Canonicalize(data []byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, ErrTrailingData
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// CanonicalJSON renders v (any value encoding/json can marshal, including
// json.RawMessage) in canonical form.
func CanonicalJSON(v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return Canonicalize(b)
}

// ActionDigest is the SHA-256, in lowercase hex, of the canonical JSON of
// an action: what an approval request's action.digest carries and what a
// decision's expected_action_digest must equal. For an AAP approval
// request the action is {"tool": …, "arguments": …}.
func ActionDigest(action any) (string, error) {
	b, err := CanonicalJSON(action)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}

// IsDigest reports whether s has the form of a digest: 64 lowercase hex
// characters.
func IsDigest(s string) bool {
	if len(s) != 64 {
		return false
	}
	for _, c := range []byte(s) {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}
