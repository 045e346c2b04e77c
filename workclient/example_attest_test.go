package workclient_test

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/agentowl/agentowl/attest"
	"github.com/agentowl/agentowl/workclient"
)

// A runtime verifies a decision's attestation before it runs the approved
// action: against the provider's published keys and the digest of the
// action it is about to run, computed from its own action.
func ExampleDecisionVerifier() {
	// The provider: its published key set (here a test key, served as
	// AgentOwl serves /.well-known/agentowl/jwks.json) and a decision it
	// pushed, with its attestation.
	seed := sha256.Sum256([]byte("example key: trust it for nothing"))
	key := ed25519.NewKeyFromSeed(seed[:])
	kid := attest.KeyID(key.Public().(ed25519.PublicKey))
	owl := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(attest.JWKS{Keys: []attest.JWK{attest.PublicJWK(kid, key.Public().(ed25519.PublicKey))}})
	}))
	defer owl.Close()
	decision := pushedDecision(key, kid)

	// The runtime.
	keys := attest.NewRemoteKeySet(owl.URL+"/.well-known/agentowl/jwks.json", http.DefaultClient)
	verifier := &workclient.DecisionVerifier{Keys: keys, Issuer: "https://owl.example.com",
		Now: func() time.Time { return time.Date(2026, 10, 6, 12, 31, 0, 0, time.UTC) }}
	action := map[string]any{"tool": "issue_refund", "arguments": map[string]any{"order": "ord_1234", "amount": "20.00"}}
	digest, _ := workclient.ActionDigest(action) // what is about to run
	doc, err := verifier.Verify(context.Background(), decision, digest)
	if err != nil {
		fmt.Println("not acting:", err)
		return
	}
	fmt.Println(doc.Decision, "by", doc.DecidedBy.Name, "for revision", doc.Subject.Revision)

	// The same decision does not cover another action.
	other, _ := workclient.ActionDigest(map[string]any{"tool": "issue_refund", "arguments": map[string]any{"order": "ord_1234", "amount": "2000.00"}})
	_, err = verifier.Verify(context.Background(), decision, other)
	fmt.Println(errors.Is(err, attest.ErrAction))
	// Output:
	// approved by bob for revision 2
	// true
}

// pushedDecision is a decision document as AgentOwl pushes it.
func pushedDecision(key ed25519.PrivateKey, kid string) *workclient.Decision {
	digest, _ := workclient.ActionDigest(map[string]any{"tool": "issue_refund", "arguments": map[string]any{"order": "ord_1234", "amount": "20.00"}})
	at := time.Date(2026, 10, 6, 12, 30, 0, 0, time.UTC)
	d := &workclient.Decision{Version: workclient.Version, Type: "decision", DecisionID: "dec-1", WorkID: "work_a",
		RequestID: "refund-approval", RequestRevision: 2, Decision: "approve", ExpectedActionDigest: digest,
		DecidedAt: at.Format(time.RFC3339), RequestExpiresAt: at.Add(30 * time.Minute).Format(time.RFC3339)}
	d.Attestation, _ = attest.Sign(&attest.Document{Version: attest.Version, Issuer: "https://owl.example.com", ID: "atst_1", Tenant: "ten_a",
		Subject: attest.Subject{Kind: attest.SubjectWorkRequest, WorkID: d.WorkID, RequestID: d.RequestID, Revision: 2, DecisionID: d.DecisionID},
		Action:  attest.Action{Digest: digest}, Decision: attest.Approved, DecidedBy: attest.DecidedBy{Kind: attest.ByOperator, Name: "bob"},
		DecidedAt: at, ExpiresAt: at.Add(30 * time.Minute)}, kid, key)
	return d
}
