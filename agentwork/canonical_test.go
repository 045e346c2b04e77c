package agentwork_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/agentowl/agentowl/agentwork"
	"github.com/agentowl/agentowl/agentwork/agentworktest"
)

// TestGoldenCanonical checks every golden vector: its canonical bytes, its
// digest, and that canonical bytes are their own canonical form.
func TestGoldenCanonical(t *testing.T) {
	t.Parallel()
	for _, v := range agentworktest.Vectors(t) {
		got, err := agentwork.Canonicalize([]byte(v.Input))
		if err != nil || string(got) != v.Canonical {
			t.Errorf("%s: Canonicalize = %s, %v; want %s", v.Name, got, err, v.Canonical)
			continue
		}
		if again, err := agentwork.Canonicalize(got); err != nil || string(again) != v.Canonical {
			t.Errorf("%s: canonical form is not stable: %s, %v", v.Name, again, err)
		}
		if sum := sha256.Sum256(got); hex.EncodeToString(sum[:]) != v.SHA256 {
			t.Errorf("%s: sha256 = %x, want %s", v.Name, sum, v.SHA256)
		}
		if d, err := agentwork.ActionDigest(json.RawMessage(v.Input)); err != nil || d != v.SHA256 {
			t.Errorf("%s: ActionDigest = %s, %v; want %s", v.Name, d, err, v.SHA256)
		}
	}
}

// TestGoldenDocuments checks that each golden document decodes into its Go
// type without unknown fields and that the type renders the same canonical
// bytes: the types carry every field and drop or add nothing.
func TestGoldenDocuments(t *testing.T) {
	t.Parallel()
	types := map[string]func() any{
		agentworktest.Handoff:    func() any { return new(agentwork.Handoff) },
		agentworktest.Callback:   func() any { return new(agentwork.Callback) },
		agentworktest.Request:    func() any { return new(agentwork.Request) },
		agentworktest.Decision:   func() any { return new(agentwork.Decision) },
		agentworktest.Acceptance: func() any { return new(agentwork.Acceptance) },
	}
	for typ, alloc := range types {
		for _, v := range agentworktest.Typed(t, typ) {
			doc := alloc()
			agentworktest.DecodeStrict(t, v, doc)
			got, err := agentwork.CanonicalJSON(doc)
			if err != nil || string(got) != v.Canonical {
				t.Errorf("%s: CanonicalJSON(%T) = %s, %v; want %s", v.Name, doc, got, err, v.Canonical)
			}
		}
	}
}

// TestGoldenActions checks action digests computed from an action's
// parts, as a runtime or the server would build it.
func TestGoldenActions(t *testing.T) {
	t.Parallel()
	for v, a := range agentworktest.Decoded[agentworktest.ActionDocument](t, agentworktest.Action) {
		d, err := agentwork.ActionDigest(map[string]any{"tool": a.Tool, "arguments": a.Arguments})
		if err != nil || d != v.SHA256 || !agentwork.IsDigest(d) {
			t.Errorf("%s: ActionDigest = %s, %v; want %s", v.Name, d, err, v.SHA256)
		}
	}
}

func TestCanonicalizeRefuses(t *testing.T) {
	t.Parallel()
	for _, in := range []string{``, `{`, `{"a":1}x`, `{"a":1} {"b":2}`, `[1,]`, `{'a':1}`, `NaN`} {
		if got, err := agentwork.Canonicalize([]byte(in)); err == nil {
			t.Errorf("Canonicalize(%q) = %s, want an error", in, got)
		}
	}
	if _, err := agentwork.Canonicalize([]byte(`{"a":1} 2`)); !errors.Is(err, agentwork.ErrTrailingData) {
		t.Errorf("trailing value: %v, want ErrTrailingData", err)
	}
	if got, err := agentwork.Canonicalize([]byte(" \n{\"a\" : 1}\n\t")); err != nil || string(got) != `{"a":1}` {
		t.Errorf("surrounding whitespace: %s, %v", got, err)
	}
}

func TestIsDigest(t *testing.T) {
	t.Parallel()
	ok := strings.Repeat("0123456789abcdef", 4)
	for s, want := range map[string]bool{ok: true, strings.ToUpper(ok): false, ok[:63]: false, ok + "0": false,
		ok[:63] + "g": false, "": false} {
		if IsDigest := agentwork.IsDigest(s); IsDigest != want {
			t.Errorf("IsDigest(%q) = %v, want %v", s, IsDigest, want)
		}
	}
}

func ExampleActionDigest() {
	d, _ := agentwork.ActionDigest(map[string]any{"tool": "issue_refund",
		"arguments": map[string]any{"order": 1234, "amount": "20.00"}})
	c, _ := agentwork.CanonicalJSON(map[string]any{"tool": "issue_refund",
		"arguments": map[string]any{"order": 1234, "amount": "20.00"}})
	fmt.Println(string(c))
	fmt.Println(d)
	// Output:
	// {"arguments":{"amount":"20.00","order":1234},"tool":"issue_refund"}
	// 5546866fc15179f7612658b38ea8c07988a87254669872d18ffb46a4924e3900
}
