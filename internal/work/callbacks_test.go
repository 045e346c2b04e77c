package work

import (
	"strings"
	"testing"

	"github.com/agentowl/agentowl"
)

const validCallback = `{"version":"agent-work.v1","callback_id":"work_a:1","work_id":"work_a","sequence":1,` +
	`"status":"accepted","occurred_at":"2026-10-06T12:00:00.000Z","runtime_session_id":"s"}`

func TestParseCallback(t *testing.T) {
	t.Parallel()
	in, err := ParseCallback([]byte(validCallback), "work_a")
	if err != nil {
		t.Fatal(err)
	}
	if in.CallbackID != "work_a:1" || in.Sequence != 1 || in.Status != "accepted" || in.RuntimeSessionID != "s" {
		t.Fatalf("parsed = %+v", in)
	}
	for _, c := range []struct{ body, code, param string }{
		{strings.Replace(validCallback, `"sequence":1`, `"sequence":"1"`, 1), agentowl.ECodeInvalidField, "sequence"},
		{strings.Replace(validCallback, `"sequence":1`, `"sequence":1e3`, 1), agentowl.ECodeInvalidField, "sequence"},
		{strings.Replace(validCallback, `"sequence":1`, `"sequence":99999999999999999999`, 1), agentowl.ECodeInvalidField, "sequence"},
		{strings.Replace(validCallback, `"callback_id":"work_a:1"`, `"callback_id":"a\u0000b"`, 1), agentowl.ECodeInvalidField, "callback_id"},
		{strings.Replace(validCallback, `"callback_id":"work_a:1"`, `"callback_id":"`+strings.Repeat("x", 257)+`"`, 1), agentowl.ECodeInvalidField, "callback_id"},
		{validCallback + "x", agentowl.ECodeInvalidJSON, ""},
		{`null`, agentowl.ECodeInvalidJSON, ""},
	} {
		_, err := ParseCallback([]byte(c.body), "work_a")
		var ae *agentowl.Error
		if !asError(err, &ae) || ae.Code != c.code || ae.Param != c.param {
			t.Errorf("%s: got %v, want %s (%s)", c.body, err, c.code, c.param)
		}
	}
}

func asError(err error, target **agentowl.Error) bool {
	e, ok := err.(*agentowl.Error)
	*target = e
	return ok
}

func TestCheckResultURL(t *testing.T) {
	t.Parallel()
	for raw, ok := range map[string]bool{
		"https://runtime.example/results/1?x=y#frag":           true,
		"https://10.0.0.1/r":                                   true, // never fetched: no address rule applies
		"http://runtime.example/r":                             false,
		"https://user@runtime.example/r":                       false,
		"https://user:pw@runtime.example/r":                    false,
		"https:///r":                                           false,
		"https:runtime.example":                                false,
		"javascript:alert(1)":                                  false,
		"https://runtime.example/" + strings.Repeat("a", 2048): false,
	} {
		if err := CheckResultURL(raw); (err == nil) != ok {
			t.Errorf("CheckResultURL(%q) = %v, want ok %v", raw, err, ok)
		}
	}
}

func TestCanonicalJSON(t *testing.T) {
	t.Parallel()
	a, err := canonicalJSON([]byte(`{"b": 1.0, "a": ["<x>", {"d":2,"c":1}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if string(a) != `{"a":["<x>",{"c":1,"d":2}],"b":1.0}` {
		t.Fatalf("canonical = %s", a)
	}
}

// FuzzParseCallback feeds arbitrary bodies to the callback parser: it must
// never panic, and whatever it accepts must satisfy the format's rules.
func FuzzParseCallback(f *testing.F) {
	f.Add([]byte(validCallback))
	f.Add([]byte(`{"version":"agent-work.v1","callback_id":"c","work_id":"work_a","sequence":9,"status":"completed",` +
		`"occurred_at":"2026-10-06T12:00:00Z","result":{"summary":"s","url":"https://r.example/x"}}`))
	f.Add([]byte(`{"version":"agent-work.v1","callback_id":"c","work_id":"work_a","sequence":2,"status":"needs_input",` +
		`"occurred_at":"2026-10-06T12:00:00+02:00","requests":[{"id":"q1"}]}`))
	f.Add([]byte(`{"version":"agent-work.v1","callback_id":"c","work_id":"work_a","sequence":3,"status":"failed",` +
		`"occurred_at":"2026-10-06T12:00:00Z","error":{"code":"x"}}`))
	f.Add([]byte(`{"sequence":-1}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, body []byte) {
		in, err := ParseCallback(body, "work_a")
		if err != nil {
			if _, ok := err.(*agentowl.Error); !ok {
				t.Fatalf("a non-agentowl error: %v", err)
			}
			return
		}
		if in.WorkID != "work_a" || in.Sequence < 1 || in.CallbackID == "" || in.OccurredAt == "" {
			t.Fatalf("accepted an invalid callback: %+v", in)
		}
		if (in.Requests != nil) != (in.Status == "needs_input") {
			t.Fatalf("requests %s with status %s", in.Requests, in.Status)
		}
		if in.ResultURL != "" && CheckResultURL(in.ResultURL) != nil {
			t.Fatalf("accepted result URL %q", in.ResultURL)
		}
		if _, err := canonicalJSON(body); err != nil {
			t.Fatalf("accepted a body that does not canonicalize: %v", err)
		}
	})
}
