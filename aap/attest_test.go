package aap_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentowl/agentowl/aap"
	"github.com/agentowl/agentowl/attest"
	"github.com/agentowl/agentowl/internal/clocktest"
)

// testIssuer is the issuer of the fake provider's attestations.
const testIssuer = "https://owl.example.test"

// signingKey is an attestation key of a test provider.
type signingKey struct {
	kid  string
	priv ed25519.PrivateKey
	pub  ed25519.PublicKey
}

func newSigningKey(t testing.TB) signingKey {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	must(t, err)
	return signingKey{kid: attest.KeyID(pub), priv: priv, pub: pub}
}

func (k signingKey) sign(t testing.TB, doc *attest.Document) string {
	t.Helper()
	tok, err := attest.Sign(doc, k.kid, k.priv)
	must(t, err)
	return tok
}

// jwksSite publishes a key set over HTTP, as a provider's
// /.well-known/agentowl/jwks.json, and counts the fetches.
type jwksSite struct {
	srv     *httptest.Server
	mu      sync.Mutex
	keys    []signingKey
	fetches atomic.Int64
}

func newJWKSSite(t testing.TB, keys ...signingKey) *jwksSite {
	j := &jwksSite{keys: keys}
	j.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		j.fetches.Add(1)
		j.mu.Lock()
		set := attest.JWKS{Keys: []attest.JWK{}}
		for _, k := range j.keys {
			set.Keys = append(set.Keys, attest.PublicJWK(k.kid, k.pub))
		}
		j.mu.Unlock()
		w.Header().Set("Content-Type", "application/jwk-set+json")
		_ = json.NewEncoder(w).Encode(set)
	}))
	t.Cleanup(j.srv.Close)
	return j
}

func (j *jwksSite) publish(k signingKey) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.keys = append(j.keys, k)
}

func (j *jwksSite) url() string { return j.srv.URL + "/.well-known/agentowl/jwks.json" }

// attestedDoc is the attestation a correct provider signs for r's
// approval, for arguments args.
func attestedDoc(r aap.Request, args json.RawMessage) *attest.Document {
	argsDigest, err := attest.ArgumentsDigest(args)
	if err != nil {
		panic(err)
	}
	digest, _ := attest.ToolActionDigest(r.Tool, args)
	return &attest.Document{Version: attest.Version, Issuer: testIssuer, ID: "atst_" + r.ID, Tenant: "ten_test",
		Subject:   attest.Subject{Kind: attest.SubjectAAPRequest, RequestID: r.ID},
		Action:    attest.Action{Tool: r.Tool, ArgumentsSHA256: argsDigest, Digest: digest},
		Decision:  attest.Approved,
		DecidedBy: attest.DecidedBy{Kind: attest.ByOperator, Name: "alice"},
		DecidedAt: r.Decision.DecidedAt, ExpiresAt: *r.Decision.ExpiresAt}
}

// attestingProvider is the fake provider with the attestation route: attest
// answers it for a request as it is now.
type attestingProvider struct {
	*fakeProvider
	mu     sync.Mutex
	attest func(r aap.Request) (string, error)
	asked  int
}

func (p *attestingProvider) RequestAttestation(_ context.Context, id string) (string, error) {
	r, err := p.get(id)
	if err != nil {
		return "", err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.asked++
	if r.Status != aap.StatusApproved && r.Status != aap.StatusDenied {
		return "", &aap.APIError{StatusCode: 404, Code: "not_found"}
	}
	return p.attest(*r)
}

func (p *attestingProvider) answer(f func(r aap.Request) (string, error)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.attest = f
}

// attestEnv is an Adapter with an AttestationCheck over a real SQLite store,
// the fake provider (with attestations signed by key) and a JWKS site.
type attestEnv struct {
	*adapterEnv
	prov *attestingProvider
	key  signingKey
	jwks *jwksSite
}

func newAttestEnv(t *testing.T) *attestEnv {
	e := &attestEnv{adapterEnv: newAdapterEnv(t), key: newSigningKey(t)}
	e.jwks = newJWKSSite(t, e.key)
	e.prov = &attestingProvider{fakeProvider: e.fake}
	// By default the provider attests exactly what it approved.
	e.prov.attest = func(r aap.Request) (string, error) { return e.key.sign(t, attestedDoc(r, r.Arguments)), nil }
	e.a = e.checked(aap.AttestationCheck{JWKSURL: e.jwks.url(), Issuer: testIssuer}, nil)
	return e
}

// checked is an adapter with check whose tool records what it saw.
func (e *attestEnv) checked(check aap.AttestationCheck, saw func(ctx context.Context, x *aap.Execution)) *aap.Adapter {
	cfg := e.config(e.prov, e.store, saw)
	cfg.Attestations = &check
	a, err := aap.NewAdapter(cfg)
	must(e.t, err)
	return a
}

// submitApproved submits refund under key, approves it for ten minutes and
// resumes it.
func (e *attestEnv) submitApproved(key string) (*aap.Execution, error) {
	e.t.Helper()
	x, err := e.a.Submit(context.Background(), key, refund)
	must(e.t, err)
	if x.State != aap.ExecWaiting {
		e.t.Fatalf("submitted: %+v", x)
	}
	e.fake.decide(x.RequestID, aap.StatusApproved, 10*time.Minute)
	return e.a.Resume(context.Background(), x.RequestID)
}

// An approval whose attestation verifies runs, and the tool gets the token
// and its document (to pass on to the executing service).
func TestAdapterRunsWithVerifiedAttestation(t *testing.T) {
	t.Parallel()
	e := newAttestEnv(t)
	var token string
	var doc *attest.Document
	e.a = e.checked(aap.AttestationCheck{JWKSURL: e.jwks.url(), Issuer: testIssuer}, func(ctx context.Context, _ *aap.Execution) {
		var ok bool
		if token, doc, ok = aap.VerifiedAttestation(ctx); !ok {
			t.Error("the tool ran without the verified attestation in its context")
		}
	})
	x, err := e.submitApproved("k1")
	must(t, err)
	if x.State != aap.ExecFinished || e.ran("k1") != 1 {
		t.Fatalf("execution %+v ran %d times", x, e.ran("k1"))
	}
	if doc == nil || doc.Subject.RequestID != x.RequestID || doc.Action.Tool != refund.Tool {
		t.Fatalf("the tool saw document %+v", doc)
	}
	// What the tool got verifies, by anyone holding the published keys,
	// against the arguments that ran.
	keys, err := attest.ParseJWKS(mustGet(t, e.jwks.url()))
	must(t, err)
	if _, err := attest.Verify(token, keys, attest.Expectation{Issuer: testIssuer,
		Subject: attest.Subject{Kind: attest.SubjectAAPRequest, RequestID: x.RequestID}, Tool: refund.Tool,
		Arguments: x.Call.Arguments, Now: e.clock.Now}); err != nil {
		t.Fatalf("the token handed to the tool does not verify: %v", err)
	}
}

func mustGet(t testing.TB, url string) []byte {
	t.Helper()
	resp, err := http.Get(url)
	must(t, err)
	defer resp.Body.Close()
	var raw json.RawMessage
	must(t, json.NewDecoder(resp.Body).Decode(&raw))
	return raw
}

// Every way an attestation can fail to prove this approval of this call:
// the call never runs, its execution ends not_run with a reason the harness
// tells apart from a denial, and nothing is retried.
func TestAdapterRefusesUnverifiedAttestation(t *testing.T) {
	t.Parallel()
	other := newSigningKey(t)
	// signedEdited is the provider's true attestation changed by edit before
	// it is signed with the provider's key.
	signedEdited := func(edit func(e *attestEnv, d *attest.Document)) func(e *attestEnv, r aap.Request) (string, error) {
		return func(e *attestEnv, r aap.Request) (string, error) {
			d := attestedDoc(r, r.Arguments)
			edit(e, d)
			return e.key.sign(t, d), nil
		}
	}
	cases := []struct {
		what   string
		attest func(e *attestEnv, r aap.Request) (string, error)
		reason string
	}{
		{"an attestation for other arguments", func(e *attestEnv, r aap.Request) (string, error) {
			// Signed by the provider's real key: the provider approved a call
			// but attested to another amount.
			return e.key.sign(t, attestedDoc(r, json.RawMessage(`{"payment_id":"payment_123","amount":490000,"currency":"GBP"}`))), nil
		}, "wrong action"},
		{"an attestation for another tool", func(e *attestEnv, r aap.Request) (string, error) {
			r.Tool = "delete_customer"
			return e.key.sign(t, attestedDoc(r, r.Arguments)), nil
		}, "wrong action"},
		{"a forged signature (another key, the provider's kid)", func(e *attestEnv, r aap.Request) (string, error) {
			forged := other
			forged.kid = e.key.kid
			return forged.sign(t, attestedDoc(r, r.Arguments)), nil
		}, "bad signature"},
		{"a payload changed after signing", func(e *attestEnv, r aap.Request) (string, error) {
			good := e.key.sign(t, attestedDoc(r, r.Arguments))
			parts := strings.Split(good, ".")
			bad := e.key.sign(t, attestedDoc(r, json.RawMessage(`{"amount":1}`)))
			return parts[0] + "." + strings.Split(bad, ".")[1] + "." + parts[2], nil
		}, "bad signature"},
		{"an expired attestation", signedEdited(func(e *attestEnv, d *attest.Document) {
			d.ExpiresAt = e.clock.Now() // the approval itself is valid for ten more minutes
		}), "expired"},
		{"no attestation (404)", func(*attestEnv, aap.Request) (string, error) {
			return "", &aap.APIError{StatusCode: 404, Code: "not_found"}
		}, "has no attestation"},
		{"another request's attestation", func(e *attestEnv, r aap.Request) (string, error) {
			r.ID = "0f8a3b1c-0000-4000-8000-000000000001"
			return e.key.sign(t, attestedDoc(r, r.Arguments)), nil
		}, "wrong subject"},
		{"another issuer", signedEdited(func(_ *attestEnv, d *attest.Document) {
			d.Issuer = "https://evil.example.test"
		}), "wrong issuer"},
		{"a denial's attestation", signedEdited(func(_ *attestEnv, d *attest.Document) {
			d.Decision = attest.Denied
		}), "wrong decision"},
		{"not a JWS", func(*attestEnv, aap.Request) (string, error) { return "approved, trust me", nil }, "malformed"},
	}
	for _, c := range cases {
		t.Run(c.what, func(t *testing.T) {
			t.Parallel()
			e := newAttestEnv(t)
			e.prov.answer(func(r aap.Request) (string, error) { return c.attest(e, r) })
			x, err := e.submitApproved("k1")
			must(t, err)
			expectState(t, x, aap.ExecNotRun, aap.ReasonAttestationRefused)
			if !strings.Contains(x.Reason, c.reason) || !x.AttestationRefused() {
				t.Fatalf("reason %q, want %q (AttestationRefused %v)", x.Reason, c.reason, x.AttestationRefused())
			}
			if e.ran("k1") != 0 {
				t.Fatal("the tool ran")
			}
			// Durably: a restarted harness reads the same outcome and runs
			// nothing; another resume does not ask again.
			saved, err := e.checked(aap.AttestationCheck{JWKSURL: e.jwks.url(), Issuer: testIssuer}, nil).Execution(context.Background(), "k1")
			must(t, err)
			if !saved.AttestationRefused() || saved.Reason != x.Reason {
				t.Fatalf("saved execution %+v", saved)
			}
			asked := e.prov.asked
			if again, err := e.a.Resume(context.Background(), x.RequestID); err != nil || again.State != aap.ExecNotRun || e.prov.asked != asked {
				t.Fatalf("resumed again: %+v, %v (asked %d → %d)", again, err, asked, e.prov.asked)
			}
			// A denial is not an attestation refusal.
			if (&aap.Execution{State: aap.ExecNotRun, Reason: "denied: no"}).AttestationRefused() {
				t.Fatal("a denial reads as an attestation refusal")
			}
		})
	}
}

// A policy approval at creation is verified too, before the started mark;
// a refusal keeps the request ID.
func TestAdapterVerifiesApprovalAtCreation(t *testing.T) {
	t.Parallel()
	for _, good := range []bool{true, false} {
		e := newAttestEnv(t)
		e.fake.onCreate = func(r *aap.Request) error {
			if r.Status == aap.StatusPending {
				e.fake.decide(r.ID, aap.StatusApproved, 10*time.Minute)
			}
			return nil
		}
		if !good {
			e.prov.answer(func(r aap.Request) (string, error) {
				return e.key.sign(t, attestedDoc(r, json.RawMessage(`{"amount":1}`))), nil
			})
		}
		x, err := e.a.Submit(context.Background(), "k1", refund)
		must(t, err)
		if good && (x.State != aap.ExecFinished || e.ran("k1") != 1) {
			t.Fatalf("verified approval at creation: %+v ran %d", x, e.ran("k1"))
		}
		if !good {
			if !x.AttestationRefused() || x.RequestID == "" || e.ran("k1") != 0 {
				t.Fatalf("refused approval at creation: %+v ran %d", x, e.ran("k1"))
			}
			saved, err := e.store.GetExecution(context.Background(), "k1")
			must(t, err)
			if saved.RequestID != x.RequestID || !saved.AttestationRefused() {
				t.Fatalf("saved %+v", saved)
			}
		}
	}
}

// Failures a retry can fix leave the execution waiting and the tool not
// run: the attestation route unavailable, the key set unreachable, and a
// key the cached set does not hold (rotated in), which is fetched again
// (at most every 30 seconds) and then verifies.
func TestAdapterRetriesAttestationFailures(t *testing.T) {
	t.Parallel()
	e := newAttestEnv(t)
	ctx := context.Background()
	e.prov.answer(func(aap.Request) (string, error) {
		return "", &aap.APIError{StatusCode: 503, Code: "unavailable", RetryAfter: time.Second}
	})
	x, err := e.a.Submit(ctx, "k1", refund)
	must(t, err)
	e.fake.decide(x.RequestID, aap.StatusApproved, 10*time.Minute)
	x, err = e.a.Resume(ctx, x.RequestID)
	var ae *aap.APIError
	if !errors.As(err, &ae) || ae.StatusCode != 503 || x.State != aap.ExecWaiting || e.ran("k1") != 0 {
		t.Fatalf("attestation route unavailable: %+v, %v", x, err)
	}

	// The key set is unreachable.
	unreachable := e.checked(aap.AttestationCheck{JWKSURL: "http://127.0.0.1:1/jwks.json", Issuer: testIssuer}, nil)
	e.prov.answer(func(r aap.Request) (string, error) { return e.key.sign(t, attestedDoc(r, r.Arguments)), nil })
	x, err = unreachable.Resume(ctx, x.RequestID)
	if err == nil || x.State != aap.ExecWaiting || e.ran("k1") != 0 {
		t.Fatalf("key set unreachable: %+v, %v", x, err)
	}

	// The provider rotated to a key the adapter's cached set lacks.
	x, err = e.a.Resume(ctx, x.RequestID) // fetches the set (old key only) … and succeeds with the old key
	must(t, err)
	if x.State != aap.ExecFinished || e.jwks.fetches.Load() != 1 {
		t.Fatalf("verified with the old key: %+v, %d fetches", x, e.jwks.fetches.Load())
	}
	rotated := newSigningKey(t)
	e.prov.answer(func(r aap.Request) (string, error) { return rotated.sign(t, attestedDoc(r, r.Arguments)), nil })
	y, err := e.a.Submit(ctx, "k2", refund)
	must(t, err)
	e.fake.decide(y.RequestID, aap.StatusApproved, 10*time.Minute)
	e.clock.Advance(time.Minute) // past the refresh limit since the first fetch
	y, err = e.a.Resume(ctx, y.RequestID)
	if !errors.Is(err, attest.ErrUnknownKey) || y.State != aap.ExecWaiting || e.ran("k2") != 0 || e.jwks.fetches.Load() != 2 {
		t.Fatalf("a kid not published yet: %+v, %v (%d fetches)", y, err, e.jwks.fetches.Load())
	}
	e.jwks.publish(rotated)
	y, err = e.a.Resume(ctx, y.RequestID) // within 30s of the last fetch: not fetched again
	if !errors.Is(err, attest.ErrUnknownKey) || e.jwks.fetches.Load() != 2 {
		t.Fatalf("refetched within the refresh limit: %v (%d fetches)", err, e.jwks.fetches.Load())
	}
	e.clock.Advance(31 * time.Second)
	y, err = e.a.Resume(ctx, y.RequestID)
	must(t, err)
	if y.State != aap.ExecFinished || e.ran("k2") != 1 || e.jwks.fetches.Load() != 3 {
		t.Fatalf("after the rotated key was published: %+v ran %d (%d fetches)", y, e.ran("k2"), e.jwks.fetches.Load())
	}

	// An unknown key never runs a call past its approval's expiry.
	forged := newSigningKey(t)
	e.prov.answer(func(r aap.Request) (string, error) { return forged.sign(t, attestedDoc(r, r.Arguments)), nil })
	z, err := e.a.Submit(ctx, "k3", refund)
	must(t, err)
	e.fake.decide(z.RequestID, aap.StatusApproved, 2*time.Minute)
	if z, err = e.a.Resume(ctx, z.RequestID); !errors.Is(err, attest.ErrUnknownKey) || z.State != aap.ExecWaiting {
		t.Fatalf("forged kid: %+v, %v", z, err)
	}
	e.clock.Advance(3 * time.Minute)
	z, err = e.a.Resume(ctx, z.RequestID)
	must(t, err)
	expectState(t, z, aap.ExecNotRun, "approval expired")
	if e.ran("k3") != 0 {
		t.Fatal("a call whose attestation names an unknown key ran")
	}
}

// Without an AttestationCheck nothing changes: the adapter does not ask for
// attestations and runs an approved call whatever the provider would attest.
func TestAdapterWithoutAttestationCheck(t *testing.T) {
	t.Parallel()
	e := newAttestEnv(t)
	e.prov.answer(func(aap.Request) (string, error) { return "forged", nil })
	a, err := aap.NewAdapter(aap.AdapterConfig{Provider: e.prov, Store: e.store, Clock: e.clock,
		Run: func(ctx context.Context, x *aap.Execution) (json.RawMessage, error) {
			if _, _, ok := aap.VerifiedAttestation(ctx); ok {
				t.Error("an attestation in the context without a check")
			}
			e.mu.Lock()
			e.runs[x.Key]++
			e.mu.Unlock()
			return nil, nil
		}})
	must(t, err)
	e.a = a
	x, err := e.submitApproved("k1")
	must(t, err)
	if x.State != aap.ExecFinished || e.ran("k1") != 1 || e.prov.asked != 0 {
		t.Fatalf("unchecked adapter: %+v ran %d, asked %d", x, e.ran("k1"), e.prov.asked)
	}
}

func TestAttestationCheckConfig(t *testing.T) {
	t.Parallel()
	st := openStore(t, filepath.Join(t.TempDir(), "h.db"))
	defer st.Close()
	fake := newFakeProvider(clocktest.New(t0))
	run := func(context.Context, *aap.Execution) (json.RawMessage, error) { return nil, nil }
	for _, c := range []struct {
		what  string
		check aap.AttestationCheck
		prov  aap.Provider
		err   string
	}{
		{"no issuer", aap.AttestationCheck{JWKSURL: "https://x/jwks.json"}, &attestingProvider{fakeProvider: fake}, "Issuer"},
		{"no keys", aap.AttestationCheck{Issuer: testIssuer}, &attestingProvider{fakeProvider: fake}, "JWKSURL or Keys"},
		{"both", aap.AttestationCheck{Issuer: testIssuer, JWKSURL: "https://x/jwks.json", Keys: attest.StaticKeys{}}, &attestingProvider{fakeProvider: fake}, "JWKSURL or Keys"},
		{"a provider without attestations", aap.AttestationCheck{Issuer: testIssuer, Keys: attest.StaticKeys{}}, fake, "Source"},
		{"a client", aap.AttestationCheck{Issuer: testIssuer, JWKSURL: "https://x/jwks.json"}, &aap.Client{BaseURL: "https://x"}, ""},
	} {
		_, err := aap.NewAdapter(aap.AdapterConfig{Provider: c.prov, Store: st, Run: run, Attestations: &c.check})
		if (err == nil) != (c.err == "") || err != nil && !strings.Contains(err.Error(), c.err) {
			t.Errorf("%s: %v, want %q", c.what, err, c.err)
		}
	}
}
