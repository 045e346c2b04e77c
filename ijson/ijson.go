// Package ijson holds the rule every surface applies to the JSON it
// receives beyond syntax: I-JSON's (RFC 7493) unique member names. It is a
// leaf, so that the server, the harness kit and the MCP gateway share one
// definition.
package ijson

import (
	"bytes"
	"errors"
	"strconv"
	"strings"

	"github.com/go-json-experiment/json/jsontext"
)

// DuplicateName reports where a member name appears twice in one object of
// the JSON text data, as a field path ("amount", "arguments.amount",
// "requests[0].prompt"). RFC 8259 §4 leaves the meaning of such an object
// to each parser: one keeps the first value, another the last, so a policy
// could read {"amount":1} where a tool runs {"amount":5000}. I-JSON (RFC
// 7493) forbids them, and so does every surface that takes JSON here. It
// reports nothing for text that is not JSON: syntax is the decoder's to
// refuse.
func DuplicateName(data []byte) (path string, found bool) {
	// Names are compared as the decoder reads them: after unescaping, so
	// "a" and "\u0061" are one name. Invalid UTF-8 is another rule's.
	_, err := jsontext.NewDecoder(bytes.NewReader(data), jsontext.AllowInvalidUTF8(true)).ReadValue()
	var se *jsontext.SyntacticError
	if !errors.As(err, &se) || !errors.Is(se.Err, jsontext.ErrDuplicateName) {
		return "", false
	}
	return fieldPath(string(se.JSONPointer)), true
}

// fieldPath writes a JSON pointer ("/requests/0/prompt") as a field path
// ("requests[0].prompt"); a segment of digits reads as an array index.
func fieldPath(pointer string) string {
	var b strings.Builder
	for i, seg := range strings.Split(strings.TrimPrefix(pointer, "/"), "/") {
		seg = strings.NewReplacer("~1", "/", "~0", "~").Replace(seg)
		if _, err := strconv.Atoi(seg); err == nil && i > 0 {
			b.WriteString("[" + seg + "]")
			continue
		}
		if i > 0 {
			b.WriteByte('.')
		}
		b.WriteString(seg)
	}
	return b.String()
}
