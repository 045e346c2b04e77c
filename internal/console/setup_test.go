package console_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/agentowl/agentowl"
	"github.com/agentowl/agentowl/internal/server"
	"github.com/agentowl/agentowl/internal/server/servertest"
	"github.com/agentowl/agentowl/internal/store/storetest"
)

// site is one test's running server and its admin operator token.
type site struct {
	t     testing.TB
	srv   *server.Server
	url   string
	admin string
}

// start starts a server on backend b; adjust changes its configuration
// first (clock, egress, public URL).
func start(t testing.TB, b storetest.Backend, adjust func(*server.Config)) *site {
	t.Helper()
	cfg := servertest.Config(t, b)
	cfg.Console.RefreshInterval = 300 * time.Millisecond
	if adjust != nil {
		adjust(&cfg)
	}
	srv := servertest.Start(t, cfg)
	return &site{t: t, srv: srv, url: srv.URL(), admin: srv.BootstrapToken()}
}

// forEachBackend runs fn as a parallel subtest per store backend.
func forEachBackend(t *testing.T, fn func(t *testing.T, b storetest.Backend)) {
	for _, b := range storetest.Backends(t) {
		t.Run(b.Name, func(t *testing.T) {
			t.Parallel()
			fn(t, b)
		})
	}
}

// api calls the operator, provider or runtime API and decodes the answer.
func (s *site) api(method, path, token string, body any, headers ...string) (int, map[string]any) {
	s.t.Helper()
	req, err := servertest.NewRequest(method, s.url+path, token, body, headers...)
	if err != nil {
		s.t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	var out map[string]any
	_ = json.Unmarshal(data, &out)
	return resp.StatusCode, out
}

// must is api that fails the test unless the status is want.
func (s *site) must(want int, method, path, token string, body any, headers ...string) map[string]any {
	s.t.Helper()
	st, out := s.api(method, path, token, body, headers...)
	if st != want {
		s.t.Fatalf("%s %s: %d, want %d: %v", method, path, st, want, out)
	}
	return out
}

// operator adds an operator of role to tenant default and returns a token.
func (s *site) operator(name, role string) string {
	s.t.Helper()
	s.must(http.StatusCreated, http.MethodPost, "/api/v1/tenants/default/operators", s.admin, map[string]any{"name": name, "role": role})
	return s.must(http.StatusCreated, http.MethodPost, "/api/v1/tenants/default/operator-tokens", s.admin,
		map[string]any{"operator": name})["token"].(string)
}

// instance provisions an AAP instance and returns its credential.
func (s *site) instance() string {
	s.t.Helper()
	prov := s.must(http.StatusCreated, http.MethodPost, "/api/v1/tenants/default/provisioner-tokens", s.admin, map[string]any{})["token"].(string)
	inst := s.must(http.StatusCreated, http.MethodPost, "/v1/instances", prov, map[string]any{}, "Idempotency-Key", agentowl.NewID(""))
	return inst["credential"].(map[string]any)["token"].(string)
}

// request submits an AAP approval request and returns its ID.
func (s *site) request(cred string, body map[string]any) string {
	s.t.Helper()
	return s.must(http.StatusCreated, http.MethodPost, "/v1/requests", cred, body, "Idempotency-Key", agentowl.NewID(""))["id"].(string)
}

// hostile is text an agent or sender could write to attack the console.
const hostile = `<script>window.__xss=1</script>"><img src=x onerror="window.__xss=2">`

func refund(reasoning string) map[string]any {
	return map[string]any{"tool": "issue_refund", "arguments": map[string]any{"order": "A-1234", "amount": 4900, "note": hostile},
		"timeout": "1h", "agent_reasoning": reasoning}
}

// browserless is an HTTP client of the console that keeps cookies and does
// not follow redirects.
type browserless struct {
	t    testing.TB
	s    *site
	http *http.Client
}

func (s *site) client() *browserless {
	jar, _ := cookiejar.New(nil)
	return &browserless{t: s.t, s: s, http: &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse
	}}}
}

type page struct {
	Status int
	Header http.Header
	Body   string
}

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// CSRF is the first form's CSRF token on the page.
func (p *page) CSRF() string {
	m := csrfField.FindStringSubmatch(p.Body)
	if m == nil {
		return ""
	}
	return m[1]
}

func (b *browserless) do(req *http.Request) *page {
	b.t.Helper()
	resp, err := b.http.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return &page{Status: resp.StatusCode, Header: resp.Header, Body: string(data)}
}

func (b *browserless) get(path string) *page {
	b.t.Helper()
	req, _ := http.NewRequest(http.MethodGet, b.s.url+path, nil)
	return b.do(req)
}

// post sends a form; headers are name, value pairs.
func (b *browserless) post(path string, form url.Values, headers ...string) *page {
	b.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, b.s.url+path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	return b.do(req)
}

// signIn signs in with token and returns the redirect's page.
func (b *browserless) signIn(token string) *page {
	b.t.Helper()
	form := b.get("/console/sign-in")
	return b.post("/console/sign-in", url.Values{"csrf": {form.CSRF()}, "token": {token}})
}

// cookie returns the Set-Cookie of name on p, parsed.
func (p *page) cookie(name string) *http.Cookie {
	for _, c := range (&http.Response{Header: p.Header}).Cookies() {
		if c.Name == name {
			return c
		}
	}
	return nil
}

var _ = agentowl.ValidSlug
