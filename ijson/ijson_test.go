package ijson_test

import (
	"testing"

	"github.com/agentowl/agentowl/ijson"
)

func TestDuplicateName(t *testing.T) {
	for _, c := range []struct {
		json, path string
	}{
		{`{"amount":5000,"amount":1}`, "amount"},
		{`{"tool":"refund","arguments":{"amount":5000,"currency":"EUR","amount":1}}`, "arguments.amount"},
		{`{"requests":[{"id":"q1"},{"id":"q2","prompt":"a","prompt":"b"}]}`, "requests[1].prompt"},
		{`{"a":1,"\u0061":2}`, "a"}, // one name, however escaped
		{`{"a/b":{"x":1,"x":2}}`, "a/b.x"},
		{`[{"k":1},{"k":2}]`, ""},         // the same name in two objects is fine
		{`{"k":{"k":{"k":1}}}`, ""},       // and nested
		{`{"amount":5000}`, ""},           // none
		{`{"amount":`, ""},                // not JSON: syntax is the decoder's
		{"{\"a\":\"\xff\",\"a\":1}", "a"}, // invalid UTF-8 is another rule's; the duplicate is still found
	} {
		path, found := ijson.DuplicateName([]byte(c.json))
		if found != (c.path != "") || path != c.path {
			t.Errorf("%s: %q %v, want %q", c.json, path, found, c.path)
		}
	}
}

func FuzzDuplicateName(f *testing.F) {
	for _, s := range []string{`{"a":1,"a":2}`, `{"a":[{"b":1,"b":2}]}`, `{}`, `[1,2]`, `"x"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		path, found := ijson.DuplicateName(data)
		if !found && path != "" {
			t.Fatalf("a path %q without a duplicate", path)
		}
	})
}

func TestCheckText(t *testing.T) {
	for _, c := range []struct {
		json string
		want *ijson.TextProblem
	}{
		{`{"amount":5000,"note":"ok"}`, nil},
		{`{"note":"a\u0000b"}`, &ijson.TextProblem{Path: "note"}},
		{`{"args":{"lines":["x","\u0000"]}}`, &ijson.TextProblem{Path: "args.lines[1]"}},
		{"{\"k\":\"\xff\"}", &ijson.TextProblem{Path: "k"}},
		{`{"args":{"a\u0000":1}}`, &ijson.TextProblem{Path: "args", Name: true}},
		{`{"\u0000":1}`, &ijson.TextProblem{Name: true}},
		{`"\u0000"`, &ijson.TextProblem{}},
		{"{\"k\":1}\xff", &ijson.TextProblem{Outside: true}},
		{`{"escaped":"\\u0000 is text"}`, nil}, // a backslash then u0000: text
	} {
		got := ijson.CheckText([]byte(c.json))
		if (got == nil) != (c.want == nil) || got != nil && *got != *c.want {
			t.Errorf("%q: got %+v, want %+v", c.json, got, c.want)
		}
	}
}
