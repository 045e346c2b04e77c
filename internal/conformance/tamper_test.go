package conformance

import (
	"bytes"
	"crypto/tls"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// tamper is an http.Handler in front of a real provider that breaks it
// in one chosen way: before may answer a request itself or change it,
// after may change a recorded answer. Everything else passes through.
type tamper struct {
	upstream string
	client   *http.Client
	before   func(tc *tamperCtx) bool
	after    func(tc *tamperCtx)

	// State a rule may keep (guarded by mu).
	mu    sync.Mutex
	state map[string]any
}

// tamperCtx is one exchange going through the tamper.
type tamperCtx struct {
	tp     *tamper
	w      http.ResponseWriter
	r      *http.Request
	body   []byte
	status int
	header http.Header
	resp   []byte
}

func newTamper(t testing.TB, upstream string) (*tamper, string) {
	tp := &tamper{upstream: upstream, state: map[string]any{},
		client: &http.Client{CheckRedirect: noRedirects, Transport: &http.Transport{MaxIdleConnsPerHost: 64}}}
	srv := httptest.NewServer(tp)
	t.Cleanup(srv.Close)
	return tp, srv.URL
}

// newTamperTLS is newTamper serving HTTPS with tlsCfg.
func newTamperTLS(t testing.TB, upstream string, tlsCfg *tls.Config) (*tamper, string) {
	tp := &tamper{upstream: upstream, state: map[string]any{},
		client: &http.Client{CheckRedirect: noRedirects, Transport: &http.Transport{MaxIdleConnsPerHost: 64}}}
	srv := httptest.NewUnstartedServer(tp)
	srv.TLS = tlsCfg
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return tp, srv.URL
}

func (tp *tamper) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	tc := &tamperCtx{tp: tp, w: w, r: r, body: body}
	if tp.before != nil && tp.before(tc) {
		return
	}
	tc.forward()
	if tp.after != nil {
		tp.after(tc)
	}
	tc.write()
}

// forward sends the (possibly changed) request upstream and records the
// answer.
func (tc *tamperCtx) forward() {
	req, err := http.NewRequestWithContext(tc.r.Context(), tc.r.Method, tc.tp.upstream+tc.r.URL.RequestURI(), bytes.NewReader(tc.body))
	if err != nil {
		panic(err)
	}
	req.Header = tc.r.Header.Clone()
	if len(tc.body) == 0 {
		req.Body, req.ContentLength = nil, 0
	}
	resp, err := tc.tp.client.Do(req)
	if err != nil {
		tc.status, tc.header, tc.resp = http.StatusBadGateway, http.Header{}, []byte(err.Error())
		return
	}
	defer resp.Body.Close()
	tc.resp, _ = io.ReadAll(resp.Body)
	tc.status, tc.header = resp.StatusCode, resp.Header.Clone()
}

func (tc *tamperCtx) write() {
	for k, v := range tc.header {
		if strings.EqualFold(k, "Content-Length") {
			continue
		}
		tc.w.Header()[k] = v
	}
	tc.w.Header().Set("Content-Length", strconv.Itoa(len(tc.resp)))
	tc.w.WriteHeader(tc.status)
	tc.w.Write(tc.resp)
}

// answer replies without the upstream (an error in the contract's format).
func (tc *tamperCtx) answer(status int, body []byte) {
	rid := newUUID()
	tc.w.Header().Set("Content-Type", "application/json")
	tc.w.Header().Set("X-Request-ID", rid)
	tc.w.WriteHeader(status)
	tc.w.Write(bytes.ReplaceAll(body, []byte("{rid}"), []byte(rid)))
}

func errorBody(typ, code string) []byte {
	return []byte(`{"error":{"type":"` + typ + `","code":"` + code + `","message":"tampered","request_id":"{rid}"}}`)
}

func (tc *tamperCtx) token() string {
	return strings.TrimPrefix(tc.r.Header.Get("Authorization"), "Bearer ")
}

// isRequests reports whether the exchange is on /v1/requests[/{id}].
func (tc *tamperCtx) isRequests() bool { return strings.HasPrefix(tc.r.URL.Path, "/v1/requests") }

func (tc *tamperCtx) isInstances() bool { return strings.HasPrefix(tc.r.URL.Path, "/v1/instances") }

// pathID is the {id} of the path, or "".
func (tc *tamperCtx) pathID() string {
	parts := strings.Split(strings.Trim(tc.r.URL.Path, "/"), "/")
	if len(parts) == 3 {
		return parts[2]
	}
	return ""
}

// respJSON decodes the recorded answer (numbers kept as literals).
func (tc *tamperCtx) respJSON() map[string]any {
	var m map[string]any
	if decodeUseNumber(tc.resp, &m) != nil {
		return nil
	}
	return m
}

func (tc *tamperCtx) setResp(m map[string]any) {
	data, err := json.Marshal(m)
	if err != nil {
		panic(err)
	}
	tc.resp = data
}

// replay sends the request upstream again with changes.
func (tc *tamperCtx) replay(edit func(r *http.Request)) {
	edit(tc.r)
	tc.forward()
}

func (tp *tamper) get(key string) any {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	return tp.state[key]
}

func (tp *tamper) set(key string, v any) {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	tp.state[key] = v
}

var _ = url.PathEscape
