package aap_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agentowl/agentowl/aap"
	"github.com/agentowl/agentowl/attest"
	"github.com/agentowl/agentowl/internal/clocktest"
)

// swappedAttestations is a provider client whose attestation answers are
// replaced: a provider (or anything between it and the harness) that
// approves a call but hands over the proof of another decision.
type swappedAttestations struct {
	*aap.Client
	swap map[string]string // request ID → the request ID whose attestation is answered
}

func (s *swappedAttestations) RequestAttestation(ctx context.Context, id string) (string, error) {
	if other, ok := s.swap[id]; ok {
		id = other
	}
	return s.Client.RequestAttestation(ctx, id)
}

// The harness kit against the real provider: the adapter fetches each
// approval's attestation over the instance's credential and verifies it
// with the provider's published key set before the call runs. An approved
// call whose attestation is that of another approved call, for other
// arguments, does not run.
func TestAdapterVerifiesProviderAttestations(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clock := clocktest.New(t0)
	p := newProvider(t, clock, nil)
	pr := &aap.Provisioner{Provider: &aap.Client{BaseURL: p.url, Token: p.prov}, Clock: clock}
	cred, err := pr.Provision(ctx, aap.NewSubmission("attested-harness", ""))
	must(t, err)
	client := cred.Client(&http.Client{Timeout: time.Minute})
	swapped := &swappedAttestations{Client: client, swap: map[string]string{}}
	// The issuer is the provider's public URL (here its own address; the
	// harness reaches it through a front).
	issuer := p.srv.URL()
	var seen []string
	runs := map[string]int{}
	adapter, err := aap.NewAdapter(aap.AdapterConfig{Provider: swapped, Store: openStore(t, t.TempDir()+"/h.db"), Clock: clock,
		Attestations: &aap.AttestationCheck{JWKSURL: p.url + "/.well-known/agentowl/jwks.json", Issuer: issuer, HTTP: client.HTTP},
		Run: func(ctx context.Context, x *aap.Execution) (json.RawMessage, error) {
			tok, _, ok := aap.VerifiedAttestation(ctx)
			if ok {
				seen = append(seen, tok)
			}
			runs[x.Key]++
			return json.RawMessage(`{}`), nil
		}})
	must(t, err)

	small := refund
	big := refund
	big.Arguments = json.RawMessage(`{"payment_id":"payment_123","amount":490000,"currency":"GBP"}`)
	a, err := adapter.Submit(ctx, "small", small)
	must(t, err)
	b, err := adapter.Submit(ctx, "big", big)
	must(t, err)
	// The provider approves both; the harness is handed the big refund's
	// attestation when it asks for the small one's, and the reverse.
	swapped.swap[a.RequestID], swapped.swap[b.RequestID] = b.RequestID, a.RequestID
	if !p.decide(a.RequestID, true, 10*time.Minute) || !p.decide(b.RequestID, true, 10*time.Minute) {
		t.Fatal("not pending")
	}
	for _, x := range []*aap.Execution{a, b} {
		got, err := adapter.Resume(ctx, x.RequestID)
		must(t, err)
		if got.State != aap.ExecNotRun || !got.AttestationRefused() || !strings.Contains(got.Reason, "wrong subject") {
			t.Fatalf("approved %s with another call's attestation: %+v", x.Key, got)
		}
	}
	if runs["small"]+runs["big"] != 0 {
		t.Fatalf("ran %v", runs)
	}

	// Unswapped, an approval's own attestation verifies and the call runs
	// with it.
	c, err := adapter.Submit(ctx, "own", big)
	must(t, err)
	if !p.decide(c.RequestID, true, 10*time.Minute) {
		t.Fatal("not pending")
	}
	c, err = adapter.Resume(ctx, c.RequestID)
	must(t, err)
	if c.State != aap.ExecFinished || runs["own"] != 1 || len(seen) != 1 {
		t.Fatalf("approved with its own attestation: %+v, runs %v", c, runs)
	}
	doc, err := attest.Verify(seen[0], mustKeys(t, p.url), attest.Expectation{Issuer: issuer,
		Subject: attest.Subject{Kind: attest.SubjectAAPRequest, RequestID: c.RequestID}, Tool: big.Tool, Arguments: big.Arguments,
		Now: clock.Now})
	must(t, err)
	if doc.DecidedBy.Kind != attest.ByOperator {
		t.Fatalf("decided by %+v", doc.DecidedBy)
	}
	// A denied request's attestation is not an approval's: the adapter
	// never asks for one (the denial ends the call), and the route answers
	// pending requests with 404.
	d, err := adapter.Submit(ctx, "pending", small)
	must(t, err)
	if _, err := client.RequestAttestation(ctx, d.RequestID); err == nil || !strings.Contains(err.Error(), "404") {
		t.Fatalf("a pending request's attestation: %v", err)
	}
}

func mustKeys(t testing.TB, base string) attest.KeySet {
	t.Helper()
	keys, err := attest.ParseJWKS(mustGet(t, base+"/.well-known/agentowl/jwks.json"))
	must(t, err)
	return keys
}
