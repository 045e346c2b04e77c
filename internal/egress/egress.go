// Package egress is the one HTTP client the server uses for every outbound
// connection: webhook verification, deliveries and their retries.
//
// It enforces the AAP abuse-prevention rules before and during every
// connection: HTTPS only, no userinfo or fragments, no redirects followed,
// no proxy, and no connection to loopback, private, link-local, cloud
// metadata or other non-public addresses (IPv4 and IPv6, including mapped,
// NAT64 and 6to4 forms). Host names are resolved once per connection, every
// resolved address is checked, and the connection is made to the literal
// address that passed, so a DNS answer that changes between check and
// connect cannot bypass the check. The connect address is checked once more
// in net.Dialer.Control by a code.dny.dev/ssrf Guardian.
package egress

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"time"

	"code.dny.dev/ssrf"
)

// Defaults applied by New when the corresponding Config field is zero.
const (
	// DefaultMaxResponseBytes is the default bound on a response body.
	DefaultMaxResponseBytes = 64 << 10
	// DefaultMaxIdleConnsPerHost is the default keep-alive pool size per
	// destination host.
	DefaultMaxIdleConnsPerHost = 64
)

// Fixed transport limits. They protect the server, not a receiver, so they
// are not operator settings.
const (
	dialTimeout            = 10 * time.Second
	tlsHandshakeTimeout    = 10 * time.Second
	idleConnTimeout        = 90 * time.Second
	keepAlive              = 30 * time.Second
	maxResponseHeaderBytes = 64 << 10
)

// ErrResponseTooLarge is returned by a response Body's Read once the body
// has exceeded Config.MaxResponseBytes. The bytes up to the limit have been
// returned before it, so a caller that only records a prefix may ignore it.
var ErrResponseTooLarge = errors.New("egress: response body exceeds the configured limit")

// Resolver resolves host names to addresses. *net.Resolver satisfies it.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// Config configures the client. The zero value is safe defaults: nothing
// non-public is reachable, system roots only, 64 KiB response bodies.
type Config struct {
	// AllowCIDRs exempts these ranges from the address check, for tests and
	// internal receivers. IPv4-mapped IPv6 prefixes are treated as their
	// IPv4 equivalents. Filled from AGENTOWL_EGRESS_ALLOW_CIDRS (see
	// ParseAllowCIDRs). Defaults to none.
	AllowCIDRs []netip.Prefix
	// ExtraRootsPEM holds PEM-encoded CA certificates that are added to the
	// system root pool, for receivers behind a private CA. Filled from the
	// file named by AGENTOWL_EGRESS_CA_FILE. Defaults to none (system roots
	// only).
	ExtraRootsPEM []byte
	// Resolver resolves host names. Defaults to net.DefaultResolver; tests
	// stub it.
	Resolver Resolver
	// MaxResponseBytes bounds how much of a response body callers may read.
	// Defaults to 64 KiB.
	MaxResponseBytes int64
	// MaxIdleConnsPerHost bounds the keep-alive pool per destination; reuse
	// per destination matters for delivery throughput. Defaults to 64.
	MaxIdleConnsPerHost int
}

func (cfg Config) validate() error {
	if cfg.MaxResponseBytes < 0 {
		return fmt.Errorf("egress: MaxResponseBytes must not be negative, got %d", cfg.MaxResponseBytes)
	}
	if cfg.MaxIdleConnsPerHost < 0 {
		return fmt.Errorf("egress: MaxIdleConnsPerHost must not be negative, got %d", cfg.MaxIdleConnsPerHost)
	}
	for _, p := range cfg.AllowCIDRs {
		if !p.IsValid() {
			return errors.New("egress: AllowCIDRs contains an invalid prefix")
		}
	}
	return nil
}

// ParseAllowCIDRs parses a comma-separated list of CIDR prefixes such as
// "127.0.0.0/8, fd00::/8", the format of AGENTOWL_EGRESS_ALLOW_CIDRS.
// Spaces around entries are ignored and an empty or blank string yields nil.
// A bare address is rejected so that an operator cannot mistake "10.0.0.1"
// for a range; an address with host bits set ("10.0.0.1/8") is rejected
// because it usually means a typo.
func ParseAllowCIDRs(s string) ([]netip.Prefix, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var out []netip.Prefix
	for i, entry := range strings.Split(s, ",") {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			return nil, fmt.Errorf("egress: allow-list entry %d is empty", i+1)
		}
		p, err := netip.ParsePrefix(entry)
		if err != nil {
			return nil, fmt.Errorf("egress: allow-list entry %d %q is not a CIDR prefix (want e.g. 10.0.0.0/8 or fd00::/8): %v", i+1, entry, err)
		}
		if p.Masked() != p {
			return nil, fmt.Errorf("egress: allow-list entry %d %q has host bits set (did you mean %s?)", i+1, entry, p.Masked())
		}
		out = append(out, p)
	}
	return out, nil
}

// Client is the SSRF-safe HTTP client. It is safe for concurrent use; create
// one per process so connections are pooled.
type Client struct {
	http     *http.Client
	tr       *http.Transport
	guard    *ssrf.Guardian
	resolver Resolver
	maxBody  int64
	// dial connects to a checked literal address. It is the guarded
	// net.Dialer in production; tests replace it so that nothing leaves the
	// machine.
	dial func(ctx context.Context, network, address string) (net.Conn, error)
}

// New returns a Client for cfg. It fails if cfg is invalid or ExtraRootsPEM
// holds anything but well-formed certificates.
func New(cfg Config) (*Client, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	tlsCfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if len(cfg.ExtraRootsPEM) > 0 {
		pool, err := rootPool(cfg.ExtraRootsPEM)
		if err != nil {
			return nil, err
		}
		tlsCfg.RootCAs = pool
	}

	var allow4, allow6 []netip.Prefix
	for _, p := range cfg.AllowCIDRs {
		p = p.Masked()
		// Addresses are unmapped before they are checked, so a mapped
		// prefix must become its IPv4 form to ever match.
		if p.Addr().Is4In6() && p.Bits() >= 96 {
			p = netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96)
		}
		if p.Addr().Is4() {
			allow4 = append(allow4, p)
		} else {
			allow6 = append(allow6, p)
		}
	}

	c := &Client{
		guard: ssrf.New(
			ssrf.WithAnyPort(),
			ssrf.WithNetworks("tcp4", "tcp6"),
			ssrf.WithAllowedV4Prefixes(allow4...),
			ssrf.WithAllowedV6Prefixes(allow6...),
		),
		resolver: cfg.Resolver,
		maxBody:  cfg.MaxResponseBytes,
	}
	if c.resolver == nil {
		c.resolver = net.DefaultResolver
	}
	if c.maxBody == 0 {
		c.maxBody = DefaultMaxResponseBytes
	}
	perHost := cfg.MaxIdleConnsPerHost
	if perHost == 0 {
		perHost = DefaultMaxIdleConnsPerHost
	}

	dialer := &net.Dialer{Timeout: dialTimeout, KeepAlive: keepAlive, Control: c.control}
	c.dial = dialer.DialContext
	c.tr = &http.Transport{
		Proxy:                  nil,
		DialContext:            c.dialContext,
		TLSClientConfig:        tlsCfg,
		TLSHandshakeTimeout:    tlsHandshakeTimeout,
		ForceAttemptHTTP2:      true,
		MaxIdleConnsPerHost:    perHost,
		IdleConnTimeout:        idleConnTimeout,
		ExpectContinueTimeout:  time.Second,
		MaxResponseHeaderBytes: maxResponseHeaderBytes,
	}
	c.http = &http.Client{
		Transport: c.tr,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
	return c, nil
}

// rootPool returns the system roots plus every certificate in extra. Any
// block that is not a parseable CERTIFICATE is an error, so that a
// misconfigured CA file fails at start rather than as TLS errors later.
func rootPool(extra []byte) (*x509.CertPool, error) {
	pool, err := x509.SystemCertPool()
	if err != nil || pool == nil {
		pool = x509.NewCertPool()
	}
	rest := extra
	n := 0
	for {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		n++
		if block.Type != "CERTIFICATE" {
			return nil, fmt.Errorf("egress: extra root PEM block %d is %q, want CERTIFICATE", n, block.Type)
		}
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("egress: extra root PEM block %d: %v", n, err)
		}
		pool.AddCert(cert)
	}
	if n == 0 {
		return nil, errors.New("egress: extra root PEM contains no certificates")
	}
	if len(strings.TrimSpace(string(rest))) > 0 {
		return nil, fmt.Errorf("egress: extra root PEM has unparseable data after certificate %d", n)
	}
	return pool, nil
}

// Do sends req and returns the response. It refuses a URL that CheckURL
// refuses, never follows redirects (a 3xx is returned as the response), and
// wraps the response Body so reading stops with ErrResponseTooLarge after
// MaxResponseBytes. Errors from a blocked destination satisfy IsBlocked.
// Deadlines come from req's context.
func (c *Client) Do(req *http.Request) (*http.Response, error) {
	if req == nil || req.URL == nil {
		return nil, &URLError{Reason: "request has no URL"}
	}
	if err := c.checkParsed(req.URL); err != nil {
		return nil, err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, err
	}
	resp.Body = &limitedBody{rc: resp.Body, n: c.maxBody}
	return resp, nil
}

// CloseIdleConnections closes pooled keep-alive connections, for shutdown.
func (c *Client) CloseIdleConnections() { c.tr.CloseIdleConnections() }

// CheckURL reports whether raw is an acceptable destination without
// connecting: https, a host, no userinfo, no fragment, a valid port, and, if
// the host is an IP literal, an address that passes the address check. Host
// names are not resolved here; Do checks their addresses at connect time.
// It returns a *URLError or a *BlockedError.
func (c *Client) CheckURL(raw string) error {
	if strings.Contains(raw, "#") {
		return &URLError{URL: redact(raw), Reason: "URL must not contain a fragment"}
	}
	u, err := url.Parse(raw)
	if err != nil {
		return &URLError{URL: redact(raw), Reason: "URL does not parse"}
	}
	return c.checkParsed(u)
}

func (c *Client) checkParsed(u *url.URL) error {
	bad := func(reason string) error { return &URLError{URL: u.Redacted(), Reason: reason} }
	switch {
	case u.Scheme != "https":
		return bad("URL must use https")
	case u.Opaque != "":
		return bad("URL must be absolute (https://host/...)")
	case u.User != nil:
		return bad("URL must not contain userinfo")
	case u.Fragment != "" || u.RawFragment != "":
		return bad("URL must not contain a fragment")
	}
	host := u.Hostname()
	if host == "" {
		return bad("URL has no host")
	}
	if p := u.Port(); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 65535 {
			return bad("URL port must be between 1 and 65535")
		}
	}
	if addr, err := netip.ParseAddr(host); err == nil {
		return c.checkAddr(addr)
	}
	if strings.ContainsAny(host, "[]%:") {
		return bad("URL host is not a valid host name or IP address")
	}
	// Resolvers (and browsers) read hosts like "127.1", "0x7f.1" or
	// "2130706433" as IPv4 addresses; refuse them as ambiguous.
	labels := strings.Split(strings.TrimSuffix(host, "."), ".")
	if last := labels[len(labels)-1]; last != "" && isNumericLabel(last) {
		return bad("URL host looks like a non-canonical IPv4 address")
	}
	return nil
}

func isNumericLabel(s string) bool {
	if t := strings.ToLower(s); strings.HasPrefix(t, "0x") {
		s = t[2:]
		for _, r := range s {
			if !strings.ContainsRune("0123456789abcdef", r) {
				return false
			}
		}
		return true
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

// checkAddr is the address check shared by CheckURL and the dialer. The
// address is unmapped first: net.Resolver.LookupNetIP returns IPv4 answers
// as IPv4-mapped IPv6, which the Guardian would otherwise always reject, and
// an IPv4-mapped address is dialed as the IPv4 address it maps.
func (c *Client) checkAddr(addr netip.Addr) error {
	if addr.Zone() != "" {
		return &BlockedError{Addr: addr, Reason: "scoped address (has a zone)"}
	}
	a := addr.Unmap()
	if err := c.guard.SafeAddr(a); err != nil {
		return blocked(addr)
	}
	// An operator may allow NAT64 for an IPv6-only network; the embedded
	// IPv4 address must still pass.
	if nat64.Contains(a) {
		if err := c.guard.SafeAddr(embeddedV4(a, 12)); err != nil {
			return blocked(addr)
		}
	}
	return nil
}

// control is the net.Dialer.Control hook: the last check, on the address
// the socket is about to connect to.
func (c *Client) control(network, address string, _ syscall.RawConn) error {
	err := c.guard.Safe(network, address, nil)
	if err == nil {
		return nil
	}
	if errors.Is(err, ssrf.ErrProhibitedIP) {
		if ap, perr := netip.ParseAddrPort(address); perr == nil {
			return blocked(ap.Addr())
		}
	}
	return fmt.Errorf("egress: refused to connect: %w", err)
}

// dialContext resolves the host once, checks every answer, and dials the
// allowed ones in order as literal addresses.
func (c *Client) dialContext(ctx context.Context, network, address string) (net.Conn, error) {
	var lookupNet string
	switch network {
	case "tcp":
		lookupNet = "ip"
	case "tcp4":
		lookupNet = "ip4"
	case "tcp6":
		lookupNet = "ip6"
	default:
		return nil, fmt.Errorf("egress: refused network %q", network)
	}
	host, portStr, err := net.SplitHostPort(address)
	if err != nil {
		return nil, fmt.Errorf("egress: bad dial address %q: %w", address, err)
	}
	port, err := strconv.ParseUint(portStr, 10, 16)
	if err != nil || port == 0 {
		return nil, fmt.Errorf("egress: bad port in dial address %q", address)
	}

	var addrs []netip.Addr
	if a, err := netip.ParseAddr(host); err == nil {
		addrs = []netip.Addr{a}
	} else {
		addrs, err = c.resolver.LookupNetIP(ctx, lookupNet, host)
		if err != nil {
			return nil, err
		}
		if len(addrs) == 0 {
			return nil, &net.DNSError{Err: "no addresses", Name: host, IsNotFound: true}
		}
	}

	var firstBlocked error
	var dialErrs []error
	for _, a := range addrs {
		if err := c.checkAddr(a); err != nil {
			if firstBlocked == nil {
				firstBlocked = err
			}
			continue
		}
		target := netip.AddrPortFrom(a.Unmap(), uint16(port)).String()
		conn, err := c.dial(ctx, network, target)
		if err == nil {
			return conn, nil
		}
		dialErrs = append(dialErrs, err)
		if ctx.Err() != nil {
			break
		}
	}
	if len(dialErrs) > 0 {
		return nil, errors.Join(dialErrs...)
	}
	return nil, firstBlocked
}

// URLError reports a URL refused for its syntax: not https, no host,
// userinfo, a fragment, a bad port.
type URLError struct {
	// URL is the refused URL with any password redacted.
	URL string
	// Reason says, for a person, what is wrong with it.
	Reason string
}

// Error implements error.
func (e *URLError) Error() string {
	if e.URL == "" {
		return "egress: refused URL: " + e.Reason
	}
	return fmt.Sprintf("egress: refused URL %q: %s", e.URL, e.Reason)
}

// BlockedError reports a destination address that the address check
// refused.
type BlockedError struct {
	// Addr is the refused address, as given or resolved.
	Addr netip.Addr
	// Reason names the kind of address: "loopback", "private",
	// "link-local", "cloud metadata", ...
	Reason string
}

// Error implements error.
func (e *BlockedError) Error() string {
	return fmt.Sprintf("egress: destination address %s is not allowed (%s)", e.Addr, e.Reason)
}

// IsBlocked reports whether err is, or wraps (for example inside a
// *url.Error or *net.OpError), a *BlockedError.
func IsBlocked(err error) bool {
	var be *BlockedError
	return errors.As(err, &be)
}

func redact(raw string) string {
	if u, err := url.Parse(raw); err == nil {
		return u.Redacted()
	}
	if i := strings.LastIndex(raw, "@"); i >= 0 {
		if j := strings.Index(raw, "://"); j >= 0 && j < i {
			return raw[:j+3] + "REDACTED" + raw[i:]
		}
	}
	return raw
}

// limitedBody stops a response body after n bytes with ErrResponseTooLarge.
type limitedBody struct {
	rc  io.ReadCloser
	n   int64 // bytes still allowed
	err error // sticky
}

func (b *limitedBody) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	if len(p) == 0 {
		return 0, nil
	}
	// Read one byte past the limit to tell "exactly n" from "more than n".
	if int64(len(p)) > b.n+1 {
		p = p[:b.n+1]
	}
	n, err := b.rc.Read(p)
	if int64(n) <= b.n {
		b.n -= int64(n)
		b.err = err
		return n, err
	}
	n = int(b.n)
	b.n = 0
	b.err = ErrResponseTooLarge
	return n, b.err
}

func (b *limitedBody) Close() error { return b.rc.Close() }

var (
	nat64      = netip.MustParsePrefix("64:ff9b::/96")
	nat64Local = netip.MustParsePrefix("64:ff9b:1::/48")
	sixToFour  = netip.MustParsePrefix("2002::/16")
	teredo     = netip.MustParsePrefix("2001::/32")
	doc6       = []netip.Prefix{netip.MustParsePrefix("2001:db8::/32"), netip.MustParsePrefix("3fff::/20")}
	ietf6      = netip.MustParsePrefix("2001::/23")
	v4compat   = netip.MustParsePrefix("::/96")
	global6    = netip.MustParsePrefix("2000::/3")

	// Well-known instance metadata endpoints: AWS/GCP/Azure/OpenStack,
	// AWS ECS task metadata, AWS IPv6, Alibaba Cloud, Oracle Cloud.
	metadataAddrs = []netip.Addr{
		netip.MustParseAddr("169.254.169.254"),
		netip.MustParseAddr("169.254.170.2"),
		netip.MustParseAddr("fd00:ec2::254"),
		netip.MustParseAddr("100.100.100.200"),
		netip.MustParseAddr("192.0.0.192"),
	}

	reasons4 = []struct {
		p      netip.Prefix
		reason string
	}{
		{netip.MustParsePrefix("0.0.0.0/8"), "this network (0.0.0.0/8)"},
		{netip.MustParsePrefix("255.255.255.255/32"), "broadcast"},
		{netip.MustParsePrefix("100.64.0.0/10"), "shared address space (CGNAT)"},
		{netip.MustParsePrefix("198.18.0.0/15"), "benchmarking"},
		{netip.MustParsePrefix("192.0.2.0/24"), "documentation"},
		{netip.MustParsePrefix("198.51.100.0/24"), "documentation"},
		{netip.MustParsePrefix("203.0.113.0/24"), "documentation"},
		{netip.MustParsePrefix("240.0.0.0/4"), "reserved"},
	}
)

func embeddedV4(a netip.Addr, at int) netip.Addr {
	b := a.As16()
	return netip.AddrFrom4([4]byte(b[at : at+4]))
}

// blocked builds the BlockedError for addr with a human reason. The
// decision is the Guardian's; this only names it.
func blocked(addr netip.Addr) *BlockedError {
	a := addr.Unmap()
	r := reason(a)
	if addr.Is4In6() {
		r += " (IPv4-mapped)"
	}
	return &BlockedError{Addr: addr, Reason: r}
}

func reason(a netip.Addr) string {
	for _, m := range metadataAddrs {
		if a == m {
			return "cloud metadata"
		}
	}
	switch {
	case a.IsUnspecified():
		return "unspecified"
	case a.IsLoopback():
		return "loopback"
	case a.IsMulticast():
		return "multicast"
	case a.IsLinkLocalUnicast():
		return "link-local"
	case a.IsPrivate():
		return "private"
	}
	if a.Is4() {
		for _, r := range reasons4 {
			if r.p.Contains(a) {
				return r.reason
			}
		}
		return "special-purpose (IANA)"
	}
	switch {
	case nat64.Contains(a):
		return "NAT64 (embeds " + embeddedV4(a, 12).String() + ")"
	case nat64Local.Contains(a):
		return "local-use NAT64"
	case sixToFour.Contains(a):
		return "6to4 (embeds " + embeddedV4(a, 2).String() + ")"
	case doc6[0].Contains(a) || doc6[1].Contains(a):
		return "documentation"
	case teredo.Contains(a):
		return "Teredo"
	case ietf6.Contains(a):
		return "IETF protocol assignment"
	case v4compat.Contains(a):
		return "IPv4-compatible IPv6"
	case !global6.Contains(a):
		return "not global unicast"
	}
	return "special-purpose (IANA)"
}
