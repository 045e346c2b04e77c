package server

import (
	"context"
	"crypto/ed25519"
	"fmt"

	"github.com/agentowl/agentowl"
	"github.com/agentowl/agentowl/internal/auditchain"
)

// auditCheckpointSigner signs the audit chain's checkpoints with the
// server's active attestation key (internal/attestation keeps it, sealed
// in the store and shared by replicas), so they verify against the JWK
// Set the server publishes at /.well-known/agentowl/jwks.json.
type auditCheckpointSigner struct{ store agentowl.Store }

// Sign implements auditchain.Signer.
func (a auditCheckpointSigner) Sign(ctx context.Context, payload []byte) (string, error) {
	var k *agentowl.AttestationKey
	if err := a.store.Read(ctx, func(tx agentowl.Tx) (err error) {
		k, err = tx.AttestationKeyActive(ctx)
		return err
	}); err != nil {
		return "", fmt.Errorf("audit checkpoint: the attestation key: %w", err)
	}
	if len(k.PrivateKey) != ed25519.SeedSize {
		return "", fmt.Errorf("audit checkpoint: attestation key %s is not an Ed25519 seed", k.ID)
	}
	return auditchain.Ed25519Signer{Kid: k.ID, Key: ed25519.NewKeyFromSeed(k.PrivateKey)}.Sign(ctx, payload)
}
