package attest

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// MaxTokenSize bounds the compact JWS Verify and Parse accept, in bytes.
const MaxTokenSize = 16 << 10

var b64 = base64.RawURLEncoding.Strict()

// header is the protected header of an attestation.
type header struct {
	Alg string `json:"alg"`
	Kid string `json:"kid"`
	Typ string `json:"typ"`
	// Crit must be absent: no extension is understood (RFC 7515 §4.1.11).
	Crit json.RawMessage `json:"crit,omitempty"`
}

// Sign returns doc as a compact JWS signed by key, whose key ID (the JWK
// kid the verifier looks it up by) is kid. The document is checked for
// the required fields first. Ed25519 is deterministic: the same document,
// kid and key always give the same token.
func Sign(doc *Document, kid string, key ed25519.PrivateKey) (string, error) {
	if kid == "" {
		return "", errors.New("attest: a signing key needs a kid")
	}
	if len(key) != ed25519.PrivateKeySize {
		return "", errors.New("attest: not an Ed25519 private key")
	}
	if err := doc.validate(); err != nil {
		return "", fmt.Errorf("attest: %w", err)
	}
	d := *doc
	d.DecidedAt, d.ExpiresAt = d.DecidedAt.UTC(), d.ExpiresAt.UTC()
	p, err := json.Marshal(&d)
	if err != nil {
		return "", err
	}
	return SignJWS(Type, p, kid, key)
}

// SignJWS signs payload as a compact JWS (RFC 7515) with the protected
// header {"alg":"EdDSA","kid":kid,"typ":typ}: the form of every document
// AgentOwl signs (attestations, Type; the audit chain's checkpoints).
func SignJWS(typ string, payload []byte, kid string, key ed25519.PrivateKey) (string, error) {
	if kid == "" {
		return "", errors.New("attest: a signing key needs a kid")
	}
	if len(key) != ed25519.PrivateKeySize {
		return "", errors.New("attest: not an Ed25519 private key")
	}
	h, err := json.Marshal(header{Alg: Algorithm, Kid: kid, Typ: typ})
	if err != nil {
		return "", err
	}
	input := b64.EncodeToString(h) + "." + b64.EncodeToString(payload)
	return input + "." + b64.EncodeToString(ed25519.Sign(key, []byte(input))), nil
}

// JWS is a compact JWS whose signature is not yet verified.
type JWS struct {
	// KeyID is the kid header; Payload the signed bytes.
	KeyID   string
	Payload []byte
	input   []byte // what the signature covers
	sig     []byte
}

// ParseJWS splits and decodes a compact JWS of type typ: alg EdDSA, a
// kid, no crit, no other header member. It does not verify the signature.
func ParseJWS(token, typ string) (*JWS, error) {
	token = strings.TrimSpace(token)
	if len(token) > MaxTokenSize {
		return nil, fmt.Errorf("%w: longer than %d bytes", ErrMalformed, MaxTokenSize)
	}
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return nil, fmt.Errorf("%w: not three dot-separated parts", ErrMalformed)
	}
	hb, err := b64.DecodeString(parts[0])
	if err != nil {
		return nil, fmt.Errorf("%w: header: %v", ErrMalformed, err)
	}
	var h header
	if err := decodeStrict(hb, &h); err != nil {
		return nil, fmt.Errorf("%w: header: %v", ErrMalformed, err)
	}
	switch {
	case h.Alg != Algorithm:
		return nil, fmt.Errorf("%w: alg %q, want %q", ErrMalformed, h.Alg, Algorithm)
	case h.Typ != typ:
		return nil, fmt.Errorf("%w: typ %q, want %q", ErrMalformed, h.Typ, typ)
	case h.Kid == "":
		return nil, fmt.Errorf("%w: no kid", ErrMalformed)
	case h.Crit != nil:
		return nil, fmt.Errorf("%w: crit is not supported", ErrMalformed)
	}
	pb, err := b64.DecodeString(parts[1])
	if err != nil {
		return nil, fmt.Errorf("%w: payload: %v", ErrMalformed, err)
	}
	sig, err := b64.DecodeString(parts[2])
	if err != nil || len(sig) != ed25519.SignatureSize {
		return nil, fmt.Errorf("%w: signature is not %d base64url bytes", ErrMalformed, ed25519.SignatureSize)
	}
	return &JWS{KeyID: h.Kid, Payload: pb, input: []byte(parts[0] + "." + parts[1]), sig: sig}, nil
}

// Verify checks j's signature with the key its kid names in keys.
func (j *JWS) Verify(ctx context.Context, keys KeySet) error {
	if keys == nil {
		return fmt.Errorf("%w: no key set", ErrUnknownKey)
	}
	pub, err := keys.PublicKey(ctx, j.KeyID)
	if err != nil {
		return err
	}
	if !ed25519.Verify(pub, j.input, j.sig) {
		return ErrSignature
	}
	return nil
}

// Token is a parsed attestation whose signature is not yet verified.
type Token struct {
	// KeyID is the kid header.
	KeyID    string
	Document *Document
	jws      *JWS
}

// Parse splits and decodes a compact JWS without verifying its signature:
// to show an attestation, never to trust one (use Verify).
func Parse(token string) (*Token, error) {
	j, err := ParseJWS(token, Type)
	if err != nil {
		return nil, err
	}
	var doc Document
	if err := json.Unmarshal(j.Payload, &doc); err != nil {
		return nil, fmt.Errorf("%w: payload: %v", ErrMalformed, err)
	}
	if err := doc.validate(); err != nil {
		return nil, fmt.Errorf("%w: payload: %v", ErrMalformed, err)
	}
	return &Token{KeyID: j.KeyID, Document: &doc, jws: j}, nil
}

// decodeStrict decodes one JSON object into v, refusing unknown members
// (the header has no extension points) and trailing data.
func decodeStrict(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("data after the JSON object")
	}
	return nil
}

// Expectation is what a verifier requires of an attestation: what is
// about to run. Issuer and Subject.RequestID are required; for an
// approval (Decision empty or Approved), so is the action: Arguments with
// Tool, or ActionDigest.
type Expectation struct {
	// Issuer is the provider's public base URL, compared exactly.
	Issuer string
	// Tenant, when set, must be the document's.
	Tenant string
	// Subject names the request. Kind and RequestID are compared always;
	// WorkID, Revision and DecisionID when set.
	Subject Subject
	// Tool, when set, must be the document's tool.
	Tool string
	// Arguments, when not nil, are the arguments about to be used: their
	// ArgumentsDigest must be the document's arguments_sha256 (and, with
	// Tool, their ToolActionDigest its digest).
	Arguments json.RawMessage
	// ActionDigest, when set, must be the document's action digest.
	ActionDigest string
	// Answer, when set, must be the answer the document's answer_sha256
	// was computed from.
	Answer string
	// Decision is the decision required: Approved when empty.
	Decision string
	// Now returns the verification time; time.Now when nil.
	Now func() time.Time
	// Leeway tolerates clocks that differ: decided_at may be up to Leeway
	// after now. expires_at is never extended.
	Leeway time.Duration
}

func (w *Expectation) check() error {
	switch {
	case w.Issuer == "":
		return fmt.Errorf("%w: Issuer is required", ErrExpectation)
	case w.Subject.RequestID == "" || w.Subject.Kind == "":
		return fmt.Errorf("%w: Subject.Kind and Subject.RequestID are required", ErrExpectation)
	case (w.Decision == "" || w.Decision == Approved) && w.Arguments == nil && w.ActionDigest == "":
		return fmt.Errorf("%w: an approval needs Arguments or ActionDigest", ErrExpectation)
	}
	return nil
}

// Verify checks token against keys and want, in this order: its form
// (ErrMalformed), its key (ErrUnknownKey) and signature (ErrSignature),
// then the issuer, tenant, subject, action, decision and time. It
// returns the document when everything holds. The errors wrap the Err
// values of this package.
func Verify(token string, keys KeySet, want Expectation) (*Document, error) {
	return VerifyContext(context.Background(), token, keys, want)
}

// VerifyContext is Verify with a context for the key look-up (a remote
// key set may fetch).
func VerifyContext(ctx context.Context, token string, keys KeySet, want Expectation) (*Document, error) {
	if err := want.check(); err != nil {
		return nil, err
	}
	t, err := Parse(token)
	if err != nil {
		return nil, err
	}
	if err := t.VerifySignature(ctx, keys); err != nil {
		return nil, err
	}
	return t.Document, t.Document.Check(want)
}

// VerifySignature checks t's signature with the key its kid names in keys.
func (t *Token) VerifySignature(ctx context.Context, keys KeySet) error {
	return t.jws.Verify(ctx, keys)
}

// Check compares a document whose signature was verified with want.
func (d *Document) Check(want Expectation) error {
	if err := want.check(); err != nil {
		return err
	}
	if d.Issuer != want.Issuer {
		return fmt.Errorf("%w: %q, want %q", ErrIssuer, d.Issuer, want.Issuer)
	}
	if want.Tenant != "" && d.Tenant != want.Tenant {
		return fmt.Errorf("%w: %q, want %q", ErrTenant, d.Tenant, want.Tenant)
	}
	s, ws := d.Subject, want.Subject
	if s.Kind != ws.Kind || s.RequestID != ws.RequestID ||
		(ws.WorkID != "" && s.WorkID != ws.WorkID) ||
		(ws.Revision != 0 && s.Revision != ws.Revision) ||
		(ws.DecisionID != "" && s.DecisionID != ws.DecisionID) {
		return fmt.Errorf("%w: the attestation is about %s %s", ErrSubject, s.Kind, describe(s))
	}
	if want.Tool != "" && d.Action.Tool != want.Tool {
		return fmt.Errorf("%w: tool %q, want %q", ErrAction, d.Action.Tool, want.Tool)
	}
	if want.Arguments != nil {
		got, err := ArgumentsDigest(want.Arguments)
		if err != nil {
			return fmt.Errorf("%w: the arguments are not JSON: %v", ErrAction, err)
		}
		if got != d.Action.ArgumentsSHA256 {
			return fmt.Errorf("%w: the arguments digest to %s, the attestation's to %s", ErrAction, got, d.Action.ArgumentsSHA256)
		}
		if want.Tool != "" {
			ad, _ := ToolActionDigest(want.Tool, want.Arguments)
			if ad != d.Action.Digest {
				return fmt.Errorf("%w: the action digests to %s, the attestation's to %s", ErrAction, ad, d.Action.Digest)
			}
		}
	}
	if want.ActionDigest != "" && d.Action.Digest != want.ActionDigest {
		return fmt.Errorf("%w: action digest %s, want %s", ErrAction, d.Action.Digest, want.ActionDigest)
	}
	if want.Answer != "" && d.Action.AnswerSHA256 != AnswerDigest(want.Answer) {
		return fmt.Errorf("%w: the attestation is for another answer", ErrAction)
	}
	decision := want.Decision
	if decision == "" {
		decision = Approved
	}
	if d.Decision != decision {
		return fmt.Errorf("%w: %q, want %q", ErrDecision, d.Decision, decision)
	}
	now := time.Now()
	if want.Now != nil {
		now = want.Now()
	}
	if !now.Before(d.ExpiresAt) {
		return fmt.Errorf("%w: at %s", ErrExpired, d.ExpiresAt.UTC().Format(time.RFC3339))
	}
	if d.DecidedAt.After(now.Add(want.Leeway)) {
		return fmt.Errorf("%w: decided_at %s", ErrNotYetValid, d.DecidedAt.UTC().Format(time.RFC3339))
	}
	return nil
}

func describe(s Subject) string {
	if s.Kind == SubjectWorkRequest {
		return fmt.Sprintf("%s/%s revision %d", s.WorkID, s.RequestID, s.Revision)
	}
	return s.RequestID
}
