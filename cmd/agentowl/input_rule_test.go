package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/smtp"
	"net/textproto"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentowl/agentowl/aap"
	"github.com/agentowl/agentowl/aap/sqlite"
	"github.com/agentowl/agentowl/internal/ingress/twilio"
	"github.com/agentowl/agentowl/internal/mcpgateway"
	"github.com/agentowl/agentowl/internal/server"
	"github.com/agentowl/agentowl/internal/syncbuf"
)

// The two kinds of string no surface takes (agentowl.IsText): U+0000, and
// bytes that are not UTF-8. In JSON a NUL arrives as the escape \u0000; in
// a form, a mail or a file as the byte itself.
const (
	jsonNUL = `a\u0000b`
	rawNUL  = "a\x00b"
	badUTF8 = "a\xffb"
)

// inputRuleCase is one row of the input-rule table: an input on one
// surface, and the answer that surface gives it. answer returns what the
// surface said, in the table's notation: "STATUS code param" for an HTTP
// API, "STATUS" for a console page, the SMTP reply code, the JSON-RPC
// error code and message for the gateway, "cli: ..." for the command line.
type inputRuleCase struct {
	surface, input, want string
	answer               func(t *testing.T) string
}

// TestInputRule is issue 27 item 4's table: every surface that takes text
// from outside, each given a string that is not UTF-8 text without U+0000
// (and, where it takes JSON, a member name twice in one object), answers
// as docs/limits.md, docs/channels.md, docs/console.md and
// docs/mcp-gateway.md say (400 / 554 / -32602; 403 where a form or a
// webhook is refused before its fields are read), never 500, and stores no
// NUL, on both stores. Mail is the one surface that keeps such text: it is
// cleaned (invalid bytes and NUL become U+FFFD), not refused.
func TestInputRule(t *testing.T) {
	forEachBackend(t, func(t *testing.T, s site) {
		logs := &syncbuf.Buffer{}
		srv := s.startWith(t, nil, func(cfg *server.Config) {
			cfg.NoDelivery = true // handoffs stay queued: the work waits for callbacks as it is
			cfg.SMTP.Listen = "127.0.0.1:0"
			cfg.Ingress.SMTPDomain = "mail.example.com"
			cfg.Logger = slog.New(slog.NewTextHandler(logs, nil))
		})
		admin, op := s.operator(t, srv)
		tenant := srv.url + "/api/v1/tenants/default"
		dir := t.TempDir()
		file := func(name, content string) string {
			t.Helper()
			p := filepath.Join(dir, name)
			must(t, os.WriteFile(p, []byte(content), 0o600))
			return p
		}

		// An endpoint with agent work and its channels.
		ep := cliJSON(t, runCLI(t, "--json", "endpoints", "create", "--tenant", "default", "--name", "rt", "--url",
			"https://runtime.example.com/events", "--agent-work", "--api-url", srv.url, "--token", admin))
		epID := ep["id"].(string)
		webhookURL := cliJSON(t, op("--json", "bindings", "create", "--tenant", "default", "--channel", "webhook", "--endpoint", epID))["ingress_url"].(string)
		const smsToken = "0123456789abcdef0123456789abcdef"
		smsURL := cliJSON(t, op("--json", "bindings", "create", "--tenant", "default", "--channel", "sms", "--endpoint", epID,
			"--auth-token-file", file("auth-token", smsToken+"\n")))["ingress_url"].(string)
		cf := cliJSON(t, op("--json", "bindings", "create", "--tenant", "default", "--channel", "cloudflare-email", "--endpoint", epID))
		cfURL, cfSecret := cf["ingress_url"].(string), cf["secret"].(string)
		mailTo := cliJSON(t, op("--json", "bindings", "create", "--tenant", "default", "--channel", "smtp", "--endpoint", epID))["address"].(string)

		// A work item waiting for its runtime, with a question open.
		expectStatus(t, "webhook event", send(t, http.MethodPost, webhookURL, "", map[string]any{"text": "Summarise ticket 7"}), http.StatusAccepted)
		works := itemsOf(t, send(t, http.MethodGet, tenant+"/work", admin, nil).object(t))
		if len(works) != 1 {
			t.Fatalf("work list: %v", works)
		}
		workID := works[0]["id"].(string)
		rtToken := cliJSON(t, op("--json", "runtime-credentials", "create", epID))["token"].(string)
		callbacks := srv.url + "/runtime/v1/work/" + workID + "/callbacks"
		callback := func(seq int, status, extra string) string {
			return fmt.Sprintf(`{"version":"agent-work.v1","callback_id":"%s:%d","work_id":"%s","sequence":%d,"status":%q,`+
				`"occurred_at":"2026-10-06T12:00:00.000Z"%s}`, workID, seq, workID, seq, status, extra)
		}
		question := `{"id":"q1","revision":1,"kind":"question","prompt":"Which account?","allowed_decisions":["answer"],"expires_at":"2099-01-01T00:00:00Z"}`
		if a := postRaw(t, callbacks, rtToken, "application/json", callback(1, "needs_input", `,"requests":[`+question+`]`)); a.status >= 300 {
			t.Fatalf("needs_input callback: %d %s", a.status, a.body)
		}
		var attID string
		for _, it := range itemsOf(t, send(t, http.MethodGet, tenant+"/attention", admin, nil).object(t)) {
			if get(it, "request", "id") == "q1" {
				attID = it["id"].(string)
			}
		}
		if attID == "" {
			t.Fatal("the runtime's question is not in the attention list")
		}

		// An AAP instance with an approval request pending.
		prov := send(t, http.MethodPost, tenant+"/provisioner-tokens", admin, map[string]any{"label": "rule"}).object(t)["token"].(string)
		h := provision(t, srv.url, prov, "rule-harness")
		pending := h.submit(t, "pending-1", map[string]any{"tool": "deploy", "arguments": map[string]any{"env": "prod"}, "timeout": "1h"})
		expectStatus(t, "pending request", pending, http.StatusCreated)
		reqID := pending.object(t)["id"].(string)
		aapRequest := func(args string) func(*testing.T) string {
			return func(t *testing.T) string {
				return postRaw(t, srv.url+"/v1/requests", h.credential, "application/json",
					`{"tool":"deploy","arguments":`+args+`,"timeout":"1h"}`, "Idempotency-Key", fmt.Sprint(time.Now().UnixNano())).answer()
			}
		}
		apiJSON := func(method, url, token, body string) func(*testing.T) string {
			return func(t *testing.T) string { return doRaw(t, method, url, token, "application/json", body).answer() }
		}

		// Twilio: a correctly signed form, or one with a wrong signature.
		sms := func(body string, signed bool) func(*testing.T) string {
			return func(t *testing.T) string {
				form := url.Values{"MessageSid": {fmt.Sprint("SM", time.Now().UnixNano())}, "From": {"+15551230001"}, "To": {"+15550000000"},
					"Body": {body}, "SmsStatus": {"received"}}
				sig := twilio.Signature([]byte(smsToken), smsURL, form)
				if !signed {
					sig = twilio.Signature([]byte("another-account-token-0123456789"), smsURL, form)
				}
				return postRaw(t, smsURL, "", twilio.ContentType, form.Encode(), twilio.HeaderSignature, sig).answer()
			}
		}

		// Cloudflare Email Worker: the raw message, as the Worker streams it.
		worker := func(secret, msg string) func(*testing.T) string {
			return func(t *testing.T) string {
				return postRaw(t, cfURL, secret, "message/rfc822", msg,
					"AgentOwl-Envelope-From", "dana@example.org", "AgentOwl-Envelope-To", "support@example.com").answer()
			}
		}
		mail := func(id, to, subject, header, body string) string {
			return fmt.Sprintf("From: Dana Reyes <dana@example.org>\r\nTo: %s\r\nSubject: %s\r\nMessage-ID: <%s@example.org>\r\n%s\r\n%s\r\n",
				to, subject, id, header, body)
		}

		// SMTP: the reply to DATA.
		smtpData := func(msg string) func(*testing.T) string {
			return func(t *testing.T) string { return smtpSend(t, srv.m.SMTPAddr(), "dana@example.org", mailTo, msg) }
		}

		// The console, signed in as the bootstrap operator.
		browser := signInConsole(t, srv.url, admin)
		approvalPage := "/console/t/default/approvals/" + reqID
		attentionPage := "/console/t/default/attention/" + attID
		consoleForm := func(page, action string, form url.Values, csrf bool) func(*testing.T) string {
			return func(t *testing.T) string {
				if csrf {
					form.Set("csrf", browser.csrf(t, page))
				}
				return fmt.Sprint(browser.post(t, page+action, form))
			}
		}

		// A form posted before sign-in, by a browser with no session.
		publicForm := func(path string, form url.Values) func(*testing.T) string {
			return func(t *testing.T) string {
				jar, _ := cookiejar.New(nil)
				anon := &consoleBrowser{base: srv.url, http: &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error {
					return http.ErrUseLastResponse
				}}}
				form.Set("csrf", anon.csrf(t, "/console/sign-in"))
				return fmt.Sprint(anon.post(t, path, form))
			}
		}

		// The CLI: files it reads and sends.
		cli := func(args ...string) func(*testing.T) string {
			return func(t *testing.T) string {
				return cliAnswer(runCLI(t, append(args, "--url", srv.url, "--token", admin)...))
			}
		}
		decisionFile := func(name, answer string) string {
			return file(name, `{"decision_id":"d-`+name+`","request_revision":1,"decision":"answer","answer":"`+answer+`"}`)
		}
		epCLI := func(args ...string) func(*testing.T) string {
			return func(t *testing.T) string {
				return cliAnswer(runCLI(t, append(args, "--api-url", srv.url, "--token", admin)...))
			}
		}

		// The MCP gateway, in-process, in front of an upstream that counts
		// the calls it runs.
		up := newCountingUpstream(t)
		gwURL := startInputRuleGateway(t, srv.url, prov, up.srv.URL)
		agent := connectAgent(t, gwURL, inputRuleAgentToken)
		toolCall := func(args string) func(*testing.T) string {
			return func(t *testing.T) string {
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				defer cancel()
				res, err := agent.CallTool(ctx, &mcp.CallToolParams{Name: "issue_refund", Arguments: json.RawMessage(args)})
				var rpc *jsonrpc.Error
				switch {
				case errors.As(err, &rpc):
					return fmt.Sprintf("%d %s", rpc.Code, rpc.Message)
				case err != nil:
					return "error " + err.Error()
				}
				return fmt.Sprintf("result %v %q", res.IsError, toolText(res))
			}
		}

		cases := []inputRuleCase{
			// 1. AAP /v1 (docs/limits.md "text", "member names")
			{"aap /v1/requests", "argument \\u0000", "400 invalid_field arguments.k", aapRequest(`{"k":"` + jsonNUL + `"}`)},
			{"aap /v1/requests", "argument 0xFF", "400 invalid_field arguments.k", aapRequest(`{"k":"` + badUTF8 + `"}`)},
			{"aap /v1/requests", "argument name \\u0000", "400 invalid_field arguments", aapRequest(`{"` + jsonNUL + `":1}`)},
			{"aap /v1/requests", "amount twice", "400 invalid_json arguments.amount", aapRequest(`{"amount":5000,"amount":1}`)},
			{"aap /v1/requests", "0xFF outside strings", "400 invalid_json", aapRequest("{\"k\":1}\xff")},
			// 2. Operator API /api/v1
			{"operator decision", "note \\u0000", "400 invalid_field note",
				apiJSON(http.MethodPost, tenant+"/approvals/"+reqID+"/decision", admin, `{"decision":"approve","note":"`+jsonNUL+`"}`)},
			{"operator decision", "note 0xFF", "400 invalid_field note",
				apiJSON(http.MethodPost, tenant+"/approvals/"+reqID+"/decision", admin, `{"decision":"approve","note":"`+badUTF8+`"}`)},
			{"operator decision", "decision twice", "400 invalid_json decision",
				apiJSON(http.MethodPost, tenant+"/approvals/"+reqID+"/decision", admin, `{"decision":"deny","decision":"approve"}`)},
			{"operator endpoint", "name \\u0000", "400 invalid_field name",
				apiJSON(http.MethodPost, tenant+"/endpoints", admin, `{"name":"`+jsonNUL+`","url":"https://runtime.example.com/x"}`)},
			{"operator attention", "answer 0xFF", "400 invalid_field answer",
				apiJSON(http.MethodPost, tenant+"/attention/"+attID+"/decision", admin,
					`{"decision_id":"d1","request_revision":1,"decision":"answer","answer":"`+badUTF8+`"}`)},
			{"operator query", "status=\\x00", "400 invalid_field status", apiJSON(http.MethodGet, tenant+"/work?status=%00", admin, "")},
			// 3. Runtime API /runtime/v1
			{"runtime callback", "error.message \\u0000", "400 invalid_field error.message",
				apiJSON(http.MethodPost, callbacks, rtToken, callback(2, "failed", `,"error":{"message":"`+jsonNUL+`"}`))},
			{"runtime callback", "summary 0xFF", "400 invalid_field result.summary",
				apiJSON(http.MethodPost, callbacks, rtToken, callback(2, "completed", `,"result":{"summary":"`+badUTF8+`"}`))},
			{"runtime callback", "status twice", "400 invalid_json status",
				apiJSON(http.MethodPost, callbacks, rtToken, callback(2, "failed", `,"status":"completed"`))},
			// 4. Webhook ingress
			{"webhook ingress", "text \\u0000", "400 invalid_field text", apiJSON(http.MethodPost, webhookURL, "", `{"text":"`+jsonNUL+`"}`)},
			{"webhook ingress", "text 0xFF", "400 invalid_field text", apiJSON(http.MethodPost, webhookURL, "", `{"text":"`+badUTF8+`"}`)},
			{"webhook ingress", "text twice", "400 invalid_json text", apiJSON(http.MethodPost, webhookURL, "", `{"text":"a","text":"b"}`)},
			// 5. Twilio SMS (docs/channels.md: the signature first, then the fields)
			{"twilio sms", "Body NUL, signed", "400 invalid_field Body", sms(rawNUL, true)},
			{"twilio sms", "Body 0xFF, signed", "400 invalid_field Body", sms(badUTF8, true)},
			{"twilio sms", "Body NUL, wrong signature", "403 invalid_provider_signature", sms(rawNUL, false)},
			// 6. Cloudflare Email Worker
			{"cloudflare email", "header name with NUL", "400 malformed_message",
				worker(cfSecret, mail("cf-bad", "support@example.com", "hello", "X-Bad\x00Name: 1\r\n", "body"))},
			{"cloudflare email", "NUL and 0xFF in subject and body", "202",
				worker(cfSecret, mail("cf-clean", "support@example.com", "Re\x00fund \xff", "", "The blender\x00 arrived \xff broken."))},
			{"cloudflare email", "header name with NUL, wrong secret", "401 unauthenticated",
				worker("cfe_wrong", mail("cf-unauth", "support@example.com", "hello", "X-Bad\x00Name: 1\r\n", "body"))},
			// 7. SMTP
			{"smtp DATA", "header name with NUL", "554 5.6.0", smtpData(mail("smtp-bad", mailTo, "hello", "X-Bad\x00Name: 1\r\n", "body"))},
			{"smtp DATA", "NUL and 0xFF in subject and body", "250 2.0.0",
				smtpData(mail("smtp-clean", mailTo, "Order\x00 late \xff", "", "My order\x00 is \xff late."))},
			// 8. Console forms (docs/console.md "text", "CSRF")
			{"console approval", "note NUL", "400", consoleForm(approvalPage, "/decide", url.Values{"decision": {"approve"}, "note": {rawNUL}}, true)},
			{"console approval", "note 0xFF", "400", consoleForm(approvalPage, "/decide", url.Values{"decision": {"deny"}, "note": {badUTF8}}, true)},
			{"console approval", "field name 0xFF", "400", consoleForm(approvalPage, "/decide", url.Values{"decision": {"deny"}, badUTF8: {"x"}}, true)},
			{"console approval", "note NUL, no CSRF token", "403", consoleForm(approvalPage, "/decide", url.Values{"decision": {"approve"}, "note": {rawNUL}}, false)},
			{"console sign-in", "token NUL", "400", publicForm("/console/sign-in", url.Values{"token": {rawNUL}})},
			{"console sign-in", "next 0xFF", "400", publicForm("/console/sign-in", url.Values{"token": {"owl_op_x"}, "next": {badUTF8}})},
			{"console login link", "code NUL", "400", publicForm("/console/link", url.Values{"code": {rawNUL}})},
			{"console attention", "answer NUL", "400", consoleForm(attentionPage, "/decide",
				url.Values{"decision": {"answer"}, "revision": {"1"}, "answer": {rawNUL}, "step": {"submit"}}, true)},
			{"console attention", "answer 0xFF", "400", consoleForm(attentionPage, "/decide",
				url.Values{"decision": {"answer"}, "revision": {"1"}, "answer": {badUTF8}, "step": {"submit"}}, true)},
			// 9. CLI files
			{"cli attention decide FILE", "answer \\u0000", "cli: 400 invalid_field answer",
				cli("attention", "decide", attID, decisionFile("nul.json", jsonNUL), "--submit")},
			{"cli attention decide FILE", "answer 0xFF", "cli: 400 invalid_field answer",
				cli("attention", "decide", attID, decisionFile("ff.json", badUTF8), "--submit")},
			{"cli endpoints create --decision-secret-file", "secret NUL", "cli: 400 invalid_field decision_secret",
				epCLI("endpoints", "create", "--tenant", "default", "--name", "nul-secret", "--url", "https://runtime.example.com/n",
					"--agent-work", "--decision-url", "https://runtime.example.com/d", "--decision-secret-file", file("secret-nul", "s3cret"+rawNUL+"0123456789"))},
			{"cli endpoints create --decision-secret-file", "secret 0xFF", "cli: 400 invalid_field decision_secret",
				epCLI("endpoints", "create", "--tenant", "default", "--name", "ff-secret", "--url", "https://runtime.example.com/f",
					"--agent-work", "--decision-url", "https://runtime.example.com/d", "--decision-secret-file", file("secret-ff", "s3cret"+badUTF8+"0123456789"))},
			// 10. MCP gateway tools/call (docs/mcp-gateway.md)
			{"mcp tools/call", "argument \\u0000", "-32602 arguments.order must be UTF-8 text", toolCall(`{"order":"` + jsonNUL + `"}`)},
			{"mcp tools/call", "argument name \\u0000", "-32602 arguments.order must be UTF-8 text", toolCall(`{"order":{"` + jsonNUL + `":1}}`)},
			{"mcp tools/call", "argument 0xFF", "-32602 arguments.order must be UTF-8 text", toolCall(`{"order":"` + badUTF8 + `"}`)},
			{"mcp tools/call", "amount twice", "-32602 arguments.amount appears twice", toolCall(`{"order":"A-1","amount":5000,"amount":1}`)},
		}
		for _, c := range cases {
			got := c.answer(t)
			// want is the answer, or its first words (the gateway's
			// message goes on).
			if got != c.want && !strings.HasPrefix(got, c.want+" ") {
				t.Errorf("%s, %s -> %s; want %s", c.surface, c.input, got, c.want)
			} else {
				t.Logf("%-45s %-35s -> %s", c.surface, c.input, c.want)
			}
		}

		// Nothing the table sent reached a store as it was sent: the
		// pending approval is still pending without a note, the question
		// is unanswered, the gateway's upstream ran nothing, and the
		// cleaned mail holds U+FFFD where the NUL and the 0xFF were.
		if r := send(t, http.MethodGet, tenant+"/approvals/"+reqID, admin, nil).object(t); get(r, "request", "status") != "pending" || r["decision"] != nil {
			t.Errorf("the approval request after the table: %v", r)
		}
		if it := send(t, http.MethodGet, tenant+"/attention/"+attID, admin, nil).object(t); it["status"] != "open" {
			t.Errorf("the question after the table: %v", it)
		}
		if n := up.count(); n != 0 {
			t.Errorf("the gateway's upstream ran %d calls", n)
		}
		var mails []string
		for _, conv := range itemsOf(t, send(t, http.MethodGet, tenant+"/conversations?limit=100", admin, nil).object(t)) {
			r := send(t, http.MethodGet, tenant+"/conversations/"+conv["id"].(string)+"/events", admin, nil)
			if bytes.Contains(r.body, []byte(`\u0000`)) || bytes.ContainsRune(r.body, 0) || !json.Valid(r.body) {
				t.Errorf("conversation %s holds a NUL or is not JSON: %s", conv["id"], r.body)
			}
			for _, ev := range itemsOf(t, r.object(t)) {
				if p, ok := ev["payload"].(map[string]any); ok && p["subject"] != nil {
					mails = append(mails, fmt.Sprintf("%s|%s", p["subject"], p["text"]))
				}
			}
		}
		// (A header value loses its control characters, NUL included; the
		// body text keeps its place as U+FFFD.)
		for _, want := range []string{"Refund \uFFFD|The blender\uFFFD arrived \uFFFD broken.", "Order late \uFFFD|My order\uFFFD is \uFFFD late."} {
			found := false
			for _, m := range mails {
				found = found || strings.TrimSpace(m) == want
			}
			if !found {
				t.Errorf("no stored mail reads %q; stored: %q", want, mails)
			}
		}
		// Never a 500: the server logged no error.
		if l := logs.String(); strings.Contains(l, "level=ERROR") {
			t.Errorf("the server logged errors:\n%s", l)
		}
	})
}

// rawAnswer is an HTTP answer to a request sent as raw bytes.
type rawAnswer struct {
	status int
	body   []byte
}

// answer is the table's notation for an answer: "STATUS code param".
func (a rawAnswer) answer() string {
	var e struct {
		Error struct{ Code, Param string }
	}
	_ = json.Unmarshal(a.body, &e)
	return strings.TrimSpace(fmt.Sprintf("%d %s %s", a.status, e.Error.Code, e.Error.Param))
}

// doRaw sends body as it is (no JSON encoding: its bytes are the test's).
func doRaw(t *testing.T, method, url, token, contentType, body string, headers ...string) rawAnswer {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	must(t, err)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != "" {
		req.Header.Set("Content-Type", contentType)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	must(t, err)
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return rawAnswer{status: resp.StatusCode, body: data}
}

func postRaw(t *testing.T, url, token, contentType, body string, headers ...string) rawAnswer {
	t.Helper()
	return doRaw(t, http.MethodPost, url, token, contentType, body, headers...)
}

// cliAnswer is the table's notation for a command's outcome: "cli: ok",
// or "cli: STATUS code param" of the API's refusal it reported.
func cliAnswer(c cliResult) string {
	if c.err == nil {
		return "cli: ok"
	}
	if m := cliRefusal.FindStringSubmatch(c.stderr); m != nil && strings.HasPrefix(c.stderr, "error: ") {
		return strings.TrimSpace("cli: " + m[1] + " " + m[2] + " " + m[3])
	}
	return "cli: " + strings.TrimSpace(c.stderr)
}

var cliRefusal = regexp.MustCompile(`\((\d{3}) ([a-z_]+)(?:, param ([^,)]+))?`)

// smtpSend sends msg in one SMTP transaction and returns the reply to its
// DATA: "CODE ENHANCED".
func smtpSend(t *testing.T, addr, from, to, msg string) string {
	t.Helper()
	c, err := smtp.Dial(addr)
	must(t, err)
	defer c.Close()
	must(t, c.Mail(from))
	must(t, c.Rcpt(to))
	w, err := c.Data()
	must(t, err)
	_, err = io.WriteString(w, msg)
	must(t, err)
	var te *textproto.Error
	switch err := w.Close(); {
	case errors.As(err, &te):
		return fmt.Sprintf("%d %s", te.Code, strings.Fields(te.Msg)[0])
	case err != nil:
		t.Fatalf("SMTP DATA: %v", err)
	}
	_ = c.Quit()
	return "250 2.0.0"
}

// consoleBrowser is a browser signed in to the console.
type consoleBrowser struct {
	base string
	http *http.Client
}

var csrfInput = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

func signInConsole(t *testing.T, base, token string) *consoleBrowser {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	b := &consoleBrowser{base: base, http: &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse
	}}}
	if status := b.post(t, "/console/sign-in", url.Values{"csrf": {b.csrf(t, "/console/sign-in")}, "token": {token}}); status != http.StatusSeeOther {
		t.Fatalf("console sign-in: %d", status)
	}
	return b
}

// csrf is the CSRF token of the form on page.
func (b *consoleBrowser) csrf(t *testing.T, page string) string {
	t.Helper()
	resp, err := b.http.Get(b.base + page)
	must(t, err)
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	m := csrfInput.FindSubmatch(body)
	if resp.StatusCode != http.StatusOK || m == nil {
		t.Fatalf("GET %s: %d, no CSRF token", page, resp.StatusCode)
	}
	return string(m[1])
}

// post posts form to path and returns the status.
func (b *consoleBrowser) post(t *testing.T, path string, form url.Values) int {
	t.Helper()
	resp, err := b.http.PostForm(b.base+path, form)
	must(t, err)
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode
}

const inputRuleAgentToken = "agent-token-input-rule-0123456789"

// startInputRuleGateway runs an MCP gateway in-process in front of the
// upstream at upstreamURL (every tool passed through, so that a call the
// rule let through would reach the upstream at once), with an instance
// provisioned at the server at base; it returns the gateway's URL.
func startInputRuleGateway(t *testing.T, base, provToken, upstreamURL string) string {
	t.Helper()
	dir := t.TempDir()
	cfg, err := mcpgateway.ParseConfig(fmt.Appendf(nil, `
data_dir: %s
upstreams:
  - name: billing
    url: %s
    tools: [{match: "*", gate: false}]
agents:
  - name: rule-agent
    token_sha256: %s
    tools: ["billing/*"]
`, dir, upstreamURL, mcpgateway.HashToken(inputRuleAgentToken)))
	must(t, err)
	pr := &aap.Provisioner{Provider: &aap.Client{BaseURL: base, Token: provToken}}
	cred, err := pr.Provision(context.Background(), aap.NewSubmission("rule-gateway", ""))
	must(t, err)
	st, err := sqlite.Open(context.Background(), filepath.Join(dir, "gateway.db"))
	must(t, err)
	gw, err := mcpgateway.New(context.Background(), cfg, mcpgateway.Options{Provider: cred.Client(nil), Store: st})
	must(t, err)
	hs := httptest.NewServer(gw.Handler())
	t.Cleanup(func() {
		_ = gw.Close()
		hs.CloseClientConnections()
		hs.Close()
		_ = st.Close()
	})
	return hs.URL
}

// toolText is the text of a tool result.
func toolText(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}
