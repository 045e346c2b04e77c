package httpapi

import (
	"errors"
	"io"
	"mime"
	"net/http"
	"os"

	"github.com/agentowl/agentowl"
	"github.com/agentowl/agentowl/ijson"
)

// readBody reads an application/json request body of at most limit bytes
// (limit <= 0: only the server's MaxBodyBytes) and applies the text rule
// to it. Every handler that takes a body reads it here, after the caller
// is authenticated, so the rule holds on every surface before any
// use-case runs.
func readBody(r *http.Request, limit int64) ([]byte, error) {
	return readBodyOf(r, "application/json", limit)
}

// readBodyOf is readBody of a body of media type mediaType.
func readBodyOf(r *http.Request, mediaType string, limit int64) ([]byte, error) {
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mt != mediaType {
		return nil, agentowl.Errorf(agentowl.ECodeInvalidContentType, "The request body must be %s.", mediaType)
	}
	var rd io.Reader = r.Body
	if limit > 0 {
		rd = io.LimitReader(r.Body, limit+1)
	}
	data, err := io.ReadAll(rd)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		// The body did not arrive within ReadTimeout: drop the connection,
		// as net/http drops one whose headers are late. AAP clients take
		// a lost answer as a reason to retry with the same key.
		panic(http.ErrAbortHandler)
	}
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, agentowl.Errorf(agentowl.ECodeTooLarge, "The request body exceeds %d bytes.", mbe.Limit)
		}
		return nil, agentowl.Errorf(agentowl.ECodeInvalidRequest, "The request body could not be read.")
	}
	if limit > 0 && int64(len(data)) > limit {
		return nil, agentowl.Errorf(agentowl.ECodeTooLarge, "The request body exceeds %d bytes.", limit)
	}
	if err := checkText(data); err != nil {
		return nil, err
	}
	if mediaType == "application/json" {
		if path, dup := ijson.DuplicateName(data); dup {
			return nil, agentowl.FieldError(agentowl.ECodeInvalidJSON, path,
				"%s appears twice in one object: member names must be unique (RFC 8259 §4, I-JSON).", path)
		}
	}
	return data, nil
}

// isText is the text rule for one value (agentowl.IsText).
func isText(s string) bool { return agentowl.IsText(s) }

// checkURL applies the text rule to the URL before routing: a path that is
// not text names nothing (404 not_found), and a query parameter that is not
// text is invalid_field. Path values and parameters reach the stores as
// lookup keys, where PostgreSQL would refuse them (SQLSTATE 22021).
func checkURL(r *http.Request) error {
	if !isText(r.URL.Path) {
		return agentowl.Errorf(agentowl.ECodeNotFound, "Nothing is at this path: it is not UTF-8 text without U+0000.")
	}
	for name, values := range r.URL.Query() {
		if !isText(name) {
			return agentowl.Errorf(agentowl.ECodeInvalidRequest, "A query parameter name is not UTF-8 text without U+0000.")
		}
		for _, v := range values {
			if !isText(v) {
				return agentowl.FieldError(agentowl.ECodeInvalidField, name, "%s must be UTF-8 text without U+0000.", name)
			}
		}
	}
	return nil
}

// checkText is the one input rule for text (ijson.CheckText): the refusal
// is invalid_field naming the field's path (arguments.k,
// requests[0].prompt), or invalid_json where no field can be named.
// Syntax errors are left to the decoder that reads the body next.
func checkText(data []byte) error {
	p := ijson.CheckText(data)
	switch {
	case p == nil:
		return nil
	case p.Name && p.Path == "":
		return agentowl.Errorf(agentowl.ECodeInvalidJSON, "A member name in the request body is not UTF-8 text without U+0000.")
	case p.Name:
		return agentowl.FieldError(agentowl.ECodeInvalidField, p.Path, "A member name in %s is not UTF-8 text without U+0000.", p.Path)
	case p.Path != "":
		return agentowl.FieldError(agentowl.ECodeInvalidField, p.Path, "%s must be UTF-8 text without U+0000.", p.Path)
	case p.Outside:
		return agentowl.Errorf(agentowl.ECodeInvalidJSON, "The request body is not UTF-8 text.")
	}
	return agentowl.Errorf(agentowl.ECodeInvalidJSON, "The request body is not UTF-8 text without U+0000.")
}
