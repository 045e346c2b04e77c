package aap

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/agentowl/agentowl/attest"
)

// Verifying decision attestations before a call runs (docs/attestations.md,
// docs/harness-kit.md "Verifying attestations").

// AttestationSource serves the signed attestations of decided requests.
// *Client implements it with AgentOwl's extension route
// GET /v1/requests/{id}/attestation.
type AttestationSource interface {
	// RequestAttestation returns the compact JWS of request id's decision;
	// an *APIError with StatusCode 404 when the request has none.
	RequestAttestation(ctx context.Context, id string) (string, error)
}

// AttestationCheck makes an Adapter verify the provider's signed
// attestation of every approval before the call runs: its signature
// against the provider's published keys, the issuer, the subject (this
// request ID), the tool and the digest of the exact arguments about to
// run, the decision (approved) and its expiry. A call whose attestation is
// missing or does not verify never runs (ExecNotRun, Execution.Reason
// starting with ReasonAttestationRefused). Without an AttestationCheck the
// adapter trusts the request it reads back, as an AAP harness does.
type AttestationCheck struct {
	// JWKSURL is where the provider publishes its keys, such as
	// https://owl.example.com/.well-known/agentowl/jwks.json. The set is
	// fetched with HTTP, cached, and fetched again when an attestation names
	// a key it does not hold (a rotation), at most every 30 seconds
	// (attest.RemoteKeySet). Give JWKSURL or Keys.
	JWKSURL string
	// HTTP fetches JWKSURL. Defaults to the Provider's client when it is a
	// *Client (so the fetch follows the same egress rules), else to a
	// client with a 60-second timeout.
	HTTP *http.Client
	// Keys is the key set itself, instead of JWKSURL: attest.ParseJWKS of a
	// file, or a RemoteKeySet shared by several adapters.
	Keys attest.KeySet
	// Issuer is the provider's public URL exactly as its attestations name
	// it (AgentOwl: its public URL, no trailing slash). Required.
	Issuer string
	// Tenant, when set, must be the attestation's tenant.
	Tenant string
	// Leeway tolerates a provider clock ahead of the harness's: decided_at
	// may be up to Leeway after the harness's now. The expiry is never
	// extended. Defaults to one minute; a negative value is none.
	Leeway time.Duration
	// Source fetches the attestations. Defaults to the Provider, which must
	// then implement AttestationSource (*Client does).
	Source AttestationSource
}

// ReasonAttestationRefused starts the Reason of an execution that did not
// run because its approval's attestation was missing or did not verify
// (Execution.AttestationRefused). A harness tells it apart from a denial:
// the provider said yes, but the proof of it did not hold.
const ReasonAttestationRefused = "attestation refused"

// AttestationRefused reports whether e did not run because its approval's
// attestation was missing or did not verify.
func (e *Execution) AttestationRefused() bool {
	return e.State == ExecNotRun && strings.HasPrefix(e.Reason, ReasonAttestationRefused)
}

type verifiedKey struct{}

type verified struct {
	token string
	doc   *attest.Document
}

// VerifiedAttestation returns, inside a ToolFunc, the attestation the
// adapter verified for the call about to run, and its document: ok is
// false when the adapter has no AttestationCheck. Pass the token on to the
// service that executes the call, so it can verify the decision itself
// (the MCP gateway puts it in the upstream call's _meta).
func VerifiedAttestation(ctx context.Context) (token string, doc *attest.Document, ok bool) {
	v, ok := ctx.Value(verifiedKey{}).(verified)
	return v.token, v.doc, ok
}

// attestations is an Adapter's configured check.
type attestations struct {
	keys   attest.KeySet
	source AttestationSource
	want   attest.Expectation // Issuer, Tenant, Leeway
	clock  Clock
}

func newAttestations(c *AttestationCheck, provider Provider, clock Clock) (*attestations, error) {
	if c.Issuer == "" {
		return nil, errors.New("aap: AttestationCheck needs the provider's Issuer")
	}
	if (c.JWKSURL == "") == (c.Keys == nil) {
		return nil, errors.New("aap: AttestationCheck needs JWKSURL or Keys (one of them)")
	}
	at := &attestations{keys: c.Keys, source: c.Source, clock: clock,
		want: attest.Expectation{Issuer: c.Issuer, Tenant: c.Tenant, Leeway: c.Leeway}}
	if at.want.Leeway == 0 {
		at.want.Leeway = time.Minute
	}
	at.want.Leeway = max(at.want.Leeway, 0)
	if at.source == nil {
		s, ok := provider.(AttestationSource)
		if !ok {
			return nil, errors.New("aap: AttestationCheck needs a Source: the Provider serves no attestations")
		}
		at.source = s
	}
	if c.JWKSURL != "" {
		hc := c.HTTP
		if cl, ok := provider.(*Client); ok && hc == nil {
			hc = cl.HTTP
		}
		if hc == nil {
			hc = defaultHTTP
		}
		rks := attest.NewRemoteKeySet(c.JWKSURL, hc)
		rks.Now = clock.Now
		at.keys = rks
	}
	return at, nil
}

// attestRefusal is a verdict that the call must never run.
type attestRefusal struct{ reason string }

func (r *attestRefusal) Error() string { return r.reason }

// permanentAttestationErrs are the verification failures that a retry
// cannot change. An unknown key (one rotated in that the cached set lacks
// while refetches are rate-limited), a decided_at ahead of the clock
// (skew), and failures to fetch the token or the keys are retried instead:
// the execution stays as it was, and an approval that expires meanwhile
// ends it.
var permanentAttestationErrs = []error{attest.ErrMalformed, attest.ErrSignature, attest.ErrIssuer, attest.ErrTenant,
	attest.ErrSubject, attest.ErrAction, attest.ErrDecision, attest.ErrExpired}

// verify fetches and verifies the attestation of the approved request
// requestID for e's call. It returns a *attestRefusal when the call must never
// run, another error when it should be retried.
func (at *attestations) verify(ctx context.Context, e *Execution, requestID string) (*verified, error) {
	token, err := at.source.RequestAttestation(ctx, requestID)
	if err != nil {
		var ae *APIError
		if errors.As(err, &ae) && !ae.Temporary() {
			return nil, &attestRefusal{fmt.Sprintf("%s: the provider has no attestation of request %s (%d %s)",
				ReasonAttestationRefused, requestID, ae.StatusCode, ae.Code)}
		}
		return nil, fmt.Errorf("aap: fetching the attestation of request %s: %w", requestID, err)
	}
	want := at.want
	want.Subject = attest.Subject{Kind: attest.SubjectAAPRequest, RequestID: requestID}
	want.Tool, want.Arguments, want.Decision = e.Call.Tool, e.Call.Arguments, attest.Approved
	want.Now = at.clock.Now
	doc, err := attest.VerifyContext(ctx, token, at.keys, want)
	if err == nil {
		return &verified{token: token, doc: doc}, nil
	}
	for _, p := range permanentAttestationErrs {
		if errors.Is(err, p) {
			return nil, &attestRefusal{ReasonAttestationRefused + ": " + err.Error()}
		}
	}
	return nil, fmt.Errorf("aap: verifying the attestation of request %s: %w", requestID, err)
}
