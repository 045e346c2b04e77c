// Package work holds the agent-work use-cases (docs/agent-work.md):
// endpoints and their signing and decision secrets, endpoint-bound runtime
// credentials, the handoff of events to endpoints (work identity, the work
// block, replay), runtime callbacks and the operator views of work. It holds
// business rules only: no SQL, no HTTP.
package work

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/agentowl/agentowl"
	"github.com/agentowl/agentowl/internal/attestation"
	"github.com/agentowl/agentowl/internal/ratelimit"
)

// Config holds the agent-work limits and settings. Every field has a
// default.
type Config struct {
	// PublicURL is the externally reachable base URL of the server; callback
	// URLs in handoffs and ingress URLs are built from it. Defaults to
	// http://127.0.0.1:8470 (AGENTOWL_PUBLIC_URL).
	PublicURL string
	// MaxCredentialDays caps a runtime credential's lifetime. Defaults to 90,
	// the most the protocol allows.
	MaxCredentialDays int
	// DefaultCredentialDays is the lifetime when none is asked for. Defaults
	// to MaxCredentialDays.
	DefaultCredentialDays int
	// MaxCallbackBytes caps a callback body; larger ones are 413. Defaults
	// to 64 KiB.
	MaxCallbackBytes int64
	// CallbackLimit bounds callback requests per endpoint, counted across
	// all its credentials and every process. Defaults to 60 per minute.
	CallbackLimit ratelimit.Limit
	// MaxCallbacksPerWork caps recorded callbacks (stale ones included) of
	// one work. Defaults to 10,000.
	MaxCallbacksPerWork int
	// HandoffWindow is how long a handoff is retried before it fails.
	// Defaults to 72h.
	HandoffWindow time.Duration
}

func (c Config) withDefaults() Config {
	if c.PublicURL == "" {
		c.PublicURL = "http://127.0.0.1:8470"
	}
	c.PublicURL = strings.TrimRight(c.PublicURL, "/")
	if c.MaxCredentialDays <= 0 {
		c.MaxCredentialDays = 90
	}
	if c.DefaultCredentialDays <= 0 || c.DefaultCredentialDays > c.MaxCredentialDays {
		c.DefaultCredentialDays = c.MaxCredentialDays
	}
	if c.MaxCallbackBytes <= 0 {
		c.MaxCallbackBytes = 64 << 10
	}
	if c.CallbackLimit.Per <= 0 {
		c.CallbackLimit = ratelimit.Limit{Events: 60, Per: time.Minute}
	}
	if c.MaxCallbacksPerWork <= 0 {
		c.MaxCallbacksPerWork = 10_000
	}
	if c.HandoffWindow <= 0 {
		c.HandoffWindow = 72 * time.Hour
	}
	return c
}

func (c Config) validate() error {
	if !strings.HasPrefix(c.PublicURL, "http://") && !strings.HasPrefix(c.PublicURL, "https://") {
		return fmt.Errorf("work: PublicURL %q must be an http:// or https:// URL", c.PublicURL)
	}
	return nil
}

// Service implements the agent-work use-cases.
type Service struct {
	store agentowl.Store
	clock agentowl.Clock
	cfg   Config
	log   *slog.Logger
	// checkURL refuses destinations the egress client would refuse.
	checkURL func(string) error
	// wake prompts the delivery engine after a handoff commits.
	wake          func()
	callbackLimit *ratelimit.Limiter
	// attest signs every decision on a runtime request (nil: none are).
	attest *attestation.Signer
}

// UseAttestations makes every decision on a runtime request carry an
// attestation signed by a: recorded in the decision's transaction and
// carried in the decision document's attestation field
// (docs/attestations.md). Call it before serving.
func (s *Service) UseAttestations(a *attestation.Signer) { s.attest = a }

// New returns a Service. checkURL is the egress client's URL check (every endpoint URL and
// decision URL must pass it); wake, when set, is called after handoffs
// commit.
func New(st agentowl.Store, clock agentowl.Clock, checkURL func(string) error, wake func(), cfg Config, log *slog.Logger) (*Service, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if wake == nil {
		wake = func() {}
	}
	return &Service{store: st, clock: clock, cfg: cfg, log: log, checkURL: checkURL, wake: wake,
		callbackLimit: ratelimit.New("runtime-callbacks", cfg.CallbackLimit, st, clock)}, nil
}

// Config returns the effective configuration (defaults applied).
func (s *Service) Config() Config { return s.cfg }

// CallbackRate returns the limiter of callback requests per endpoint (keyed
// by endpoint ID), for health reports.
func (s *Service) CallbackRate() *ratelimit.Limiter { return s.callbackLimit }

// Wake prompts the delivery engine; ingress calls it after committing
// handoffs.
func (s *Service) Wake() { s.wake() }

// notFound is not_found for an operator's look-up in membership m: it
// names the tenant searched (the caller's own, so nothing leaks).
func notFound(m *agentowl.Membership, what, id string) error {
	return agentowl.Errorf(agentowl.ECodeNotFound, "No %s %q in tenant %q.", what, id, m.TenantName)
}

// CallbackURL is where the runtime reports about work.
func (s *Service) CallbackURL(workID string) string {
	return s.cfg.PublicURL + "/runtime/v1/work/" + workID + "/callbacks"
}

// ofTenant reads record id with get and returns it if mine says membership
// m may see it; otherwise not_found naming what, so that another tenant's
// record looks like a missing one.
func ofTenant[T any](ctx context.Context, m *agentowl.Membership, what, id string, get func(context.Context, string) (T, error), mine func(T) bool) (T, error) {
	v, err := get(ctx, id)
	if errors.Is(err, agentowl.ErrNotFound) || (err == nil && !mine(v)) {
		var none T
		return none, notFound(m, what, id)
	}
	return v, err
}

// tenantEndpoint reads a live endpoint of membership m, or not_found.
func tenantEndpoint(ctx context.Context, tx agentowl.Tx, m *agentowl.Membership, id string) (*agentowl.Endpoint, error) {
	return ofTenant(ctx, m, "endpoint", id, tx.EndpointGet, func(ep *agentowl.Endpoint) bool {
		return ep.TenantID == m.TenantID && ep.DeletedAt == nil
	})
}

// tenantWork reads work of membership m, or not_found.
func tenantWork(ctx context.Context, tx agentowl.Tx, m *agentowl.Membership, id string) (*agentowl.Work, error) {
	return ofTenant(ctx, m, "work", id, tx.WorkGet, func(w *agentowl.Work) bool { return w.TenantID == m.TenantID })
}

// changeEndpoint runs change on the live endpoint id of m in a write
// transaction and returns the endpoint as change left it.
func (s *Service) changeEndpoint(ctx context.Context, m *agentowl.Membership, id string, change func(tx agentowl.Tx, ep *agentowl.Endpoint) error) (*agentowl.Endpoint, error) {
	var out *agentowl.Endpoint
	err := s.store.Write(ctx, func(tx agentowl.Tx) error {
		ep, err := tenantEndpoint(ctx, tx, m, id)
		if err != nil {
			return err
		}
		out = ep
		return change(tx, ep)
	})
	return out, err
}
