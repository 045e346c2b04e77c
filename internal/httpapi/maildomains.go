package httpapi

import (
	"net/http"

	"github.com/agentowl/agentowl/internal/access"
	"github.com/agentowl/agentowl/internal/ingress"
)

// ---- mail domains (docs/channels.md, "Mail domains"): server-wide, for
// admins of the system tenant only, checked before the request is read.

type wireMailDomain struct {
	Domain    string `json:"domain"`
	Tenant    string `json:"tenant"`
	CreatedAt string `json:"created_at"`
}

func toWireMailDomain(d *ingress.AssignedDomain) wireMailDomain {
	return wireMailDomain{Domain: d.Domain, Tenant: d.Tenant, CreatedAt: timestamp(d.CreatedAt)}
}

// listMailDomains is GET /api/v1/mail-domains[?tenant=NAME].
func (s *Server) listMailDomains(r *http.Request, p *access.Principal) (int, any, error) {
	if err := s.access.SystemAdmin(r.Context(), p); err != nil {
		return 0, nil, err
	}
	ds, err := s.ingress.ListMailDomains(r.Context(), p, r.URL.Query().Get("tenant"))
	return http.StatusOK, listOf(ds, toWireMailDomain), err
}

// addMailDomain is POST /api/v1/mail-domains {"domain", "tenant"}.
func (s *Server) addMailDomain(r *http.Request, p *access.Principal) (int, any, error) {
	if err := s.access.SystemAdmin(r.Context(), p); err != nil {
		return 0, nil, err
	}
	fields, err := readObject(r, "domain", "tenant")
	if err != nil {
		return 0, nil, err
	}
	var domain, tenant string
	if err := requiredField(fields, "domain", &domain); err != nil {
		return 0, nil, err
	}
	if err := requiredField(fields, "tenant", &tenant); err != nil {
		return 0, nil, err
	}
	d, err := s.ingress.AddMailDomain(r.Context(), p, domain, tenant)
	return reply(http.StatusCreated, d, err, toWireMailDomain)
}

// removeMailDomain is DELETE /api/v1/mail-domains/{domain}.
func (s *Server) removeMailDomain(r *http.Request, p *access.Principal) (int, any, error) {
	if err := s.access.SystemAdmin(r.Context(), p); err != nil {
		return 0, nil, err
	}
	return http.StatusNoContent, nil, s.ingress.RemoveMailDomain(r.Context(), p, r.PathValue("domain"))
}
