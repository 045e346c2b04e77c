package workclient_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/agentowl/agentowl/agentwork"
	"github.com/agentowl/agentowl/agentwork/agentworktest"
	"github.com/agentowl/agentowl/attest"
	"github.com/agentowl/agentowl/webhook"
	"github.com/agentowl/agentowl/workclient"
)

const issuer = "https://owl.example.com"

// provider signs decision documents as AgentOwl does: the document and,
// in its attestation, the same decision.
type provider struct {
	kid  string
	priv ed25519.PrivateKey
	keys attest.StaticKeys
}

func newProvider(t testing.TB) *provider {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	kid := attest.KeyID(pub)
	return &provider{kid: kid, priv: priv, keys: attest.StaticKeys{kid: pub}}
}

var refundAction = map[string]any{"tool": "issue_refund", "arguments": map[string]any{"order": "ord_1234", "amount": "20.00"}}

func digestOf(t testing.TB, action any) string {
	d, err := workclient.ActionDigest(action)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// decision is a signed decision document; change alters the attested
// document before it is signed.
func (p *provider) decision(t testing.TB, decision, digest, answer string, change func(*attest.Document)) *workclient.Decision {
	t.Helper()
	d := &workclient.Decision{Version: workclient.Version, Type: agentwork.DecisionType, DecisionID: "dec-1", WorkID: "work_a",
		RequestID: "refund-approval", RequestRevision: 2, Decision: decision, Answer: answer, ExpectedActionDigest: digest,
		DecidedAt: now.Format(time.RFC3339), RequestExpiresAt: now.Add(time.Hour).Format(time.RFC3339)}
	doc := &attest.Document{Version: attest.Version, Issuer: issuer, ID: "atst_1", Tenant: "ten_a",
		Subject: attest.Subject{Kind: attest.SubjectWorkRequest, WorkID: d.WorkID, RequestID: d.RequestID, Revision: d.RequestRevision,
			DecisionID: d.DecisionID},
		DecidedBy: attest.DecidedBy{Kind: attest.ByOperator, Name: "bob"}, DecidedAt: now, ExpiresAt: now.Add(time.Hour)}
	switch decision {
	case agentwork.DecisionApprove:
		doc.Decision, doc.Action.Digest = attest.Approved, digest
	case agentwork.DecisionReject:
		doc.Decision, doc.Action.Digest = attest.Denied, digest
	case agentwork.DecisionAnswer:
		doc.Decision, doc.Action.AnswerSHA256 = attest.Answered, attest.AnswerDigest(answer)
	}
	if change != nil {
		change(doc)
	}
	tok, err := attest.Sign(doc, p.kid, p.priv)
	if err != nil {
		t.Fatal(err)
	}
	d.Attestation = tok
	return d
}

// A runtime verifies a decision's attestation against the action it is
// about to run; every mismatch is refused with attest's error.
func TestVerifyDecision(t *testing.T) {
	t.Parallel()
	p := newProvider(t)
	ctx := context.Background()
	digest := digestOf(t, refundAction)
	v := &workclient.DecisionVerifier{Keys: p.keys, Issuer: issuer, Now: func() time.Time { return now.Add(time.Minute) }}

	doc, err := v.Verify(ctx, p.decision(t, "approve", digest, "", nil), digest)
	if err != nil || doc.Decision != attest.Approved || doc.Subject.DecisionID != "dec-1" || doc.DecidedBy.Name != "bob" {
		t.Fatalf("a valid approval: %+v, %v", doc, err)
	}
	if _, err := v.Verify(ctx, p.decision(t, "reject", digest, "", nil), digest); err != nil {
		t.Fatalf("a valid rejection: %v", err)
	}
	if _, err := v.Verify(ctx, p.decision(t, "answer", "", "yes, ship it", nil), ""); err != nil {
		t.Fatalf("a valid answer: %v", err)
	}
	if _, err := v.Verify(ctx, p.decision(t, "answer", "", "", nil), ""); err != nil {
		t.Fatalf("a valid empty answer: %v", err)
	}

	other := newProvider(t)
	bigger := digestOf(t, map[string]any{"tool": "issue_refund", "arguments": map[string]any{"order": "ord_1234", "amount": "2000.00"}})
	cases := []struct {
		what   string
		d      *workclient.Decision
		digest string
		verify *workclient.DecisionVerifier
		want   error
	}{
		{"the runtime is about to run another action", p.decision(t, "approve", digest, "", nil), bigger, v, attest.ErrAction},
		{"the document was approved for another action", p.decision(t, "approve", bigger, "", nil), digest, v, attest.ErrAction},
		{"no action digest about to run", p.decision(t, "approve", digest, "", nil), "", v, attest.ErrExpectation},
		{"a forged signature", func() *workclient.Decision {
			d := other.decision(t, "approve", digest, "", nil)
			d2 := p.decision(t, "approve", digest, "", nil)
			d.Attestation = strings.Split(d2.Attestation, ".")[0] + "." + strings.Split(d.Attestation, ".")[1] + "." + strings.Split(d.Attestation, ".")[2]
			return d
		}(), digest, v, attest.ErrSignature},
		{"a key not published", other.decision(t, "approve", digest, "", nil), digest, v, attest.ErrUnknownKey},
		{"expired", p.decision(t, "approve", digest, "", nil), digest,
			&workclient.DecisionVerifier{Keys: p.keys, Issuer: issuer, Now: func() time.Time { return now.Add(time.Hour) }}, attest.ErrExpired},
		{"missing", func() *workclient.Decision {
			d := p.decision(t, "approve", digest, "", nil)
			d.Attestation = ""
			return d
		}(), digest, v, workclient.ErrNoAttestation},
		{"the document says approve, the attestation denied", p.decision(t, "approve", digest, "", func(d *attest.Document) { d.Decision = attest.Denied }),
			digest, v, attest.ErrDecision},
		{"an attestation of another revision", p.decision(t, "approve", digest, "", func(d *attest.Document) { d.Subject.Revision = 1 }),
			digest, v, attest.ErrSubject},
		{"an attestation of another decision", p.decision(t, "approve", digest, "", func(d *attest.Document) { d.Subject.DecisionID = "dec-0" }),
			digest, v, attest.ErrSubject},
		{"an attestation of another work", p.decision(t, "approve", digest, "", func(d *attest.Document) { d.Subject.WorkID = "work_b" }),
			digest, v, attest.ErrSubject},
		{"another issuer", p.decision(t, "approve", digest, "", func(d *attest.Document) { d.Issuer = "https://evil.example" }),
			digest, v, attest.ErrIssuer},
		{"another answer", func() *workclient.Decision {
			d := p.decision(t, "answer", "", "yes", nil)
			d.Answer = "no"
			return d
		}(), "", v, attest.ErrAction},
		{"an empty answer attested as another", func() *workclient.Decision {
			d := p.decision(t, "answer", "", "yes", nil)
			d.Answer = ""
			return d
		}(), "", v, attest.ErrAction},
	}
	for _, c := range cases {
		if _, err := c.verify.Verify(ctx, c.d, c.digest); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.what, err, c.want)
		}
	}
	// The helper is the same check.
	if _, err := workclient.VerifyDecision(ctx, p.decision(t, "approve", digest, "", nil), p.keys, issuer, bigger); !errors.Is(err, attest.ErrAction) {
		t.Errorf("VerifyDecision with another action: %v", err)
	}
}

// The golden decision with an attestation (agentwork/testdata/vectors.json)
// verifies with the golden test key (attest/testdata/vectors.json), and
// fails when any byte of it changes.
func TestGoldenDecisionAttestation(t *testing.T) {
	t.Parallel()
	var d workclient.Decision
	found := false
	for _, v := range agentworktest.Typed(t, agentworktest.Decision) {
		if strings.Contains(v.Input, `"attestation"`) {
			agentworktest.DecodeStrict(t, v, &d)
			found = true
		}
	}
	if !found {
		t.Fatal("no golden decision carries an attestation")
	}
	raw, err := os.ReadFile("../attest/testdata/vectors.json")
	if err != nil {
		t.Fatal(err)
	}
	var golden struct {
		JWKS json.RawMessage `json:"jwks"`
	}
	if err := json.Unmarshal(raw, &golden); err != nil {
		t.Fatal(err)
	}
	keys, err := attest.ParseJWKS(golden.JWKS)
	if err != nil {
		t.Fatal(err)
	}
	at := func() time.Time { return time.Date(2026, 3, 1, 9, 31, 0, 0, time.UTC) }
	v := &workclient.DecisionVerifier{Keys: keys, Issuer: issuer, Now: at}
	if _, err := v.Verify(context.Background(), &d, d.ExpectedActionDigest); err != nil {
		t.Fatalf("the golden decision: %v", err)
	}
	for i := 0; i < len(d.Attestation); i++ {
		if d.Attestation[i] == '.' {
			continue
		}
		changed := d
		b := []byte(d.Attestation)
		b[i] ^= 0x01
		changed.Attestation = string(b)
		if _, err := v.Verify(context.Background(), &changed, d.ExpectedActionDigest); err == nil {
			t.Fatalf("byte %d changed: still verifies", i)
		}
	}
}

// A DecisionReceiver with Attestations refuses a push whose attestation is
// missing or does not match the document; a valid one is received.
func TestDecisionReceiverVerifiesAttestations(t *testing.T) {
	t.Parallel()
	p := newProvider(t)
	secret := webhook.NewSecret()
	rcv := &workclient.DecisionReceiver{BearerSecret: "bearer-0123456789abcdef", Secrets: []string{secret}, Now: func() time.Time { return now },
		Attestations: &workclient.DecisionVerifier{Keys: p.keys, Issuer: issuer, Now: func() time.Time { return now }}}
	push := func(d *workclient.Decision) *http.Request {
		body, _ := json.Marshal(d)
		r := httptest.NewRequest(http.MethodPost, "/decisions", strings.NewReader(string(body)))
		key, _ := webhook.ParseSecret(secret)
		key.SetHeaders(r.Header, "msg-"+d.DecisionID, now, body)
		r.Header.Set("Authorization", "Bearer bearer-0123456789abcdef")
		return r
	}
	digest := digestOf(t, refundAction)
	// Signed with the endpoint's secret, but its attestation is for another
	// action than the document claims: someone holding the secret (not the
	// provider) wrote it.
	bad := p.decision(t, "approve", digest, "", nil)
	bad.ExpectedActionDigest = digestOf(t, map[string]any{"tool": "delete_customer"})
	if _, err := rcv.Receive(push(bad)); !errors.Is(err, attest.ErrAction) {
		t.Fatalf("a push whose attestation is for another action: %v", err)
	}
	missing := p.decision(t, "approve", digest, "", nil)
	missing.Attestation = ""
	if _, err := rcv.Receive(push(missing)); !errors.Is(err, workclient.ErrNoAttestation) {
		t.Fatalf("a push without an attestation: %v", err)
	}
	// The refused decision ID was not recorded as received: the provider's
	// genuine push of it is received.
	good := p.decision(t, "approve", digest, "", nil)
	d, err := rcv.Receive(push(good))
	if err != nil || d.DecisionID != "dec-1" {
		t.Fatalf("a valid push: %v, %v", d, err)
	}
}
