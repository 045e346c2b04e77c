package smtp_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentowl/agentowl"
	"github.com/agentowl/agentowl/internal/attachment"
	"github.com/agentowl/agentowl/internal/ingress"
	"github.com/agentowl/agentowl/internal/server"
)

// A multipart message with a text body, an HTML alternative, an inline
// image and an attachment, sent with Go's SMTP client, becomes one event
// at the binding and work for its endpoint: the text body, the headers
// and every other part's metadata (filename, content type, size, hash,
// Content-ID).
func TestSMTPMessageBecomesWork(t *testing.T) {
	t.Parallel()
	forEachBackend(t, nil, func(t *testing.T, e *env) {
		bid, addr := e.binding("Support@Mail.Example.com")
		pdf := []byte("%PDF-1.4 pretend report\x00\xff")
		png := []byte("\x89PNG pretend image")
		msg := crlf(`From: "Alice Example" <Alice@Example.org>
To: Support <support@mail.example.com>
Cc: bob@example.org
Subject: =?UTF-8?Q?R=C3=A9sum=C3=A9_attached?=
Date: Tue, 06 Oct 2026 11:59:00 +0000
Message-ID: <first@example.org>
MIME-Version: 1.0
Content-Type: multipart/mixed; boundary="outer"

--outer
Content-Type: multipart/alternative; boundary="alt"

--alt
Content-Type: text/plain; charset=iso-8859-1
Content-Transfer-Encoding: quoted-printable

Please find my r=E9sum=E9 attached.
--alt
Content-Type: multipart/related; boundary="rel"

--rel
Content-Type: text/html; charset=utf-8

<p>Please find my r&eacute;sum&eacute; attached.<img src="cid:logo@example.org"></p>
--rel
Content-Type: image/png
Content-ID: <logo@example.org>
Content-Disposition: inline
Content-Transfer-Encoding: base64

` + base64.StdEncoding.EncodeToString(png) + `
--rel--
--alt--
--outer
Content-Type: application/pdf; name="cv.pdf"
Content-Disposition: attachment; filename="cv.pdf"
Content-Transfer-Encoding: base64

` + base64.StdEncoding.EncodeToString(pdf) + `
--outer--
`)
		if err := e.send("bounce@example.org", []string{strings.ToUpper(addr)}, msg); err != nil {
			t.Fatalf("send: %v", err)
		}
		evs := e.events()
		if len(evs) != 1 {
			t.Fatalf("%d events, want 1", len(evs))
		}
		ev := evs[0]
		if ev.BindingID != bid || ev.Channel != "smtp" || ev.Sender != "alice@example.org" || ev.FollowUp ||
			ev.DedupeKey != "message-id:first@example.org" {
			t.Fatalf("event = %+v", ev)
		}
		p := payload(t, ev)
		want := map[string]any{"subject": "Résumé attached", "message_id": "first@example.org", "text": "Please find my résumé attached.",
			"text_truncated": false, "date": "2026-10-06T11:59:00Z",
			"html": `<p>Please find my r&eacute;sum&eacute; attached.<img src="cid:logo@example.org"></p>`}
		for k, v := range want {
			if p[k] != v {
				t.Errorf("payload %s = %#v, want %#v", k, p[k], v)
			}
		}
		if got, _ := json.Marshal(p["from"]); string(got) != `[{"address":"alice@example.org","name":"Alice Example"}]` {
			t.Errorf("from = %s", got)
		}
		if got, _ := json.Marshal(p["envelope"]); string(got) != `{"from":"bounce@example.org","to":["`+strings.ToUpper(addr)+`"]}` {
			t.Errorf("envelope = %s", got)
		}
		if p["size"] != float64(len(msg)) {
			t.Errorf("size = %v, want %d", p["size"], len(msg))
		}
		sum := sha256.Sum256([]byte(msg))
		if p["sha256"] != hex.EncodeToString(sum[:]) {
			t.Errorf("sha256 = %v", p["sha256"])
		}
		// The event carries its retained attachments (docs/attachments.md).
		var parts []attachment.Entry
		if err := json.Unmarshal(ev.Attachments, &parts); err != nil {
			t.Fatal(err)
		}
		hash := func(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }
		expires := e.clock.Now().Add(7 * 24 * time.Hour).Format(time.RFC3339)
		wantParts := []attachment.Entry{
			{Name: "attachment-1", ContentType: "image/png", SniffedType: "text/plain; charset=utf-8", Inline: true, ContentID: "logo@example.org",
				Size: int64(len(png)), SHA256: hash(png), ExpiresAt: expires, Availability: "available"},
			{Name: "cv.pdf", ContentType: "application/pdf", SniffedType: "application/pdf", Size: int64(len(pdf)), SHA256: hash(pdf),
				ExpiresAt: expires, Availability: "available"},
		}
		for i := range parts {
			if i < len(wantParts) {
				wantParts[i].ID = parts[i].ID
			}
		}
		if fmt.Sprint(parts) != fmt.Sprint(wantParts) {
			t.Errorf("parts = %+v\nwant %+v", parts, wantParts)
		}
		if ev.Headers["Subject"][0] != "Résumé attached" || ev.Headers["Message-Id"][0] != "<first@example.org>" {
			t.Errorf("headers = %v", ev.Headers)
		}
	})
}

// A message to several bindings is one event at each; a binding named by
// two recipients (the same address in two cases) takes one.
func TestSMTPSeveralBindings(t *testing.T) {
	t.Parallel()
	forEachBackend(t, nil, func(t *testing.T, e *env) {
		a, addrA := e.binding("")
		b, addrB := e.binding("")
		msg := crlf("From: carol@example.org\nSubject: to both\nMessage-ID: <both@example.org>\n\nHello both.\n")
		if err := e.send("carol@example.org", []string{addrA, addrB, strings.ToUpper(addrA)}, msg); err != nil {
			t.Fatal(err)
		}
		got := map[string]int{}
		for _, ev := range e.events() {
			got[ev.BindingID]++
			if env := payload(t, ev)["envelope"].(map[string]any); ev.BindingID == a && len(env["to"].([]any)) != 2 {
				t.Errorf("binding A's envelope = %v, want both of its recipients", env)
			}
		}
		if got[a] != 1 || got[b] != 1 || len(got) != 2 {
			t.Fatalf("events per binding = %v", got)
		}
		// The sender's retry of the same message is deduplicated at both.
		if err := e.send("carol@example.org", []string{addrA, addrB}, msg); err != nil {
			t.Fatal(err)
		}
		if n := len(e.events()); n != 2 {
			t.Fatalf("%d events after a retry, want 2", n)
		}
	})
}

// Retries of a message without a Message-ID are deduplicated by its
// digest; a different message is a new event.
func TestSMTPDedupeWithoutMessageID(t *testing.T) {
	t.Parallel()
	forEachBackend(t, nil, func(t *testing.T, e *env) {
		_, addr := e.binding("")
		msg := crlf("From: dave@example.org\nSubject: no id\n\nSame bytes.\n")
		for range 2 {
			if err := e.send("dave@example.org", []string{addr}, msg); err != nil {
				t.Fatal(err)
			}
		}
		if err := e.send("dave@example.org", []string{addr}, strings.Replace(msg, "Same", "Other", 1)); err != nil {
			t.Fatal(err)
		}
		if n := len(e.events()); n != 2 {
			t.Fatalf("%d events, want 2", n)
		}
	})
}

// Every refusal answers what a real MTA understands, and stores nothing.
func TestSMTPRefusals(t *testing.T) {
	t.Parallel()
	adjust := func(c *server.Config) {
		c.SMTP.MaxRecipients = 2
		c.SMTP.MaxLineLength = 200
		c.Ingress.Mail = ingress.MailLimits{MaxMessageBytes: 8 << 10, MaxParts: 3, MaxPartBytes: 2 << 10}
	}
	forEachBackend(t, adjust, func(t *testing.T, e *env) {
		bid, addr := e.binding("")
		_, addr2 := e.binding("")
		_, addr3 := e.binding("")
		plain := crlf("From: erin@example.org\nSubject: hi\n\nHello.\n")

		wantReply(t, "unknown recipient", e.send("erin@example.org", []string{"nobody@mail.example.com"}, plain), 550, "5.1.1")
		wantReply(t, "a malformed recipient", e.send("erin@example.org", []string{"not an address"}, plain), 501, "5.5.2")
		wantReply(t, "too many recipients", e.send("erin@example.org", []string{addr, addr2, addr3}, plain), 452, "4.5.3")

		big := crlf("From: erin@example.org\nSubject: big\n\n" + strings.Repeat(strings.Repeat("x", 99)+"\n", 100))
		wantReply(t, "over the message limit", e.send("erin@example.org", []string{addr}, big), 552, "5.3.4")
		c := e.dial()
		err := c.Mail("erin@example.org") // net/smtp sends SIZE only from Client.SendMail's callers; declare it by hand
		if err != nil {
			t.Fatal(err)
		}
		c.Reset()
		if id, err := c.Text.Cmd("MAIL FROM:<erin@example.org> SIZE=%d", 9<<10); err == nil {
			c.Text.StartResponse(id)
			_, _, err = c.Text.ReadResponse(250)
			c.Text.EndResponse(id)
			wantReply(t, "a declared size over the limit", err, 552, "5.3.4")
		} else {
			t.Fatal(err)
		}

		parts := "From: erin@example.org\nSubject: parts\nContent-Type: multipart/mixed; boundary=b\n\n"
		for i := range 4 {
			parts += fmt.Sprintf("--b\nContent-Type: text/plain\n\npart %d\n", i)
		}
		wantReply(t, "too many parts", e.send("erin@example.org", []string{addr}, crlf(parts+"--b--\n")), 552, "5.3.4")
		// A body text over the part limit refuses the message (an attachment
		// over it is kept as blocked: attachments_test.go).
		bigPart := "From: erin@example.org\nSubject: part\nContent-Type: multipart/mixed; boundary=b\n\n--b\nContent-Type: text/plain\n" +
			"Content-Transfer-Encoding: base64\n\n"
		for range 40 {
			bigPart += base64.StdEncoding.EncodeToString(bytes.Repeat([]byte("x"), 57)) + "\n"
		}
		wantReply(t, "a body text over the part limit", e.send("erin@example.org", []string{addr}, crlf(bigPart+"--b--\n")), 552, "5.3.4")

		for what, bad := range map[string]string{
			"a header line without a colon": "From: erin@example.org\nthis is not a header\n\nbody\n",
			"a multipart without its end":   "From: erin@example.org\nContent-Type: multipart/mixed; boundary=b\n\n--b\nContent-Type: text/plain\n\ncut",
			"bad base64":                    "From: erin@example.org\nContent-Type: application/pdf\nContent-Transfer-Encoding: base64\n\n!!!not base64!!!\n",
			"an empty boundary":             "From: erin@example.org\nContent-Type: multipart/mixed; boundary=\"\"\n\nx\n",
			"multiparts nested too deep": "From: erin@example.org\nContent-Type: multipart/mixed; boundary=b0\n\n" + func() string {
				s := ""
				for i := 1; i < 10; i++ {
					s += fmt.Sprintf("--b%d\nContent-Type: multipart/mixed; boundary=b%d\n\n", i-1, i)
				}
				return s
			}(),
		} {
			wantReply(t, what, e.send("erin@example.org", []string{addr}, crlf(bad)), 554, "5.6.0")
		}

		long := crlf("From: erin@example.org\nSubject: long\n\n" + strings.Repeat("y", 300) + "\n")
		err = e.send("erin@example.org", []string{addr}, long)
		wantReply(t, "a line over the limit", err, 554, "5.6.0")

		// A binding deleted between RCPT and DATA takes nothing.
		c = e.dial()
		if err := c.Mail("erin@example.org"); err != nil {
			t.Fatal(err)
		}
		if err := c.Rcpt(addr); err != nil {
			t.Fatal(err)
		}
		e.api(http.MethodDelete, "/bindings/"+bid, nil, http.StatusNoContent)
		w, err := c.Data()
		if err != nil {
			t.Fatal(err)
		}
		w.Write([]byte(plain))
		wantReply(t, "a binding deleted before DATA", w.Close(), 550, "5.1.1")
		wantReply(t, "a deleted binding's address", e.send("erin@example.org", []string{addr}, plain), 550, "5.1.1")

		if evs := e.events(); len(evs) != 0 {
			t.Fatalf("refused messages stored %d events", len(evs))
		}
		var conversations int
		e.srv.Store().Read(t.Context(), func(tx agentowl.Tx) error {
			b, _ := tx.BindingGet(t.Context(), bid)
			_, err := tx.ConversationGetOpenByKey(t.Context(), b.ID, "")
			if err == nil {
				conversations++
			}
			return nil
		})
		if conversations != 0 {
			t.Fatal("a refused message left a conversation")
		}
	})
}

// Senders that support CHUNKING (RFC 3030; the server announces it) send
// the message with BDAT, in chunks and without dot-stuffing: the message is
// recorded as with DATA, a line that begins with a dot keeps it, the 250
// of the LAST chunk comes once the event is stored, and a message over the
// limit is 552 5.3.4 with nothing stored.
func TestSMTPChunking(t *testing.T) {
	t.Parallel()
	adjust := func(c *server.Config) {
		c.Ingress.Mail = ingress.MailLimits{MaxMessageBytes: 8 << 10, MaxParts: 3, MaxPartBytes: 4 << 10}
	}
	forEachBackend(t, adjust, func(t *testing.T, e *env) {
		_, addr := e.binding("")
		c, exts, err := dialRaw(e.srv.SMTPAddr())
		if err != nil {
			t.Fatal(err)
		}
		defer c.close()
		if !slices.Contains(exts, "CHUNKING") {
			t.Fatalf("EHLO announced %q, want CHUNKING among them", exts)
		}
		msg := crlf("From: fay@example.org\nSubject: in chunks\nMessage-ID: <chunks@example.org>\n\n.leading dot\n" +
			strings.Repeat("a line of the body\n", 100))
		if err := c.sendBDAT("fay@example.org", addr, msg, 3); err != nil {
			t.Fatalf("BDAT in three chunks: %v", err)
		}
		ev := bySubject(t, e.events(), "in chunks")
		if text, _ := payload(t, ev)["text"].(string); !strings.HasPrefix(text, ".leading dot\r\n") || strings.Count(text, "a line of the body") != 100 {
			t.Fatalf("text recorded from BDAT = %.80q…", text)
		}
		// The sender's retry of the same message is one event.
		if err := c.sendBDAT("fay@example.org", addr, msg, 1); err != nil {
			t.Fatalf("BDAT retry: %v", err)
		}
		before := len(e.events())
		if before != 1 {
			t.Fatalf("%d events after a retry, want 1", before)
		}
		big := crlf("From: fay@example.org\nSubject: too big\n\n" + strings.Repeat("x", 76) + "\n")
		big += strings.Repeat(strings.Repeat("y", 76)+"\r\n", 9<<10/78)
		err = c.sendBDAT("fay@example.org", addr, big, 2)
		wantReply(t, "BDAT over the message limit", err, 552, "5.3.4")
		if n := len(e.events()); n != before {
			t.Fatalf("%d events after a refused message, want %d", n, before)
		}
	})
}
