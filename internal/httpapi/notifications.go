package httpapi

import (
	"net/http"
	"strings"

	"github.com/agentowl/agentowl"
	"github.com/agentowl/agentowl/internal/access"
	"github.com/agentowl/agentowl/internal/notify"
)

// In-app notifications (docs/console.md) and console login links: the
// caller's own notices, read state and preferences.

type wireSubject struct {
	Type string `json:"type"`
	ID   string `json:"id"`
}

type wireNotification struct {
	ID         string      `json:"id"`
	Kind       string      `json:"kind"`
	Cause      string      `json:"cause"`
	Title      string      `json:"title"`
	Subject    wireSubject `json:"subject"`
	EndpointID string      `json:"endpoint_id,omitempty"`
	Link       string      `json:"link"`
	Read       bool        `json:"read"`
	ReadAt     *string     `json:"read_at,omitempty"`
	CreatedAt  string      `json:"created_at"`
}

func toWireNotification(tenant string, n *agentowl.Notification) wireNotification {
	typ, id, _ := strings.Cut(n.Subject, ":")
	return wireNotification{ID: n.ID, Kind: n.Kind, Cause: n.Cause, Title: n.Title, Subject: wireSubject{Type: typ, ID: id},
		EndpointID: n.EndpointID, Link: notify.Link(tenant, n), Read: n.ReadAt != nil, ReadAt: timestampPtr(n.ReadAt),
		CreatedAt: timestamp(n.CreatedAt)}
}

type wireNotificationList struct {
	Items  []wireNotification `json:"items"`
	Unread int                `json:"unread"`
	// Next is the page token of the following page, absent on the last.
	Next string `json:"next,omitempty"`
}

// page is a list with the page token of the next page, if any.
type page[T any] struct {
	Items []T `json:"items"`
	// Next is the page token of the following page (?after=), absent when
	// this page was not full.
	Next string `json:"next,omitempty"`
}

// pageOf is l with its next page token when full (last gives the cursor of
// its last item).
func pageOf[T any](l list[T], full bool, last func() agentowl.Cursor) page[T] {
	out := page[T]{Items: l.Items}
	if full && len(l.Items) > 0 {
		out.Next = last().String()
	}
	return out
}

// cursorParam reads the ?after= page token.
func cursorParam(r *http.Request) (*agentowl.Cursor, error) {
	v := r.URL.Query().Get("after")
	if v == "" {
		return nil, nil
	}
	c, ok := agentowl.ParseCursor(v)
	if !ok {
		return nil, agentowl.FieldError(agentowl.ECodeInvalidField, "after", "after must be a page token from a previous list's next.")
	}
	return c, nil
}

func (s *Server) listNotifications(r *http.Request, p *access.Principal) (int, any, error) {
	limit, err := limitParam(r)
	if err != nil {
		return 0, nil, err
	}
	after, err := cursorParam(r)
	if err != nil {
		return 0, nil, err
	}
	unread := r.URL.Query().Get("unread")
	if unread != "" && unread != "true" && unread != "false" {
		return 0, nil, agentowl.FieldError(agentowl.ECodeInvalidField, "unread", "unread must be true or false.")
	}
	tenant := r.PathValue("tenant")
	ns, n, err := s.notify.List(r.Context(), p, tenant, notify.ListParams{UnreadOnly: unread == "true", After: after, Limit: limit})
	if err != nil {
		return 0, nil, err
	}
	out := wireNotificationList{Items: make([]wireNotification, 0, len(ns)), Unread: n}
	for _, x := range ns {
		out.Items = append(out.Items, toWireNotification(tenant, x))
	}
	if len(ns) == limit {
		out.Next = agentowl.Cursor{At: ns[len(ns)-1].CreatedAt, ID: ns[len(ns)-1].ID}.String()
	}
	return http.StatusOK, out, nil
}

func (s *Server) getNotification(r *http.Request, p *access.Principal) (int, any, error) {
	n, err := s.notify.Get(r.Context(), p, r.PathValue("tenant"), r.PathValue("id"))
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, toWireNotification(r.PathValue("tenant"), n), nil
}

func (s *Server) readNotification(r *http.Request, p *access.Principal) (int, any, error) {
	n, err := s.notify.MarkRead(r.Context(), p, r.PathValue("tenant"), r.PathValue("id"))
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, toWireNotification(r.PathValue("tenant"), n), nil
}

func (s *Server) readAllNotifications(r *http.Request, p *access.Principal) (int, any, error) {
	n, err := s.notify.MarkAllRead(r.Context(), p, r.PathValue("tenant"))
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, map[string]int{"marked": n}, nil
}

type wirePrefs struct {
	MutedKinds     []string `json:"muted_kinds"`
	MutedEndpoints []string `json:"muted_endpoints"`
}

func (s *Server) getNotificationPrefs(r *http.Request, p *access.Principal) (int, any, error) {
	prefs, err := s.notify.GetPrefs(r.Context(), p, r.PathValue("tenant"))
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, wirePrefs{MutedKinds: prefs.MutedKinds, MutedEndpoints: prefs.MutedEndpoints}, nil
}

func (s *Server) setNotificationPrefs(r *http.Request, p *access.Principal) (int, any, error) {
	fields, err := readObject(r, "muted_kinds", "muted_endpoints")
	if err != nil {
		return 0, nil, err
	}
	var in notify.Prefs
	if err := requiredField(fields, "muted_kinds", &in.MutedKinds); err != nil {
		return 0, nil, err
	}
	if err := requiredField(fields, "muted_endpoints", &in.MutedEndpoints); err != nil {
		return 0, nil, err
	}
	prefs, err := s.notify.SetPrefs(r.Context(), p, r.PathValue("tenant"), in)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, wirePrefs{MutedKinds: prefs.MutedKinds, MutedEndpoints: prefs.MutedEndpoints}, nil
}

type wireLoginLink struct {
	URL       string `json:"url"`
	Operator  string `json:"operator"`
	Tenant    string `json:"tenant"`
	ExpiresAt string `json:"expires_at"`
}

// LoginLinkPath is the console path a login link opens, before its code.
const LoginLinkPath = "/console/link?code="

func (s *Server) createLoginLink(r *http.Request, p *access.Principal) (int, any, error) {
	var operator string
	if r.ContentLength != 0 || r.Header.Get("Content-Type") != "" {
		fields, err := readObject(r, "operator")
		if err != nil {
			return 0, nil, err
		}
		if _, err := field(fields, "operator", &operator); err != nil {
			return 0, nil, err
		}
	}
	l, err := s.access.CreateLoginLink(r.Context(), p, r.PathValue("tenant"), operator)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusCreated, wireLoginLink{URL: s.cfg.PublicURL + LoginLinkPath + l.Secret, Operator: l.OperatorName,
		Tenant: l.TenantName, ExpiresAt: timestamp(l.ExpiresAt)}, nil
}
