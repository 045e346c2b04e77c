// Package servertest starts the one server assembly (internal/server) for
// tests and benchmarks: every test that needs a running server starts it
// here, on a real store of the backend it runs on.
package servertest

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"path/filepath"
	"testing"

	"github.com/agentowl/agentowl/internal/secret"
	"github.com/agentowl/agentowl/internal/server"
	"github.com/agentowl/agentowl/internal/store/storetest"
)

// Config returns the configuration of a test server on backend b: a fresh
// database (a SQLite file in its own directory, or its own PostgreSQL
// schema), a random secret key, a loopback listener on a free port and a
// silent logger. Adjust it (clock, egress, limits), then Start it.
func Config(t testing.TB, b storetest.Backend) server.Config {
	t.Helper()
	cfg := server.Config{
		Listen:    "127.0.0.1:0",
		SecretKey: secret.NewKey(),
		Logger:    slog.New(slog.NewTextHandler(io.Discard, nil)),
		Resolver:  LocalResolver{},
	}
	if url := b.URL(t); server.IsPostgresURL(url) {
		cfg.DataDir, cfg.DatabaseURL = t.TempDir(), url
	} else {
		cfg.DataDir = filepath.Dir(url)
	}
	return cfg
}

// Start starts a server from cfg and closes it when the test ends.
func Start(t testing.TB, cfg server.Config) *server.Server {
	t.Helper()
	s, err := server.Start(context.Background(), cfg)
	if err != nil {
		t.Fatalf("start server: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("close server: %v", err)
		}
	})
	return s
}

// LocalResolver answers "localhost" with the loopback addresses and every
// other name with "no such host", so that a test server never asks a DNS
// server: tests reach receivers on loopback addresses only.
type LocalResolver struct{}

// LookupNetIP implements egress.Resolver.
func (LocalResolver) LookupNetIP(_ context.Context, network, host string) ([]netip.Addr, error) {
	if addr, err := netip.ParseAddr(host); err == nil {
		return []netip.Addr{addr}, nil
	}
	if host == "localhost" {
		if network == "ip6" {
			return []netip.Addr{netip.IPv6Loopback()}, nil
		}
		return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
	}
	return nil, &net.DNSError{Err: "no such host (servertest resolves localhost only)", Name: host, IsNotFound: true}
}
