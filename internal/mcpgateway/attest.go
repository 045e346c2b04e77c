package mcpgateway

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/agentowl/agentowl/aap"
)

// AttestationMetaKey is the _meta key under which the gateway passes an
// approved call's attestation (a compact JWS, docs/attestations.md) to the
// upstream in tools/call, so the upstream can verify the decision itself
// without trusting the gateway.
const AttestationMetaKey = "agentowl.dev/attestation"

// JWKSPath is where an AgentOwl provider publishes its attestation keys.
const JWKSPath = "/.well-known/agentowl/jwks.json"

// attestationCheck is the adapter's check when attestations.verify is on:
// keys from the provider's JWK Set, fetched with the provider client's
// HTTP client (the gateway's one way out to the provider).
func attestationCheck(cfg *AttestationsConfig, provider *aap.Client) *aap.AttestationCheck {
	if !cfg.Verify {
		return nil
	}
	base := strings.TrimRight(provider.BaseURL, "/")
	c := &aap.AttestationCheck{JWKSURL: cfg.JWKSURL, Issuer: cfg.Issuer, HTTP: provider.HTTP, Source: provider}
	if c.JWKSURL == "" {
		c.JWKSURL = base + JWKSPath
	}
	if c.Issuer == "" {
		c.Issuer = base
	}
	return c
}

// attestationFor is the attestation forwarded with an approved call: the
// one the adapter verified or, when the gateway does not verify, the
// provider's as it is (the upstream verifies it). A provider that has none
// (or cannot be asked now) gives none: the call goes without it, and an
// upstream that requires one refuses it.
func (g *Gateway) attestationFor(ctx context.Context, e *aap.Execution) string {
	if tok, _, ok := aap.VerifiedAttestation(ctx); ok {
		return tok
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	tok, err := g.provider.RequestAttestation(ctx, e.RequestID)
	if err != nil {
		var ae *aap.APIError
		if !errors.As(err, &ae) || ae.StatusCode != 404 {
			g.log.Warn("mcp gateway: the approval's attestation could not be read; the call is forwarded without it",
				"key", e.Key, "request_id", e.RequestID, "err", err)
		}
		return ""
	}
	return tok
}
