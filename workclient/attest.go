package workclient

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/agentowl/agentowl/agentwork"
	"github.com/agentowl/agentowl/attest"
)

// Decision attestations (docs/attestations.md): a decision document, pushed
// or recovered, carries the provider's signed attestation of the decision.
// A runtime that verifies it before acting needs to trust neither the
// channel the document came through nor anyone holding the endpoint's
// signing secret: only the provider's published keys.

// ErrNoAttestation: the decision carries no attestation (the provider
// signs none, or it was stripped on the way).
var ErrNoAttestation = errors.New("workclient: the decision carries no attestation")

// DecisionVerifier verifies the attestation of decision documents.
type DecisionVerifier struct {
	// Keys is the provider's published key set:
	// attest.NewRemoteKeySet("https://owl.example.com/.well-known/agentowl/jwks.json", client)
	// (fetched, cached, fetched again for an unknown kid), or
	// attest.ParseJWKS of a file. Required.
	Keys attest.KeySet
	// Issuer is the provider's public URL exactly as its attestations name
	// it, such as https://owl.example.com. Required.
	Issuer string
	// Tenant, when set, must be the attestation's tenant.
	Tenant string
	// Now is the clock. Defaults to time.Now.
	Now func() time.Time
	// Leeway tolerates a provider clock ahead of the runtime's: decided_at
	// may be up to Leeway in the future. The expiry is never extended.
	Leeway time.Duration
}

// Verify checks d's attestation before the runtime acts on d: signed by a
// key of v.Keys, issued by v.Issuer, about this work, request, revision and
// decision ID, recording d's decision (approve: approved, reject: denied,
// answer: answered with d.Answer), not expired. For approve, actionDigest
// is the digest of the action the runtime is about to run, computed by the
// runtime with ActionDigest from its own action, never copied from the
// document: the attestation must be about that action (for reject it is
// checked when given). It returns the verified document; errors wrap ErrNoAttestation or
// one of attest's Err values (errors.Is).
func (v *DecisionVerifier) Verify(ctx context.Context, d *Decision, actionDigest string) (*attest.Document, error) {
	if d.Attestation == "" {
		return nil, ErrNoAttestation
	}
	want := attest.Expectation{Issuer: v.Issuer, Tenant: v.Tenant, Now: v.Now, Leeway: v.Leeway,
		Subject: attest.Subject{Kind: attest.SubjectWorkRequest, WorkID: d.WorkID, RequestID: d.RequestID,
			Revision: d.RequestRevision, DecisionID: d.DecisionID}}
	switch d.Decision {
	case agentwork.DecisionApprove:
		if actionDigest == "" {
			return nil, fmt.Errorf("%w: the digest of the action about to run is required", attest.ErrExpectation)
		}
		want.ActionDigest, want.Decision = actionDigest, attest.Approved
	case agentwork.DecisionReject:
		want.ActionDigest, want.Decision = actionDigest, attest.Denied
	case agentwork.DecisionAnswer:
		want.Decision = attest.Answered
	default:
		return nil, fmt.Errorf("%w: decision %q", attest.ErrDecision, d.Decision)
	}
	if d.WorkID == "" || d.DecisionID == "" || d.RequestRevision < 1 {
		return nil, fmt.Errorf("%w: the decision names no work, revision or decision ID", attest.ErrSubject)
	}
	doc, err := attest.VerifyContext(ctx, d.Attestation, v.Keys, want)
	if err != nil {
		return nil, err
	}
	// Checked here rather than with Expectation.Answer, which an empty
	// answer would leave unchecked.
	if d.Decision == agentwork.DecisionAnswer && doc.Action.AnswerSHA256 != attest.AnswerDigest(d.Answer) {
		return nil, fmt.Errorf("%w: the attestation is for another answer", attest.ErrAction)
	}
	return doc, nil
}

// VerifyDecision verifies d's attestation with keys and issuer before the
// runtime acts on d; actionDigest is the digest of the action about to run
// (approve). See DecisionVerifier.Verify.
func VerifyDecision(ctx context.Context, d *Decision, keys attest.KeySet, issuer, actionDigest string) (*attest.Document, error) {
	return (&DecisionVerifier{Keys: keys, Issuer: issuer}).Verify(ctx, d, actionDigest)
}
