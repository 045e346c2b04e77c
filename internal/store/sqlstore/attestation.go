package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/agentowl/agentowl"
)

// ---- decision attestations (docs/attestations.md)

// attestationKeySecrets: an attestation key's Ed25519 seed, sealed like
// every stored secret (and re-sealed by a secret key rotation).
var attestationKeySecrets = sealedFields[agentowl.AttestationKey]{
	bytesField("attestation_keys", "private_key_sealed", func(v *agentowl.AttestationKey) *[]byte { return &v.PrivateKey }),
}

const attestationKeyCols = `id, public_key, created_at, retired_at`

func scanAttestationKeyPublic(s scanner, extra ...any) (*agentowl.AttestationKey, error) {
	var v agentowl.AttestationKey
	var created int64
	var retired sql.NullInt64
	if err := s.Scan(append([]any{&v.ID, &v.PublicKey, &created, &retired}, extra...)...); err != nil {
		return nil, err
	}
	v.CreatedAt, v.RetiredAt = fromTS(created), fromNullTS(retired)
	return &v, nil
}

func (t *tx) AttestationKeyActive(ctx context.Context) (*agentowl.AttestationKey, error) {
	return one(t.queryRow(ctx, `SELECT `+attestationKeyCols+`, `+attestationKeySecrets.cols()+
		` FROM attestation_keys WHERE retired_at IS NULL`), func(s scanner) (*agentowl.AttestationKey, error) {
		sealed, raw := attestationKeySecrets.dest()
		v, err := scanAttestationKeyPublic(s, sealed...)
		if err != nil {
			return nil, err
		}
		return v, attestationKeySecrets.open(t.db, v.ID, v, raw)
	})
}

func (t *tx) AttestationKeyCreate(ctx context.Context, k *agentowl.AttestationKey) error {
	if k.RetiredAt != nil {
		return errors.New("sqlstore: a new attestation key is the signing key: RetiredAt must be nil")
	}
	if len(k.PrivateKey) == 0 {
		return errors.New("sqlstore: an attestation key without its private key")
	}
	sealed, err := attestationKeySecrets.seal(t.db, k.ID, k)
	if err != nil {
		return err
	}
	_, err = t.exec(ctx, `INSERT INTO attestation_keys (`+attestationKeyCols+`, `+attestationKeySecrets.cols()+`)
		VALUES (?, ?, ?, NULL, ?)`, append([]any{k.ID, k.PublicKey, ts(k.CreatedAt)}, sealed...)...)
	return err
}

func (t *tx) AttestationKeyRotate(ctx context.Context, next *agentowl.AttestationKey, now time.Time) error {
	if _, err := t.exec(ctx, `UPDATE attestation_keys SET retired_at = ? WHERE retired_at IS NULL`, ts(now)); err != nil {
		return err
	}
	return t.AttestationKeyCreate(ctx, next)
}

func (t *tx) AttestationKeyList(ctx context.Context) ([]*agentowl.AttestationKey, error) {
	rows, err := t.query(ctx, `SELECT `+qualified(attestationKeyCols, "k")+`,
		(SELECT max(a.expires_at) FROM attestations a WHERE a.key_id = k.id)
		FROM attestation_keys k ORDER BY k.created_at, k.id`)
	return all(rows, err, func(s scanner) (*agentowl.AttestationKey, error) {
		var last sql.NullInt64
		v, err := scanAttestationKeyPublic(s, &last)
		if err != nil {
			return nil, err
		}
		if last.Valid {
			v.LastExpiresAt = fromTS(last.Int64)
		}
		return v, nil
	})
}

const attestationCols = `id, tenant_id, subject_kind, subject_id, key_id, token, decided_at, expires_at`

func scanAttestation(s scanner) (*agentowl.Attestation, error) {
	var v agentowl.Attestation
	var decided, expires int64
	if err := s.Scan(&v.ID, &v.TenantID, &v.SubjectKind, &v.SubjectID, &v.KeyID, &v.Token, &decided, &expires); err != nil {
		return nil, err
	}
	v.DecidedAt, v.ExpiresAt = fromTS(decided), fromTS(expires)
	return &v, nil
}

// AttestationCreate is sent with the transaction's next statement or its
// commit on PostgreSQL: no caller acts on its outcome inside the
// transaction, so a decision costs no extra round trip.
func (t *tx) AttestationCreate(ctx context.Context, a *agentowl.Attestation) error {
	return t.execLater(ctx, nil, `INSERT INTO attestations (`+attestationCols+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
		a.ID, a.TenantID, a.SubjectKind, a.SubjectID, a.KeyID, a.Token, ts(a.DecidedAt), ts(a.ExpiresAt))
}

func (t *tx) AttestationGet(ctx context.Context, subjectKind, subjectID string) (*agentowl.Attestation, error) {
	return one(t.queryRow(ctx, `SELECT `+attestationCols+` FROM attestations WHERE subject_kind = ? AND subject_id = ?`,
		subjectKind, subjectID), scanAttestation)
}

func (t *tx) AttestationPut(ctx context.Context, a *agentowl.Attestation) error {
	_, err := t.exec(ctx, `INSERT INTO attestations (`+attestationCols+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (subject_kind, subject_id) DO NOTHING`,
		a.ID, a.TenantID, a.SubjectKind, a.SubjectID, a.KeyID, a.Token, ts(a.DecidedAt), ts(a.ExpiresAt))
	return err
}

// AttestationsUnsigned reads the requests through their retention index:
// a decided request is kept until RetentionAfterDecision after its
// decision, so those decided since from are kept until at least
// from + RetentionAfterDecision.
func (t *tx) AttestationsUnsigned(ctx context.Context, from, to time.Time, limit int) ([]string, error) {
	rows, err := t.query(ctx, `SELECT r.id FROM approval_requests r
		WHERE r.retain_until >= ? AND r.decided_at >= ? AND r.decided_at < ? AND r.status IN ('approved', 'denied')
		AND NOT EXISTS (SELECT 1 FROM attestations a WHERE a.subject_kind = ? AND a.subject_id = r.id)
		ORDER BY r.decided_at, r.id LIMIT ?`,
		ts(from.Add(agentowl.RetentionAfterDecision)), ts(from), ts(to), agentowl.AttestationAAPRequest, limit)
	return all(rows, err, scanString)
}
