package egress

import (
	"context"
	"crypto/tls"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// errNoNetwork is what the recording dialer returns instead of connecting,
// so tests that reach a public address never send a packet.
var errNoNetwork = errors.New("test dialer: no network")

// stubResolver answers from a function of the host and the call number.
type stubResolver struct {
	calls  atomic.Int64
	answer func(host string, call int) ([]netip.Addr, error)
}

func (r *stubResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	n := int(r.calls.Add(1))
	return r.answer(host, n)
}

func fixedResolver(host string, addrs ...netip.Addr) *stubResolver {
	return &stubResolver{answer: func(h string, _ int) ([]netip.Addr, error) {
		if h != host {
			return nil, &net.DNSError{Err: "no such host", Name: h, IsNotFound: true}
		}
		return addrs, nil
	}}
}

// dialRecorder records every address the client asks to connect to and
// refuses them all, or forwards loopback ones to a real dialer when next is
// set.
type dialRecorder struct {
	mu    sync.Mutex
	addrs []string
	next  func(ctx context.Context, network, address string) (net.Conn, error)
}

func (d *dialRecorder) dial(ctx context.Context, network, address string) (net.Conn, error) {
	d.mu.Lock()
	d.addrs = append(d.addrs, address)
	d.mu.Unlock()
	if d.next != nil {
		if ap, err := netip.ParseAddrPort(address); err == nil && ap.Addr().IsLoopback() {
			return d.next(ctx, network, address)
		}
	}
	return nil, errNoNetwork
}

func (d *dialRecorder) dialed() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.addrs...)
}

type fixture struct {
	client *Client
	dials  *dialRecorder
}

// setup builds a Client whose dialer records instead of connecting.
func setup(t *testing.T, cfg Config) fixture {
	t.Helper()
	c, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	d := &dialRecorder{}
	c.dial = d.dial
	t.Cleanup(c.CloseIdleConnections)
	return fixture{client: c, dials: d}
}

// requireDialed fails t unless the client asked to connect to exactly
// want, in order (nothing when want is empty).
func (f fixture) requireDialed(t *testing.T, want ...string) {
	t.Helper()
	if got := f.dials.dialed(); !slices.Equal(got, want) {
		t.Fatalf("dialed %v, want %v", got, want)
	}
}

func newRequest(t *testing.T, rawURL string) *http.Request {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, rawURL, strings.NewReader(`{}`))
	if err != nil {
		t.Fatalf("NewRequest(%q): %v", rawURL, err)
	}
	return req
}

func literalURL(a netip.Addr) string {
	if a.Is4() {
		return "https://" + a.String() + "/hook"
	}
	return "https://[" + strings.ReplaceAll(a.String(), "%", "%25") + "]/hook"
}

func requireBlocked(t *testing.T, err error, want netip.Addr, reason string) {
	t.Helper()
	var be *BlockedError
	if !errors.As(err, &be) {
		t.Fatalf("err = %v (%T), want *BlockedError", err, err)
	}
	if !IsBlocked(err) {
		t.Fatalf("IsBlocked(%v) = false", err)
	}
	if be.Addr != want {
		t.Fatalf("BlockedError.Addr = %s, want %s", be.Addr, want)
	}
	if !strings.Contains(be.Reason, reason) {
		t.Fatalf("BlockedError.Reason = %q, want it to contain %q", be.Reason, reason)
	}
	if !strings.Contains(be.Error(), want.String()) || !strings.Contains(be.Error(), be.Reason) {
		t.Fatalf("Error() = %q, want the address and the reason", be.Error())
	}
}

var blockedCases = []struct {
	addr   string
	reason string
}{
	{"127.0.0.1", "loopback"},
	{"127.255.255.254", "loopback"},
	{"::1", "loopback"},
	{"::ffff:127.0.0.1", "loopback (IPv4-mapped)"},
	{"::ffff:10.0.0.1", "private (IPv4-mapped)"},
	{"::ffff:169.254.169.254", "cloud metadata (IPv4-mapped)"},
	{"10.0.0.1", "private"},
	{"172.16.0.1", "private"},
	{"172.31.255.254", "private"},
	{"192.168.1.1", "private"},
	{"fd00::1", "private"},
	{"fc00::1", "private"},
	{"169.254.169.254", "cloud metadata"},
	{"169.254.170.2", "cloud metadata"},
	{"fd00:ec2::254", "cloud metadata"},
	{"100.100.100.200", "cloud metadata"},
	{"192.0.0.192", "cloud metadata"},
	{"169.254.1.1", "link-local"},
	{"fe80::1", "link-local"},
	{"fe80::1%eth0", "zone"},
	{"100.64.0.1", "CGNAT"},
	{"100.127.255.254", "CGNAT"},
	{"0.0.0.0", "unspecified"},
	{"0.1.2.3", "this network"},
	{"::", "unspecified"},
	{"255.255.255.255", "broadcast"},
	{"224.0.0.1", "multicast"},
	{"239.255.255.250", "multicast"},
	{"ff02::1", "multicast"},
	{"ff0e::1", "multicast"},
	{"192.0.2.1", "documentation"},
	{"198.51.100.1", "documentation"},
	{"203.0.113.1", "documentation"},
	{"2001:db8::1", "documentation"},
	{"3fff::1", "documentation"},
	{"198.18.0.1", "benchmarking"},
	{"198.19.255.254", "benchmarking"},
	{"240.0.0.1", "reserved"},
	{"192.0.0.1", "special-purpose"},
	{"192.88.99.1", "special-purpose"},
	{"64:ff9b::a00:1", "NAT64 (embeds 10.0.0.1)"},
	{"64:ff9b::7f00:1", "NAT64 (embeds 127.0.0.1)"},
	{"64:ff9b::5db8:d70e", "NAT64"}, // even of a public address: not global unicast
	{"64:ff9b:1::1", "local-use NAT64"},
	{"2002:a00:1::", "6to4 (embeds 10.0.0.1)"},
	{"2002:7f00:1::1", "6to4 (embeds 127.0.0.1)"},
	{"2001::1", "Teredo"},
	{"2001:2::1", "IETF protocol assignment"},
	{"::a00:1", "IPv4-compatible"},
	{"::7f00:1", "IPv4-compatible"},
	{"100::1", "not global unicast"},
}

var publicCases = []struct {
	addr   string
	dialed string // what the connection must be made to, on port 443
}{
	{"93.184.215.14", "93.184.215.14:443"},
	{"8.8.8.8", "8.8.8.8:443"},
	{"1.1.1.1", "1.1.1.1:443"},
	{"::ffff:93.184.215.14", "93.184.215.14:443"},
	{"2606:4700::1111", "[2606:4700::1111]:443"},
	{"2a00:1450:4001:80b::200e", "[2a00:1450:4001:80b::200e]:443"},
}

func TestCheckURLBlocksNonPublicLiterals(t *testing.T) {
	t.Parallel()
	f := setup(t, Config{})
	for _, tc := range blockedCases {
		t.Run(tc.addr, func(t *testing.T) {
			t.Parallel()
			a := netip.MustParseAddr(tc.addr)
			requireBlocked(t, f.client.CheckURL(literalURL(a)), a, tc.reason)
		})
	}
}

// Do refuses a non-public address before dialing it, whether a name
// resolved to it or the URL names it; a literal is refused without
// resolving anything.
func TestDoBlocksNonPublicAddresses(t *testing.T) {
	t.Parallel()
	for _, tc := range blockedCases {
		a := netip.MustParseAddr(tc.addr)
		for _, literal := range []bool{false, true} {
			r, url := fixedResolver("hooks.example", a), "https://hooks.example/hook"
			if literal {
				r, url = fixedResolver("unused.example"), literalURL(a)
			}
			t.Run(fmt.Sprintf("%s/literal=%v", tc.addr, literal), func(t *testing.T) {
				t.Parallel()
				f := setup(t, Config{Resolver: r})
				resp, err := f.client.Do(newRequest(t, url))
				if resp != nil {
					resp.Body.Close()
					t.Fatalf("Do returned a response for %s", a)
				}
				requireBlocked(t, err, a, tc.reason)
				f.requireDialed(t)
				if n := r.calls.Load(); literal && n != 0 {
					t.Fatalf("resolver called %d times for an IP literal", n)
				}
			})
		}
	}
}

func TestPublicAddressesPass(t *testing.T) {
	t.Parallel()
	for _, tc := range publicCases {
		t.Run(tc.addr, func(t *testing.T) {
			t.Parallel()
			a := netip.MustParseAddr(tc.addr)
			f := setup(t, Config{Resolver: fixedResolver("hooks.example", a)})
			if err := f.client.checkAddr(a); err != nil {
				t.Fatalf("checkAddr(%s) = %v, want nil", a, err)
			}
			if err := f.client.CheckURL(literalURL(a)); err != nil {
				t.Fatalf("CheckURL(%s) = %v, want nil", literalURL(a), err)
			}
			if err := f.client.control(map[bool]string{true: "tcp4", false: "tcp6"}[a.Unmap().Is4()], tc.dialed, nil); err != nil {
				t.Fatalf("control(%s) = %v, want nil", tc.dialed, err)
			}
			// Through Do the recording dialer is asked for the literal
			// address and refuses, so nothing leaves the machine.
			_, err := f.client.Do(newRequest(t, "https://hooks.example/hook"))
			if !errors.Is(err, errNoNetwork) || IsBlocked(err) {
				t.Fatalf("Do err = %v, want the test dialer's refusal", err)
			}
			f.requireDialed(t, tc.dialed)
		})
	}
}

func TestDoAnyPortAndLiteralHost(t *testing.T) {
	t.Parallel()
	r := fixedResolver("unused.example")
	f := setup(t, Config{Resolver: r})
	_, err := f.client.Do(newRequest(t, "https://93.184.215.14:8443/hook"))
	if !errors.Is(err, errNoNetwork) {
		t.Fatalf("Do err = %v, want the test dialer's refusal", err)
	}
	f.requireDialed(t, "93.184.215.14:8443")
	if n := r.calls.Load(); n != 0 {
		t.Fatalf("resolver called %d times for an IP literal", n)
	}
}

func TestDoDialsOnlyAllowedAddresses(t *testing.T) {
	t.Parallel()
	public := netip.MustParseAddr("93.184.215.14")
	loop := netip.MustParseAddr("127.0.0.1")
	meta := netip.MustParseAddr("169.254.169.254")

	t.Run("mixed answer dials only the public one", func(t *testing.T) {
		t.Parallel()
		f := setup(t, Config{Resolver: fixedResolver("hooks.example", loop, public, meta)})
		_, err := f.client.Do(newRequest(t, "https://hooks.example/hook"))
		if !errors.Is(err, errNoNetwork) || IsBlocked(err) {
			t.Fatalf("Do err = %v, want the test dialer's refusal", err)
		}
		f.requireDialed(t, "93.184.215.14:443")
	})
	t.Run("all blocked reports the first", func(t *testing.T) {
		t.Parallel()
		f := setup(t, Config{Resolver: fixedResolver("hooks.example", meta, loop)})
		_, err := f.client.Do(newRequest(t, "https://hooks.example/hook"))
		requireBlocked(t, err, meta, "cloud metadata")
		f.requireDialed(t)
	})
	t.Run("empty answer is a DNS error", func(t *testing.T) {
		t.Parallel()
		f := setup(t, Config{Resolver: fixedResolver("hooks.example")})
		_, err := f.client.Do(newRequest(t, "https://hooks.example/hook"))
		var dnsErr *net.DNSError
		if !errors.As(err, &dnsErr) || IsBlocked(err) {
			t.Fatalf("Do err = %v, want a *net.DNSError", err)
		}
	})
}

// A resolver that answers with a public address first and a blocked one
// afterwards (DNS rebinding) never gets the blocked address dialed: each
// connection resolves once and dials exactly what it checked.
func TestDoRebindingCannotReachBlockedAddress(t *testing.T) {
	t.Parallel()
	public := netip.MustParseAddr("93.184.215.14")
	loop := netip.MustParseAddr("127.0.0.1")
	r := &stubResolver{answer: func(_ string, call int) ([]netip.Addr, error) {
		if call == 1 {
			return []netip.Addr{public}, nil
		}
		return []netip.Addr{loop}, nil
	}}
	f := setup(t, Config{Resolver: r})

	if err := f.client.CheckURL("https://rebind.example/hook"); err != nil {
		t.Fatalf("CheckURL: %v", err)
	}
	_, err := f.client.Do(newRequest(t, "https://rebind.example/hook"))
	if !errors.Is(err, errNoNetwork) {
		t.Fatalf("first Do err = %v, want the test dialer's refusal", err)
	}
	_, err = f.client.Do(newRequest(t, "https://rebind.example/hook"))
	requireBlocked(t, err, loop, "loopback")

	f.requireDialed(t, "93.184.215.14:443")
	if n := r.calls.Load(); n != 2 {
		t.Fatalf("resolver called %d times, want exactly once per connection (2)", n)
	}
}

func TestCheckURLSyntax(t *testing.T) {
	t.Parallel()
	f := setup(t, Config{})
	good := []string{
		"https://hooks.example/hook",
		"https://hooks.example:8443/a/b?x=1",
		"HTTPS://Hooks.Example/",
		"https://93.184.215.14/",
		"https://[2606:4700::1111]:443/",
		"https://xn--bcher-kva.example/",
		"https://hooks.example./",
	}
	for _, raw := range good {
		if err := f.client.CheckURL(raw); err != nil {
			t.Errorf("CheckURL(%q) = %v, want nil", raw, err)
		}
	}
	bad := []struct{ raw, reason string }{
		{"http://hooks.example/hook", "https"},
		{"ftp://hooks.example/", "https"},
		{"hooks.example/hook", "https"},
		{"//hooks.example/hook", "https"},
		{"", "https"},
		{"https:hooks.example", "absolute"},
		{"https:///hook", "no host"},
		{"https://:443/hook", "no host"},
		{"https://user:secret@hooks.example/hook", "userinfo"},
		{"https://user@hooks.example/hook", "userinfo"},
		{"https://@hooks.example/hook", "userinfo"},
		{"https://hooks.example/hook#frag", "fragment"},
		{"https://hooks.example/hook#", "fragment"},
		{"https://hooks.example:0/", "port"},
		{"https://hooks.example:65536/", "port"},
		{"https://hooks.example:99999999999999999999/", "port"},
		{"https://127.1/", "non-canonical IPv4"},
		{"https://2130706433/", "non-canonical IPv4"},
		{"https://0x7f.1/", "non-canonical IPv4"},
		{"https://hooks.example/%zz", "parse"},
		{"https://hooks example/", "parse"},
	}
	for _, tc := range bad {
		err := f.client.CheckURL(tc.raw)
		var ue *URLError
		if !errors.As(err, &ue) {
			t.Errorf("CheckURL(%q) = %v, want *URLError", tc.raw, err)
			continue
		}
		if !strings.Contains(ue.Reason, tc.reason) {
			t.Errorf("CheckURL(%q) reason = %q, want it to contain %q", tc.raw, ue.Reason, tc.reason)
		}
		if IsBlocked(err) {
			t.Errorf("IsBlocked(CheckURL(%q)) = true for a syntax error", tc.raw)
		}
		if strings.Contains(err.Error(), "secret") {
			t.Errorf("error %q leaks the password", err)
		}
	}
}

func TestDoRefusesBadURLsWithoutConnecting(t *testing.T) {
	t.Parallel()
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { hits.Add(1) }))
	t.Cleanup(srv.Close)
	f := setup(t, Config{AllowCIDRs: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}})

	for _, raw := range []string{srv.URL + "/hook", "https://user:pw@93.184.215.14/hook"} {
		resp, err := f.client.Do(newRequest(t, raw))
		var ue *URLError
		if resp != nil || !errors.As(err, &ue) {
			t.Fatalf("Do(%q) = %v, %v; want *URLError", raw, resp, err)
		}
	}
	req := newRequest(t, "https://93.184.215.14/hook")
	req.URL.Fragment = "frag"
	if _, err := f.client.Do(req); !errors.As(err, new(*URLError)) {
		t.Fatalf("Do with fragment = %v, want *URLError", err)
	}
	if _, err := f.client.Do(&http.Request{}); !errors.As(err, new(*URLError)) {
		t.Fatalf("Do without URL = %v, want *URLError", err)
	}
	if hits.Load() != 0 || len(f.dials.dialed()) != 0 {
		t.Fatalf("plain-http server got %d requests, dials %v; want none", hits.Load(), f.dials.dialed())
	}
}

// tlsServer starts a loopback TLS server and returns it with its
// certificate as PEM and a URL naming it by a host its certificate covers.
func tlsServer(t *testing.T, h http.Handler) (srv *httptest.Server, caPEM []byte, hostURL string, resolver *stubResolver) {
	t.Helper()
	srv = httptest.NewUnstartedServer(h)
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // expected handshake failures
	srv.StartTLS()
	t.Cleanup(srv.Close)
	caPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	ap := netip.MustParseAddrPort(srv.Listener.Addr().String())
	hostURL = fmt.Sprintf("https://receiver.example.com:%d", ap.Port())
	return srv, caPEM, hostURL, fixedResolver("receiver.example.com", ap.Addr())
}

func realClient(t *testing.T, cfg Config) *Client {
	t.Helper()
	c, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(c.CloseIdleConnections)
	return c
}

func TestLoopbackReceiverNeedsAllowListAndCA(t *testing.T) {
	t.Parallel()
	var hits atomic.Int64
	srv, caPEM, hostURL, r := tlsServer(t, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		hits.Add(1)
		io.WriteString(w, "ok")
	}))
	allow := []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}

	t.Run("allowed and trusted", func(t *testing.T) {
		c := realClient(t, Config{AllowCIDRs: allow, ExtraRootsPEM: caPEM, Resolver: r})
		for _, raw := range []string{hostURL + "/hook", srv.URL + "/hook"} {
			resp, err := c.Do(newRequest(t, raw))
			if err != nil {
				t.Fatalf("Do(%s): %v", raw, err)
			}
			body, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil || resp.StatusCode != http.StatusOK || string(body) != "ok" {
				t.Fatalf("Do(%s) = %d %q %v, want 200 ok", raw, resp.StatusCode, body, err)
			}
		}
	})
	before := hits.Load()

	t.Run("not allow-listed", func(t *testing.T) {
		c := realClient(t, Config{ExtraRootsPEM: caPEM, Resolver: r})
		for _, raw := range []string{hostURL + "/hook", srv.URL + "/hook"} {
			_, err := c.Do(newRequest(t, raw))
			requireBlocked(t, err, netip.MustParseAddr("127.0.0.1"), "loopback")
		}
	})
	t.Run("CA not trusted", func(t *testing.T) {
		c := realClient(t, Config{AllowCIDRs: allow, Resolver: r})
		_, err := c.Do(newRequest(t, hostURL+"/hook"))
		var cve *tls.CertificateVerificationError
		if !errors.As(err, &cve) || IsBlocked(err) {
			t.Fatalf("Do err = %v, want a certificate verification error", err)
		}
	})
	if hits.Load() != before {
		t.Fatalf("receiver got %d requests it should not have", hits.Load()-before)
	}
}

// The production dialer re-checks the connect address in net.Dialer.Control:
// with the pre-check allowing loopback but the Control hook of a client
// without the allow-list, the connection is refused at the socket.
func TestDialerControlBlocksAtConnect(t *testing.T) {
	t.Parallel()
	var hits atomic.Int64
	_, caPEM, hostURL, r := tlsServer(t, http.HandlerFunc(func(http.ResponseWriter, *http.Request) { hits.Add(1) }))
	strict := realClient(t, Config{})
	lax := realClient(t, Config{
		AllowCIDRs:    []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")},
		ExtraRootsPEM: caPEM,
		Resolver:      r,
	})
	lax.dial = strict.dial
	_, err := lax.Do(newRequest(t, hostURL+"/hook"))
	requireBlocked(t, err, netip.MustParseAddr("127.0.0.1"), "loopback")
	var opErr *net.OpError
	if !errors.As(err, &opErr) {
		t.Fatalf("err = %v, want the refusal from inside the dialer (*net.OpError)", err)
	}
	if hits.Load() != 0 {
		t.Fatal("receiver was reached")
	}
}

func TestControl(t *testing.T) {
	t.Parallel()
	c := realClient(t, Config{})
	if err := c.control("tcp4", "127.0.0.1:443", nil); !IsBlocked(err) {
		t.Fatalf("control(127.0.0.1) = %v, want blocked", err)
	}
	if err := c.control("tcp6", "[fe80::1]:443", nil); !IsBlocked(err) {
		t.Fatalf("control(fe80::1) = %v, want blocked", err)
	}
	if err := c.control("udp4", "93.184.215.14:443", nil); err == nil || IsBlocked(err) {
		t.Fatalf("control(udp4) = %v, want a network refusal", err)
	}
	if err := c.control("tcp4", "93.184.215.14:1", nil); err != nil {
		t.Fatalf("control(any port) = %v, want nil", err)
	}
	allowed := realClient(t, Config{AllowCIDRs: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}})
	if err := allowed.control("tcp4", "127.0.0.1:443", nil); err != nil {
		t.Fatalf("control with allow-list = %v, want nil", err)
	}
}

func TestAllowCIDRs(t *testing.T) {
	t.Parallel()
	c := realClient(t, Config{AllowCIDRs: []netip.Prefix{
		netip.MustParsePrefix("::ffff:10.1.0.0/112"), // mapped form means 10.1.0.0/16
		netip.MustParsePrefix("fd00:1::/32"),
		netip.MustParsePrefix("64:ff9b::/96"),
	}})
	pass := []string{"10.1.2.3", "::ffff:10.1.2.3", "fd00:1::5", "64:ff9b::5db8:d70e"}
	fail := []string{"10.2.0.1", "fd00:2::5", "127.0.0.1", "64:ff9b::7f00:1", "64:ff9b::a00:1", "169.254.169.254"}
	for _, s := range pass {
		if err := c.checkAddr(netip.MustParseAddr(s)); err != nil {
			t.Errorf("checkAddr(%s) = %v, want allowed", s, err)
		}
	}
	for _, s := range fail {
		if err := c.checkAddr(netip.MustParseAddr(s)); !IsBlocked(err) {
			t.Errorf("checkAddr(%s) = %v, want blocked", s, err)
		}
	}
}

func TestRedirectsAreNotFollowed(t *testing.T) {
	t.Parallel()
	var targetHits, sourceHits atomic.Int64
	target, caTarget, _, _ := tlsServer(t, http.HandlerFunc(func(http.ResponseWriter, *http.Request) { targetHits.Add(1) }))
	source, caSource, _, _ := tlsServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sourceHits.Add(1)
		if r.URL.Path == "/self" {
			http.Redirect(w, r, "/elsewhere", http.StatusTemporaryRedirect)
			return
		}
		http.Redirect(w, r, target.URL+"/stolen", http.StatusFound)
	}))
	c := realClient(t, Config{
		AllowCIDRs:    []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")},
		ExtraRootsPEM: append(caSource, caTarget...),
	})

	resp, err := c.Do(newRequest(t, source.URL+"/hook"))
	if err != nil {
		t.Fatalf("Do: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusFound || resp.Header.Get("Location") != target.URL+"/stolen" {
		t.Fatalf("got %d Location %q, want the 302 itself", resp.StatusCode, resp.Header.Get("Location"))
	}
	resp, err = c.Do(newRequest(t, source.URL+"/self"))
	if err != nil {
		t.Fatalf("Do: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusTemporaryRedirect {
		t.Fatalf("got %d, want 307", resp.StatusCode)
	}
	if targetHits.Load() != 0 || sourceHits.Load() != 2 {
		t.Fatalf("target hits %d, source hits %d; want 0 and 2", targetHits.Load(), sourceHits.Load())
	}
}

func TestResponseBodyIsBounded(t *testing.T) {
	t.Parallel()
	_, caPEM, hostURL, r := tlsServer(t, http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		var n int
		fmt.Sscan(req.URL.Query().Get("n"), &n)
		w.Write([]byte(strings.Repeat("x", n)))
	}))
	allow := []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}
	small := realClient(t, Config{AllowCIDRs: allow, ExtraRootsPEM: caPEM, Resolver: r, MaxResponseBytes: 10})
	def := realClient(t, Config{AllowCIDRs: allow, ExtraRootsPEM: caPEM, Resolver: r})

	cases := []struct {
		c       *Client
		n       int
		wantLen int
		wantErr error
	}{
		{small, 9, 9, nil},
		{small, 10, 10, nil},
		{small, 11, 10, ErrResponseTooLarge},
		{small, 1 << 20, 10, ErrResponseTooLarge},
		{def, DefaultMaxResponseBytes, DefaultMaxResponseBytes, nil},
		{def, DefaultMaxResponseBytes + 1, DefaultMaxResponseBytes, ErrResponseTooLarge},
	}
	for _, tc := range cases {
		resp, err := tc.c.Do(newRequest(t, fmt.Sprintf("%s/body?n=%d", hostURL, tc.n)))
		if err != nil {
			t.Fatalf("Do(n=%d): %v", tc.n, err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if len(body) != tc.wantLen || !errors.Is(err, tc.wantErr) && err != tc.wantErr {
			t.Fatalf("n=%d: read %d bytes, err %v; want %d bytes, err %v", tc.n, len(body), err, tc.wantLen, tc.wantErr)
		}
		// The error is sticky.
		if n, err2 := resp.Body.Read(make([]byte, 8)); tc.wantErr != nil && (n != 0 || !errors.Is(err2, tc.wantErr)) {
			t.Fatalf("n=%d: read after limit = %d, %v", tc.n, n, err2)
		}
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	t.Parallel()
	srv := httptest.NewUnstartedServer(http.NotFoundHandler())
	srv.StartTLS()
	t.Cleanup(srv.Close)
	cert := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})

	if _, err := New(Config{ExtraRootsPEM: append(append([]byte{}, cert...), cert...)}); err != nil {
		t.Fatalf("New with two certificates: %v", err)
	}
	bad := map[string]Config{
		"garbage":            {ExtraRootsPEM: []byte("not pem at all")},
		"private key block":  {ExtraRootsPEM: pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: []byte{1, 2, 3}})},
		"corrupt cert":       {ExtraRootsPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: []byte{1, 2, 3}})},
		"trailing garbage":   {ExtraRootsPEM: append(append([]byte{}, cert...), "junk"...)},
		"negative body size": {MaxResponseBytes: -1},
		"negative idle":      {MaxIdleConnsPerHost: -1},
		"invalid prefix":     {AllowCIDRs: []netip.Prefix{{}}},
	}
	for name, cfg := range bad {
		if c, err := New(cfg); err == nil || c != nil {
			t.Errorf("New(%s) = %v, %v; want an error", name, c, err)
		}
	}
}

func TestParseAllowCIDRs(t *testing.T) {
	t.Parallel()
	good := map[string][]string{
		"":                                 nil,
		"   ":                              nil,
		"127.0.0.0/8":                      {"127.0.0.0/8"},
		" 10.0.0.0/8 , fd00::/8 ":          {"10.0.0.0/8", "fd00::/8"},
		"192.168.1.10/32,::1/128":          {"192.168.1.10/32", "::1/128"},
		"0.0.0.0/0,::/0":                   {"0.0.0.0/0", "::/0"},
		"::ffff:10.0.0.0/104,\t1.2.3.0/24": {"::ffff:10.0.0.0/104", "1.2.3.0/24"},
	}
	for in, want := range good {
		got, err := ParseAllowCIDRs(in)
		if err != nil {
			t.Errorf("ParseAllowCIDRs(%q): %v", in, err)
			continue
		}
		if fmt.Sprint(got) != fmt.Sprint(want) || (want == nil) != (got == nil) {
			t.Errorf("ParseAllowCIDRs(%q) = %v, want %v", in, got, want)
		}
	}
	bad := map[string]string{
		"10.0.0.1":               `"10.0.0.1"`,
		"10.0.0.0/8,bogus":       `"bogus"`,
		"10.0.0.0/33":            `"10.0.0.0/33"`,
		"10.0.0.1/8":             "did you mean 10.0.0.0/8",
		"10.0.0.0/8,,fd00::/8":   "entry 2 is empty",
		"10.0.0.0/8,":            "entry 2 is empty",
		"fe80::/10%eth0":         `"fe80::/10%eth0"`,
		"10.0.0.0/8 192.168.0.0": `"10.0.0.0/8 192.168.0.0"`,
	}
	for in, want := range bad {
		got, err := ParseAllowCIDRs(in)
		if err == nil || got != nil {
			t.Errorf("ParseAllowCIDRs(%q) = %v, %v; want an error", in, got, err)
			continue
		}
		if !strings.Contains(err.Error(), want) {
			t.Errorf("ParseAllowCIDRs(%q) error %q, want it to mention %s", in, err, want)
		}
	}
}

func TestIsBlockedUnwraps(t *testing.T) {
	t.Parallel()
	be := &BlockedError{Addr: netip.MustParseAddr("10.0.0.1"), Reason: "private"}
	wrapped := &url.Error{Op: "Post", URL: "https://x/", Err: &net.OpError{Op: "dial", Net: "tcp", Err: be}}
	if !IsBlocked(wrapped) || !IsBlocked(fmt.Errorf("deliver: %w", wrapped)) {
		t.Fatal("IsBlocked does not see through url.Error/net.OpError")
	}
	if IsBlocked(nil) || IsBlocked(errors.New("other")) || IsBlocked(&URLError{Reason: "x"}) {
		t.Fatal("IsBlocked true for a non-blocked error")
	}
}

func FuzzCheckURL(f *testing.F) {
	for _, s := range []string{
		"https://hooks.example/hook",
		"https://93.184.215.14:8443/a?b=c",
		"https://[2606:4700::1111]/",
		"https://[::ffff:127.0.0.1]/",
		"https://[fe80::1%25eth0]/",
		"https://user:pw@hooks.example/",
		"https://hooks.example/#x",
		"http://hooks.example/",
		"https://127.1/",
		"https://[64:ff9b::a00:1]:0/",
		"HTTPS://%68ooks.example/",
		"",
	} {
		f.Add(s)
	}
	c, err := New(Config{})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		err := c.CheckURL(raw)
		if err != nil {
			var ue *URLError
			var be *BlockedError
			if !errors.As(err, &ue) && !errors.As(err, &be) {
				t.Fatalf("CheckURL(%q) = %T %v, want *URLError or *BlockedError", raw, err, err)
			}
			return
		}
		u, perr := url.Parse(raw)
		switch {
		case perr != nil:
			t.Fatalf("accepted unparseable %q: %v", raw, perr)
		case u.Scheme != "https":
			t.Fatalf("accepted non-https %q", raw)
		case u.User != nil:
			t.Fatalf("accepted userinfo in %q", raw)
		case strings.Contains(raw, "#") || u.Fragment != "":
			t.Fatalf("accepted fragment in %q", raw)
		case u.Hostname() == "":
			t.Fatalf("accepted %q without a host", raw)
		}
		if a, aerr := netip.ParseAddr(u.Hostname()); aerr == nil {
			if cerr := c.checkAddr(a); cerr != nil {
				t.Fatalf("accepted blocked literal %q: %v", raw, cerr)
			}
		}
	})
}
