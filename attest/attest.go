// Package attest creates and verifies AgentOwl decision attestations
// (docs/attestations.md): a JWS (RFC 7515, compact serialization,
// alg EdDSA over Ed25519, with a kid header) over a small JSON Document
// that says which decision the provider recorded on exactly which action.
//
// An executing service, a harness or an auditor verifies one with
// Verify against the provider's published JWK Set (RFC 7517; ParseJWKS for
// a file, NewRemoteKeySet for the provider's
// /.well-known/agentowl/jwks.json) and an Expectation naming what is about
// to run: the issuer, the subject, the tool and arguments (or the action
// digest) and the decision. A token whose signature, issuer, subject,
// action, decision or expiry does not match is refused with an error that
// wraps one of the Err values below.
//
// The document's JSON Schema is api/attestation.schema.json; golden
// vectors (a fixed test key and tokens) are in testdata/vectors.json.
//
// The package depends on the standard library and agentwork (the
// canonical JSON that arguments digests are computed over) only.
package attest

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"time"

	"github.com/agentowl/agentowl/agentwork"
)

// Version is the document version every attestation carries in "v".
const Version = 1

// Type is the JWS typ header of an attestation (RFC 8725 explicit typing):
// a verifier refuses any other JWS, such as an unrelated JWT signed by a
// key of the same set.
const Type = "agentowl-attestation+jws"

// Algorithm is the only JWS alg: Ed25519 signatures (RFC 8037).
const Algorithm = "EdDSA"

// Subject kinds.
const (
	// SubjectAAPRequest: an AAP approval request (Subject.RequestID is its
	// UUID).
	SubjectAAPRequest = "aap_request"
	// SubjectWorkRequest: a runtime request of agent work (Subject.WorkID,
	// RequestID, Revision and DecisionID name it).
	SubjectWorkRequest = "work_request"
)

// Decisions.
const (
	// Approved: an operator or a policy permitted the action.
	Approved = "approved"
	// Denied: an operator or a policy refused it (AAP denied, agent-work
	// reject).
	Denied = "denied"
	// Answered: an operator answered a runtime's question
	// (Action.AnswerSHA256 is the answer's digest).
	Answered = "answered"
)

// Deciders (DecidedBy.Kind).
const (
	ByOperator = "operator" // Name is the operator's name
	ByPolicy   = "policy"   // PolicyID names the policy rule
	ByToken    = "token"    // Name is the API token's kind and ID, such as "admin:tok_…"
)

// Document is the signed content of an attestation. Every field is
// required except those marked optional; times are UTC RFC 3339.
type Document struct {
	// Version is the document version, 1.
	Version int `json:"v"`
	// Issuer is the provider's public base URL, such as
	// "https://owl.example.com".
	Issuer string `json:"iss"`
	// ID is unique per attestation (a JWT-style jti).
	ID string `json:"jti"`
	// Tenant is the ID of the tenant the decision belongs to.
	Tenant   string  `json:"tenant"`
	Subject  Subject `json:"subject"`
	Action   Action  `json:"action"`
	Decision string  `json:"decision"`
	// DecidedBy is who decided.
	DecidedBy DecidedBy `json:"decided_by"`
	DecidedAt time.Time `json:"decided_at"`
	// ExpiresAt: the attestation proves nothing at or after this instant.
	// For an AAP approval it is the approval's expires_at (the call must
	// not start later); for a runtime request the request's expiry.
	ExpiresAt time.Time `json:"expires_at"`
}

// Subject names what was decided.
type Subject struct {
	// Kind is SubjectAAPRequest or SubjectWorkRequest.
	Kind string `json:"kind"`
	// RequestID is the AAP request's UUID, or the runtime request's ID.
	RequestID string `json:"request_id"`
	// WorkID, Revision and DecisionID are set for SubjectWorkRequest only.
	WorkID     string `json:"work_id,omitempty"`
	Revision   int64  `json:"revision,omitempty"`
	DecisionID string `json:"decision_id,omitempty"`
}

// Action is the identity of the decided action.
type Action struct {
	// Tool is the AAP request's tool name (SubjectAAPRequest only).
	Tool string `json:"tool,omitempty"`
	// ArgumentsSHA256 is ArgumentsDigest of the AAP request's arguments
	// (SubjectAAPRequest only).
	ArgumentsSHA256 string `json:"arguments_sha256,omitempty"`
	// Digest is the action digest (agentwork.ActionDigest): of
	// {"tool": …, "arguments": …} for an AAP request, the runtime's
	// action.digest for an approval request of agent work. Empty for a
	// question.
	Digest string `json:"digest,omitempty"`
	// AnswerSHA256 is the SHA-256 (lowercase hex) of the answer's UTF-8
	// bytes, for Answered only.
	AnswerSHA256 string `json:"answer_sha256,omitempty"`
}

// DecidedBy says who decided.
type DecidedBy struct {
	// Kind is ByOperator, ByPolicy or ByToken.
	Kind     string `json:"kind"`
	Name     string `json:"name,omitempty"`
	PolicyID string `json:"policy_id,omitempty"`
}

// Errors a verification wraps (test with errors.Is).
var (
	// ErrMalformed: not a compact JWS of this package's form (three
	// base64url parts, the header and document as specified).
	ErrMalformed = errors.New("attest: malformed attestation")
	// ErrUnknownKey: the key set holds no key with the token's kid.
	ErrUnknownKey = errors.New("attest: unknown signing key")
	// ErrSignature: the signature does not verify with the kid's key.
	ErrSignature = errors.New("attest: bad signature")
	// ErrIssuer: the document names another issuer.
	ErrIssuer = errors.New("attest: wrong issuer")
	// ErrTenant: the document names another tenant.
	ErrTenant = errors.New("attest: wrong tenant")
	// ErrSubject: the document is about another request.
	ErrSubject = errors.New("attest: wrong subject")
	// ErrAction: the document is about another action (tool, arguments or
	// action digest) or answer.
	ErrAction = errors.New("attest: wrong action")
	// ErrDecision: the document records another decision.
	ErrDecision = errors.New("attest: wrong decision")
	// ErrExpired: the verification time is at or after expires_at.
	ErrExpired = errors.New("attest: expired")
	// ErrNotYetValid: decided_at is later than the verification time
	// (beyond Expectation.Leeway).
	ErrNotYetValid = errors.New("attest: decided in the future")
	// ErrExpectation: the Expectation itself is incomplete (it names no
	// issuer or subject, or an approval without its action).
	ErrExpectation = errors.New("attest: incomplete expectation")
)

// ArgumentsDigest is the SHA-256, lowercase hex, of the canonical JSON
// (agentwork.Canonicalize) of a tool call's arguments: Action.ArgumentsSHA256.
// Empty arguments digest as JSON null.
func ArgumentsDigest(arguments json.RawMessage) (string, error) {
	if len(arguments) == 0 {
		arguments = json.RawMessage("null")
	}
	c, err := agentwork.Canonicalize(arguments)
	if err != nil {
		return "", err
	}
	return sha256Hex(c), nil
}

// ToolActionDigest is the action digest of a tool call,
// agentwork.ActionDigest of {"tool": tool, "arguments": arguments}: the
// digest AgentOwl shows for an AAP request and Action.Digest carries.
func ToolActionDigest(tool string, arguments json.RawMessage) (string, error) {
	if len(arguments) == 0 {
		arguments = json.RawMessage("null")
	}
	return agentwork.ActionDigest(map[string]any{"tool": tool, "arguments": arguments})
}

// AnswerDigest is Action.AnswerSHA256 of an answer.
func AnswerDigest(answer string) string { return sha256Hex([]byte(answer)) }

func sha256Hex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// validate checks a document's form: what every attestation carries.
func (d *Document) validate() error {
	switch {
	case d.Version != Version:
		return errors.New("unsupported version")
	case d.Issuer == "" || d.ID == "" || d.Tenant == "":
		return errors.New("iss, jti and tenant are required")
	case d.Subject.RequestID == "":
		return errors.New("subject.request_id is required")
	case d.Subject.Kind == SubjectWorkRequest && (d.Subject.WorkID == "" || d.Subject.Revision < 1):
		return errors.New("a work request's subject needs work_id and revision")
	case d.Subject.Kind != SubjectAAPRequest && d.Subject.Kind != SubjectWorkRequest:
		return errors.New("unknown subject kind")
	case d.Decision != Approved && d.Decision != Denied && d.Decision != Answered:
		return errors.New("unknown decision")
	case d.DecidedBy.Kind == "":
		return errors.New("decided_by.kind is required")
	case d.DecidedAt.IsZero() || d.ExpiresAt.IsZero():
		return errors.New("decided_at and expires_at are required")
	case d.Subject.Kind == SubjectAAPRequest && (d.Action.Tool == "" || d.Action.ArgumentsSHA256 == ""):
		return errors.New("an AAP request's action needs tool and arguments_sha256")
	}
	for _, h := range []string{d.Action.ArgumentsSHA256, d.Action.Digest, d.Action.AnswerSHA256} {
		if h != "" && !agentwork.IsDigest(h) {
			return errors.New("a digest is not 64 lowercase hex characters")
		}
	}
	return nil
}
