package conformance

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentowl/agentowl/internal/delivery"
	"github.com/agentowl/agentowl/internal/egress"
	"github.com/agentowl/agentowl/internal/ratelimit"
	"github.com/agentowl/agentowl/internal/server"
	"github.com/agentowl/agentowl/internal/server/servertest"
	"github.com/agentowl/agentowl/internal/store/storetest"
)

// This file starts the real AgentOwl provider in-process (the one server
// assembly, on a real store) for the kit to test, as the other packages'
// tests do.

// agentOwl is a running AgentOwl server.
type agentOwl struct {
	t        testing.TB
	srv      *server.Server
	url      string
	operator string // admin operator token of tenant "default"
	prov     string // a provisioner token
}

type agentOwlOptions struct {
	// caPEM is trusted by the egress (the kit's receiver certificate).
	caPEM []byte
	// retry bounds the delivery engine's backoff.
	retryMin, retryMax time.Duration
	// manyRegistrations lifts the receiver registration limits, for tests
	// that run the asynchronous checks many times a minute.
	manyRegistrations bool
	// memoryDisk keeps SQLite in /dev/shm where there is one.
	memoryDisk bool
}

// startAgentOwl starts AgentOwl on backend b.
func startAgentOwl(t testing.TB, b storetest.Backend, opts agentOwlOptions) *agentOwl {
	t.Helper()
	cfg := servertest.Config(t, b)
	if opts.memoryDisk && cfg.DatabaseURL == "" {
		// The broken-implementation suites start many servers at once;
		// their SQLite files go to memory so that their commits do not
		// queue on one disk. They test the wire, not durability.
		// The copy of the migrated template comes along: migrating anew
		// would be most of a server's start.
		dir, err := os.MkdirTemp("/dev/shm", "aap-conformance-")
		if err == nil {
			t.Cleanup(func() { os.RemoveAll(dir) })
			if err := os.CopyFS(dir, os.DirFS(cfg.DataDir)); err != nil {
				t.Fatal(err)
			}
			cfg.DataDir = dir
		}
	}
	cfg.Egress = egress.Config{AllowCIDRs: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}, ExtraRootsPEM: opts.caPEM}
	if opts.retryMin > 0 {
		cfg.Delivery = delivery.Config{RetryMinDelay: opts.retryMin, RetryMaxDelay: opts.retryMax}
	}
	if opts.manyRegistrations {
		cfg.Approval.RegisterLimit = ratelimit.Limit{Events: 100_000, Per: time.Minute}
		cfg.RegisterPerDestination = ratelimit.Limit{Events: 100_000, Per: time.Minute}
	}
	srv := servertest.Start(t, cfg)
	a := &agentOwl{t: t, srv: srv, url: srv.URL(), operator: srv.BootstrapToken()}
	var tok struct{ Token string }
	a.operatorCall(http.MethodPost, "/provisioner-tokens", map[string]any{"label": "conformance", "days": 0}, &tok)
	if tok.Token == "" {
		t.Fatal("no provisioner token")
	}
	a.prov = tok.Token
	return a
}

// operatorCall calls the operator API of tenant "default".
func (a *agentOwl) operatorCall(method, path string, body, out any) (int, []byte) {
	a.t.Helper()
	data, _ := json.Marshal(body)
	req, err := http.NewRequest(method, a.url+"/api/v1/tenants/default"+path, bytes.NewReader(data))
	if err != nil {
		a.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+a.operator)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		a.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if out != nil && resp.StatusCode < 300 {
		if err := json.Unmarshal(raw, out); err != nil {
			a.t.Fatal(err)
		}
	}
	return resp.StatusCode, raw
}

// decider decides through AgentOwl's operator API (what `agentowl
// approvals decide` does); the command's own tests use the CLI.
func (a *agentOwl) decider() Decider { return &apiDecider{a: a} }

type apiDecider struct {
	a  *agentOwl
	mu sync.Mutex
}

func (d *apiDecider) Decide(ctx context.Context, id string, approve bool) (string, error) {
	body := map[string]any{"decision": "deny"}
	if approve {
		body["decision"] = "approve"
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, d.a.url+"/api/v1/tenants/default/approvals/"+id+"/decision", strings.NewReader(mustJSON(body)))
	if err != nil {
		return "", err
	}
	req.Header.Set("Authorization", "Bearer "+d.a.operator)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode == http.StatusServiceUnavailable {
		// Shed under load before anything was stored: the CLI sends it
		// again after Retry-After, and so does this decider.
		time.Sleep(time.Second)
		return d.Decide(ctx, id, approve)
	}
	out := fmt.Sprintf("operator API decision %s: %d %s", body["decision"], resp.StatusCode, raw)
	if resp.StatusCode >= 300 {
		return out, fmt.Errorf("decision refused: %d", resp.StatusCode)
	}
	return out, nil
}

func mustJSON(v any) string {
	data, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(data)
}

// repoFile is a path in the repository.
func repoFile(rel string) string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", rel)
}

var (
	contractOnce sync.Once
	contract     *Contract
	contractErr  error
)

// testContract is the AAP contract as AgentOwl publishes it.
func testContract(t testing.TB) *Contract {
	t.Helper()
	contractOnce.Do(func() { contract, contractErr = LoadContract(repoFile("api/openapi.yaml")) })
	if contractErr != nil {
		t.Fatal(contractErr)
	}
	return contract
}

// requireStatuses fails t unless exactly the checks in fail failed, none
// of skip... were anything but skipped, and every other check passed.
func requireOutcome(t *testing.T, rep *Report, fail []string, skip []string) {
	t.Helper()
	want := map[string]Status{}
	for _, id := range fail {
		want[id] = Fail
	}
	for _, id := range skip {
		want[id] = Skip
	}
	bad := false
	for _, c := range rep.Checks {
		w, ok := want[c.ID]
		if !ok {
			w = Pass
		}
		if c.Status != w {
			bad = true
			t.Errorf("%s: %s, want %s: %s", c.ID, c.Status, w, c.Reason)
		}
	}
	for id := range want {
		if rep.Result(id) == nil {
			t.Errorf("no check %s in the report", id)
		}
	}
	if bad {
		var b strings.Builder
		WriteText(&b, rep)
		t.Logf("report:\n%.60000s", b.String())
	}
}

// selfSigned returns a TLS configuration for 127.0.0.1 and its
// certificate in PEM, for the kit's receiver.
func selfSigned(t testing.TB) (*tls.Config, []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: "aap conformance kit"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true, IsCA: true, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert := tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
	return &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12},
		pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// asyncSetup is the kit's receiver on a loopback port with its own
// certificate, and AgentOwl options that trust it with short retries.
func asyncSetup(t testing.TB) (*AsyncConfig, agentOwlOptions) {
	t.Helper()
	tlsCfg, caPEM := selfSigned(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return &AsyncConfig{Listener: ln, PublicURL: "https://" + ln.Addr().String(), TLS: tlsCfg, DeliveryWait: 15 * time.Second,
			RetryAfter: 2 * time.Second, Quiet: 1500 * time.Millisecond},
		agentOwlOptions{caPEM: caPEM, retryMin: 100 * time.Millisecond, retryMax: 400 * time.Millisecond}
}

// clientTrusting is a client TLS configuration trusting caPEM.
func clientTrusting(t testing.TB, caPEM []byte) *tls.Config {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		t.Fatal("no certificate")
	}
	return &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
}
