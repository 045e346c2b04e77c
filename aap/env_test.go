package aap_test

import (
	"context"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/netip"
	"net/url"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentowl/agentowl"
	"github.com/agentowl/agentowl/aap"
	"github.com/agentowl/agentowl/aap/sqlite"
	"github.com/agentowl/agentowl/internal/delivery"
	"github.com/agentowl/agentowl/internal/egress"
	"github.com/agentowl/agentowl/internal/server"
	"github.com/agentowl/agentowl/internal/server/servertest"
	"github.com/agentowl/agentowl/internal/store/storetest"
)

// This file builds the real AgentOwl provider in-process (store, access,
// approval, HTTP API, delivery engine and SSRF-safe egress, as
// cmd/agentowl wires them) on a fake clock, and a real aap.Receiver on a
// local TLS server that the provider's egress trusts.

var t0 = time.Date(2026, 9, 16, 12, 0, 0, 0, time.UTC)

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func openStore(t testing.TB, path string) aap.Store {
	t.Helper()
	s, err := sqlite.Open(context.Background(), path)
	must(t, err)
	return s
}

// swapHandler lets a test replace the handler behind a running server (a
// restarted process keeps its address).
type swapHandler struct{ h atomic.Pointer[http.Handler] }

func (s *swapHandler) set(h http.Handler) { s.h.Store(&h) }

func (s *swapHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	(*s.h.Load()).ServeHTTP(w, r)
}

// receiverSite is a receiver process: its durable store file, the Receiver
// over it and the TLS server it listens on.
type receiverSite struct {
	t     testing.TB
	path  string
	clock aap.Clock
	srv   *httptest.Server
	front swapHandler
	// wrap, if set, sits in front of the Receiver (fault injection).
	wrap func(http.Handler) http.Handler

	mu       sync.Mutex
	store    aap.Store
	receiver *aap.Receiver
}

func newReceiverSite(t testing.TB, clock aap.Clock, wrap func(http.Handler) http.Handler) *receiverSite {
	rs := &receiverSite{t: t, path: filepath.Join(t.TempDir(), "receiver.db"), clock: clock, wrap: wrap}
	rs.srv = httptest.NewUnstartedServer(&rs.front)
	rs.srv.StartTLS()
	rs.restart()
	t.Cleanup(func() {
		rs.srv.Close()
		rs.mu.Lock()
		rs.store.Close()
		rs.mu.Unlock()
	})
	return rs
}

// restart closes the store and opens a new Receiver over the same file, as
// a restarted receiver process would.
func (rs *receiverSite) restart() {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if rs.store != nil {
		rs.store.Close()
	}
	rs.store = openStore(rs.t, rs.path)
	r, err := aap.NewReceiver(aap.ReceiverConfig{Store: rs.store, Clock: rs.clock})
	must(rs.t, err)
	rs.receiver = r
	var h http.Handler = r
	if rs.wrap != nil {
		h = rs.wrap(r)
	}
	rs.front.set(h)
}

func (rs *receiverSite) current() (*aap.Receiver, aap.Store) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return rs.receiver, rs.store
}

func (rs *receiverSite) url() string { return rs.srv.URL + "/aap/events" }

func (rs *receiverSite) caPEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: rs.srv.Certificate().Raw})
}

// provider is an in-process AgentOwl server on a fake clock.
type provider struct {
	t      testing.TB
	clock  agentowl.Clock
	cfg    server.Config
	tenant string // tenant "default"'s ID
	url    string // the provider's base URL, kept across restarts
	// op is tenant "default"'s admin operator (the bootstrap token); prov
	// a provisioner token.
	op   servertest.Operator
	prov string

	mu  sync.Mutex
	srv *server.Server
}

// newProvider starts the provider (the one server assembly); its egress
// allows loopback and trusts caPEM (the receiver's certificate).
func newProvider(t testing.TB, clock agentowl.Clock, caPEM []byte) *provider {
	t.Helper()
	cfg := servertest.Config(t, storetest.Backends(t)[0]) // SQLite
	cfg.Clock = clock
	cfg.Egress = egress.Config{AllowCIDRs: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}, ExtraRootsPEM: caPEM}
	cfg.Delivery = delivery.Config{RetryMinDelay: time.Second, RetryMaxDelay: 4 * time.Second}
	srv, err := server.Start(context.Background(), cfg)
	must(t, err)
	p := &provider{t: t, clock: clock, srv: srv, cfg: srv.Config()}
	// The adapters call a front that stays put while the provider restarts
	// (on another port: the old one may be taken by then).
	front := httptest.NewServer(&httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) {
		p.mu.Lock()
		target, _ := url.Parse(p.srv.URL())
		p.mu.Unlock()
		r.SetURL(target)
	}})
	p.url = front.URL
	p.op = servertest.Operator{T: t, URL: front.URL, Token: srv.BootstrapToken()}
	t.Cleanup(func() {
		front.Close()
		p.mu.Lock()
		defer p.mu.Unlock()
		must(t, p.srv.Close())
	})
	op, err := srv.Access().Authenticate(context.Background(), p.op.Token, agentowl.TokenOperator)
	must(t, err)
	p.tenant = op.Membership.TenantID
	p.prov = p.op.ProvisionerToken("test")
	return p
}

// store is the provider's current store.
func (p *provider) store() agentowl.Store {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.srv.Store()
}

// restart stops the provider, as killing it would, and starts it again on
// the same database; requests wait at the front meanwhile.
func (p *provider) restart() {
	p.mu.Lock()
	defer p.mu.Unlock()
	must(p.t, p.srv.Close())
	srv, err := server.Start(context.Background(), p.cfg)
	must(p.t, err)
	p.srv = srv
}

func (p *provider) wake() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.srv.Engine().Wake()
}

// decide approves (valid for validity) or denies a pending request; it
// reports false if the request was no longer pending.
func (p *provider) decide(id string, approve bool, validity time.Duration) bool {
	p.t.Helper()
	return p.op.Decide(id, approve, validity, "")
}

// flush delivers every notification that is due at the current fake time:
// it returns once no pending message is due (each has either been
// acknowledged or is scheduled for a later retry).
func (p *provider) flush() {
	p.t.Helper()
	servertest.Eventually(p.t, "due notifications to be attempted", func() bool {
		p.wake()
		msgs, err := delivery.NewViews(p.store()).List(context.Background(), &agentowl.Membership{TenantID: p.tenant}, delivery.ListFilter{State: agentowl.MessagePending, Limit: 1000})
		must(p.t, err)
		now := p.clock.Now()
		for _, m := range msgs {
			if !m.NextAttempt.After(now) {
				return false
			}
		}
		return true
	})
}

// provision creates an instance delivering to rs with the kit's
// Provisioner, and returns its credential.
func (p *provider) provision(rs *receiverSite, name string) *aap.Credential {
	p.t.Helper()
	_, st := rs.current()
	pr := &aap.Provisioner{Provider: &aap.Client{BaseURL: p.url, Token: p.prov}, Registrations: st, Clock: p.clock}
	cred, err := pr.Provision(context.Background(), aap.NewSubmission(name, rs.url()))
	must(p.t, err)
	return cred
}
