package server

import (
	"context"
	"time"

	"github.com/agentowl/agentowl"
	"github.com/agentowl/agentowl/internal/attestation"
)

// Attestation keys, for `agentowl attestation-keys list` and `rotate`
// (docs/attestations.md, "Key rotation"), run directly against the
// database like `secrets rotate-key`, with replicas running or not: a
// replica signs with a rotated-in key within a minute, and the retired key
// stays published until every attestation it signed has expired plus the
// retention.

// AttestationKey is a key as listed.
type AttestationKey = attestation.Key

// offlineSigner is a Signer for key management: it signs nothing, so the
// issuer is not used.
func offlineSigner(st agentowl.Store, clock agentowl.Clock, retention time.Duration) (*attestation.Signer, error) {
	if clock == nil {
		clock = agentowl.SystemClock{}
	}
	return attestation.New(st, clock, attestation.Config{Issuer: "offline", Retention: retention})
}

// AttestationKeys lists st's attestation keys, oldest first, with when
// each retired key leaves the JWK Set under retention (0: the default).
func AttestationKeys(ctx context.Context, st agentowl.Store, clock agentowl.Clock, retention time.Duration) ([]AttestationKey, error) {
	s, err := offlineSigner(st, clock, retention)
	if err != nil {
		return nil, err
	}
	return s.Keys(ctx)
}

// RotateAttestationKey generates a new signing key and retires the
// current one. st must be opened with the secret key (the new key is
// sealed).
func RotateAttestationKey(ctx context.Context, st agentowl.Store, clock agentowl.Clock) (*AttestationKey, error) {
	s, err := offlineSigner(st, clock, 0)
	if err != nil {
		return nil, err
	}
	return s.Rotate(ctx)
}
