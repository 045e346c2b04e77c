package attestation

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/agentowl/agentowl"
	"github.com/agentowl/agentowl/agentwork"
	"github.com/agentowl/agentowl/attest"
)

// Presign says when the use-cases sign a decision's attestation before
// the transaction that records the decision (PrepareRequest, PrepareWork)
// rather than inside it.
type Presign int

const (
	// PresignAuto presigns on a store whose write transactions run one at
	// a time (SQLite: every write's function runs in the one writer
	// goroutine, so signing inside it is throughput lost by every write
	// of the server), and signs inside the transaction elsewhere
	// (PostgreSQL: transactions run concurrently, and presigning would
	// cost a read round trip).
	PresignAuto Presign = iota
	// PresignAlways presigns on every store.
	PresignAlways
	// PresignNever signs inside the transaction on every store.
	PresignNever
)

// Prepared is an attestation signed before the transaction that records
// its decision, from what is known beforehand: the request's immutable
// fields read outside the transaction, the decision time fixed before it,
// the decider. SignRequestTx and SignWorkTx record it only when the
// document they would sign from what the transaction writes is exactly
// the one signed, and sign in the transaction otherwise: an attestation
// always attests exactly the decision committed with it.
type Prepared struct {
	a   *agentowl.Attestation
	doc attest.Document // as signed
	// tool and args are what the AAP action digests were computed from,
	// reused by the check when the transaction's request has the same.
	tool string
	args json.RawMessage
}

// Presigns reports whether the use-cases should prepare attestations
// before their decisions' transactions (Config.Presign). False for a nil
// Signer.
func (s *Signer) Presigns() bool {
	if s == nil {
		return false
	}
	switch s.cfg.Presign {
	case PresignAlways:
		return true
	case PresignNever:
		return false
	}
	return s.store.Dialect() == "sqlite"
}

// PrepareRequest signs, before the transaction, the attestation of
// decision d on AAP request r (as read before it) for SignRequestTx; nil
// (sign in the transaction) for a nil Signer, an outcome without an
// attestation, or when it cannot (no signing key yet, arguments that do
// not digest).
func (s *Signer) PrepareRequest(ctx context.Context, r *agentowl.ApprovalRequest, d *agentowl.Decision, validity time.Duration) *Prepared {
	if s == nil || (d.Status != agentowl.StatusApproved && d.Status != agentowl.StatusDenied) {
		return nil
	}
	doc, err := requestDocument(r, d, validity, nil)
	if err != nil {
		return nil
	}
	p := s.prepare(ctx, doc, agentowl.AttestationAAPRequest, r.ID)
	if p != nil {
		p.tool, p.args = r.Tool, r.Arguments
	}
	return p
}

// PrepareWork signs, before the transaction, the attestation of w for
// SignWorkTx; nil (sign in the transaction) for a nil Signer or when it
// cannot.
func (s *Signer) PrepareWork(ctx context.Context, w WorkDecision) *Prepared {
	if s == nil {
		return nil
	}
	doc, err := workDocument(w)
	if err != nil {
		return nil
	}
	return s.prepare(ctx, doc, agentowl.AttestationWorkDecision, WorkSubjectID(w.WorkID, w.DecisionID))
}

func (s *Signer) prepare(ctx context.Context, doc *attest.Document, subjectKind, subjectID string) *Prepared {
	kid, priv, err := s.committedKey(ctx)
	if err != nil {
		return nil
	}
	a, err := s.signWith(doc, kid, priv, subjectKind, subjectID)
	if err != nil {
		return nil
	}
	return &Prepared{a: a, doc: *doc}
}

// committedKey is the signing key outside a transaction: from the cache
// while it is fresh, else read from the store (never created: the first
// key is created by Ensure or in a transaction). A key rotated after it
// was read still verifies: a retired key stays published while the
// attestations it signed may be checked.
func (s *Signer) committedKey(ctx context.Context) (string, ed25519.PrivateKey, error) {
	if kid, priv, ok := s.cachedKey(s.clock.Now()); ok {
		return kid, priv, nil
	}
	var kid string
	var priv ed25519.PrivateKey
	err := s.store.Read(ctx, func(tx agentowl.Tx) (err error) {
		kid, priv, err = s.activeKey(ctx, tx, false)
		return err
	})
	return kid, priv, err
}

// attestsRequest reports whether p is the attestation SignRequestTx would
// sign for decision d on request r: the document built from r and d (the
// action digests reused only when r's tool and arguments are
// byte-for-byte those digested) equals the one signed.
func (p *Prepared) attestsRequest(r *agentowl.ApprovalRequest, d *agentowl.Decision, validity time.Duration) bool {
	if p == nil || p.a.SubjectKind != agentowl.AttestationAAPRequest || p.a.SubjectID != r.ID ||
		p.tool != r.Tool || !bytes.Equal(p.args, r.Arguments) {
		return false
	}
	doc, err := requestDocument(r, d, validity, &p.doc.Action)
	return err == nil && p.same(doc)
}

// attestsWork reports whether p is the attestation SignWorkTx would sign
// for w.
func (p *Prepared) attestsWork(w WorkDecision) bool {
	if p == nil || p.a.SubjectKind != agentowl.AttestationWorkDecision || p.a.SubjectID != WorkSubjectID(w.WorkID, w.DecisionID) {
		return false
	}
	doc, err := workDocument(w)
	return err == nil && p.same(doc)
}

// same reports whether doc (without version, issuer and ID) is the
// document p signed.
func (p *Prepared) same(doc *attest.Document) bool {
	want, got := p.doc, *doc
	got.Version, got.Issuer, got.ID = want.Version, want.Issuer, want.ID
	// Times compare as instants (location and monotonic reading apart),
	// as the signed document renders them: in UTC.
	want.DecidedAt, want.ExpiresAt = want.DecidedAt.UTC(), want.ExpiresAt.UTC()
	got.DecidedAt, got.ExpiresAt = got.DecidedAt.UTC(), got.ExpiresAt.UTC()
	return want == got
}

// toolDigests is attest.ArgumentsDigest of arguments and
// attest.ToolActionDigest of tool and arguments, canonicalizing the
// arguments once: the action {"tool": …, "arguments": …} in canonical form
// is {"arguments":<canonical arguments>,"tool":<tool as a JSON string>}
// (keys sorted, no HTML escaping). A tool name that is not valid UTF-8
// takes attest's own path (its replacement characters).
func toolDigests(tool string, arguments json.RawMessage) (argsDigest, actionDigest string, err error) {
	if len(arguments) == 0 {
		arguments = json.RawMessage("null")
	}
	c, err := agentwork.Canonicalize(arguments)
	if err != nil || !utf8.ValidString(tool) {
		return slowToolDigests(tool, arguments)
	}
	var buf bytes.Buffer
	buf.Grow(len(c) + len(tool) + 32)
	buf.WriteString(`{"arguments":`)
	buf.Write(c)
	buf.WriteString(`,"tool":`)
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(tool); err != nil {
		return slowToolDigests(tool, arguments)
	}
	buf.Truncate(buf.Len() - 1) // Encode's newline
	buf.WriteByte('}')
	return sha256Hex(c), sha256Hex(buf.Bytes()), nil
}

// slowToolDigests is toolDigests through attest's functions, for its
// exact results and errors on unusual input.
func slowToolDigests(tool string, arguments json.RawMessage) (string, string, error) {
	argsDigest, err := attest.ArgumentsDigest(arguments)
	if err != nil {
		return "", "", err
	}
	digest, err := attest.ToolActionDigest(tool, arguments)
	if err != nil {
		return "", "", fmt.Errorf("action: %w", err)
	}
	if argsDigest == "" || digest == "" {
		return "", "", errors.New("empty digest")
	}
	return argsDigest, digest, nil
}

func sha256Hex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}
