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

// KeyPublication is how long a retired attestation key stays in the JWK Set
// after the last attestation it signed expired: the configured retention
// (default 30 days), but never shorter than the audit log's retention
// (default 365 days), because the audit chain's checkpoints it signed are
// kept as long as their entries and must still verify against the
// published keys (docs/attestations.md, "The audit chain").
func KeyPublication(retention, auditRetention time.Duration) time.Duration {
	if retention <= 0 {
		retention = 30 * 24 * time.Hour
	}
	if auditRetention <= 0 {
		auditRetention = 365 * 24 * time.Hour
	}
	return max(retention, auditRetention)
}

// offlineSigner is a Signer for key management: it signs nothing, so the
// issuer is not used.
func offlineSigner(st agentowl.Store, clock agentowl.Clock, retention time.Duration) (*attestation.Signer, error) {
	if clock == nil {
		clock = agentowl.SystemClock{}
	}
	return attestation.New(st, clock, attestation.Config{Issuer: "offline", Retention: retention})
}

// AttestationKeys lists st's attestation keys, oldest first, with when
// each retired key leaves the JWK Set under the key and audit retentions
// (0: their defaults), as KeyPublication combines them.
func AttestationKeys(ctx context.Context, st agentowl.Store, clock agentowl.Clock, retention, auditRetention time.Duration) ([]AttestationKey, error) {
	s, err := offlineSigner(st, clock, KeyPublication(retention, auditRetention))
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
