package delivery

import (
	"context"
	"net"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"
)

// AddrResolver resolves host names; *net.Resolver satisfies it.
type AddrResolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// destinations names what an attempt counts against: the URL's host:port
// and every address the host resolves to, so that many host names (or URL
// paths, or instances) pointing at one server share its limits. Lookups
// are cached briefly; they only choose limiter keys — the egress client
// resolves and checks again when it dials.
type destinations struct {
	resolver AddrResolver
	mu       sync.Mutex
	cache    map[string]cachedAddrs
}

type cachedAddrs struct {
	addrs   []string
	expires time.Time
}

const addrCacheTTL = 10 * time.Second

func (d *destinations) keys(ctx context.Context, raw string, now time.Time) []string {
	u, err := url.Parse(raw)
	if err != nil {
		return []string{raw}
	}
	keys := []string{"host:" + strings.ToLower(u.Host)}
	host := u.Hostname()
	if a, err := netip.ParseAddr(host); err == nil {
		return append(keys, "addr:"+a.Unmap().String())
	}
	d.mu.Lock()
	c, ok := d.cache[host]
	d.mu.Unlock()
	if !ok || now.After(c.expires) {
		lookup, cancel := context.WithTimeout(ctx, 2*time.Second)
		addrs, err := d.resolver.LookupNetIP(lookup, "ip", host)
		cancel()
		if err != nil {
			return keys // the attempt will fail at dial time and be retried
		}
		c = cachedAddrs{expires: now.Add(addrCacheTTL)}
		for _, a := range addrs {
			c.addrs = append(c.addrs, "addr:"+a.Unmap().String())
		}
		slices.Sort(c.addrs)
		c.addrs = slices.Compact(c.addrs)
		d.mu.Lock()
		if len(d.cache) > 10_000 {
			d.cache = map[string]cachedAddrs{}
		}
		d.cache[host] = c
		d.mu.Unlock()
	}
	return append(keys, c.addrs...)
}

var _ AddrResolver = net.DefaultResolver
