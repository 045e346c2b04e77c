package httpapi_test

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"

	"github.com/agentowl/agentowl/internal/ingress"
	"github.com/agentowl/agentowl/internal/store/storetest"
	"github.com/agentowl/agentowl/internal/work"
)

// workerScript is docs/cloudflare-email-worker.js.
func workerScript(t *testing.T) string {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	data, err := os.ReadFile(filepath.Join(filepath.Dir(file), "..", "..", "docs", "cloudflare-email-worker.js"))
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// workerMessage is what the Worker's runtime gives the script.
type workerMessage struct {
	from, to, raw string
}

// workerRequest builds the request docs/cloudflare-email-worker.js sends
// for msg: its method, URL and headers read from the script itself (an
// expression the test does not know fails it, so the two cannot drift),
// and message.raw streamed as a chunked body, as a ReadableStream is.
func workerRequest(t *testing.T, script, ingressURL, secret string, msg workerMessage) *http.Request {
	t.Helper()
	if !strings.Contains(script, "fetch(env.AGENTOWL_INGRESS_URL, {") || !strings.Contains(script, `method: "POST",`) ||
		!strings.Contains(script, "body: message.raw,") {
		t.Fatal("the Worker script no longer POSTs message.raw to AGENTOWL_INGRESS_URL")
	}
	block := regexp.MustCompile(`(?s)headers: \{\n(.*?)\n\s*\},`).FindStringSubmatch(script)
	if block == nil {
		t.Fatal("no headers block in the Worker script")
	}
	pr, pw := io.Pipe()
	go func() {
		for chunk := range strings.SplitAfterSeq(msg.raw, "\n") { // streamed, line by line
			pw.Write([]byte(chunk))
		}
		pw.Close()
	}()
	req, err := http.NewRequest(http.MethodPost, ingressURL, pr)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(block[1], "\n") {
		m := regexp.MustCompile(`^\s*"([A-Za-z-]+)": (.+),$`).FindStringSubmatch(line)
		if m == nil {
			t.Fatalf("a header line the test does not know: %q", line)
		}
		value, ok := map[string]string{"`Bearer ${env.AGENTOWL_SECRET}`": "Bearer " + secret, `"message/rfc822"`: "message/rfc822",
			"message.from": msg.from, "message.to": msg.to}[m[2]]
		if !ok {
			t.Fatalf("a header value the test does not know: %q", m[2])
		}
		req.Header.Set(m[1], value)
	}
	return req
}

// sendWorker sends req and returns the checked response.
func (e *workEnv) sendWorker(t *testing.T, req *http.Request) *response {
	t.Helper()
	resp, err := e.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	checkContract(t, req, resp, data)
	return &response{Status: resp.StatusCode, Header: resp.Header, Body: data}
}

func (e *workEnv) cloudflareBinding(t *testing.T, endpointID string) (ingressURL, secret string) {
	t.Helper()
	b := wantJSON(t, "cloudflare-email binding", e.do(http.MethodPost, tenantPath+"/bindings", e.operatorToken,
		map[string]any{"channel": "cloudflare-email", "endpoint_id": endpointID}), http.StatusCreated)
	return b["ingress_url"].(string), b["secret"].(string)
}

const workerMail = "From: Hana <hana@example.org>\r\nTo: help@agents.example.com\r\nSubject: Worker mail\r\n" +
	"Message-ID: <cf-1@example.org>\r\nContent-Type: multipart/mixed; boundary=b\r\n\r\n" +
	"--b\r\nContent-Type: text/plain\r\n\r\nPlease help.\r\n" +
	"--b\r\nContent-Type: text/csv\r\nContent-Disposition: attachment; filename=data.csv\r\n\r\na,b\r\n--b--\r\n"

// The exact request the Worker script sends is accepted, handed to the
// endpoint as work with the message's text and parts, and deduplicated on
// the provider's retry; a reply threads into the same conversation.
func TestCloudflareWorkerRequest(t *testing.T) {
	t.Parallel()
	script := workerScript(t)
	forEachWorkBackend(t, work.Config{}, func(t *testing.T, e *workEnv) {
		rt := newRuntime(t, e)
		ep := e.endpoint(t, rt, true)["id"].(string)
		u, secret := e.cloudflareBinding(t, ep)
		msg := workerMessage{from: "bounces@example.org", to: "help@agents.example.com", raw: workerMail}
		acc := wantJSON(t, "the Worker's request", e.sendWorker(t, workerRequest(t, script, u, secret, msg)), http.StatusAccepted)
		d := rt.wait(t, 1)[0]
		ev := d.Doc["event"].(map[string]any)
		if ev["id"] != acc["event_id"] || ev["channel"] != "cloudflare-email" || ev["sender"] != "hana@example.org" ||
			jsonAt(ev, "payload", "text") != "Please help." || jsonAt(ev, "payload", "subject") != "Worker mail" ||
			fmt.Sprint(jsonAt(ev, "payload", "envelope")) != "map[from:bounces@example.org to:[help@agents.example.com]]" {
			t.Fatalf("event = %v", ev)
		}
		parts := ev["attachments"].([]any)
		if len(parts) != 1 || jsonAt(parts[0].(map[string]any), "name") != "data.csv" || jsonAt(parts[0].(map[string]any), "size") != float64(3) {
			t.Fatalf("attachments = %v", parts)
		}
		if d.Doc["work"] == nil {
			t.Fatal("no work block")
		}
		// The part was retained: the runtime downloads it byte-identical.
		token := e.credential(t, ep, map[string]any{"scopes": []string{work.ScopeCallbacks, work.ScopeAttachments}})["token"].(string)
		manifest := wantJSON(t, "manifest", e.do(http.MethodGet, "/runtime/v1/work/"+jsonAt(d.Doc, "work", "work_id").(string)+"/attachments",
			token, nil), http.StatusOK)["items"].([]any)
		file := manifest[0].(map[string]any)
		if len(manifest) != 1 || file["availability"] != "available" || file["sha256"] != hexSum([]byte("a,b")) {
			t.Fatalf("manifest = %v", manifest)
		}
		if got := e.do(http.MethodGet, strings.TrimPrefix(file["url"].(string), e.srv.URL), token, nil); got.Status != http.StatusOK ||
			string(got.Body) != "a,b" || got.Header.Get("Content-Type") != "application/octet-stream" {
			t.Fatalf("download: %d %q %v", got.Status, got.Body, got.Header)
		}
		dup := wantJSON(t, "the provider's retry", e.sendWorker(t, workerRequest(t, script, u, secret, msg)), http.StatusOK)
		if dup["duplicate"] != true || dup["event_id"] != acc["event_id"] {
			t.Fatalf("retry = %v", dup)
		}
		reply := strings.NewReplacer("Subject: Worker mail", "Subject: Re: Worker mail",
			"Message-ID: <cf-1@example.org>", "Message-ID: <cf-2@example.org>\r\nIn-Reply-To: <cf-1@example.org>").Replace(workerMail)
		next := wantJSON(t, "a reply", e.sendWorker(t, workerRequest(t, script, u, secret, workerMessage{from: msg.from, to: msg.to, raw: reply})),
			http.StatusAccepted)
		if next["conversation_id"] != acc["conversation_id"] || next["follow_up"] != true {
			t.Fatalf("reply = %v, first = %v", next, acc)
		}
	})
}

// A message larger than the API's 1 MiB body limit is taken, up to the
// email limit (25 MiB by default).
func TestCloudflareLargeMessage(t *testing.T) {
	t.Parallel()
	script := workerScript(t)
	forEachWorkBackend(t, work.Config{}, func(t *testing.T, e *workEnv) {
		ep := e.endpoint(t, newRuntime(t, e), true)["id"].(string)
		u, secret := e.cloudflareBinding(t, ep)
		raw := "Subject: large\r\nContent-Type: multipart/mixed; boundary=b\r\n\r\n--b\r\nContent-Type: application/octet-stream\r\n" +
			"Content-Transfer-Encoding: base64\r\n\r\n" + strings.Repeat(strings.Repeat("A", 76)+"\r\n", 3<<20/57) + "--b--\r\n"
		wantJSON(t, "a 4 MiB message", e.sendWorker(t, workerRequest(t, script, u, secret, workerMessage{raw: raw})), http.StatusAccepted)
	})
}

// Every refusal of the route has its status and code, and stores nothing.
func TestCloudflareRefusals(t *testing.T) {
	t.Parallel()
	script := workerScript(t)
	for _, b := range storetest.Backends(t) {
		t.Run(b.Name, func(t *testing.T) {
			t.Parallel()
			e := setupWorkWith(t, b, work.Config{}, ingress.Config{Mail: ingress.MailLimits{MaxMessageBytes: 4 << 10, MaxParts: 2}})
			rt := newRuntime(t, e)
			ep := e.endpoint(t, rt, true)["id"].(string)
			u, secret := e.cloudflareBinding(t, ep)
			other, otherSecret := e.cloudflareBinding(t, ep)
			path := strings.TrimPrefix(u, e.srv.URL)
			msg := workerMessage{from: "a@example.org", to: "help@agents.example.com", raw: "Subject: x\r\n\r\nhello\r\n"}
			send := func(what string, req *http.Request, status int, code string) {
				t.Helper()
				expectRefused(t, what, e.sendWorker(t, req), status, code)
			}
			send("no secret", workerRequest(t, script, u, "", msg), http.StatusUnauthorized, "unauthenticated")
			send("a wrong secret", workerRequest(t, script, u, secret+"x", msg), http.StatusUnauthorized, "unauthenticated")
			send("another binding's secret", workerRequest(t, script, u, otherSecret, msg), http.StatusUnauthorized, "unauthenticated")
			send("this binding's secret at another", workerRequest(t, script, other, secret, msg), http.StatusUnauthorized, "unauthenticated")
			req := workerRequest(t, script, u, secret, msg)
			req.Header.Set("Content-Type", "text/plain")
			send("another content type", req, http.StatusBadRequest, "invalid_content_type")
			req = workerRequest(t, script, u, secret, msg)
			req.Header.Set("AgentOwl-Envelope-From", "é@example.org")
			send("a non-ASCII envelope", req, http.StatusBadRequest, "invalid_field")

			big := workerMessage{from: msg.from, to: msg.to, raw: "Subject: big\r\n\r\n" + strings.Repeat(strings.Repeat("z", 70)+"\r\n", 80)}
			send("over the message limit, streamed", workerRequest(t, script, u, secret, big), http.StatusRequestEntityTooLarge, "request_too_large")
			expectRefused(t, "over the message limit, declared", e.do(http.MethodPost, path, "", big.raw, "Authorization", "Bearer "+secret,
				"Content-Type", "message/rfc822"), http.StatusRequestEntityTooLarge, "request_too_large")
			parts := "Content-Type: multipart/mixed; boundary=b\r\n\r\n--b\r\n\r\n1\r\n--b\r\n\r\n2\r\n--b\r\n\r\n3\r\n--b--\r\n"
			send("too many parts", workerRequest(t, script, u, secret, workerMessage{raw: parts}), http.StatusRequestEntityTooLarge, "request_too_large")
			send("not MIME", workerRequest(t, script, u, secret, workerMessage{raw: "no header here\r\n\r\nbody"}), http.StatusBadRequest,
				"malformed_message")

			_, webhookPath := e.binding(t, ep, nil)
			token := webhookPath[strings.LastIndex(webhookPath, "/")+1:]
			send("a webhook binding's token", workerRequest(t, script, e.srv.URL+"/in/cloudflare-email/"+token, secret, msg),
				http.StatusNotFound, "not_found")
			send("an unknown token", workerRequest(t, script, e.srv.URL+"/in/cloudflare-email/in_nope", secret, msg),
				http.StatusNotFound, "not_found")
			if n := len(e.listWork(t, "")); n != 0 {
				t.Fatalf("refused requests made %d work", n)
			}
		})
	}
}
