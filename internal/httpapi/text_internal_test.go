package httpapi

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzCheckText checks the text rule against the decoder: a JSON document
// passes exactly when it is UTF-8 and none of its decoded strings or member
// names holds U+0000.
func FuzzCheckText(f *testing.F) {
	for _, s := range []string{`{"a":"b"}`, `{"a":"\u0000"}`, "{\"a\":\"\xff\"}", `{"a":[1,{"b":"x\u0000"}]}`,
		`{"\u0000":1}`, `{"a":{"\u0000":1}}`, `{"a":"\\u0000"}`, `[1e400,"\u0000"]`, "{\"a\":1,\"\xc3\":2}", `"\u0000"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		err := checkText(data)
		if !json.Valid(data) {
			return // refused by the decoder that reads the body next
		}
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.UseNumber()
		var v any
		if dec.Decode(&v) != nil {
			t.Fatalf("json.Valid but not decodable: %q", data)
		}
		want := utf8.Valid(data) && !holdsNUL(v)
		if (err == nil) != want {
			t.Fatalf("checkText(%q) = %v, want pass=%v", data, err, want)
		}
	})
}

func holdsNUL(v any) bool {
	switch v := v.(type) {
	case string:
		return strings.ContainsRune(v, 0)
	case []any:
		for _, x := range v {
			if holdsNUL(x) {
				return true
			}
		}
	case map[string]any:
		for k, x := range v {
			if strings.ContainsRune(k, 0) || holdsNUL(x) {
				return true
			}
		}
	}
	return false
}
