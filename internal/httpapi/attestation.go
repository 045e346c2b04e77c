package httpapi

import (
	"net/http"

	"github.com/agentowl/agentowl"
	"github.com/agentowl/agentowl/internal/access"
)

// Decision attestations (docs/attestations.md): the JWK Set of the keys
// that sign them, and each decision's attestation on the provider
// extension route and the operator API. AAP's own /v1 answers are left
// exactly as the contract has them.

// JWKSPath is where the server publishes its attestation keys.
const JWKSPath = "/.well-known/agentowl/jwks.json"

// wireAttestation is the answer of the attestation routes.
type wireAttestation struct {
	// Attestation is the compact JWS.
	Attestation string `json:"attestation"`
	ID          string `json:"id"`
	KeyID       string `json:"key_id"`
	DecidedAt   string `json:"decided_at"`
	ExpiresAt   string `json:"expires_at"`
	// JWKSURL is where the keys that verify it are published.
	JWKSURL string `json:"jwks_url"`
}

func (s *Server) toWireAttestation(a *agentowl.Attestation) wireAttestation {
	return wireAttestation{Attestation: a.Token, ID: a.ID, KeyID: a.KeyID, DecidedAt: timestamp(a.DecidedAt),
		ExpiresAt: timestamp(a.ExpiresAt), JWKSURL: s.cfg.PublicURL + JWKSPath}
}

// jwks serves the JWK Set: the signing key and the retired keys still
// published. Anyone may read it; it holds public keys only.
func (s *Server) jwks(w http.ResponseWriter, r *http.Request) {
	signer := s.approval.Attestations()
	if signer == nil {
		writeJSON(w, http.StatusOK, map[string][]any{"keys": {}})
		return
	}
	set, err := signer.JWKS(r.Context())
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	// Short: a verifier that meets an unknown kid refetches, and a cache in
	// between must not hide a key rotated in for long.
	w.Header().Set("Cache-Control", "public, max-age=60")
	writeJSON(w, http.StatusOK, set)
}

// getRequestAttestation is GET /v1/requests/{id}/attestation: the
// attestation of the instance's own decided request.
func (s *Server) getRequestAttestation(r *http.Request, p *access.Principal) (int, any, error) {
	req, err := s.approval.GetRequest(r.Context(), p, r.PathValue("id"), 0)
	if err != nil {
		return 0, nil, err
	}
	a, err := s.approval.Attestation(r.Context(), req)
	return reply(http.StatusOK, a, err, s.toWireAttestation)
}

// approvalAttestation is the operator's view of the same.
func (s *Server) approvalAttestation(r *http.Request, p *access.Principal) (int, any, error) {
	req, err := s.approval.TenantRequest(r.Context(), p, r.PathValue("tenant"), r.PathValue("id"))
	if err != nil {
		return 0, nil, err
	}
	a, err := s.approval.Attestation(r.Context(), req)
	return reply(http.StatusOK, a, err, s.toWireAttestation)
}

// workDecisionAttestation is the attestation of a decision on a runtime
// request (also carried in the decision document itself).
func (s *Server) workDecisionAttestation(r *http.Request, p *access.Principal) (int, any, error) {
	a, err := s.work.DecisionAttestation(r.Context(), p, r.PathValue("tenant"), r.PathValue("id"), r.PathValue("decision"))
	return reply(http.StatusOK, a, err, s.toWireAttestation)
}
