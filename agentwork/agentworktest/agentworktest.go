// Package agentworktest loads the agent-work golden vectors,
// agentwork/testdata/vectors.json, so that the protocol package's tests,
// the server's tests and the workclient SDK's tests check the same
// documents, canonical bytes and digests. It is for tests only and reads
// the file from the module's source tree.
package agentworktest

import (
	"encoding/json"
	"iter"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// Document types of Vector.Type.
const (
	Plain      = ""           // any JSON value
	Handoff    = "handoff"    // agentwork.Handoff
	Callback   = "callback"   // agentwork.Callback
	Request    = "request"    // agentwork.Request
	Decision   = "decision"   // agentwork.Decision
	Acceptance = "acceptance" // agentwork.Acceptance
	Action     = "action"     // an AAP action, ActionDocument
)

// ActionDocument is the document of an Action vector.
type ActionDocument struct {
	Tool      string          `json:"tool"`
	Arguments json.RawMessage `json:"arguments"`
}

// Vector is one golden vector.
type Vector struct {
	Name string `json:"name"`
	// Type is the document type of Input (Plain, Handoff, …).
	Type string `json:"type"`
	// Input is the document as a sender might write it: whitespace, key
	// order, escapes and number forms are not canonical.
	Input string `json:"input"`
	// Canonical is Input's canonical JSON.
	Canonical string `json:"canonical"`
	// SHA256 is the lowercase hex SHA-256 of Canonical: for an Action, its
	// action digest.
	SHA256 string `json:"sha256"`
}

// Path is the vectors file's path in the source tree.
func Path() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "testdata", "vectors.json")
}

// Vectors returns every vector, failing t if the file cannot be read.
func Vectors(t testing.TB) []Vector {
	t.Helper()
	data, err := os.ReadFile(Path())
	if err != nil {
		t.Fatalf("agent-work vectors: %v", err)
	}
	var vs []Vector
	if err := json.Unmarshal(data, &vs); err != nil {
		t.Fatalf("agent-work vectors: %v", err)
	}
	if len(vs) == 0 {
		t.Fatal("agent-work vectors: none")
	}
	return vs
}

// Typed returns the vectors of one document type, failing t if there are
// none (a check over no vectors cannot fail).
func Typed(t testing.TB, typ string) []Vector {
	t.Helper()
	var out []Vector
	for _, v := range Vectors(t) {
		if v.Type == typ {
			out = append(out, v)
		}
	}
	if len(out) == 0 {
		t.Fatalf("agent-work vectors: none of type %q", typ)
	}
	return out
}

// DecodeStrict decodes a vector's input into a document type, refusing
// unknown fields: every field of a golden document must exist in the Go
// type, or the type would silently drop it.
func DecodeStrict(t testing.TB, v Vector, into any) {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(v.Input))
	dec.DisallowUnknownFields()
	dec.UseNumber()
	if err := dec.Decode(into); err != nil {
		t.Fatalf("%s: decoding as %s: %v", v.Name, v.Type, err)
	}
}

// Decoded yields the vectors of one document type, each with its input
// decoded strictly (DecodeStrict) into a T, failing t if there are none.
func Decoded[T any](t testing.TB, typ string) iter.Seq2[Vector, T] {
	t.Helper()
	vs := Typed(t, typ)
	return func(yield func(Vector, T) bool) {
		for _, v := range vs {
			var doc T
			DecodeStrict(t, v, &doc)
			if !yield(v, doc) {
				return
			}
		}
	}
}
