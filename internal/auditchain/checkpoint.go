package auditchain

import (
	"context"
	"crypto/ed25519"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/agentowl/agentowl/attest"
)

// CheckpointType is a signed checkpoint's JWS typ header and its
// payload's typ member.
const CheckpointType = "agentowl-audit-checkpoint+jws"

// Checkpoint is what the server signs of a tenant's chain: its head (the
// hash of entry Seq) at a time. Every entry up to Seq is covered: changing,
// adding or removing any of them changes the head.
type Checkpoint struct {
	Type     string    `json:"typ"`
	TenantID string    `json:"tenant_id"`
	Seq      int64     `json:"seq"`
	Head     string    `json:"head"` // hex SHA-256
	At       time.Time `json:"at"`
}

// CheckpointPayload is the JSON a checkpoint's JWS signs.
func CheckpointPayload(tenantID string, seq int64, head []byte, at time.Time) []byte {
	b, _ := json.Marshal(Checkpoint{Type: CheckpointType, TenantID: tenantID, Seq: seq, Head: hex.EncodeToString(head),
		At: at.UTC().Truncate(time.Microsecond)})
	return b
}

// Signer signs a checkpoint's payload as a compact JWS (RFC 7515,
// alg EdDSA) whose kid the published JWK Set names. The server's
// attestation keys implement it.
type Signer interface {
	Sign(ctx context.Context, payload []byte) (jws string, err error)
}

// Ed25519Signer signs with one Ed25519 key named Kid.
type Ed25519Signer struct {
	Kid string
	Key ed25519.PrivateKey
}

// Sign implements Signer: header {"alg":"EdDSA","kid":…,"typ":CheckpointType}.
func (s Ed25519Signer) Sign(_ context.Context, payload []byte) (string, error) {
	return attest.SignJWS(CheckpointType, payload, s.Kid, s.Key)
}

// ErrCheckpoint marks a checkpoint that does not verify.
var ErrCheckpoint = errors.New("checkpoint does not verify")

// VerifyCheckpoint checks a checkpoint's signature against keys (the
// server's published JWK Set, attest.ParseJWKS or attest.NewRemoteKeySet)
// and returns its payload, which must be about tenantID.
func VerifyCheckpoint(ctx context.Context, jws string, keys attest.KeySet, tenantID string) (*Checkpoint, error) {
	fail := func(format string, args ...any) (*Checkpoint, error) {
		return nil, fmt.Errorf("%w: %s", ErrCheckpoint, fmt.Sprintf(format, args...))
	}
	j, err := attest.ParseJWS(jws, CheckpointType)
	if err != nil {
		return fail("%v", err)
	}
	if err := j.Verify(ctx, keys); err != nil {
		return fail("key %q: %v", j.KeyID, err)
	}
	pb := j.Payload
	var c Checkpoint
	if err := json.Unmarshal(pb, &c); err != nil {
		return fail("payload: %v", err)
	}
	if _, err := hex.DecodeString(c.Head); err != nil || len(c.Head) != 2*HashSize {
		return fail("payload: head is not a hex SHA-256")
	}
	switch {
	case c.Type != CheckpointType:
		return fail("payload typ %q", c.Type)
	case c.TenantID != tenantID:
		return fail("it is about tenant %q, not %q", c.TenantID, tenantID)
	case c.Seq < 1:
		return fail("seq %d", c.Seq)
	}
	return &c, nil
}
