package agentowl

import (
	"context"
	"time"
)

// AttestationKey is an Ed25519 key that signs decision attestations
// (docs/attestations.md). The store seals PrivateKey at rest; replicas
// share the keys through the store.
type AttestationKey struct {
	// ID is the key's kid in the JWK Set.
	ID string
	// PrivateKey is the Ed25519 seed (32 bytes), in plain text in memory
	// only; nil when read for publication (AttestationKeyList).
	PrivateKey []byte
	// PublicKey is the Ed25519 public key (32 bytes).
	PublicKey []byte
	CreatedAt time.Time
	// RetiredAt is set once another key replaced this one: it signs no
	// more, and stays published while attestations it signed may still be
	// checked.
	RetiredAt *time.Time
	// LastExpiresAt is the latest expires_at of the attestations the key
	// signed (AttestationKeyList only); zero when it signed none.
	LastExpiresAt time.Time
}

// Attestation subject kinds (Attestation.SubjectKind).
const (
	// AttestationAAPRequest: SubjectID is the AAP request's UUID.
	AttestationAAPRequest = "aap_request"
	// AttestationWorkDecision: SubjectID is "<work ID>/<decision ID>".
	AttestationWorkDecision = "work_decision"
)

// Attestation is the signed attestation of one decision, as issued.
type Attestation struct {
	// ID is the document's jti.
	ID          string
	TenantID    string
	SubjectKind string
	SubjectID   string
	KeyID       string
	// Token is the compact JWS.
	Token     string
	DecidedAt time.Time
	ExpiresAt time.Time
}

// AttestationStore keeps the attestation signing keys and the
// attestations of decisions. Implemented by Tx.
type AttestationStore interface {
	// AttestationKeyActive returns the key that signs, its private key
	// opened; ErrNotFound when there is none yet.
	AttestationKeyActive(ctx context.Context) (*AttestationKey, error)
	// AttestationKeyCreate adds k as the signing key; ErrConflict when
	// another key signs already (k.RetiredAt must be nil), or its ID is
	// taken.
	AttestationKeyCreate(ctx context.Context, k *AttestationKey) error
	// AttestationKeyRotate retires the signing key at now (if any) and
	// adds next as the signing key, atomically.
	AttestationKeyRotate(ctx context.Context, next *AttestationKey, now time.Time) error
	// AttestationKeyList lists every key, oldest first, without private
	// keys, with the latest expiry of the attestations each signed.
	AttestationKeyList(ctx context.Context) ([]*AttestationKey, error)
	// AttestationCreate records a; ErrConflict when its subject has one
	// already (possibly only at the commit: see Store.Write).
	AttestationCreate(ctx context.Context, a *Attestation) error
	// AttestationPut records a unless its subject has one already: a
	// decision signed after its transaction, where whoever signs first
	// wins (the others read the winner with AttestationGet).
	AttestationPut(ctx context.Context, a *Attestation) error
	// AttestationsUnsigned lists the approved and denied AAP requests
	// decided in [from, to) that have no attestation, oldest decision
	// first, at most limit: the decisions left to sign after their
	// transactions (a replica stopped before it signed them).
	AttestationsUnsigned(ctx context.Context, from, to time.Time, limit int) ([]string, error)
	// AttestationGet returns the attestation of a subject; ErrNotFound if
	// it has none.
	AttestationGet(ctx context.Context, subjectKind, subjectID string) (*Attestation, error)
}
