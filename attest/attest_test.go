package attest_test

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentowl/agentowl/attest"
)

// The golden vectors (testdata/vectors.json): a fixed Ed25519 key, its
// JWK Set, and tokens over fixed documents with the expectation each
// verifies under. Ed25519 signatures are deterministic, so signing a
// vector's document with the key gives its token byte for byte. Regenerate
// with AGENTOWL_WRITE_ATTEST_VECTORS=1 go test ./attest -run TestGolden.

type vector struct {
	Name     string          `json:"name"`
	Document json.RawMessage `json:"document"`
	Token    string          `json:"token"`
	// Expect is the expectation the token verifies under (Now fixed at
	// "now").
	Expect struct {
		Issuer       string          `json:"issuer"`
		Subject      attest.Subject  `json:"subject"`
		Tool         string          `json:"tool,omitempty"`
		Arguments    json.RawMessage `json:"arguments,omitempty"`
		ActionDigest string          `json:"action_digest,omitempty"`
		Answer       string          `json:"answer,omitempty"`
		Decision     string          `json:"decision"`
		Now          time.Time       `json:"now"`
	} `json:"expect"`
}

type vectors struct {
	Comment string `json:"comment"`
	// Seed is the test key's private seed (hex): a key for these vectors
	// only, never for anything real.
	Seed    string          `json:"seed"`
	Kid     string          `json:"kid"`
	JWKS    json.RawMessage `json:"jwks"`
	Vectors []vector        `json:"vectors"`
}

func goldenKey() (ed25519.PrivateKey, string) {
	seed := sha256.Sum256([]byte("agentowl attestation golden vectors: a public test key"))
	key := ed25519.NewKeyFromSeed(seed[:])
	return key, attest.KeyID(key.Public().(ed25519.PublicKey))
}

func (v *vector) expectation() attest.Expectation {
	e := v.Expect
	now := e.Now
	return attest.Expectation{Issuer: e.Issuer, Subject: e.Subject, Tool: e.Tool, Arguments: e.Arguments,
		ActionDigest: e.ActionDigest, Answer: e.Answer, Decision: e.Decision, Now: func() time.Time { return now }}
}

// goldenDocuments are the documents of the vectors, one per decision kind.
func goldenDocuments() []vector {
	at := time.Date(2026, 3, 1, 9, 30, 0, 0, time.UTC)
	args := json.RawMessage(`{"order_id": "ord_1234", "amount": {"value": "20.00", "currency": "EUR"}}`)
	argsDigest, _ := attest.ArgumentsDigest(args)
	actionDigest, _ := attest.ToolActionDigest("issue_refund", args)
	workDigest := strings.Repeat("5a", 32)
	docs := []struct {
		name string
		doc  attest.Document
	}{
		{"AAP request approved by an operator", attest.Document{Version: 1, Issuer: "https://owl.example.com",
			ID: "atst_01JNB7Y5Q3KXGJ2W0M6V8R4T1A", Tenant: "ten_01JNB7W2F6B8S3V1X0C4D5E6F7",
			Subject:  attest.Subject{Kind: attest.SubjectAAPRequest, RequestID: "6f1c2b4e-8a3d-4c5e-9f70-1a2b3c4d5e6f"},
			Action:   attest.Action{Tool: "issue_refund", ArgumentsSHA256: argsDigest, Digest: actionDigest},
			Decision: attest.Approved, DecidedBy: attest.DecidedBy{Kind: attest.ByOperator, Name: "alice"},
			DecidedAt: at, ExpiresAt: at.Add(5 * time.Minute)}},
		{"AAP request denied by a policy", attest.Document{Version: 1, Issuer: "https://owl.example.com",
			ID: "atst_01JNB7Y5Q3KXGJ2W0M6V8R4T1B", Tenant: "ten_01JNB7W2F6B8S3V1X0C4D5E6F7",
			Subject:  attest.Subject{Kind: attest.SubjectAAPRequest, RequestID: "0d9e8f7a-6b5c-4d3e-8f2a-1b0c9d8e7f6a"},
			Action:   attest.Action{Tool: "issue_refund", ArgumentsSHA256: argsDigest, Digest: actionDigest},
			Decision: attest.Denied, DecidedBy: attest.DecidedBy{Kind: attest.ByPolicy, PolicyID: "pol_01JNB7X0A1B2C3D4E5F6G7H8J9"},
			DecidedAt: at, ExpiresAt: at.Add(5 * time.Minute)}},
		{"runtime approval request approved", attest.Document{Version: 1, Issuer: "https://owl.example.com",
			ID: "atst_01JNB7Y5Q3KXGJ2W0M6V8R4T1C", Tenant: "ten_01JNB7W2F6B8S3V1X0C4D5E6F7",
			Subject: attest.Subject{Kind: attest.SubjectWorkRequest, WorkID: "work_01JNB7V0000000000000000000",
				RequestID: "refund-approval", Revision: 2, DecisionID: "dec-7"},
			Action: attest.Action{Digest: workDigest}, Decision: attest.Approved,
			DecidedBy: attest.DecidedBy{Kind: attest.ByOperator, Name: "bob"},
			DecidedAt: at, ExpiresAt: at.Add(time.Hour)}},
		{"runtime question answered", attest.Document{Version: 1, Issuer: "https://owl.example.com",
			ID: "atst_01JNB7Y5Q3KXGJ2W0M6V8R4T1D", Tenant: "ten_01JNB7W2F6B8S3V1X0C4D5E6F7",
			Subject: attest.Subject{Kind: attest.SubjectWorkRequest, WorkID: "work_01JNB7V0000000000000000000",
				RequestID: "which-account", Revision: 1, DecisionID: "dec-8"},
			Action: attest.Action{AnswerSHA256: attest.AnswerDigest("Use the café account 🦉")}, Decision: attest.Answered,
			DecidedBy: attest.DecidedBy{Kind: attest.ByOperator, Name: "bob"},
			DecidedAt: at, ExpiresAt: at.Add(time.Hour)}},
	}
	var out []vector
	for i, d := range docs {
		var v vector
		v.Name = d.name
		v.Document, _ = json.Marshal(d.doc)
		v.Expect.Issuer, v.Expect.Subject, v.Expect.Decision = d.doc.Issuer, d.doc.Subject, d.doc.Decision
		v.Expect.Now = at.Add(time.Minute)
		switch i {
		case 0, 1:
			v.Expect.Tool, v.Expect.Arguments = "issue_refund", args
		case 2:
			v.Expect.ActionDigest = workDigest
		case 3:
			v.Expect.Answer = "Use the café account 🦉"
		}
		out = append(out, v)
	}
	return out
}

func loadVectors(t *testing.T) vectors {
	t.Helper()
	path := filepath.Join("testdata", "vectors.json")
	key, kid := goldenKey()
	if os.Getenv("AGENTOWL_WRITE_ATTEST_VECTORS") != "" {
		jwks, _ := json.Marshal(attest.JWKS{Keys: []attest.JWK{attest.PublicJWK(kid, key.Public().(ed25519.PublicKey))}})
		vs := vectors{Comment: "Golden vectors of AgentOwl decision attestations (package attest, docs/attestations.md). " +
			"seed names a public TEST key (its Ed25519 seed is that SHA-256): anyone can sign with it; trust it for nothing.",
			Seed: "sha256(\"agentowl attestation golden vectors: a public test key\")", Kid: kid, JWKS: jwks}
		for _, v := range goldenDocuments() {
			var doc attest.Document
			if err := json.Unmarshal(v.Document, &doc); err != nil {
				t.Fatal(err)
			}
			tok, err := attest.Sign(&doc, kid, key)
			if err != nil {
				t.Fatal(err)
			}
			v.Token = tok
			vs.Vectors = append(vs.Vectors, v)
		}
		b, _ := json.MarshalIndent(vs, "", "  ")
		if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var vs vectors
	if err := json.Unmarshal(b, &vs); err != nil {
		t.Fatal(err)
	}
	if len(vs.Vectors) < 4 {
		t.Fatalf("%d vectors", len(vs.Vectors))
	}
	return vs
}

// TestGoldenVectors: every vector verifies against the published JWK Set
// under its expectation, and its document is what the vector says; signing
// that document with the fixed key gives the token byte for byte.
func TestGoldenVectors(t *testing.T) {
	vs := loadVectors(t)
	keys, err := attest.ParseJWKS(vs.JWKS)
	if err != nil {
		t.Fatal(err)
	}
	key, kid := goldenKey()
	if kid != vs.Kid {
		t.Fatalf("kid %s, vectors say %s", kid, vs.Kid)
	}
	for _, v := range vs.Vectors {
		doc, err := attest.Verify(v.Token, keys, v.expectation())
		if err != nil {
			t.Errorf("%s: %v", v.Name, err)
			continue
		}
		var want attest.Document
		if err := json.Unmarshal(v.Document, &want); err != nil {
			t.Fatal(err)
		}
		got, _ := json.Marshal(doc)
		wantJSON, _ := json.Marshal(&want)
		if string(got) != string(wantJSON) {
			t.Errorf("%s: document\n%s\nwant\n%s", v.Name, got, wantJSON)
		}
		again, err := attest.Sign(&want, kid, key)
		if err != nil || again != v.Token {
			t.Errorf("%s: signing the document again gave %s, %v; want the vector's token", v.Name, again, err)
		}
	}
}

// TestGoldenTampering: changing any one byte of a vector's payload or
// signature (each base64url character replaced by another) makes it fail.
// So does any character of the header, and moving the signature to
// another vector's payload.
func TestGoldenTampering(t *testing.T) {
	vs := loadVectors(t)
	keys, err := attest.ParseJWKS(vs.JWKS)
	if err != nil {
		t.Fatal(err)
	}
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	for _, v := range vs.Vectors {
		want := v.expectation()
		for i := range len(v.Token) {
			if v.Token[i] == '.' {
				continue
			}
			// Two replacements per position: the next character of the
			// alphabet, and one far from it, so that a change of the
			// unused low bits of a final character is also covered
			// (strict base64url refuses those).
			j := strings.IndexByte(alphabet, v.Token[i])
			for _, k := range []int{1, 32} {
				tampered := v.Token[:i] + string(alphabet[(j+k)%64]) + v.Token[i+1:]
				if _, err := attest.Verify(tampered, keys, want); err == nil {
					t.Fatalf("%s: changing character %d verifies: %s", v.Name, i, tampered)
				}
			}
		}
		// Any byte of the decoded payload or signature.
		parts := strings.Split(v.Token, ".")
		for p := 1; p <= 2; p++ {
			raw, err := base64Decode(parts[p])
			if err != nil {
				t.Fatal(err)
			}
			for i := range raw {
				changed := append([]byte(nil), raw...)
				changed[i] ^= 0x01
				q := append([]string(nil), parts...)
				q[p] = base64Encode(changed)
				if _, err := attest.Verify(strings.Join(q, "."), keys, want); err == nil {
					t.Fatalf("%s: flipping a bit of byte %d of part %d verifies", v.Name, i, p)
				}
			}
		}
	}
	a, b := strings.Split(vs.Vectors[0].Token, "."), strings.Split(vs.Vectors[1].Token, ".")
	mixed := a[0] + "." + a[1] + "." + b[2]
	if _, err := attest.Verify(mixed, keys, vs.Vectors[0].expectation()); !errors.Is(err, attest.ErrSignature) {
		t.Errorf("another token's signature: %v, want ErrSignature", err)
	}
}

// TestVerifyRefusals: each mismatch is refused with its error.
func TestVerifyRefusals(t *testing.T) {
	vs := loadVectors(t)
	keys, _ := attest.ParseJWKS(vs.JWKS)
	v := vs.Vectors[0] // approved AAP request
	good := v.expectation()
	if _, err := attest.Verify(v.Token, keys, good); err != nil {
		t.Fatal(err)
	}
	expiry := v.Expect.Now.Add(4 * time.Minute) // decided_at + 5m
	otherKey, otherKid := ed25519.NewKeyFromSeed(make([]byte, 32)), "other"
	var doc attest.Document
	_ = json.Unmarshal(v.Document, &doc)
	forged, _ := attest.Sign(&doc, vs.Kid, otherKey) // the right kid, the wrong key
	unknown, _ := attest.Sign(&doc, otherKid, otherKey)
	cases := []struct {
		name  string
		token string
		edit  func(e *attest.Expectation)
		want  error
	}{
		{"another issuer", v.Token, func(e *attest.Expectation) { e.Issuer = "https://evil.example" }, attest.ErrIssuer},
		{"another tenant", v.Token, func(e *attest.Expectation) { e.Tenant = "ten_other" }, attest.ErrTenant},
		{"another request", v.Token, func(e *attest.Expectation) { e.Subject.RequestID = "00000000-0000-4000-8000-000000000000" }, attest.ErrSubject},
		{"another subject kind", v.Token, func(e *attest.Expectation) { e.Subject.Kind = attest.SubjectWorkRequest }, attest.ErrSubject},
		{"another tool", v.Token, func(e *attest.Expectation) { e.Tool = "delete_everything" }, attest.ErrAction},
		{"other arguments", v.Token, func(e *attest.Expectation) {
			e.Arguments = json.RawMessage(`{"order_id": "ord_1234", "amount": {"value": "2000.00", "currency": "EUR"}}`)
		}, attest.ErrAction},
		{"arguments that are not JSON", v.Token, func(e *attest.Expectation) { e.Arguments = json.RawMessage(`{`) }, attest.ErrAction},
		{"another action digest", v.Token, func(e *attest.Expectation) { e.ActionDigest = strings.Repeat("0", 64) }, attest.ErrAction},
		{"a denial wanted", v.Token, func(e *attest.Expectation) { e.Decision = attest.Denied }, attest.ErrDecision},
		{"at expiry", v.Token, func(e *attest.Expectation) { e.Now = func() time.Time { return expiry } }, attest.ErrExpired},
		{"before the decision", v.Token, func(e *attest.Expectation) {
			e.Now = func() time.Time { return v.Expect.Now.Add(-time.Hour) }
		}, attest.ErrNotYetValid},
		{"a forged signature", forged, nil, attest.ErrSignature},
		{"an unknown kid", unknown, nil, attest.ErrUnknownKey},
		{"not a JWS", "not.a.jws", nil, attest.ErrMalformed},
		{"two parts", "a.b", nil, attest.ErrMalformed},
		{"empty", "", nil, attest.ErrMalformed},
		{"no issuer expected", v.Token, func(e *attest.Expectation) { e.Issuer = "" }, attest.ErrExpectation},
		{"no subject expected", v.Token, func(e *attest.Expectation) { e.Subject = attest.Subject{} }, attest.ErrExpectation},
		{"an approval without its action", v.Token, func(e *attest.Expectation) { e.Arguments, e.Tool = nil, "" }, attest.ErrExpectation},
	}
	for _, c := range cases {
		e := good
		if c.edit != nil {
			c.edit(&e)
		}
		if _, err := attest.Verify(c.token, keys, e); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
	// Just before expiry, and with leeway for a clock behind, it holds.
	e := good
	e.Now = func() time.Time { return expiry.Add(-time.Second) }
	if _, err := attest.Verify(v.Token, keys, e); err != nil {
		t.Errorf("a second before expiry: %v", err)
	}
	e.Now, e.Leeway = func() time.Time { return doc.DecidedAt.Add(-time.Second) }, 2*time.Second
	if _, err := attest.Verify(v.Token, keys, e); err != nil {
		t.Errorf("within the leeway: %v", err)
	}
}

// TestHeaderRefusals: a token with another alg, typ, a crit header or an
// unknown header member is malformed even when correctly signed.
func TestHeaderRefusals(t *testing.T) {
	key, kid := goldenKey()
	doc := goldenDocuments()[0]
	for _, h := range []string{
		`{"alg":"none","kid":"` + kid + `","typ":"` + attest.Type + `"}`,
		`{"alg":"HS256","kid":"` + kid + `","typ":"` + attest.Type + `"}`,
		`{"alg":"EdDSA","kid":"` + kid + `","typ":"JWT"}`,
		`{"alg":"EdDSA","kid":"` + kid + `","typ":"` + attest.Type + `","crit":["exp"]}`,
		`{"alg":"EdDSA","kid":"` + kid + `","typ":"` + attest.Type + `","jku":"https://evil.example/jwks"}`,
		`{"alg":"EdDSA","typ":"` + attest.Type + `"}`,
	} {
		input := base64Encode([]byte(h)) + "." + base64Encode(doc.Document)
		tok := input + "." + base64Encode(ed25519.Sign(key, []byte(input)))
		keys := attest.StaticKeys{kid: key.Public().(ed25519.PublicKey)}
		if _, err := attest.Verify(tok, keys, doc.expectation()); !errors.Is(err, attest.ErrMalformed) {
			t.Errorf("header %s: %v, want ErrMalformed", h, err)
		}
	}
}

func TestParseJWKS(t *testing.T) {
	key, kid := goldenKey()
	good := attest.PublicJWK(kid, key.Public().(ed25519.PublicKey))
	rsa := `{"kty":"RSA","kid":"r1","n":"AQAB","e":"AQAB"}`
	gb, _ := json.Marshal(good)
	keys, err := attest.ParseJWKS([]byte(`{"keys":[` + rsa + `,` + string(gb) + `]}`))
	if err != nil || len(keys) != 1 || keys[kid] == nil {
		t.Fatalf("ParseJWKS = %v, %v", keys, err)
	}
	for _, bad := range []string{`{}`, `[]`, `{"keys":[{"kty":"OKP","crv":"Ed25519","x":"AAAA","kid":"k"}]}`,
		`{"keys":[` + string(gb) + `,` + string(gb) + `]}`,
		`{"keys":[{"kty":"OKP","crv":"Ed25519","x":"` + good.X + `"}]}`} {
		if _, err := attest.ParseJWKS([]byte(bad)); err == nil {
			t.Errorf("ParseJWKS(%s) succeeded", bad)
		}
	}
}

// TestRemoteKeySet: the set is fetched once and cached; an unknown kid
// refreshes it (a key rotated in is found), but not more than once per
// MinRefresh; after MaxAge it is fetched again; a failed refresh keeps the
// keys it had. Time is the test's.
func TestRemoteKeySet(t *testing.T) {
	k1 := ed25519.NewKeyFromSeed(make([]byte, 32))
	seed2 := make([]byte, 32)
	seed2[0] = 1
	k2 := ed25519.NewKeyFromSeed(seed2)
	var published atomic.Value
	published.Store([]attest.JWK{attest.PublicJWK("k1", k1.Public().(ed25519.PublicKey))})
	var fetches, failing atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fetches.Add(1)
		if failing.Load() != 0 {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		_ = json.NewEncoder(w).Encode(attest.JWKS{Keys: published.Load().([]attest.JWK)})
	}))
	defer srv.Close()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ks := attest.NewRemoteKeySet(srv.URL, srv.Client())
	ks.Now = func() time.Time { return now }
	ctx := context.Background()
	if _, err := ks.PublicKey(ctx, "k1"); err != nil {
		t.Fatal(err)
	}
	if _, err := ks.PublicKey(ctx, "k1"); err != nil || fetches.Load() != 1 {
		t.Fatalf("cached: %v, %d fetches", err, fetches.Load())
	}
	// An unknown kid refreshes the set (once MinRefresh has passed since
	// the last fetch)...
	now = now.Add(31 * time.Second)
	if _, err := ks.PublicKey(ctx, "k2"); !errors.Is(err, attest.ErrUnknownKey) || fetches.Load() != 2 {
		t.Fatalf("unknown kid: %v, %d fetches", err, fetches.Load())
	}
	// ...and not again within MinRefresh, even once it is published.
	published.Store([]attest.JWK{attest.PublicJWK("k1", k1.Public().(ed25519.PublicKey)), attest.PublicJWK("k2", k2.Public().(ed25519.PublicKey))})
	if _, err := ks.PublicKey(ctx, "k2"); !errors.Is(err, attest.ErrUnknownKey) || fetches.Load() != 2 {
		t.Fatalf("within MinRefresh: %v, %d fetches", err, fetches.Load())
	}
	now = now.Add(31 * time.Second)
	if pub, err := ks.PublicKey(ctx, "k2"); err != nil || !pub.Equal(k2.Public()) || fetches.Load() != 3 {
		t.Fatalf("rotated-in key: %v, %d fetches", err, fetches.Load())
	}
	// After MaxAge the set is fetched again; a failure keeps the old keys.
	failing.Store(1)
	now = now.Add(11 * time.Minute)
	if _, err := ks.PublicKey(ctx, "k1"); err != nil || fetches.Load() != 4 {
		t.Fatalf("stale set, fetch failing: %v, %d fetches", err, fetches.Load())
	}
	// A set never fetched and a server that fails: the error says so.
	fresh := attest.NewRemoteKeySet(srv.URL, srv.Client())
	if _, err := fresh.PublicKey(ctx, "k1"); err == nil || errors.Is(err, attest.ErrUnknownKey) {
		t.Fatalf("first fetch failing: %v", err)
	}
}

func TestSignRefuses(t *testing.T) {
	key, kid := goldenKey()
	var doc attest.Document
	_ = json.Unmarshal(goldenDocuments()[0].Document, &doc)
	bad := doc
	bad.Issuer = ""
	if _, err := attest.Sign(&bad, kid, key); err == nil {
		t.Error("signed a document without issuer")
	}
	bad = doc
	bad.Action.ArgumentsSHA256 = "ABC"
	if _, err := attest.Sign(&bad, kid, key); err == nil {
		t.Error("signed a document with a bad digest")
	}
	if _, err := attest.Sign(&doc, "", key); err == nil {
		t.Error("signed without a kid")
	}
	if _, err := attest.Sign(&doc, kid, key[:10]); err == nil {
		t.Error("signed with a short key")
	}
}

func base64Encode(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

func base64Decode(s string) ([]byte, error) { return base64.RawURLEncoding.DecodeString(s) }

// TestSchemaMatchesDocuments: api/attestation.schema.json lists every
// member the documents carry, requires what Document always sets, and
// its enums hold the package's constants; each golden document has every
// required member and no member the schema does not know.
func TestSchemaMatchesDocuments(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "api", "attestation.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	type node struct {
		Required   []string                   `json:"required"`
		Properties map[string]json.RawMessage `json:"properties"`
		Enum       []string                   `json:"enum"`
	}
	var schema node
	if err := json.Unmarshal(b, &schema); err != nil {
		t.Fatal(err)
	}
	sub := func(n node, name string) node {
		var s node
		if err := json.Unmarshal(n.Properties[name], &s); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return s
	}
	for _, v := range loadVectors(t).Vectors {
		var doc map[string]json.RawMessage
		if err := json.Unmarshal(v.Document, &doc); err != nil {
			t.Fatal(err)
		}
		for _, r := range schema.Required {
			if _, ok := doc[r]; !ok {
				t.Errorf("%s: no %q", v.Name, r)
			}
		}
		for k, raw := range doc {
			if _, ok := schema.Properties[k]; !ok {
				t.Errorf("%s: member %q is not in the schema", v.Name, k)
			}
			if k == "subject" || k == "action" || k == "decided_by" {
				var inner map[string]json.RawMessage
				_ = json.Unmarshal(raw, &inner)
				s := sub(schema, k)
				for ik := range inner {
					if _, ok := s.Properties[ik]; !ok {
						t.Errorf("%s: member %s.%s is not in the schema", v.Name, k, ik)
					}
				}
			}
		}
	}
	if got := sub(schema, "decision").Enum; strings.Join(got, ",") != strings.Join([]string{attest.Approved, attest.Denied, attest.Answered}, ",") {
		t.Errorf("decision enum %v", got)
	}
	if got := sub(sub(schema, "subject"), "kind").Enum; strings.Join(got, ",") != attest.SubjectAAPRequest+","+attest.SubjectWorkRequest {
		t.Errorf("subject kind enum %v", got)
	}
	if got := sub(sub(schema, "decided_by"), "kind").Enum; strings.Join(got, ",") != attest.ByOperator+","+attest.ByPolicy+","+attest.ByToken {
		t.Errorf("decided_by kind enum %v", got)
	}
}
