package attest_test

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"time"

	"github.com/agentowl/agentowl/attest"
)

// An upstream service checks, before it runs a tool call, that the
// provider approved exactly these arguments: the attestation arrives with
// the call (in MCP's _meta, or fetched from
// GET /v1/requests/{id}/attestation) and the keys come from the
// provider's JWK Set.
func ExampleVerify() {
	data, _ := os.ReadFile("testdata/vectors.json")
	var golden struct {
		JWKS    json.RawMessage `json:"jwks"`
		Vectors []struct {
			Token string `json:"token"`
		} `json:"vectors"`
	}
	_ = json.Unmarshal(data, &golden)
	// In a service: keys := attest.NewRemoteKeySet("https://owl.example.com/.well-known/agentowl/jwks.json", egressClient)
	keys, err := attest.ParseJWKS(golden.JWKS)
	if err != nil {
		panic(err)
	}
	token := golden.Vectors[0].Token
	arguments := json.RawMessage(`{"amount": {"currency": "EUR", "value": "20.00"}, "order_id": "ord_1234"}`)
	doc, err := attest.Verify(token, keys, attest.Expectation{
		Issuer:    "https://owl.example.com",
		Subject:   attest.Subject{Kind: attest.SubjectAAPRequest, RequestID: "6f1c2b4e-8a3d-4c5e-9f70-1a2b3c4d5e6f"},
		Tool:      "issue_refund",
		Arguments: arguments, // what is about to run
		Now:       func() time.Time { return time.Date(2026, 3, 1, 9, 31, 0, 0, time.UTC) },
	})
	if err != nil {
		fmt.Println("refused:", err)
		return
	}
	fmt.Println(doc.Decision, "by", doc.DecidedBy.Kind, doc.DecidedBy.Name, "until", doc.ExpiresAt.Format(time.RFC3339))

	// Other arguments than those approved are refused.
	_, err = attest.Verify(token, keys, attest.Expectation{
		Issuer:    "https://owl.example.com",
		Subject:   attest.Subject{Kind: attest.SubjectAAPRequest, RequestID: "6f1c2b4e-8a3d-4c5e-9f70-1a2b3c4d5e6f"},
		Tool:      "issue_refund",
		Arguments: json.RawMessage(`{"amount": {"currency": "EUR", "value": "2000.00"}, "order_id": "ord_1234"}`),
		Now:       func() time.Time { return time.Date(2026, 3, 1, 9, 31, 0, 0, time.UTC) },
	})
	fmt.Println(err != nil)
	// Output:
	// approved by operator alice until 2026-03-01T09:35:00Z
	// true
}

// Signing, as the provider does: a document, a kid and an Ed25519 key.
func ExampleSign() {
	seed := make([]byte, ed25519.SeedSize) // a real key comes from crypto/rand
	key := ed25519.NewKeyFromSeed(seed)
	pub := key.Public().(ed25519.PublicKey)
	kid := attest.KeyID(pub)
	argsDigest, _ := attest.ArgumentsDigest(json.RawMessage(`{"to": "ops@example.com"}`))
	digest, _ := attest.ToolActionDigest("send_email", json.RawMessage(`{"to": "ops@example.com"}`))
	at := time.Date(2026, 3, 1, 9, 30, 0, 0, time.UTC)
	token, err := attest.Sign(&attest.Document{Version: attest.Version, Issuer: "https://owl.example.com", ID: "atst_1",
		Tenant:   "ten_1",
		Subject:  attest.Subject{Kind: attest.SubjectAAPRequest, RequestID: "6f1c2b4e-8a3d-4c5e-9f70-1a2b3c4d5e6f"},
		Action:   attest.Action{Tool: "send_email", ArgumentsSHA256: argsDigest, Digest: digest},
		Decision: attest.Approved, DecidedBy: attest.DecidedBy{Kind: attest.ByPolicy, PolicyID: "pol_1"},
		DecidedAt: at, ExpiresAt: at.Add(5 * time.Minute)}, kid, key)
	if err != nil {
		panic(err)
	}
	jwks, _ := json.Marshal(attest.JWKS{Keys: []attest.JWK{attest.PublicJWK(kid, pub)}})
	keys, _ := attest.ParseJWKS(jwks)
	t, _ := attest.Parse(token)
	fmt.Println(t.KeyID == kid, t.VerifySignature(context.Background(), keys) == nil)
	// Output:
	// true true
}

// A JWK Set fetched from the provider, cached, refreshed when a token
// names a kid it does not hold (after a key rotation).
func ExampleNewRemoteKeySet() {
	keys := attest.NewRemoteKeySet("https://owl.example.com/.well-known/agentowl/jwks.json", &http.Client{Timeout: 10 * time.Second})
	keys.MinRefresh = time.Minute
	_ = keys // attest.Verify(token, keys, expectation)
	fmt.Println("ok")
	// Output: ok
}
