package conformance

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
)

// maxEvidenceBody bounds a body kept as evidence.
const maxEvidenceBody = 4096

// maxBody bounds a body read from the implementation under test.
const maxBody = 1 << 20

// noRedirects is the CheckRedirect of every client of the kit: a redirect
// is an answer to check, never followed.
func noRedirects(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

// newHTTPClient returns a client that never follows redirects.
func newHTTPClient(timeout time.Duration, tlsConfig *tls.Config) *http.Client {
	tr := &http.Transport{Proxy: nil, TLSClientConfig: tlsConfig, MaxIdleConnsPerHost: 16, ForceAttemptHTTP2: false}
	return &http.Client{Timeout: timeout, CheckRedirect: noRedirects, Transport: tr}
}

// Exchange is one HTTP exchange with the implementation under test.
type Exchange struct {
	Method     string
	URL        string
	Path       string // the request path relative to the base URL
	ReqHeader  http.Header
	ReqBody    []byte
	Status     int
	RespHeader http.Header
	RespBody   []byte
	Err        error
	Elapsed    time.Duration
	// Check is the ID of the check that sent it.
	Check string
}

// JSON decodes the response body into a generic value (numbers as
// json.Number); nil if it is not JSON.
func (x *Exchange) JSON() map[string]any {
	dec := json.NewDecoder(bytes.NewReader(x.RespBody))
	dec.UseNumber()
	var m map[string]any
	if dec.Decode(&m) != nil {
		return nil
	}
	return m
}

// ErrorCode is error.code of an error answer, or "".
func (x *Exchange) ErrorCode() string {
	var e struct {
		Error struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	_ = json.Unmarshal(x.RespBody, &e)
	return e.Error.Code
}

// Describe is a one-line account of the exchange for a failure reason.
func (x *Exchange) Describe() string {
	if x.Err != nil {
		return fmt.Sprintf("%s %s failed: %v", x.Method, x.Path, x.Err)
	}
	body := strings.TrimSpace(string(x.RespBody))
	if len(body) > 300 {
		body = body[:300] + "…"
	}
	return fmt.Sprintf("%s %s answered %d %s", x.Method, x.Path, x.Status, body)
}

var evidenceHeaders = []string{"Authorization", "Idempotency-Key", "Content-Type", "X-Request-ID", "Retry-After",
	"Location", "webhook-id", "webhook-timestamp", "webhook-signature"}

func (x *Exchange) evidence() Evidence {
	e := Evidence{Request: &Message{Method: x.Method, URL: x.URL, Body: clip(x.ReqBody), Headers: pick(x.ReqHeader)},
		ElapsedMS: x.Elapsed.Milliseconds()}
	if x.Err != nil {
		e.Error = x.Err.Error()
	} else {
		e.Response = &Message{Status: x.Status, Body: clip(x.RespBody), Headers: pick(x.RespHeader)}
	}
	return e
}

func pick(h http.Header) map[string]string {
	out := map[string]string{}
	for _, k := range evidenceHeaders {
		if v := h.Values(k); len(v) > 0 {
			out[k] = strings.Join(v, ", ")
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

func clip(b []byte) string {
	if len(b) > maxEvidenceBody {
		return string(b[:maxEvidenceBody]) + fmt.Sprintf("… (%d bytes)", len(b))
	}
	return string(b)
}

// api is a client of a provider's /v1 API that records every exchange:
// as evidence of the check that sent it, and for the contract check.
type api struct {
	base string
	http *http.Client

	mu  sync.Mutex
	log []*Exchange
}

// call sends one request. body is JSON-encoded unless it is a []byte or a
// string, sent as is. headers are name, value pairs.
func (a *api) call(ctx context.Context, t *T, checkID, method, path, token string, body any, headers ...string) *Exchange {
	var raw []byte
	switch b := body.(type) {
	case nil:
	case []byte:
		raw = b
	case string:
		raw = []byte(b)
	default:
		var err error
		if raw, err = json.Marshal(b); err != nil {
			panic(err)
		}
	}
	x := &Exchange{Method: method, URL: strings.TrimRight(a.base, "/") + path, Path: path, ReqBody: raw, Check: checkID}
	var rd io.Reader
	if raw != nil {
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequestWithContext(ctx, method, x.URL, rd)
	if err != nil {
		x.Err = err
		t.add(x.evidence())
		return x
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if raw != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	x.ReqHeader = req.Header.Clone()
	for attempt := 1; ; attempt++ {
		a.send(t, x, req, raw)
		// A provider shedding load (503) or limiting the caller (429)
		// says when to come back: the kit does, a few times. Retrying is
		// safe: every write carries its idempotency key.
		wait, again := retryAfter(x)
		if !again || attempt == 4 {
			return x
		}
		t.Notef("the provider answered %d with Retry-After: the kit waits %s and sends the same request again", x.Status, wait)
		select {
		case <-ctx.Done():
			return x
		case <-time.After(wait):
		}
		if raw != nil {
			req.Body = io.NopCloser(bytes.NewReader(raw))
		}
	}
}

// retryAfter reports whether x is a 429 or 503 with a Retry-After of at
// most 30 seconds, and that delay.
func retryAfter(x *Exchange) (time.Duration, bool) {
	if x.Err != nil || (x.Status != http.StatusServiceUnavailable && x.Status != http.StatusTooManyRequests) {
		return 0, false
	}
	secs, err := strconv.Atoi(x.RespHeader.Get("Retry-After"))
	if err != nil || secs < 0 || secs > 30 {
		return 0, false
	}
	return max(time.Duration(secs)*time.Second, 100*time.Millisecond), true
}

// send performs one attempt of x.
func (a *api) send(t *T, x *Exchange, req *http.Request, raw []byte) {
	x.Err, x.Status, x.RespHeader, x.RespBody = nil, 0, nil, nil
	start := time.Now()
	resp, err := a.http.Do(req)
	if err != nil {
		x.Err, x.Elapsed = err, time.Since(start)
		t.add(x.evidence())
		return
	}
	x.RespBody, err = io.ReadAll(io.LimitReader(resp.Body, maxBody))
	resp.Body.Close()
	x.Elapsed = time.Since(start)
	x.Status, x.RespHeader = resp.StatusCode, resp.Header
	if err != nil {
		x.Err = err
	}
	t.add(x.evidence())
	cp := *x
	a.mu.Lock()
	a.log = append(a.log, &cp)
	a.mu.Unlock()
}

// exchanges returns every exchange recorded so far.
func (a *api) exchanges() []*Exchange {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]*Exchange(nil), a.log...)
}

// relativePath returns u's path and query relative to base's path.
func relativePath(base, full string) string {
	bu, err1 := url.Parse(base)
	fu, err2 := url.Parse(full)
	if err1 != nil || err2 != nil {
		return full
	}
	p := strings.TrimPrefix(fu.EscapedPath(), strings.TrimRight(bu.EscapedPath(), "/"))
	if fu.RawQuery != "" {
		p += "?" + fu.RawQuery
	}
	return p
}
