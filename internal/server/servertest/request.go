package servertest

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
)

// NewRequest builds a request to a test server's API as its clients send
// one: token, if any, as a bearer token; body, unless nil, as JSON (a
// string or []byte is sent as is, so tests can send bytes no encoder
// would); headers as name, value pairs. Tests of every face build their
// requests alike, so they build them here.
func NewRequest(method, url, token string, body any, headers ...string) (*http.Request, error) {
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		data, err := json.Marshal(b)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		return nil, err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	return req, nil
}
