package httpapi_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentowl/agentowl"
	"github.com/agentowl/agentowl/internal/attachment/attachmenttest"
	"github.com/agentowl/agentowl/internal/blob/blobtest"
	"github.com/agentowl/agentowl/internal/server"
	"github.com/agentowl/agentowl/internal/store/storetest"
	"github.com/agentowl/agentowl/internal/work"
)

// Retained attachments over HTTP (docs/attachments.md): the runtime and
// operator manifests and downloads, their headers, ranges and refusals, on
// every store with every object store. Messages are stored through the real
// retaining writer (attachmenttest), as a channel stores them.

// attachEnv is a work server with an agent-work endpoint, a binding and a
// runtime token holding attachments:read.
type attachEnv struct {
	*workEnv
	rt        *fakeRuntime
	endpoint  string
	binding   *agentowl.Binding
	token     string
	callbacks string // a token of the endpoint without attachments:read
}

func forEachAttachmentBackend(t *testing.T, fn func(t *testing.T, e *attachEnv)) {
	for _, sb := range storetest.Backends(t) {
		for _, bb := range blobtest.Backends() {
			t.Run(sb.Name+"/"+bb.Name, func(t *testing.T) {
				t.Parallel()
				url := bb.URL(t)
				fn(t, setupAttachments(t, setupWorkServer(t, sb, func(sc *server.Config) { sc.BlobURL = url })))
			})
		}
	}
}

func setupAttachments(t *testing.T, w *workEnv) *attachEnv {
	t.Helper()
	e := &attachEnv{workEnv: w, rt: newRuntime(t, w)}
	e.endpoint = e.workEnv.endpoint(t, e.rt, true)["id"].(string)
	e.token = e.credential(t, e.endpoint, map[string]any{"scopes": []string{work.ScopeCallbacks, work.ScopeAttachments}})["token"].(string)
	e.callbacks = e.credential(t, e.endpoint, map[string]any{"scopes": []string{work.ScopeCallbacks}})["token"].(string)
	id, _ := e.workEnv.binding(t, e.endpoint, nil)
	if err := e.store.Read(context.Background(), func(tx agentowl.Tx) (err error) {
		e.binding, err = tx.BindingGet(context.Background(), id)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return e
}

// receive stores a message with files at the binding and hands it to the
// endpoint; it returns the event and its work.
func (e *attachEnv) receive(t *testing.T, files ...attachmenttest.File) (*agentowl.Event, string) {
	t.Helper()
	var workID string
	ev, err := attachmenttest.Accept(context.Background(), e.store, e.server.Attachments(), e.binding,
		attachmenttest.Message{Sender: "ann@example.com", Files: files}, e.clock.Now(),
		func(ctx context.Context, tx agentowl.Tx, ev *agentowl.Event, conv *agentowl.Conversation) error {
			ep, err := tx.EndpointGet(ctx, e.endpoint)
			if err != nil {
				return err
			}
			w, err := e.work.HandoffTx(ctx, tx, ep, ev, conv)
			if w != nil {
				workID = w.ID
			}
			return err
		})
	if err != nil {
		t.Fatalf("receive: %v", err)
	}
	e.work.Wake()
	return ev, workID
}

func (e *attachEnv) manifest(t *testing.T, path, token string) []map[string]any {
	t.Helper()
	return itemsOf(t, wantJSON(t, "manifest "+path, e.do(http.MethodGet, path, token, nil), http.StatusOK))
}

func hexSum(p []byte) string {
	s := sha256.Sum256(p)
	return hex.EncodeToString(s[:])
}

// nastyName is a sender's file name that tries everything.
const nastyName = "../../résumé\u202Efdp.exe\x00\r\nX-Injected: 1.pdf"

func TestAttachmentDownloads(t *testing.T) {
	t.Parallel()
	forEachAttachmentBackend(t, func(t *testing.T, e *attachEnv) {
		report := attachmenttest.Generated(300_001)
		html := []byte("<html><script>alert(1)</script></html>")
		ev, w := e.receive(t,
			attachmenttest.File{Name: nastyName, ContentType: "application/pdf", Data: report},
			attachmenttest.File{Name: "page.txt", ContentType: "text/plain", Data: html},
			attachmenttest.File{Name: "huge.iso", ContentType: "application/octet-stream", Size: 10<<20 + 1},
		)
		base := "/runtime/v1/work/" + w + "/attachments"
		items := e.manifest(t, base, e.token)
		if len(items) != 3 {
			t.Fatalf("manifest %v", items)
		}
		a, page, huge := items[0], items[1], items[2]
		if a["name"] != "_.._résuméfdp.exe  X-Injected_ 1.pdf" || a["size"] != float64(len(report)) || a["sha256"] != hexSum(report) ||
			a["availability"] != "available" || a["url"] != e.srv.URL+base+"/"+a["id"].(string) {
			t.Fatalf("manifest entry %v", a)
		}
		if page["sniffed_type"] != "text/html; charset=utf-8" || page["content_type"] != "text/plain" {
			t.Fatalf("a mislabelled part %v", page)
		}
		if huge["availability"] != "blocked" || huge["blocked_reason"] != "file_too_large" {
			t.Fatalf("the file over the ceiling %v", huge)
		}
		// The handoff carried the same entries.
		got := e.rt.wait(t, 1)[0]
		if carried := jsonAt(got.Doc, "event", "attachments").([]any); len(carried) != 3 ||
			carried[0].(map[string]any)["id"] != a["id"] || carried[0].(map[string]any)["sha256"] != a["sha256"] {
			t.Fatalf("handoff attachments %v", carried)
		}

		r := e.do(http.MethodGet, base+"/"+a["id"].(string), e.token, nil)
		if r.Status != http.StatusOK || !bytes.Equal(r.Body, report) {
			t.Fatalf("download: %d, %d bytes", r.Status, len(r.Body))
		}
		checkDownloadHeaders(t, r, a["name"].(string), report)

		// A file that would render in a browser is still an inert download.
		r = e.do(http.MethodGet, base+"/"+page["id"].(string), e.token, nil)
		if r.Header.Get("Content-Type") != "application/octet-stream" || !bytes.Equal(r.Body, html) {
			t.Fatalf("html download: %s %q", r.Header.Get("Content-Type"), r.Body)
		}

		// Ranges.
		url := base + "/" + a["id"].(string)
		size := len(report)
		for _, c := range []struct {
			rng, ifRange string
			status       int
			from, to     int // expected body report[from:to]
		}{
			{"bytes=10-19", "", 206, 10, 20},
			{"bytes=300000-", "", 206, 300000, size},
			{"bytes=-5", "", 206, size - 5, size},
			{"bytes=-999999999", "", 206, 0, size},
			{"bytes=299990-999999999", "", 206, 299990, size},
			{"bytes=0-0,5-6", "", 200, 0, size},
			{"bytes=abc", "", 200, 0, size},
			{"items=0-5", "", 200, 0, size},
			{"bytes=10-19", `"` + a["sha256"].(string) + `"`, 206, 10, 20},
			{"bytes=10-19", `"0000"`, 200, 0, size},
		} {
			r := e.do(http.MethodGet, url, e.token, nil, "Range", c.rng, "If-Range", c.ifRange)
			if r.Status != c.status || !bytes.Equal(r.Body, report[c.from:c.to]) {
				t.Fatalf("Range %q If-Range %q: %d, %d bytes; want %d, %d bytes", c.rng, c.ifRange, r.Status, len(r.Body), c.status, c.to-c.from)
			}
			if want := fmt.Sprintf("bytes %d-%d/%d", c.from, c.to-1, size); c.status == 206 && r.Header.Get("Content-Range") != want {
				t.Fatalf("Range %q: Content-Range %q, want %q", c.rng, r.Header.Get("Content-Range"), want)
			}
			if r.Header.Get("Content-Length") != strconv.Itoa(c.to-c.from) {
				t.Fatalf("Range %q: Content-Length %q", c.rng, r.Header.Get("Content-Length"))
			}
		}
		for _, rng := range []string{"bytes=300001-", "bytes=999999999-1000000000", "bytes=-0"} {
			r := e.do(http.MethodGet, url, e.token, nil, "Range", rng)
			expectRefused(t, "Range "+rng, r, http.StatusRequestedRangeNotSatisfiable, "range_not_satisfiable")
			if r.Header.Get("Content-Range") != "bytes */"+strconv.Itoa(size) {
				t.Fatalf("Range %q: Content-Range %q", rng, r.Header.Get("Content-Range"))
			}
		}

		// Refusals: scope, other endpoints, unknown IDs, blocked.
		expectRefused(t, "a token without attachments:read", e.do(http.MethodGet, base, e.callbacks, nil),
			http.StatusForbidden, "insufficient_scope")
		expectRefused(t, "a download without attachments:read", e.do(http.MethodGet, url, e.callbacks, nil),
			http.StatusForbidden, "insufficient_scope")
		other := e.workEnv.endpoint(t, newRuntime(t, e.workEnv), true)["id"].(string)
		otherToken := e.credential(t, other, map[string]any{"scopes": []string{work.ScopeAttachments}})["token"].(string)
		expectRefused(t, "another endpoint's token", e.do(http.MethodGet, base, otherToken, nil), http.StatusNotFound, "not_found")
		expectRefused(t, "another endpoint's download", e.do(http.MethodGet, url, otherToken, nil), http.StatusNotFound, "not_found")
		expectRefused(t, "an unknown attachment", e.do(http.MethodGet, base+"/att_unknown", e.token, nil), http.StatusNotFound, "not_found")
		expectRefused(t, "no token", e.do(http.MethodGet, url, "", nil), http.StatusUnauthorized, "unauthenticated")
		expectRefused(t, "an operator token", e.do(http.MethodGet, url, e.operatorToken, nil), http.StatusForbidden, "forbidden")
		expectRefused(t, "a blocked file", e.do(http.MethodGet, base+"/"+huge["id"].(string), e.token, nil),
			http.StatusConflict, "attachment_blocked")

		// The operator API shows the event's manifest, linked from the work, and serves the bytes.
		opBase := tenantPath + "/events/" + ev.ID + "/attachments"
		if got := e.getWork(t, w)["attachments_url"]; got != e.srv.URL+opBase {
			t.Fatalf("the work links %v, want %s", got, e.srv.URL+opBase)
		}
		ops := e.manifest(t, opBase, e.member(t))
		if len(ops) != 3 || ops[0]["sha256"] != a["sha256"] || ops[0]["url"] != e.srv.URL+opBase+"/"+a["id"].(string) {
			t.Fatalf("operator manifest %v", ops)
		}
		r = e.do(http.MethodGet, opBase+"/"+a["id"].(string), e.operatorToken, nil)
		if r.Status != http.StatusOK || !bytes.Equal(r.Body, report) {
			t.Fatalf("operator download: %d", r.Status)
		}
		checkDownloadHeaders(t, r, a["name"].(string), report)
		expectRefused(t, "an unknown event", e.do(http.MethodGet, tenantPath+"/events/evt_unknown/attachments", e.operatorToken, nil),
			http.StatusNotFound, "not_found")
		wantJSON(t, "tenant", e.do(http.MethodPost, "/api/v1/tenants", e.operatorToken, map[string]any{"name": "acme"}), http.StatusCreated)
		expectRefused(t, "another tenant's path", e.do(http.MethodGet, "/api/v1/tenants/acme/events/"+ev.ID+"/attachments", e.operatorToken, nil),
			http.StatusNotFound, "not_found")

		// Replayed work shows the same manifest.
		replay := wantJSON(t, "replay", e.do(http.MethodPost, tenantPath+"/work/"+w+"/replay", e.operatorToken, nil), http.StatusCreated)
		again := e.manifest(t, "/runtime/v1/work/"+replay["id"].(string)+"/attachments", e.token)
		if len(again) != 3 || again[0]["id"] != a["id"] || again[0]["sha256"] != a["sha256"] || again[2]["availability"] != "blocked" {
			t.Fatalf("replayed work's manifest %v", again)
		}

		// Lost bytes are missing, never substituted.
		if err := e.server.Blobs().Delete(context.Background(), blobKeyOf(t, e, a["id"].(string))); err != nil {
			t.Fatal(err)
		}
		expectRefused(t, "lost bytes", e.do(http.MethodGet, url, e.token, nil), http.StatusGone, "attachment_missing")
		if got := e.manifest(t, base, e.token)[0]["availability"]; got != "missing" {
			t.Fatalf("availability after the loss %v", got)
		}

		// Expired at the instant, before any deletion.
		e.clock.Advance(7 * 24 * time.Hour)
		expectRefused(t, "an expired file", e.do(http.MethodGet, base+"/"+page["id"].(string), e.token, nil),
			http.StatusGone, "attachment_expired")
		if ok, err := e.server.Blobs().Exists(context.Background(), blobKeyOf(t, e, page["id"].(string))); err != nil || !ok {
			t.Fatalf("the expired file's bytes before the sweep: %v, %v", ok, err)
		}
		if got := e.manifest(t, base, e.token)[1]["availability"]; got != "expired" {
			t.Fatalf("availability at expiry %v", got)
		}
	})
}

func blobKeyOf(t *testing.T, e *attachEnv, id string) string {
	t.Helper()
	var a *agentowl.Attachment
	if err := e.store.Read(context.Background(), func(tx agentowl.Tx) (err error) {
		a, err = tx.AttachmentGet(context.Background(), id)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return a.BlobKey
}

// checkDownloadHeaders checks the headers that keep a download private
// and inert, and its safe name.
func checkDownloadHeaders(t *testing.T, r *response, name string, data []byte) {
	t.Helper()
	sum := sha256.Sum256(data)
	for h, want := range map[string]string{
		"Content-Type":           "application/octet-stream",
		"X-Content-Type-Options": "nosniff",
		"Cache-Control":          "private, no-store",
		"Content-Length":         strconv.Itoa(len(data)),
		"Accept-Ranges":          "bytes",
		"ETag":                   `"` + hex.EncodeToString(sum[:]) + `"`,
		"Repr-Digest":            "sha-256=:" + base64.StdEncoding.EncodeToString(sum[:]) + ":",
	} {
		if got := r.Header.Get(h); got != want {
			t.Errorf("%s: %q, want %q", h, got, want)
		}
	}
	if csp := r.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "sandbox") {
		t.Errorf("Content-Security-Policy %q", csp)
	}
	cd := r.Header.Get("Content-Disposition")
	disp, params, err := mime.ParseMediaType(cd)
	if err != nil || disp != "attachment" {
		t.Fatalf("Content-Disposition %q: %v", cd, err)
	}
	// mime.ParseMediaType decodes filename* (RFC 2231) into filename.
	if params["filename"] != name {
		t.Errorf("Content-Disposition %q names %q, want %q", cd, params["filename"], name)
	}
	if !strings.Contains(cd, `filename="`) || !strings.Contains(cd, "filename*=UTF-8''") {
		t.Errorf("Content-Disposition %q lacks the ASCII fallback or filename*", cd)
	}
	for _, bad := range []string{"/", "\\", "\u202e", "\x00", "\r", "\n", "%2F", "%5C", "%E2%80%AE", "%00", "%0D", "%0A"} {
		if strings.Contains(cd, bad) {
			t.Errorf("Content-Disposition %q contains %q", cd, bad)
		}
	}
}
