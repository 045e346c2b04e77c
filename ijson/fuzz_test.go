package ijson_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"testing"
	"unicode/utf8"

	"github.com/agentowl/agentowl"
	"github.com/agentowl/agentowl/ijson"
)

// FuzzCheckText checks CheckText against a plain reading of the rule: for
// any input it does not panic, it refuses every input that is not UTF-8
// and passes every UTF-8 input without a "\u0000" in it; and for JSON text
// it passes exactly the inputs that are UTF-8 and whose every string and
// member name, as decoded, is text (agentowl.IsText).
func FuzzCheckText(f *testing.F) {
	for _, s := range []string{
		`{"amount":5000,"note":"ok"}`,
		`{"note":"a\u0000b"}`,
		`{"args":{"lines":["x","\u0000"]}}`,
		"{\"k\":\"\xff\"}",
		`{"args":{"a\u0000":1}}`,
		`{"\u0000":1}`,
		`"\u0000"`,
		"{\"k\":1}\xff",
		`{"escaped":"\\u0000 is text"}`,
		`{"e":"\\\u0000"}`,
		`{"s":"\ud800","t":"\u00e9\u2028"}`,
		`[{"a":[{"b":{"c":"\u0000"}}]},"x"]`,
		`{"a":1,"a":2}`,
		"{\"caf\xc3\xa9\":\"\xe2\x82\"}",
		`{"k":"a\u0000`,
		`[1, 2.5e300, -0, true, null, "x"]`,
		``,
		"\x00",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		p := ijson.CheckText(data)
		switch {
		case !utf8.Valid(data) && p == nil:
			t.Fatalf("%q is not UTF-8, yet passes", data)
		case utf8.Valid(data) && !bytes.Contains(data, []byte(`\u0000`)) && p != nil:
			t.Fatalf("%q holds neither invalid UTF-8 nor \\u0000, yet is refused: %+v", data, p)
		}
		_, _ = ijson.DuplicateName(data) // nor does it panic
		if !json.Valid(data) {
			return
		}
		text, err := allText(data)
		if err != nil {
			t.Fatalf("%q: valid JSON, yet decoding it failed: %v", data, err)
		}
		if want := utf8.Valid(data) && text; (p == nil) != want {
			t.Fatalf("%q: CheckText = %+v; UTF-8 %v, every decoded string and name text %v", data, p, utf8.Valid(data), text)
		}
	})
}

// allText decodes the JSON text data and reports whether every string and
// member name in it is text.
func allText(data []byte) (bool, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	text := true
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			return text, nil
		}
		if err != nil {
			return false, err
		}
		if s, ok := tok.(string); ok && !agentowl.IsText(s) {
			text = false
		}
	}
}
