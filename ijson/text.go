package ijson

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"unicode/utf8"
)

// TextProblem is where JSON text breaks the text rule.
type TextProblem struct {
	// Path is the field whose value (or, with Name, one of whose member
	// names) is not text, as a field path ("arguments.k",
	// "requests[0].prompt"); "" when no field can be named (the top level,
	// or bytes outside any string).
	Path string
	// Name is true when a member name, not a value, breaks the rule.
	Name bool
	// Outside is true when bytes outside any string are not UTF-8.
	Outside bool
}

// CheckText applies the one input rule for text to the JSON text data: it
// must be UTF-8, and no string or member name in it, however deep, may hold
// U+0000. It returns nil when data keeps the rule, else where it breaks it.
// PostgreSQL refuses both in text (SQLSTATE 22021) while SQLite keeps them
// and serves back invalid JSON; Go's decoder would silently turn invalid
// bytes into U+FFFD in decoded strings yet keep them in json.RawMessage
// (tool arguments, callback errors, event payloads). Syntax errors are left
// to the decoder that reads the text next.
func CheckText(data []byte) *TextProblem {
	if utf8.Valid(data) && !bytes.Contains(data, []byte(`\u0000`)) {
		return nil // the common case: nothing to look for
	}
	type frame struct {
		path    string
		array   bool
		index   int
		key     string
		wantKey bool
	}
	var stack []*frame
	valuePath := func() string {
		if len(stack) == 0 {
			return ""
		}
		top := stack[len(stack)-1]
		if top.array {
			return top.path + "[" + strconv.Itoa(top.index) + "]"
		}
		if top.path == "" {
			return top.key
		}
		return top.path + "." + top.key
	}
	// next moves the innermost container past the value just read.
	next := func() {
		if len(stack) == 0 {
			return
		}
		if top := stack[len(stack)-1]; top.array {
			top.index++
		} else {
			top.wantKey = true
		}
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber() // any number is read, however large
	start := dec.InputOffset()
	for {
		tok, err := dec.Token()
		if err != nil {
			break
		}
		raw := data[start:dec.InputOffset()] // the token and the delimiters before it
		start = dec.InputOffset()
		switch v := tok.(type) {
		case json.Delim:
			switch v {
			case '{', '[':
				stack = append(stack, &frame{path: valuePath(), array: v == '[', wantKey: v == '{'})
			default:
				stack = stack[:len(stack)-1]
				next()
			}
			continue
		case string:
			bad := !utf8.Valid(raw) || strings.ContainsRune(v, 0)
			if top := len(stack) - 1; top >= 0 && !stack[top].array && stack[top].wantKey {
				if bad {
					return &TextProblem{Path: stack[top].path, Name: true}
				}
				stack[top].key, stack[top].wantKey = v, false
				continue
			}
			if bad {
				return &TextProblem{Path: valuePath()}
			}
		}
		next()
	}
	if !utf8.Valid(data) {
		return &TextProblem{Outside: true}
	}
	return nil
}
