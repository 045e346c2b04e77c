package console_test

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/agentowl/agentowl"
	"github.com/agentowl/agentowl/internal/ingress/twilio"
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

// tenantStory is what a new operator would find in a fresh tenant (issue
// 26): an email thread whose reply carries a PDF, an SMS thread, a runtime
// question, a runtime approval, an AAP approval with arguments and an
// incident, all through the real channels and APIs.
type tenantStory struct {
	Endpoint, EmailBinding, SMSBinding string
	// The email thread: the first message's work failed (the incident),
	// the reply (with the PDF) asks for an approval.
	EmailConv, EmailWork1, EmailWork2 string
	// The SMS thread: its second message asks a question.
	SMSConv, SMSWork1, SMSWork2  string
	Question, Approval, Incident string
	// AAP is the AAP request, AAPItem its attention item.
	AAP, AAPItem string
	PDFName      string
	PDF          []byte
	Digest       string
}

// storyHostile is what the customer's reply and the agent write: it must
// render as text.
const storyHostile = `<script>window.__xss=1</script><img src=x onerror="window.__xss=2">`

// seedStory fills tenant default of s with a tenantStory. The question
// expires in 10 minutes (soonest), the runtime approval in 2 hours, the
// AAP request in 1 hour.
func (s *site) seedStory() *tenantStory {
	s.t.Helper()
	base := "/api/v1/tenants/default"
	st := &tenantStory{PDFName: "invoice-A-1234.pdf", PDF: []byte("%PDF-1.4\n1 0 obj<</Type/Catalog>>endobj\ntrailer<</Root 1 0 R>>\n%%EOF\n")}
	st.Endpoint = s.must(http.StatusCreated, http.MethodPost, base+"/endpoints", s.admin, map[string]any{"name": "Support desk",
		"url": "https://runtime.example.com/events", "config": map[string]any{"agent_work": true}})["id"].(string)
	tok := s.must(http.StatusCreated, http.MethodPost, base+"/endpoints/"+st.Endpoint+"/runtime-credentials", s.admin,
		map[string]any{"scopes": []string{"callbacks:write"}})["token"].(string)

	// Email, through the cloudflare-email channel: a message, then a reply
	// with the invoice attached.
	cf := s.must(http.StatusCreated, http.MethodPost, base+"/bindings", s.admin, map[string]any{"channel": "cloudflare-email",
		"endpoint_id": st.Endpoint, "name": "Support inbox"})
	st.EmailBinding = cf["id"].(string)
	mail := func(raw string) map[string]any {
		req, _ := http.NewRequest(http.MethodPost, cf["ingress_url"].(string), strings.NewReader(strings.ReplaceAll(raw, "\n", "\r\n")))
		req.Header.Set("Authorization", "Bearer "+cf["secret"].(string))
		req.Header.Set("Content-Type", "message/rfc822")
		req.Header.Set("AgentOwl-Envelope-From", "ann@example.com")
		req.Header.Set("AgentOwl-Envelope-To", "support@example.com")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			s.t.Fatal(err)
		}
		defer resp.Body.Close()
		var out map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&out)
		if resp.StatusCode != http.StatusAccepted {
			s.t.Fatalf("email: %d %v", resp.StatusCode, out)
		}
		return out
	}
	first := mail(`From: Ann Example <ann@example.com>
To: Support <support@example.com>
Subject: Refund for order A-1234
Date: Mon, 05 Oct 2026 09:12:00 +0000
Message-ID: <first-a1234@example.com>
Content-Type: text/plain; charset=utf-8

Hello,

I was charged twice for order A-1234 (49.00 EUR). Could you refund one of the charges?

Thanks,
Ann
`)
	reply := mail(`From: Ann Example <ann@example.com>
To: Support <support@example.com>
Subject: Re: Refund for order A-1234
Date: Mon, 05 Oct 2026 09:40:00 +0000
Message-ID: <reply-a1234@example.com>
In-Reply-To: <first-a1234@example.com>
References: <first-a1234@example.com>
MIME-Version: 1.0
Content-Type: multipart/mixed; boundary="b1"

--b1
Content-Type: text/plain; charset=utf-8

Here is the invoice showing both captures. ` + storyHostile + `

Ann
--b1
Content-Type: application/pdf; name="` + st.PDFName + `"
Content-Disposition: attachment; filename="` + st.PDFName + `"
Content-Transfer-Encoding: base64

` + base64.StdEncoding.EncodeToString(st.PDF) + `
--b1--
`)
	st.EmailConv = first["conversation_id"].(string)
	if reply["conversation_id"] != st.EmailConv {
		s.t.Fatalf("the reply started another conversation: %v, not %s", reply, st.EmailConv)
	}

	// SMS, through the sms channel with Twilio's signature.
	const authToken = "12345678901234567890123456789012"
	smsB := s.must(http.StatusCreated, http.MethodPost, base+"/bindings", s.admin, map[string]any{"channel": "sms",
		"endpoint_id": st.Endpoint, "name": "Support SMS", "auth_token": authToken})
	st.SMSBinding = smsB["id"].(string)
	sms := func(sid, body string) map[string]any {
		form := url.Values{"MessageSid": {sid}, "AccountSid": {"AC0123"}, "From": {"+15551230001"}, "To": {"+15559870000"},
			"Body": {body}, "NumMedia": {"0"}, "SmsStatus": {"received"}}
		req, _ := http.NewRequest(http.MethodPost, smsB["ingress_url"].(string), strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("X-Twilio-Signature", twilio.Signature([]byte(authToken), smsB["ingress_url"].(string), form))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			s.t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			s.t.Fatalf("sms: %d", resp.StatusCode)
		}
		return nil
	}
	sms("SM0001", "Hi, my parcel for order B-77 has not arrived.")
	sms("SM0002", "Tracking says delivered on Friday but nothing is here. Can you help?")

	// The works, by conversation, oldest first.
	works := s.must(http.StatusOK, http.MethodGet, base+"/work", s.admin, nil)["items"].([]any)
	var email, text []string
	for i := len(works) - 1; i >= 0; i-- {
		w := works[i].(map[string]any)
		if w["conversation_id"] == st.EmailConv {
			email = append(email, w["id"].(string))
		} else {
			st.SMSConv = w["conversation_id"].(string)
			text = append(text, w["id"].(string))
		}
	}
	if len(email) != 2 || len(text) != 2 {
		s.t.Fatalf("works: email %v, sms %v", email, text)
	}
	st.EmailWork1, st.EmailWork2, st.SMSWork1, st.SMSWork2 = email[0], email[1], text[0], text[1]

	seq := map[string]int{}
	callback := func(w, status string, extra map[string]any) {
		seq[w]++
		cb := map[string]any{"version": "agent-work.v1", "callback_id": fmt.Sprintf("%s:%d", w, seq[w]), "work_id": w,
			"sequence": seq[w], "status": status, "occurred_at": time.Now().UTC().Format(time.RFC3339)}
		maps.Copy(cb, extra)
		s.must(http.StatusOK, http.MethodPost, "/runtime/v1/work/"+w+"/callbacks", tok, cb)
	}
	now := time.Now().UTC()
	callback(st.EmailWork1, "accepted", nil)
	callback(st.EmailWork1, "failed", map[string]any{"error": map[string]any{"code": "crm_unavailable",
		"message": "The CRM did not answer within 30 s."}})
	callback(st.EmailWork2, "accepted", nil)
	callback(st.EmailWork2, "running", nil)
	sum := sha256.Sum256([]byte("refund A-1234 49.00 EUR"))
	st.Digest = hex.EncodeToString(sum[:])
	callback(st.EmailWork2, "needs_input", map[string]any{"requests": []any{map[string]any{"id": "refund", "revision": 1,
		"kind": "approval", "prompt": "Refund the duplicate charge of order A-1234? The invoice shows two captures.",
		"allowed_decisions": []any{"approve", "reject"}, "expires_at": now.Add(2 * time.Hour).Format(time.RFC3339),
		"action": map[string]any{"description": "Refund 49.00 EUR to the card ending 4242 (order A-1234, capture ch_2)", "digest": st.Digest}}}})
	callback(st.SMSWork1, "accepted", nil)
	callback(st.SMSWork2, "running", nil)
	callback(st.SMSWork2, "needs_input", map[string]any{"requests": []any{map[string]any{"id": "parcel", "revision": 1,
		"kind": "question", "prompt": "The carrier says delivered. Open a claim with the carrier, or resend the parcel now?",
		"allowed_decisions": []any{"answer"}, "expires_at": now.Add(10 * time.Minute).Format(time.RFC3339)}}})

	// The AAP request, from an agent harness.
	cred := s.instance()
	st.AAP = s.request(cred, map[string]any{"tool": "issue_refund", "timeout": "1h",
		"arguments": map[string]any{"order": "A-1234", "amount": 4900, "currency": "EUR", "reason": "duplicate charge",
			"note": "Customer sent the invoice; both captures are on it. " + strings.Repeat("A long line that must wrap, never be clipped. ", 4)},
		"agent_reasoning": "The invoice shows two captures for one order. " + storyHostile})
	st.AAPItem = "att_aap_" + st.AAP

	items := s.must(http.StatusOK, http.MethodGet, base+"/attention?status=unresolved", s.admin, nil)["items"].([]any)
	for _, it := range items {
		it := it.(map[string]any)
		switch it["kind"] {
		case "question":
			st.Question = it["id"].(string)
		case "incident":
			st.Incident = it["id"].(string)
		case "approval":
			if it["id"] != st.AAPItem {
				st.Approval = it["id"].(string)
			}
		}
	}
	if st.Question == "" || st.Incident == "" || st.Approval == "" {
		s.t.Fatalf("attention items %v", items)
	}
	return st
}
