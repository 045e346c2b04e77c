package smtp_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"mime/quotedprintable"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agentowl/agentowl"
	"github.com/agentowl/agentowl/internal/attachment"
	"github.com/agentowl/agentowl/internal/blob/blobtest"
	"github.com/agentowl/agentowl/internal/server"
	"github.com/agentowl/agentowl/internal/store/storetest"
)

// Retained attachments of real email (docs/attachments.md): messages sent
// with Go's SMTP client to the real listener, their parts streamed into
// each object store, then read back over the runtime API.

// forEachStoreAndBlob runs fn on every store backend with every object
// store.
func forEachStoreAndBlob(t *testing.T, adjust func(c *server.Config), fn func(t *testing.T, e *env)) {
	for _, sb := range storetest.Backends(t) {
		for _, bb := range blobtest.Backends() {
			t.Run(sb.Name+"/"+bb.Name, func(t *testing.T) {
				t.Parallel()
				url := bb.URL(t)
				fn(t, start(t, sb, func(c *server.Config) {
					c.BlobURL = url
					if adjust != nil {
						adjust(c)
					}
				}))
			})
		}
	}
}

// part is one MIME part of a test message.
type part struct {
	header string // the part's header lines, without the blank line
	body   string // already encoded as the header says
}

// mixed builds a multipart/mixed message of parts.
func mixed(subject string, parts ...part) string {
	var b strings.Builder
	fmt.Fprintf(&b, "From: ann@example.org\nSubject: %s\nMessage-ID: <%s@example.org>\nMIME-Version: 1.0\n"+
		"Content-Type: multipart/mixed; boundary=\"=outer\"\n\n", subject, strings.ReplaceAll(subject, " ", "-"))
	for _, p := range parts {
		fmt.Fprintf(&b, "--=outer\n%s\n\n%s\n", p.header, p.body)
	}
	b.WriteString("--=outer--\n")
	return crlf(b.String())
}

// b64 is data in base64 lines of 76 characters.
func b64(data []byte) string {
	s := base64.StdEncoding.EncodeToString(data)
	var b strings.Builder
	for len(s) > 76 {
		b.WriteString(s[:76] + "\n")
		s = s[76:]
	}
	b.WriteString(s)
	return b.String()
}

// rfc2231 is a parameter in RFC 2231 continuations (UTF-8, percent
// encoded), each on a folded header line.
func rfc2231(name, value string) string {
	var enc strings.Builder
	for _, b := range []byte(value) {
		if b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9' || b == '.' || b == '-' || b == '_' {
			enc.WriteByte(b)
		} else {
			fmt.Fprintf(&enc, "%%%02X", b)
		}
	}
	v, out := enc.String(), ""
	for i := 0; len(v) > 0; i++ {
		n := min(len(v), 60)
		for n < len(v) && strings.LastIndexByte(v[:n], '%') > n-3 { // never split an escape
			n--
		}
		chunk := v[:n]
		if i == 0 {
			chunk = "utf-8''" + chunk
		}
		out += fmt.Sprintf("\n %s*%d*=%s;", name, i, chunk)
		v = v[n:]
	}
	return strings.TrimSuffix(out, ";")
}

func file(name, ctype string, data []byte) part {
	return part{header: fmt.Sprintf("Content-Type: %s\nContent-Disposition: attachment; filename=%q\nContent-Transfer-Encoding: base64",
		ctype, name), body: b64(data)}
}

// pattern is n bytes that are not all alike.
func pattern(n int) []byte {
	p := make([]byte, n)
	for i := range p {
		p[i] = byte(i*31 + i/251)
	}
	return p
}

func hexSHA(p []byte) string {
	s := sha256.Sum256(p)
	return hex.EncodeToString(s[:])
}

// runtimeToken issues a runtime credential of e's endpoint with scopes.
func (e *env) runtimeToken(scopes ...string) string {
	e.t.Helper()
	return e.api(http.MethodPost, "/endpoints/"+e.endpoint+"/runtime-credentials", map[string]any{"scopes": scopes},
		http.StatusCreated)["token"].(string)
}

// get calls the server with a bearer token.
func (e *env) get(path, token string) (int, http.Header, []byte) {
	e.t.Helper()
	req, _ := http.NewRequest(http.MethodGet, e.srv.URL()+path, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, body
}

// workOf returns the work of the event with subject.
func (e *env) workOf(subject string) string {
	e.t.Helper()
	var ev *agentowl.Event
	for _, v := range e.events() {
		var p map[string]any
		if json.Unmarshal(v.Payload, &p) == nil && p["subject"] == subject {
			ev = v
		}
	}
	if ev == nil {
		e.t.Fatalf("no event with subject %q", subject)
	}
	var id string
	err := e.srv.Store().Read(context.Background(), func(tx agentowl.Tx) error {
		ws, err := tx.WorkByEvent(context.Background(), ev.ID)
		if err == nil && len(ws) > 0 {
			id = ws[0].ID
		}
		return err
	})
	if err != nil || id == "" {
		e.t.Fatalf("work of %q: %v", subject, err)
	}
	return id
}

// manifest is a runtime's manifest of work.
func (e *env) manifest(work, token string) []attachment.Entry {
	e.t.Helper()
	status, _, body := e.get("/runtime/v1/work/"+work+"/attachments", token)
	if status != http.StatusOK {
		e.t.Fatalf("manifest: %d %s", status, body)
	}
	var m struct {
		Items []attachment.Entry `json:"items"`
	}
	if err := json.Unmarshal(body, &m); err != nil {
		e.t.Fatal(err)
	}
	return m.Items
}

// objects counts the stored objects (temporary files included).
func (e *env) objects() int {
	e.t.Helper()
	keys, err := e.srv.Blobs().Keys(context.Background(), "")
	if err != nil {
		e.t.Fatal(err)
	}
	return len(keys)
}

// nothingStored fails unless no event, attachment, upload or object exists.
func (e *env) nothingStored(what string) {
	e.t.Helper()
	if n := len(e.events()); n != 0 {
		e.t.Fatalf("%s: %d events stored", what, n)
	}
	for _, table := range []string{"attachments", "attachment_uploads"} {
		if n := e.count(table); n != 0 {
			e.t.Fatalf("%s: %d rows in %s", what, n, table)
		}
	}
	if n := e.objects(); n != 0 {
		e.t.Fatalf("%s: %d objects stored", what, n)
	}
}

// A message with nested multiparts, an inline image, base64 and
// quoted-printable attachments, hostile file names and wrong declared types
// reaches the runtime's manifest, and every file downloads byte-identical.
func TestSMTPAttachmentsReachTheRuntime(t *testing.T) {
	t.Parallel()
	forEachStoreAndBlob(t, nil, func(t *testing.T, e *env) {
		_, addr := e.binding("")
		token := e.runtimeToken("attachments:read")
		png := append([]byte("\x89PNG\r\n\x1a\n"), pattern(3000)...)
		pdf := append([]byte("%PDF-1.7\n"), pattern(200_000)...)
		csv := []byte("name,amount\nCafé Zoë,12.50\n= trailing spaces   \n")
		var qp bytes.Buffer
		w := quotedprintable.NewWriter(&qp)
		w.Binary = true // line breaks encoded, so the decoded bytes are csv's exactly
		w.Write(csv)
		w.Close()
		long := strings.Repeat("é", 300) + ".txt"
		nasty := "../../etc/passwd\x00\u202Efdp.exe"
		msg := crlf("From: ann@example.org\nSubject: files\nMessage-ID: <files@example.org>\nMIME-Version: 1.0\n" +
			"Content-Type: multipart/mixed; boundary=\"=outer\"\n\n" +
			"--=outer\nContent-Type: multipart/alternative; boundary=\"=alt\"\n\n" +
			"--=alt\nContent-Type: text/plain; charset=utf-8\n\nSee the files.\n" +
			"--=alt\nContent-Type: multipart/related; boundary=\"=rel\"\n\n" +
			"--=rel\nContent-Type: text/html; charset=utf-8\n\n<p>See <img src=\"cid:logo@example.org\"></p>\n" +
			"--=rel\nContent-Type: image/png\nContent-ID: <logo@example.org>\nContent-Transfer-Encoding: base64\n\n" + b64(png) + "\n" +
			"--=rel--\n--=alt--\n" +
			"--=outer\nContent-Type: application/pdf\nContent-Disposition: attachment; filename=\"report.pdf\"\nContent-Transfer-Encoding: base64\n\n" +
			b64(pdf) + "\n" +
			"--=outer\nContent-Type: text/csv; charset=utf-8\nContent-Disposition: attachment; filename=\"data.csv\"\n" +
			"Content-Transfer-Encoding: quoted-printable\n\n" + qp.String() + "\n" +
			// A PNG declared as a PDF, with a name that climbs, hides a NUL and flips direction.
			"--=outer\nContent-Type: application/pdf\nContent-Disposition: attachment;" + rfc2231("filename", nasty) +
			"\nContent-Transfer-Encoding: base64\n\n" + b64(png) + "\n" +
			"--=outer\nContent-Type: text/plain\nContent-Disposition: attachment;" + rfc2231("filename", long) + "\n\nshort text\n" +
			"--=outer--\n")
		if err := e.send("ann@example.org", []string{addr}, msg); err != nil {
			t.Fatalf("send: %v", err)
		}
		got := e.manifest(e.workOf("files"), token)
		if len(got) != 5 {
			t.Fatalf("manifest has %d entries: %+v", len(got), got)
		}
		want := []struct {
			name, declared, sniffed string
			data                    []byte
			inline                  bool
			cid                     string
		}{
			{"attachment-1", "image/png", "image/png", png, true, "logo@example.org"},
			{"report.pdf", "application/pdf", "application/pdf", pdf, false, ""},
			{"data.csv", "text/csv", "text/plain; charset=utf-8", csv, false, ""},
			{"_.._etc_passwdfdp.exe", "application/pdf", "image/png", png, false, ""},
			{"", "text/plain", "text/plain; charset=utf-8", []byte("short text"), false, ""},
		}
		for i, w := range want {
			a := got[i]
			if (w.name != "" && a.Name != w.name) || a.ContentType != w.declared || a.SniffedType != w.sniffed || a.Inline != w.inline ||
				a.ContentID != w.cid || a.Size != int64(len(w.data)) || a.SHA256 != hexSHA(w.data) || a.Availability != "available" {
				t.Errorf("entry %d = %+v, want %+v", i, a, w)
			}
			status, h, body := e.get("/runtime/v1/work/"+e.workOf("files")+"/attachments/"+a.ID, token)
			if status != http.StatusOK || !bytes.Equal(body, w.data) || h.Get("Content-Type") != "application/octet-stream" ||
				h.Get("X-Content-Type-Options") != "nosniff" || h.Get("Cache-Control") != "private, no-store" {
				t.Errorf("download %d: %d, %d bytes, headers %v", i, status, len(body), h)
			}
		}
		if n := got[4].Name; len(n) > attachment.MaxNameBytes || !strings.HasSuffix(n, ".txt") || !strings.HasPrefix(n, "éé") {
			t.Errorf("the 300-character name became %q (%d bytes)", n, len(n))
		}
	})
}

// The parser ceilings on real email: a file over 10 MiB is kept as blocked
// while its message is accepted; 21 parts, and more than 25 MiB decoded,
// refuse the message with 552 5.3.4 and store nothing.
func TestSMTPAttachmentCeilings(t *testing.T) {
	t.Parallel()
	forEachStoreAndBlob(t, nil, func(t *testing.T, e *env) {
		_, addr := e.binding("")
		token := e.runtimeToken("attachments:read")

		var parts []part
		for i := range 21 {
			parts = append(parts, file(fmt.Sprintf("f%d.txt", i), "text/plain", []byte{byte('a' + i)}))
		}
		wantReply(t, "21 parts", e.send("ann@example.org", []string{addr}, mixed("many", parts...)), 552, "5.3.4")
		e.nothingStored("21 parts")
		// 25 MiB + 1 decoded cannot arrive in a message of at most 25 MiB.
		over := mixed("decoded", file("a.bin", "application/octet-stream", pattern(10<<20)),
			file("b.bin", "application/octet-stream", pattern(10<<20)), part{header: "Content-Type: text/plain", body: strings.Repeat("x\n", 5<<19+1)})
		wantReply(t, "25 MiB + 1 decoded", e.send("ann@example.org", []string{addr}, over), 552, "5.3.4")
		e.nothingStored("25 MiB + 1 decoded")

		text := part{header: "Content-Type: text/plain", body: "Twenty parts, the body text one of them."}
		if err := e.send("ann@example.org", []string{addr}, mixed("twenty", append([]part{text}, parts[:19]...)...)); err != nil {
			t.Fatalf("20 parts: %v", err)
		}
		if got := e.manifest(e.workOf("twenty"), token); len(got) != 19 {
			t.Fatalf("20 parts: %d attachments", len(got))
		}

		big := pattern(10<<20 + 1)
		if err := e.send("ann@example.org", []string{addr}, mixed("big", file("big.iso", "application/octet-stream", big),
			file("small.txt", "text/plain", []byte("kept")))); err != nil {
			t.Fatalf("a 10 MiB + 1 file: %v", err)
		}
		got := e.manifest(e.workOf("big"), token)
		if len(got) != 2 || got[0].Availability != "blocked" || got[0].BlockedReason != "file_too_large" || got[0].Size != 10<<20+1 ||
			got[1].Availability != "available" {
			t.Fatalf("a 10 MiB + 1 file: %+v", got)
		}
		status, _, body := e.get("/runtime/v1/work/"+e.workOf("big")+"/attachments/"+got[0].ID, token)
		if status != http.StatusConflict || !strings.Contains(string(body), "attachment_blocked") {
			t.Fatalf("download of the blocked file: %d %s", status, body)
		}
		exact := pattern(10 << 20)
		if err := e.send("ann@example.org", []string{addr}, mixed("exact", file("exact.bin", "application/octet-stream", exact))); err != nil {
			t.Fatalf("a 10 MiB file: %v", err)
		}
		got = e.manifest(e.workOf("exact"), token)
		if len(got) != 1 || got[0].Availability != "available" || got[0].SHA256 != hexSHA(exact) {
			t.Fatalf("a 10 MiB file: %+v", got)
		}
		if n := e.count("attachment_uploads"); n != 0 {
			t.Fatalf("%d uploads left open", n)
		}
	})
}

// A lower decoded ceiling refuses a message whose attachments pass it.
func TestSMTPDecodedCeiling(t *testing.T) {
	t.Parallel()
	forEachStoreAndBlob(t, func(c *server.Config) { c.Attachments.MaxDecodedBytes = 1 << 20 }, func(t *testing.T, e *env) {
		_, addr := e.binding("")
		msg := mixed("two halves", file("a.bin", "application/octet-stream", pattern(512<<10)),
			file("b.bin", "application/octet-stream", pattern(512<<10+1)))
		wantReply(t, "1 MiB + 1 decoded", e.send("ann@example.org", []string{addr}, msg), 552, "5.3.4")
		e.nothingStored("1 MiB + 1 decoded")
	})
}

// The hosted profile: the whole message, MIME encoding included, at most
// 1 MB; files kept 30 days. Quota: a file past the tenant's retained bytes
// is kept as blocked (quota).
func TestSMTPHostedProfileAndQuota(t *testing.T) {
	t.Parallel()
	adjust := func(c *server.Config) {
		c.Attachments.Profile = attachment.ProfileHosted
		c.Attachments.TenantRetainedBytes = 300_000
	}
	forEachStoreAndBlob(t, adjust, func(t *testing.T, e *env) {
		_, addr := e.binding("")
		token := e.runtimeToken("attachments:read")
		fits := mixed("fits", file("a.bin", "application/octet-stream", pattern(200_000)), file("b.bin", "application/octet-stream", pattern(200_000)))
		if err := e.send("ann@example.org", []string{addr}, fits); err != nil {
			t.Fatalf("a message under 1 MB: %v", err)
		}
		got := e.manifest(e.workOf("fits"), token)
		if got[0].Availability != "available" || got[1].Availability != "blocked" || got[1].BlockedReason != "quota" {
			t.Fatalf("at quota: %+v", got)
		}
		if want := e.clock.Now().Add(30 * 24 * time.Hour).Format(time.RFC3339); got[0].ExpiresAt != want {
			t.Fatalf("hosted expiry %s, want %s", got[0].ExpiresAt, want)
		}
		if err := e.send("ann@example.org", []string{addr}, sized("at the limit", 1_000_000)); err != nil {
			t.Fatalf("a message of 1 MB: %v", err)
		}
		wantReply(t, "1 MB + 1", e.send("ann@example.org", []string{addr}, sized("over the limit", 1_000_001)), 552, "5.3.4")
	})
}

// A message to two bindings keeps a copy for each event: each event's
// files have their own expiry, quota charge and deletion.
func TestSMTPAttachmentsForSeveralBindings(t *testing.T) {
	t.Parallel()
	forEachStoreAndBlob(t, nil, func(t *testing.T, e *env) {
		_, a := e.binding("")
		_, b := e.binding("")
		data := pattern(70_000)
		if err := e.send("ann@example.org", []string{a, b}, mixed("both", file("x.bin", "application/octet-stream", data))); err != nil {
			t.Fatal(err)
		}
		evs := e.events()
		if len(evs) != 2 || e.count("attachments") != 2 || e.objects() != 2 {
			t.Fatalf("%d events, %d attachments, %d objects; want 2 of each", len(evs), e.count("attachments"), e.objects())
		}
		for _, ev := range evs {
			var entries []attachment.Entry
			if err := json.Unmarshal(ev.Attachments, &entries); err != nil || len(entries) != 1 || entries[0].SHA256 != hexSHA(data) {
				t.Fatalf("event attachments %s", ev.Attachments)
			}
		}
	})
}

// sized is a plain message of exactly n bytes as sent, in short lines.
func sized(subject string, n int) string {
	var msg strings.Builder // not +=: a megabyte so built copies gigabytes
	msg.Grow(n)
	msg.WriteString(crlf("From: ann@example.org\nSubject: " + subject + "\n\n"))
	line := strings.Repeat("y", 98) + "\r\n"
	for msg.Len()+len(line) <= n-3 {
		msg.WriteString(line)
	}
	msg.WriteString(strings.Repeat("z", n-msg.Len()-2) + "\r\n")
	return msg.String()
}
