package work

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"iter"
	"testing"
	"time"

	"github.com/agentowl/agentowl"
	"github.com/agentowl/agentowl/agentwork"
	"github.com/agentowl/agentowl/agentwork/agentworktest"
)

// The server's side of the agent-work golden vectors
// (agentwork/testdata/vectors.json, also checked by the workclient SDK's
// tests): what the server records, compares and sends has the golden
// canonical bytes and digests.

// TestGoldenCanonicalJSON checks the canonical form RecordCallback records
// and compares duplicates by.
func TestGoldenCanonicalJSON(t *testing.T) {
	t.Parallel()
	for _, v := range agentworktest.Vectors(t) {
		got, err := canonicalJSON([]byte(v.Input))
		if err != nil || string(got) != v.Canonical {
			t.Errorf("%s: canonicalJSON = %s, %v; want %s", v.Name, got, err, v.Canonical)
		}
		if sum := sha256.Sum256(got); hex.EncodeToString(sum[:]) != v.SHA256 {
			t.Errorf("%s: body hash = %x, want %s", v.Name, sum, v.SHA256)
		}
	}
}

// TestGoldenCallbacks parses each golden callback as RecordCallback does.
func TestGoldenCallbacks(t *testing.T) {
	t.Parallel()
	for v, doc := range decoded[agentwork.Callback](t, agentworktest.Callback) {
		in, err := ParseCallback([]byte(v.Input), doc.WorkID)
		if err != nil {
			t.Fatalf("%s: ParseCallback: %v", v.Name, err)
		}
		if in.CallbackID != doc.CallbackID || in.Sequence != doc.Sequence || string(in.Status) != string(doc.Status) {
			t.Errorf("%s: parsed %+v", v.Name, in)
		}
		if doc.Requests != nil {
			var reqs []json.RawMessage
			if err := json.Unmarshal(doc.Requests, &reqs); err != nil || len(in.ParsedRequests) != len(reqs) {
				t.Fatalf("%s: %d parsed requests of %s (%v)", v.Name, len(in.ParsedRequests), doc.Requests, err)
			}
			for i, raw := range reqs {
				want, _ := agentwork.Canonicalize(raw)
				if string(in.ParsedRequests[i].Canonical) != string(want) {
					t.Errorf("%s: request %d recorded as %s, want %s", v.Name, i, in.ParsedRequests[i].Canonical, want)
				}
			}
		}
	}
}

// TestGoldenRequests parses each golden request as a needs_input callback
// carries it: its recorded canonical form and content hash.
func TestGoldenRequests(t *testing.T) {
	t.Parallel()
	for _, v := range agentworktest.Typed(t, agentworktest.Request) {
		r, err := parseRequest(json.RawMessage(v.Input), "requests[0]")
		if err != nil {
			t.Fatalf("%s: %v", v.Name, err)
		}
		if string(r.Canonical) != v.Canonical || hex.EncodeToString(r.Hash) != v.SHA256 {
			t.Errorf("%s: recorded %s (%x), want %s (%s)", v.Name, r.Canonical, r.Hash, v.Canonical, v.SHA256)
		}
	}
}

// TestGoldenHandoffs checks the handoff envelope as deliverTx writes it:
// the event rendered from a stored event, and the envelope's canonical form.
func TestGoldenHandoffs(t *testing.T) {
	t.Parallel()
	for v, doc := range decoded[agentwork.Handoff](t, agentworktest.Handoff) {
		received, err := time.Parse(time.RFC3339, doc.Event.ReceivedAt)
		if err != nil {
			t.Fatal(err)
		}
		e := doc.Event
		doc.Event = ToWireEvent(&agentowl.Event{ID: e.ID, BindingID: e.BindingID, ConversationID: e.ConversationID,
			Channel: e.Channel, Sender: e.Sender, ReceivedAt: received, Headers: e.Headers, Payload: e.Payload,
			Attachments: e.Attachments, FollowUp: e.FollowUp})
		checkCanonical(t, v, "handoff", doc)
	}
}

// TestGoldenDecisions checks the decision document Decide writes and the
// acceptance the push delivery requires.
func TestGoldenDecisions(t *testing.T) {
	t.Parallel()
	for v, doc := range decoded[agentwork.Decision](t, agentworktest.Decision) {
		checkCanonical(t, v, "decision", doc)
	}
	for v, a := range decoded[agentwork.Acceptance](t, agentworktest.Acceptance) {
		if err := CheckAcceptance([]byte(v.Input), a.DecisionID); err != nil {
			t.Errorf("%s: CheckAcceptance: %v", v.Name, err)
		}
		if err := CheckAcceptance([]byte(v.Input), a.DecisionID+"x"); err == nil {
			t.Errorf("%s: accepted for another decision", v.Name)
		}
	}
}

// decoded yields each golden vector of type typ with its document,
// decoded strictly as a T.
func decoded[T any](t *testing.T, typ string) iter.Seq2[agentworktest.Vector, T] {
	return func(yield func(agentworktest.Vector, T) bool) {
		for _, v := range agentworktest.Typed(t, typ) {
			var doc T
			agentworktest.DecodeStrict(t, v, &doc)
			if !yield(v, doc) {
				return
			}
		}
	}
}

// checkCanonical checks that doc, marshalled as the server sends it, has
// vector v's canonical bytes.
func checkCanonical(t *testing.T, v agentworktest.Vector, what string, doc any) {
	t.Helper()
	body, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := canonicalJSON(body); string(got) != v.Canonical {
		t.Errorf("%s: %s = %s, want %s", v.Name, what, got, v.Canonical)
	}
}
