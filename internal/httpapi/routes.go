package httpapi

import (
	"context"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/agentowl/agentowl"
	"github.com/agentowl/agentowl/internal/access"
	"github.com/agentowl/agentowl/internal/admission"
	"github.com/agentowl/agentowl/internal/buildinfo"
	"github.com/agentowl/agentowl/internal/ingress"
	"github.com/agentowl/agentowl/internal/work"
)

// The route table: every route of the four surfaces and the health
// endpoints, with who may call it. Adding a route is one row here, its
// handler, its operation in api/openapi.yaml (TestRouteTable checks the two
// agree) and its row in the authorization matrix (authz_matrix_test.go).

// Surfaces label metrics (agentowl_http_requests_total{surface=…}).
const (
	surfaceProvider = "provider" // AAP v1: /v1
	surfaceOperator = "operator" // /api/v1
	surfaceRuntime  = "runtime"  // /runtime/v1
	surfaceIngress  = "ingress"  // /in
	surfaceHealth   = "health"   // /healthz, /readyz, /metrics
	surfaceConsole  = "console"  // the web console, /console/
	surfaceOther    = "other"    // no route: unknown paths, malformed URLs
)

// authKind is what a route asks of its caller. It is checked before the
// handler reads the request, so an unauthorized caller learns nothing from
// the body's validation and never makes the server read a body.
type authKind string

const (
	authPublic      authKind = "public"      // anyone: health and metrics
	authIngress     authKind = "ingress"     // the unguessable binding URL token; bearer tokens play no part
	authProvisioner authKind = "provisioner" // a provisioner token
	authInstance    authKind = "instance"    // an instance credential
	authMember      authKind = "member"      // an operator token with a role in the path's tenant (or its own, outside a tenant)
	authAdmin       authKind = "admin"       // as member, with the admin role
	authRuntime     authKind = "runtime"     // a runtime credential holding the route's scope
)

// handler is the one shape of an API handler: it receives the request and
// the caller its route's auth established (an operator, provisioner or
// instance principal, a runtime credential, an ingress binding) and returns
// a status and body (nil for none), or an error.
type handler[C any] func(r *http.Request, c C) (int, any, error)

// gate is a route's auth kind with the handler behind its check; the gate
// constructors below build both together, so they cannot disagree.
type gate struct {
	auth  authKind
	scope string // authRuntime: the scope the credential must hold
	serve http.HandlerFunc
}

// route is one row of the table.
type route struct {
	method, pattern, surface string
	gate
	// work routes are registered only with agent work enabled (Services.Work).
	work bool
}

// routes is the route table.
func (s *Server) routes() []route {
	get, post, del, patch, put := http.MethodGet, http.MethodPost, http.MethodDelete, http.MethodPatch, http.MethodPut
	const t = "/api/v1/tenants/{tenant}"
	rs := []route{
		{method: get, pattern: "/healthz", surface: surfaceHealth, gate: public(http.HandlerFunc(s.healthz))},
		{method: get, pattern: "/readyz", surface: surfaceHealth, gate: public(http.HandlerFunc(s.readyz))},
		{method: get, pattern: "/metrics", surface: surfaceHealth, gate: public(promhttp.HandlerFor(s.registry, promhttp.HandlerOpts{}))},

		{method: post, pattern: "/v1/instances", surface: surfaceProvider, gate: s.provisioner(s.provisionInstance)},
		{method: get, pattern: "/v1/instances/{id}", surface: surfaceProvider, gate: s.provisioner(s.getInstance)},
		{method: patch, pattern: "/v1/instances/{id}", surface: surfaceProvider, gate: s.provisioner(s.updateInstance)},
		{method: del, pattern: "/v1/instances/{id}", surface: surfaceProvider, gate: s.provisioner(s.deleteInstance)},
		{method: post, pattern: "/v1/requests", surface: surfaceProvider, gate: s.admitted(admission.Requests, s.instance(s.createRequest))},
		{method: get, pattern: "/v1/requests/{id}", surface: surfaceProvider, gate: s.instance(s.getRequest)},
		{method: del, pattern: "/v1/requests/{id}", surface: surfaceProvider, gate: s.instance(s.cancelRequest)},
		{method: get, pattern: "/v1/requests/{id}/attestation", surface: surfaceProvider, gate: s.instance(s.getRequestAttestation)},
		{method: get, pattern: JWKSPath, surface: surfaceHealth, gate: public(http.HandlerFunc(s.jwks))},

		{method: get, pattern: "/api/v1/whoami", surface: surfaceOperator, gate: s.member(s.whoami)},
		{method: get, pattern: "/api/v1/tenants", surface: surfaceOperator, gate: s.member(s.listTenants)},
		{method: post, pattern: "/api/v1/tenants", surface: surfaceOperator, gate: s.admin(s.createTenant)},
		{method: get, pattern: t + "/operators", surface: surfaceOperator, gate: s.member(s.listOperators)},
		{method: post, pattern: t + "/operators", surface: surfaceOperator, gate: s.admin(s.createOperator)},
		{method: get, pattern: t + "/operator-tokens", surface: surfaceOperator, gate: s.member(s.listTokens(agentowl.TokenOperator))},
		{method: post, pattern: t + "/operator-tokens", surface: surfaceOperator, gate: s.member(s.createOperatorToken)},
		{method: del, pattern: t + "/operator-tokens/{id}", surface: surfaceOperator, gate: s.member(s.revokeToken(agentowl.TokenOperator))},
		{method: get, pattern: t + "/provisioner-tokens", surface: surfaceOperator, gate: s.admin(s.listTokens(agentowl.TokenProvisioner))},
		{method: post, pattern: t + "/provisioner-tokens", surface: surfaceOperator, gate: s.admin(s.createProvisionerToken)},
		{method: del, pattern: t + "/provisioner-tokens/{id}", surface: surfaceOperator, gate: s.admin(s.revokeToken(agentowl.TokenProvisioner))},
		{method: get, pattern: t + "/instances", surface: surfaceOperator, gate: s.member(s.listInstances)},
		{method: get, pattern: t + "/instances/{id}", surface: surfaceOperator, gate: s.member(s.inspectInstance)},
		{method: patch, pattern: t + "/instances/{id}", surface: surfaceOperator, gate: s.admin(s.patchInstance)},
		{method: get, pattern: t + "/approvals", surface: surfaceOperator, gate: s.member(s.listApprovals)},
		{method: get, pattern: t + "/approvals/{id}", surface: surfaceOperator, gate: s.member(s.inspectApproval)},
		{method: post, pattern: t + "/approvals/{id}/decision", surface: surfaceOperator, gate: s.admitted(admission.Decisions, s.member(s.decideApproval))},
		{method: get, pattern: t + "/approvals/{id}/attestation", surface: surfaceOperator, gate: s.member(s.approvalAttestation)},
		{method: get, pattern: t + "/policies", surface: surfaceOperator, gate: s.member(s.listPolicies)},
		{method: post, pattern: t + "/policies", surface: surfaceOperator, gate: s.admin(s.createPolicy)},
		{method: del, pattern: t + "/policies/{id}", surface: surfaceOperator, gate: s.admin(s.deletePolicy)},
		{method: get, pattern: t + "/audit", surface: surfaceOperator, gate: s.admin(s.listAudit)},
		{method: get, pattern: t + "/audit/chain", surface: surfaceOperator, gate: s.admin(s.auditChain)},
		{method: get, pattern: t + "/audit/checkpoints", surface: surfaceOperator, gate: s.admin(s.auditCheckpoints)},
		{method: get, pattern: t + "/deliveries", surface: surfaceOperator, gate: s.member(s.listDeliveries)},
		{method: get, pattern: t + "/deliveries/{id}", surface: surfaceOperator, gate: s.member(s.inspectDelivery)},
		{method: get, pattern: "/api/v1/maintenance", surface: surfaceOperator, gate: s.admin(s.maintenanceStatus)},
		{method: get, pattern: t + "/notifications", surface: surfaceOperator, gate: s.member(s.listNotifications)},
		{method: post, pattern: t + "/notifications/read-all", surface: surfaceOperator, gate: s.member(s.readAllNotifications)},
		{method: get, pattern: t + "/notifications/preferences", surface: surfaceOperator, gate: s.member(s.getNotificationPrefs)},
		{method: put, pattern: t + "/notifications/preferences", surface: surfaceOperator, gate: s.member(s.setNotificationPrefs)},
		{method: get, pattern: t + "/notifications/{id}", surface: surfaceOperator, gate: s.member(s.getNotification)},
		{method: post, pattern: t + "/notifications/{id}/read", surface: surfaceOperator, gate: s.member(s.readNotification)},
		{method: post, pattern: t + "/console-login-links", surface: surfaceOperator, gate: s.member(s.createLoginLink)},
	}
	for _, r := range []route{
		{method: get, pattern: t + "/endpoints", surface: surfaceOperator, gate: s.member(s.listEndpoints)},
		{method: post, pattern: t + "/endpoints", surface: surfaceOperator, gate: s.admin(s.createEndpoint)},
		{method: get, pattern: t + "/endpoints/{id}", surface: surfaceOperator, gate: s.member(s.inspectEndpoint)},
		{method: patch, pattern: t + "/endpoints/{id}", surface: surfaceOperator, gate: s.admin(s.updateEndpoint)},
		{method: del, pattern: t + "/endpoints/{id}", surface: surfaceOperator, gate: s.admin(s.deleteEndpoint)},
		{method: post, pattern: t + "/endpoints/{id}/rotate-secret", surface: surfaceOperator, gate: s.admin(s.rotateEndpointSecret)},
		{method: post, pattern: t + "/endpoints/{id}/pause", surface: surfaceOperator, gate: s.admin(s.pauseEndpoint)},
		{method: post, pattern: t + "/endpoints/{id}/resume", surface: surfaceOperator, gate: s.admin(s.resumeEndpoint)},
		{method: get, pattern: t + "/endpoints/{id}/runtime-credentials", surface: surfaceOperator, gate: s.admin(s.listRuntimeCredentials)},
		{method: post, pattern: t + "/endpoints/{id}/runtime-credentials", surface: surfaceOperator, gate: s.admin(s.createRuntimeCredential)},
		{method: del, pattern: t + "/runtime-credentials/{id}", surface: surfaceOperator, gate: s.admin(s.revokeRuntimeCredential)},
		{method: get, pattern: t + "/bindings", surface: surfaceOperator, gate: s.member(s.listBindings)},
		{method: post, pattern: t + "/bindings", surface: surfaceOperator, gate: s.admin(s.createBinding)},
		{method: get, pattern: t + "/bindings/{id}", surface: surfaceOperator, gate: s.member(s.inspectBinding)},
		{method: del, pattern: t + "/bindings/{id}", surface: surfaceOperator, gate: s.admin(s.deleteBinding)},
		{method: get, pattern: "/api/v1/mail-domains", surface: surfaceOperator, gate: s.admin(s.listMailDomains)},
		{method: post, pattern: "/api/v1/mail-domains", surface: surfaceOperator, gate: s.admin(s.addMailDomain)},
		{method: del, pattern: "/api/v1/mail-domains/{domain}", surface: surfaceOperator, gate: s.admin(s.removeMailDomain)},
		{method: get, pattern: t + "/work", surface: surfaceOperator, gate: s.member(s.listWork)},
		{method: get, pattern: t + "/work/{id}", surface: surfaceOperator, gate: s.member(s.inspectWork)},
		{method: post, pattern: t + "/work/{id}/replay", surface: surfaceOperator, gate: s.admin(s.replayWork)},
		{method: get, pattern: t + "/work/{id}/decisions/{decision}/attestation", surface: surfaceOperator, gate: s.member(s.workDecisionAttestation)},
		{method: get, pattern: t + "/attention", surface: surfaceOperator, gate: s.member(s.listAttention)},
		{method: get, pattern: t + "/attention/{id}", surface: surfaceOperator, gate: s.member(s.inspectAttention)},
		{method: post, pattern: t + "/attention/{id}/ack", surface: surfaceOperator, gate: s.member(s.ackAttention)},
		{method: post, pattern: t + "/attention/{id}/resolve", surface: surfaceOperator, gate: s.member(s.resolveAttention)},
		{method: post, pattern: t + "/attention/{id}/decision", surface: surfaceOperator, gate: s.admitted(admission.Decisions, s.member(s.decideAttention))},
		{method: get, pattern: t + "/work-outbox", surface: surfaceOperator, gate: s.member(s.listQueue(work.WorkOutbox, "endpoint", "work"))},
		{method: get, pattern: t + "/work-outbox/{id}", surface: surfaceOperator, gate: s.member(s.inspectQueue(work.WorkOutbox))},
		{method: post, pattern: t + "/work-outbox/{id}/redrive", surface: surfaceOperator, gate: s.admin(s.redriveQueue(work.WorkOutbox))},
		{method: get, pattern: t + "/ingress-publications", surface: surfaceOperator,
			gate: s.member(s.listQueue(work.IngressPublications, "endpoint", "binding", "event"))},
		{method: get, pattern: t + "/ingress-publications/{id}", surface: surfaceOperator, gate: s.member(s.inspectQueue(work.IngressPublications))},
		{method: post, pattern: t + "/ingress-publications/{id}/redrive", surface: surfaceOperator,
			gate: s.admin(s.redriveQueue(work.IngressPublications))},
		{method: get, pattern: t + "/doctor", surface: surfaceOperator, gate: s.admin(s.tenantDoctor)},
		{method: get, pattern: t + "/conversations", surface: surfaceOperator, gate: s.member(s.listConversations)},
		{method: get, pattern: t + "/conversations/{id}", surface: surfaceOperator, gate: s.member(s.inspectConversation)},
		{method: get, pattern: t + "/conversations/{id}/events", surface: surfaceOperator, gate: s.member(s.conversationEvents)},
		{method: post, pattern: t + "/conversations/{id}/link", surface: surfaceOperator, gate: s.admin(s.linkConversationEvent)},
		{method: post, pattern: t + "/conversations/{id}/reset", surface: surfaceOperator, gate: s.admin(s.resetConversation)},

		{method: post, pattern: "/runtime/v1/work/{work}/callbacks", surface: surfaceRuntime, gate: s.admitted(admission.Callbacks, s.runtime(work.ScopeCallbacks, s.postCallback))},
		{method: get, pattern: "/runtime/v1/work/{work}/decisions", surface: surfaceRuntime, gate: s.runtime(work.ScopeDecisions, s.listDecisions)},
		{method: post, pattern: "/runtime/v1/work/{work}/decisions/{decision}/receipt", surface: surfaceRuntime,
			gate: s.runtime(work.ScopeDecisions, s.postReceipt)},

		{method: post, pattern: "/in/webhook/{token}", surface: surfaceIngress, gate: s.admitted(admission.Events, s.bindingGate(ingress.ChannelWebhook, s.receiveWebhook))},
		{method: post, pattern: "/in/cloudflare-email/{token}", surface: surfaceIngress, gate: s.admitted(admission.Events, s.bindingGate(ingress.ChannelCloudflareEmail, s.receiveCloudflareEmail))},

		{method: get, pattern: "/runtime/v1/work/{work}/attachments", surface: surfaceRuntime,
			gate: s.runtime(work.ScopeAttachments, s.listWorkAttachments)},
		{method: get, pattern: "/runtime/v1/work/{work}/attachments/{attachment}", surface: surfaceRuntime,
			gate: s.runtime(work.ScopeAttachments, s.downloadWorkAttachment)},
		{method: get, pattern: t + "/events/{id}/attachments", surface: surfaceOperator, gate: s.member(s.listEventAttachments)},
		{method: get, pattern: t + "/events/{id}/attachments/{attachment}", surface: surfaceOperator,
			gate: s.member(s.downloadEventAttachment)},
		{method: post, pattern: "/in/sms/{token}", surface: surfaceIngress, gate: s.admitted(admission.Providers, s.bindingGate(ingress.ChannelSMS, s.receiveProvider))},
		{method: post, pattern: "/in/voice/{token}", surface: surfaceIngress, gate: s.admitted(admission.Providers, s.bindingGate(ingress.ChannelVoice, s.receiveProvider))},
	} {
		r.work = true
		rs = append(rs, r)
	}
	return rs
}

// register adds the table's routes to mux, one pattern per path: each
// pattern's handler records its surface for the metrics, then dispatches on
// the method; any other method is 405 with an Allow header and the
// contract's error body.
func (s *Server) register(mux *http.ServeMux) {
	type path struct {
		surface string
		allow   []string
		methods map[string]http.HandlerFunc
	}
	var order []string
	paths := map[string]*path{}
	for _, rt := range s.routes() {
		if rt.work && s.work == nil {
			continue
		}
		p := paths[rt.pattern]
		if p == nil {
			p = &path{surface: rt.surface, methods: map[string]http.HandlerFunc{}}
			paths[rt.pattern] = p
			order = append(order, rt.pattern)
		}
		p.allow = append(p.allow, rt.method)
		p.methods[rt.method] = rt.serve
	}
	for _, pattern := range order {
		p := paths[pattern]
		mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
			if rec, ok := w.(*statusRecorder); ok {
				rec.surface = p.surface
			}
			if h, ok := p.methods[r.Method]; ok {
				h(w, r)
				return
			}
			w.Header().Set("Allow", strings.Join(p.allow, ", "))
			s.writeError(w, r, agentowl.Errorf(agentowl.ECodeMethod, "Method %s is not allowed here.", r.Method))
		})
	}
}

// respond writes a handler's answer.
func (s *Server) respond(w http.ResponseWriter, r *http.Request, status int, body any, err error) {
	sb, stream := body.(streamed)
	switch {
	case err != nil:
		s.writeError(w, r, err)
	case stream:
		sb.stream(s, w, r)
	case body == nil:
		w.WriteHeader(status)
	default:
		if raw, ok := body.(rawBody); ok {
			w.Header().Set("Content-Type", raw.contentType)
			w.WriteHeader(status)
			_, _ = w.Write(raw.data)
			return
		}
		writeJSON(w, status, body)
	}
}

// rawBody is a handler's answer in another format than JSON.
type rawBody struct {
	contentType string
	data        []byte
}

// serveAs builds a gate whose check, authenticate, establishes the caller
// that h receives.
func serveAs[C any](s *Server, kind authKind, scope string, authenticate func(r *http.Request) (C, error), h handler[C]) gate {
	return gate{auth: kind, scope: scope, serve: func(w http.ResponseWriter, r *http.Request) {
		c, err := authenticate(r)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		status, body, err := h(r, c)
		s.respond(w, r, status, body, err)
	}}
}

// admitted puts g's requests through surface's admission queue: a request
// that would wait longer than the queue allows is answered 503 overloaded
// with Retry-After before anything of it is read or stored
// (internal/admission). The wait covers the caller's authentication too:
// under overload that is store work like the write.
func (s *Server) admitted(surface string, g gate) gate {
	if s.admission == nil { // a Server not made by New: the route table's own tests
		return g
	}
	q := s.admission.Queue(surface)
	serve := g.serve
	g.serve = func(w http.ResponseWriter, r *http.Request) {
		done, err := q.Admit(r.Context())
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		defer done()
		serve(w, r)
	}
	return g
}

func public(h http.Handler) gate { return gate{auth: authPublic, serve: h.ServeHTTP} }

func (s *Server) provisioner(h handler[*access.Principal]) gate {
	return serveAs(s, authProvisioner, "", s.principal(agentowl.TokenProvisioner, ""), h)
}

func (s *Server) instance(h handler[*access.Principal]) gate {
	return serveAs(s, authInstance, "", s.principal(agentowl.TokenInstance, ""), h)
}

// member and admin serve operator routes. The membership is checked
// before the handler reads the request: another tenant's path is 404 and a
// member on an admin route is 403, whatever the body. The use-cases check
// again; this fixes the order.
func (s *Server) member(h handler[*access.Principal]) gate {
	return serveAs(s, authMember, "", s.principal(agentowl.TokenOperator, agentowl.RoleMember), h)
}

func (s *Server) admin(h handler[*access.Principal]) gate {
	return serveAs(s, authAdmin, "", s.principal(agentowl.TokenOperator, agentowl.RoleAdmin), h)
}

// runtime serves a runtime route: a live runtime credential that holds
// scope, checked before the body is read.
func (s *Server) runtime(scope string, h handler[*agentowl.RuntimeCredential]) gate {
	return serveAs(s, authRuntime, scope, func(r *http.Request) (*agentowl.RuntimeCredential, error) {
		c, err := s.authenticateRuntime(r)
		if err != nil {
			return nil, err
		}
		return c, work.RequireScope(c, scope)
	}, h)
}

// bindingGate serves an ingress route of channel: the path's token must name a
// binding of that channel, checked before the body is read.
func (s *Server) bindingGate(channel string, h handler[*agentowl.Binding]) gate {
	return serveAs(s, authIngress, "", func(r *http.Request) (*agentowl.Binding, error) {
		return s.ingress.Admit(r.Context(), channel, r.PathValue("token"))
	}, h)
}

// principal authenticates a credential of kind; for operators, role is the
// role the caller needs in the path's tenant (or, outside a tenant, in its
// own).
func (s *Server) principal(kind agentowl.TokenKind, role agentowl.Role) func(r *http.Request) (*access.Principal, error) {
	return func(r *http.Request) (*access.Principal, error) {
		p, err := s.authenticate(r, kind)
		if err != nil || role == "" {
			return p, err
		}
		name := r.PathValue("tenant")
		if name == "" && p.Membership != nil {
			name = p.Membership.TenantName
		}
		if _, err := p.Tenant(name, role); err != nil {
			return nil, err
		}
		return p, nil
	}
}

// bearer returns the Authorization header's bearer secret, or "": the one
// parser of every bearer surface.
func bearer(r *http.Request) string {
	h := r.Header.Get("Authorization")
	secret, ok := strings.CutPrefix(h, "Bearer ")
	if !ok {
		if scheme, rest, found := strings.Cut(h, " "); found && strings.EqualFold(scheme, "bearer") {
			secret, ok = rest, true
		}
	}
	if !ok {
		return ""
	}
	return strings.TrimSpace(secret)
}

// otherKind turns a failed authentication into forbidden when the secret is
// a valid credential of another kind: it authenticates, but may not call
// this surface. Anything else stays unauthenticated.
func (s *Server) otherKind(ctx context.Context, secret string, kind agentowl.TokenKind, surface string, err error) error {
	if agentowl.ErrorCode(err) == agentowl.ECodeUnauthenticated {
		if other, known := agentowl.TokenKindOf(secret); known && other != kind {
			if _, oerr := s.access.Authenticate(ctx, secret, other); oerr == nil {
				return agentowl.Errorf(agentowl.ECodeForbidden, "A %s credential cannot call %s.", other, surface)
			}
		}
	}
	return err
}

// authenticate resolves the bearer token for a surface that accepts kind.
func (s *Server) authenticate(r *http.Request, kind agentowl.TokenKind) (*access.Principal, error) {
	secret := bearer(r)
	if secret == "" {
		return nil, agentowl.Errorf(agentowl.ECodeUnauthenticated, "A bearer credential is required in the Authorization header.")
	}
	p, err := s.access.Authenticate(r.Context(), secret, kind)
	if err = s.otherKind(r.Context(), secret, kind, "this operation", err); err != nil {
		return nil, err
	}
	return p, nil
}

// authenticateRuntime resolves a runtime credential.
func (s *Server) authenticateRuntime(r *http.Request) (*agentowl.RuntimeCredential, error) {
	secret := bearer(r)
	if secret == "" {
		return nil, agentowl.Errorf(agentowl.ECodeUnauthenticated, "A runtime credential is required in the Authorization header.")
	}
	c, err := s.work.AuthenticateRuntime(r.Context(), secret)
	if err = s.otherKind(r.Context(), secret, agentowl.TokenRuntime, "the runtime API", err); err != nil {
		return nil, err
	}
	return c, nil
}

// healthz answers while the process serves HTTP, naming the running build
// so that an operator (or a rollout script) sees which version each replica
// runs.
func (s *Server) healthz(w http.ResponseWriter, r *http.Request) {
	b := buildinfo.Get()
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok", "version": b.Version, "commit": b.Commit})
}

func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	if err := s.database.Ping(ctx); err != nil {
		s.log.Warn("not ready", "request_id", requestID(r), "err", err)
		s.writeError(w, r, &agentowl.Error{Code: agentowl.ECodeUnavailable, Message: "The database cannot take writes now.",
			RetryAfter: unavailableRetryAfter})
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ready", "database": s.database.Dialect()})
}
