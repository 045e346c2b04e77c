package attachment_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentowl/agentowl"
	"github.com/agentowl/agentowl/internal/attachment"
	"github.com/agentowl/agentowl/internal/attachment/attachmenttest"
	"github.com/agentowl/agentowl/internal/blob"
	"github.com/agentowl/agentowl/internal/blob/blobtest"
	"github.com/agentowl/agentowl/internal/clocktest"
	"github.com/agentowl/agentowl/internal/store/storetest"
	"github.com/agentowl/agentowl/internal/work"
)

// env is one test's store, object store and service on a fake clock, with
// one tenant's endpoint, binding and an attachments:read credential.
type env struct {
	t      *testing.T
	ctx    context.Context
	st     agentowl.Store
	blobs  *blob.Store
	clock  *clocktest.Fake
	svc    *attachment.Service
	tenant string
	ep     *agentowl.Endpoint
	b      *agentowl.Binding
	cred   *agentowl.RuntimeCredential
}

// forEachBackend runs fn on every store backend with every object store.
func forEachBackend(t *testing.T, cfg attachment.Config, fn func(t *testing.T, e *env)) {
	for _, sb := range storetest.Backends(t) {
		for _, bb := range blobtest.Backends() {
			t.Run(sb.Name+"/"+bb.Name, func(t *testing.T) {
				t.Parallel()
				fn(t, setup(t, sb.Open(t), blobtest.Open(t, bb, t.TempDir()), cfg))
			})
		}
	}
}

func setup(t *testing.T, st agentowl.Store, blobs *blob.Store, cfg attachment.Config) *env {
	t.Helper()
	clock := clocktest.New(time.Date(2026, 10, 6, 12, 0, 0, 0, time.UTC))
	e := &env{t: t, ctx: t.Context(), st: st, blobs: blobs, clock: clock}
	e.svc = e.service(cfg)
	e.tenant, e.ep, e.b = e.thread()
	e.cred = e.credential(e.ep, work.ScopeAttachments)
	return e
}

func (e *env) service(cfg attachment.Config) *attachment.Service {
	e.t.Helper()
	svc, err := attachment.New(e.st, e.blobs, e.clock, cfg, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	return svc
}

// commitUpload commits u as the attachments of a new webhook event in a
// conversation of its own, as ingress does, and returns the event (its ID
// set even when the commit fails).
func (e *env) commitUpload(u *attachment.Upload) (*agentowl.Event, error) {
	ev := &agentowl.Event{ID: agentowl.NewID("evt"), TenantID: e.tenant, BindingID: e.b.ID, Channel: "webhook", ReceivedAt: e.clock.Now(),
		Headers: map[string][]string{}, Payload: json.RawMessage(`{}`)}
	return ev, e.st.Write(e.ctx, func(tx agentowl.Tx) error {
		conv := &agentowl.Conversation{ID: agentowl.NewID("conv"), TenantID: e.tenant, BindingID: e.b.ID, Status: "open",
			CreatedAt: ev.ReceivedAt, LastEventAt: ev.ReceivedAt}
		ev.ConversationID = conv.ID
		if err := tx.ConversationCreate(e.ctx, conv); err != nil {
			return err
		}
		if err := u.PrepareTx(e.ctx, tx, ev); err != nil {
			return err
		}
		if err := tx.EventCreate(e.ctx, ev); err != nil {
			return err
		}
		return u.RecordTx(e.ctx, tx)
	})
}

// storePart stores one part of u whole, as a message streaming it does.
func (e *env) storePart(u *attachment.Upload, name string, data []byte) {
	e.t.Helper()
	pw, err := u.Begin(e.ctx, attachment.Part{Filename: name})
	if err != nil {
		e.t.Fatal(err)
	}
	if _, err := pw.Write(data); err != nil {
		e.t.Fatal(err)
	}
	if err := pw.End(e.ctx); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) write(fn func(tx agentowl.Tx) error) {
	e.t.Helper()
	if err := e.st.Write(e.ctx, fn); err != nil {
		e.t.Fatalf("write: %v", err)
	}
}

// thread makes a tenant with an agent-work endpoint and an smtp-like
// binding routed to it.
func (e *env) thread() (string, *agentowl.Endpoint, *agentowl.Binding) {
	e.t.Helper()
	now := e.clock.Now()
	tn := &agentowl.Tenant{ID: agentowl.NewID("t"), Name: agentowl.NewID("tenant"), CreatedAt: now}
	ep := &agentowl.Endpoint{ID: agentowl.NewID("ep"), TenantID: tn.ID, Name: "runtime", URL: "https://runtime.example.com/",
		AgentWork: true, SigningSecret: []byte("sealed"), CreatedAt: now, UpdatedAt: now}
	b := &agentowl.Binding{ID: agentowl.NewID("bnd"), TenantID: tn.ID, Channel: "webhook", Name: "mail", EndpointID: ep.ID,
		TokenHash: []byte(agentowl.NewID("h")), CreatedAt: now}
	e.write(func(tx agentowl.Tx) error {
		if err := tx.TenantCreate(e.ctx, tn); err != nil {
			return err
		}
		if err := tx.EndpointCreate(e.ctx, ep); err != nil {
			return err
		}
		return tx.BindingCreate(e.ctx, b)
	})
	return tn.ID, ep, b
}

func (e *env) credential(ep *agentowl.Endpoint, scopes ...string) *agentowl.RuntimeCredential {
	e.t.Helper()
	now := e.clock.Now()
	c := &agentowl.RuntimeCredential{ID: agentowl.NewID("rtc"), TenantID: ep.TenantID, EndpointID: ep.ID, Hash: []byte(agentowl.NewID("h")),
		Scopes: scopes, CreatedAt: now, ExpiresAt: now.Add(30 * 24 * time.Hour)}
	e.write(func(tx agentowl.Tx) error { return tx.RuntimeCredentialCreate(e.ctx, c) })
	return c
}

// handoff creates work of generation 1 for the event, as a handoff does.
func handoff(ep *agentowl.Endpoint, workID *string) attachmenttest.Handoff {
	return func(ctx context.Context, tx agentowl.Tx, ev *agentowl.Event, conv *agentowl.Conversation) error {
		*workID = agentowl.NewID("work")
		return tx.WorkCreate(ctx, &agentowl.Work{ID: *workID, TenantID: ev.TenantID, EndpointID: ep.ID, ConversationID: conv.ID,
			EventID: ev.ID, Generation: 1, DeliveryID: agentowl.NewID("d"), Status: agentowl.WorkPending, CreatedAt: ev.ReceivedAt,
			UpdatedAt: ev.ReceivedAt})
	}
}

// accept stores m at e's binding with work for it; it returns the event
// and the work ID.
func (e *env) accept(m attachmenttest.Message) (*agentowl.Event, string, error) {
	e.t.Helper()
	var workID string
	ev, err := attachmenttest.Accept(e.ctx, e.st, e.svc, e.b, m, e.clock.Now(), handoff(e.ep, &workID))
	return ev, workID, err
}

func (e *env) mustAccept(m attachmenttest.Message) (*agentowl.Event, string) {
	e.t.Helper()
	ev, w, err := e.accept(m)
	if err != nil {
		e.t.Fatalf("accept: %v", err)
	}
	return ev, w
}

func (e *env) manifest(workID string) []attachment.Entry {
	e.t.Helper()
	m, err := e.svc.WorkManifest(e.ctx, e.cred, workID)
	if err != nil {
		e.t.Fatalf("manifest: %v", err)
	}
	return m.Entries()
}

// wantFirstFile fails the test, at the step what, unless the first file
// of workID's manifest has availability.
func (e *env) wantFirstFile(what, workID, availability string) {
	e.t.Helper()
	if got := e.manifest(workID)[0]; got.Availability != availability {
		e.t.Fatalf("%s: %+v, want %s", what, got, availability)
	}
}

// download returns the bytes of attachment id of workID, or the error code.
func (e *env) download(workID, id string, offset, length int64) ([]byte, string) {
	e.t.Helper()
	a, err := e.svc.WorkAttachment(e.ctx, e.cred, workID, id)
	if err != nil {
		return nil, agentowl.ErrorCode(err)
	}
	r, err := e.svc.Open(e.ctx, a, offset, length)
	if err != nil {
		return nil, agentowl.ErrorCode(err)
	}
	defer r.Close()
	data, err := io.ReadAll(r)
	if err != nil {
		e.t.Fatal(err)
	}
	return data, ""
}

// keys lists the tenant's objects.
func (e *env) keys() []string {
	e.t.Helper()
	keys, err := e.blobs.Keys(e.ctx, e.tenant+"/")
	if err != nil {
		e.t.Fatal(err)
	}
	return keys
}

func (e *env) retained() int64 {
	e.t.Helper()
	var n int64
	if err := e.st.Read(e.ctx, func(tx agentowl.Tx) (err error) {
		n, err = tx.RetainedBytes(e.ctx, e.tenant)
		return err
	}); err != nil {
		e.t.Fatal(err)
	}
	return n
}

// wantObjects, wantRetained and wantNoUploads fail the test, at the step
// what, unless the tenant has n stored objects, n retained bytes or no
// upload left uncommitted and uncleared.
func (e *env) wantObjects(what string, n int) {
	e.t.Helper()
	if keys := e.keys(); len(keys) != n {
		e.t.Fatalf("%s: objects %v, want %d", what, keys, n)
	}
}

func (e *env) wantRetained(what string, n int64) {
	e.t.Helper()
	if r := e.retained(); r != n {
		e.t.Fatalf("%s: retained %d bytes, want %d", what, r, n)
	}
}

func (e *env) wantNoUploads(what string) {
	e.t.Helper()
	if n := e.uploadsLeft(); n != 0 {
		e.t.Fatalf("%s: %d uploads left", what, n)
	}
}

func (e *env) uploadsLeft() int {
	e.t.Helper()
	var n int
	if err := e.st.Read(e.ctx, func(tx agentowl.Tx) error {
		us, err := tx.AttachmentUploadStale(e.ctx, e.clock.Now().Add(1000*time.Hour), 1000)
		n = len(us)
		return err
	}); err != nil {
		e.t.Fatal(err)
	}
	return n
}

func sum(p []byte) string {
	s := sha256.Sum256(p)
	return hex.EncodeToString(s[:])
}

func wantCode(t *testing.T, what, got, want string) {
	t.Helper()
	if got != want {
		t.Fatalf("%s: code %q, want %q", what, got, want)
	}
}

var pdf = append([]byte("%PDF-1.7\n"), bytes.Repeat([]byte("stream of a report "), 5000)...)

var png = append([]byte("\x89PNG\r\n\x1a\n"), bytes.Repeat([]byte{0, 1, 2, 3}, 1000)...)

func TestIngestManifestDownload(t *testing.T) {
	t.Parallel()
	forEachBackend(t, attachment.Config{}, func(t *testing.T, e *env) {
		big := attachmenttest.Generated(3<<20 + 17)
		ev, w := e.mustAccept(attachmenttest.Message{BodyBytes: 300, Files: []attachmenttest.File{
			{Name: "report.pdf", ContentType: "application/pdf", Data: pdf},
			{Name: "logo.png", ContentType: "image/png", ContentID: "<logo@example.com>", Inline: true, Data: png},
			// A wrong declaration: the bytes are a PDF.
			{Name: "../../etc/passwd", ContentType: "Text/Plain; Charset=UTF-8", Data: pdf[:600]},
			{Name: "", ContentType: "", Data: []byte{}},
			{Name: "data.bin", ContentType: "application/octet-stream", Data: big},
		}})
		got := e.manifest(w)
		if len(got) != 5 {
			t.Fatalf("manifest has %d entries: %+v", len(got), got)
		}
		expires := e.clock.Now().Add(7 * 24 * time.Hour).Format(time.RFC3339)
		want := []attachment.Entry{
			{Name: "report.pdf", Size: int64(len(pdf)), SHA256: sum(pdf), ContentType: "application/pdf", SniffedType: "application/pdf"},
			{Name: "logo.png", Size: int64(len(png)), SHA256: sum(png), ContentID: "logo@example.com", ContentType: "image/png",
				SniffedType: "image/png", Inline: true},
			{Name: "_.._etc_passwd", Size: 600, SHA256: sum(pdf[:600]), ContentType: "text/plain; charset=UTF-8", SniffedType: "application/pdf"},
			{Name: "attachment-4", Size: 0, SHA256: sum(nil), ContentType: "text/plain", SniffedType: "text/plain; charset=utf-8"},
			{Name: "data.bin", Size: int64(len(big)), SHA256: sum(big), ContentType: "application/octet-stream",
				SniffedType: "application/octet-stream"},
		}
		for i := range want {
			want[i].ID, want[i].ExpiresAt, want[i].Availability = got[i].ID, expires, "available"
			if !strings.HasPrefix(got[i].ID, "att_") {
				t.Errorf("attachment ID %q", got[i].ID)
			}
		}
		if !slices.Equal(got, want) {
			t.Fatalf("manifest:\n got %+v\nwant %+v", got, want)
		}
		// The event carries the same entries, as they were at receipt.
		var carried []attachment.Entry
		if err := json.Unmarshal(ev.Attachments, &carried); err != nil || !slices.Equal(carried, want) {
			t.Fatalf("event attachments %s (%v), want %+v", ev.Attachments, err, want)
		}
		for i, data := range [][]byte{pdf, png, pdf[:600], {}, big} {
			if got, code := e.download(w, want[i].ID, 0, -1); code != "" || !bytes.Equal(got, data) {
				t.Fatalf("download %s: %d bytes, %q; want %d identical", want[i].Name, len(got), code, len(data))
			}
		}
		if got, code := e.download(w, want[4].ID, 1<<20, 1000); code != "" || !bytes.Equal(got, big[1<<20:1<<20+1000]) {
			t.Fatalf("range: %d bytes, %q", len(got), code)
		}
		// Keys are the tenant's and random: no sender's name in them.
		keys := e.keys()
		if len(keys) != 5 {
			t.Fatalf("stored objects %v", keys)
		}
		for _, k := range keys {
			if !strings.HasPrefix(k, e.tenant+"/upl_") || strings.Contains(k, "passwd") || strings.Contains(k, "report") {
				t.Errorf("key %q", k)
			}
		}
		e.wantRetained("after the commit", int64(len(pdf)+len(png)+600+len(big)))
		e.wantNoUploads("after the commit")
	})
}

func TestFileCeilingBlocksThePart(t *testing.T) {
	t.Parallel()
	forEachBackend(t, attachment.Config{}, func(t *testing.T, e *env) {
		_, w := e.mustAccept(attachmenttest.Message{BodyBytes: 100, Files: []attachmenttest.File{
			{Name: "exactly.bin", Size: 10 << 20},
			{Name: "over.bin", ContentType: "application/zip", Size: 10<<20 + 1},
			{Name: "after.txt", Data: []byte("still here")},
		}})
		got := e.manifest(w)
		if len(got) != 3 || got[0].Availability != "available" || got[0].Size != 10<<20 || got[2].Availability != "available" {
			t.Fatalf("manifest %+v", got)
		}
		over := got[1]
		if over.Availability != "blocked" || over.BlockedReason != "file_too_large" || over.Size != 10<<20+1 || over.SHA256 != "" {
			t.Fatalf("the file over the ceiling: %+v", over)
		}
		_, code := e.download(w, over.ID, 0, -1)
		wantCode(t, "download of a blocked file", code, agentowl.ECodeAttachmentBlocked)
		e.wantObjects("the blocked file's bytes must not stay", 2)
		e.wantRetained("the files kept", 10<<20+int64(len("still here")))
	})
}

// refused checks that a refused message left nothing: no event, no
// objects, no upload, no retained bytes.
func (e *env) refused(what string, err error, code string) {
	e.t.Helper()
	wantCode(e.t, what, agentowl.ErrorCode(err), code)
	e.wantObjects(what, 0)
	e.wantNoUploads(what)
	e.wantRetained(what, 0)
}

func TestDecodedCeilingRefusesTheMessage(t *testing.T) {
	t.Parallel()
	forEachBackend(t, attachment.Config{}, func(t *testing.T, e *env) {
		// 25 MiB + 1 decoded: a 10 MiB file, an 11 MiB one (blocked, but
		// decoded all the same) and 4 MiB + 1 of body.
		_, _, err := e.accept(attachmenttest.Message{BodyBytes: 4<<20 + 1, Files: []attachmenttest.File{
			{Name: "a.bin", Size: 10 << 20}, {Name: "b.bin", Size: 11 << 20},
		}})
		e.refused("25 MiB + 1 decoded", err, agentowl.ECodeTooLarge)
		_, w := e.mustAccept(attachmenttest.Message{BodyBytes: 4 << 20, Files: []attachmenttest.File{
			{Name: "a.bin", Size: 10 << 20}, {Name: "b.bin", Size: 11 << 20},
		}})
		got := e.manifest(w)
		if len(got) != 2 || got[0].Availability != "available" || got[1].BlockedReason != "file_too_large" {
			t.Fatalf("25 MiB decoded: %+v", got)
		}
	})
}

func TestQuota(t *testing.T) {
	t.Parallel()
	forEachBackend(t, attachment.Config{TenantRetainedBytes: 1000}, func(t *testing.T, e *env) {
		_, w := e.mustAccept(attachmenttest.Message{Files: []attachmenttest.File{
			{Name: "a", Size: 600}, {Name: "b", Size: 500}, {Name: "c", Size: 400},
		}})
		got := e.manifest(w)
		if got[0].Availability != "available" || got[1].BlockedReason != "quota" || got[2].Availability != "available" {
			t.Fatalf("at quota: %+v", got)
		}
		e.wantRetained("at quota", 1000)
		_, w = e.mustAccept(attachmenttest.Message{Files: []attachmenttest.File{{Name: "d", Size: 1}}})
		if got := e.manifest(w); got[0].BlockedReason != "quota" {
			t.Fatalf("over quota: %+v", got)
		}
		e.wantObjects("over quota", 2)
	})
}

// Two messages stream while the tenant has room for one: the second to
// commit records its file blocked (quota) and its bytes go.
func TestQuotaRaceAtCommit(t *testing.T) {
	t.Parallel()
	forEachBackend(t, attachment.Config{TenantRetainedBytes: 1000}, func(t *testing.T, e *env) {
		stream := func() *attachment.Upload {
			u := e.svc.NewUpload(e.tenant)
			w, err := u.Begin(e.ctx, attachment.Part{Filename: "x"})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := w.Write(make([]byte, 700)); err != nil {
				t.Fatal(err)
			}
			if err := w.End(e.ctx); err != nil {
				t.Fatal(err)
			}
			return u
		}
		first, second := stream(), stream()
		e.wantObjects("while streaming", 2)
		commit := func(u *attachment.Upload) *agentowl.Event {
			ev, err := e.commitUpload(u)
			if err != nil {
				t.Fatal(err)
			}
			u.Finish(e.ctx, true)
			return ev
		}
		commit(first)
		ev := commit(second)
		var entries []attachment.Entry
		if err := json.Unmarshal(ev.Attachments, &entries); err != nil || entries[0].BlockedReason != "quota" {
			t.Fatalf("second event's attachments %s", ev.Attachments)
		}
		e.wantObjects("after both commits", 1)
		e.wantRetained("after both commits", 700)
	})
}

func TestExpiry(t *testing.T) {
	t.Parallel()
	forEachBackend(t, attachment.Config{}, func(t *testing.T, e *env) {
		_, w := e.mustAccept(attachmenttest.Message{Files: []attachmenttest.File{{Name: "a.pdf", Data: pdf}}})
		id := e.manifest(w)[0].ID
		e.clock.Advance(7*24*time.Hour - time.Microsecond)
		if n, err := e.svc.SweepExpired(e.ctx, e.clock.Now()); err != nil || n != 0 {
			t.Fatalf("sweep inside retention: %d, %v", n, err)
		}
		if got, code := e.download(w, id, 0, -1); code != "" || !bytes.Equal(got, pdf) {
			t.Fatalf("download a moment before expiry: %q", code)
		}
		e.clock.Advance(time.Microsecond)
		// Expired at the instant, while its bytes still exist.
		e.wantObjects("at expiry", 1)
		e.wantFirstFile("at expiry", w, "expired")
		_, code := e.download(w, id, 0, -1)
		wantCode(t, "download at expiry", code, agentowl.ECodeAttachmentExpired)

		if n, err := e.svc.SweepExpired(e.ctx, e.clock.Now()); err != nil || n != 1 {
			t.Fatalf("sweep at expiry: %d, %v", n, err)
		}
		e.wantObjects("after the sweep", 0)
		e.wantRetained("after the sweep", 0)
		if n, err := e.svc.SweepExpired(e.ctx, e.clock.Now()); err != nil || n != 0 {
			t.Fatalf("second sweep: %d, %v", n, err)
		}
		_, code = e.download(w, id, 0, -1)
		wantCode(t, "download after deletion", code, agentowl.ECodeAttachmentExpired)
		e.wantFirstFile("after deletion", w, "expired")
	})
}

// A file keeps the expiry recorded with it when retention changes.
func TestRecordedExpiryKept(t *testing.T) {
	t.Parallel()
	forEachBackend(t, attachment.Config{}, func(t *testing.T, e *env) {
		_, old := e.mustAccept(attachmenttest.Message{Files: []attachmenttest.File{{Name: "old", Data: pdf}}})
		e.svc = e.service(attachment.Config{Profile: attachment.ProfileHosted})
		_, fresh := e.mustAccept(attachmenttest.Message{Files: []attachmenttest.File{{Name: "new", Data: pdf}}})
		now := e.clock.Now()
		if got := e.manifest(old)[0].ExpiresAt; got != now.Add(7*24*time.Hour).Format(time.RFC3339) {
			t.Fatalf("old file's expiry %s", got)
		}
		if got := e.manifest(fresh)[0].ExpiresAt; got != now.Add(30*24*time.Hour).Format(time.RFC3339) {
			t.Fatalf("new file's expiry %s", got)
		}
		e.clock.Advance(8 * 24 * time.Hour)
		if n, err := e.svc.SweepExpired(e.ctx, e.clock.Now()); err != nil || n != 1 {
			t.Fatalf("sweep: %d, %v", n, err)
		}
		if e.manifest(old)[0].Availability != "expired" || e.manifest(fresh)[0].Availability != "available" {
			t.Fatal("availability after 8 days")
		}
	})
}

func TestMissingBytes(t *testing.T) {
	t.Parallel()
	forEachBackend(t, attachment.Config{}, func(t *testing.T, e *env) {
		_, w := e.mustAccept(attachmenttest.Message{Files: []attachmenttest.File{{Name: "a.pdf", Data: pdf}}})
		id := e.manifest(w)[0].ID
		for _, k := range e.keys() {
			if err := e.blobs.Delete(e.ctx, k); err != nil {
				t.Fatal(err)
			}
		}
		_, code := e.download(w, id, 0, -1)
		wantCode(t, "download of lost bytes", code, agentowl.ECodeAttachmentMissing)
		e.wantFirstFile("manifest after the loss", w, "missing")
		_, code = e.download(w, id, 0, -1)
		wantCode(t, "second download", code, agentowl.ECodeAttachmentMissing)
		e.clock.Advance(7 * 24 * time.Hour)
		e.wantFirstFile("past expiry", w, "expired")
	})
}

func TestRuntimeAccess(t *testing.T) {
	t.Parallel()
	forEachBackend(t, attachment.Config{}, func(t *testing.T, e *env) {
		ev, w := e.mustAccept(attachmenttest.Message{Files: []attachmenttest.File{{Name: "a.pdf", Data: pdf}}})
		id := e.manifest(w)[0].ID
		noScope := e.credential(e.ep, work.ScopeCallbacks, work.ScopeDecisions)
		_, otherEp, _ := e.thread()
		elsewhere := e.credential(otherEp, work.ScopeAttachments)
		for _, c := range []struct {
			name string
			cred *agentowl.RuntimeCredential
			code string
		}{
			{"a credential without attachments:read", noScope, agentowl.ECodeInsufficientScope},
			{"another endpoint's credential", elsewhere, agentowl.ECodeNotFound},
		} {
			_, err := e.svc.WorkManifest(e.ctx, c.cred, w)
			wantCode(t, c.name+": manifest", agentowl.ErrorCode(err), c.code)
			_, err = e.svc.WorkAttachment(e.ctx, c.cred, w, id)
			wantCode(t, c.name+": download", agentowl.ErrorCode(err), c.code)
		}
		_, err := e.svc.WorkManifest(e.ctx, e.cred, "work_unknown")
		wantCode(t, "unknown work", agentowl.ErrorCode(err), agentowl.ECodeNotFound)
		_, err = e.svc.WorkAttachment(e.ctx, e.cred, w, "att_unknown")
		wantCode(t, "unknown attachment", agentowl.ErrorCode(err), agentowl.ECodeNotFound)

		// Another event's attachment is not reachable through this work.
		_, w2 := e.mustAccept(attachmenttest.Message{Files: []attachmenttest.File{{Name: "b.pdf", Data: pdf}}})
		_, err = e.svc.WorkAttachment(e.ctx, e.cred, w, e.manifest(w2)[0].ID)
		wantCode(t, "another event's attachment", agentowl.ErrorCode(err), agentowl.ECodeNotFound)

		// Replayed work of the event shows the same manifest.
		replay := agentowl.NewID("work")
		e.write(func(tx agentowl.Tx) error {
			return tx.WorkCreate(e.ctx, &agentowl.Work{ID: replay, TenantID: e.tenant, EndpointID: e.ep.ID, ConversationID: ev.ConversationID,
				EventID: ev.ID, Generation: 2, ReplayOf: w, DeliveryID: agentowl.NewID("d"), Status: agentowl.WorkPending,
				CreatedAt: e.clock.Now(), UpdatedAt: e.clock.Now()})
		})
		if a, b := e.manifest(w), e.manifest(replay); !slices.Equal(a, b) {
			t.Fatalf("replayed work's manifest %+v, original %+v", b, a)
		}
		if got, code := e.download(replay, id, 0, -1); code != "" || !bytes.Equal(got, pdf) {
			t.Fatalf("download through the replay: %q", code)
		}
	})
}

// A process killed between storing bytes and committing the event leaves
// an upload whose bytes no manifest names; the orphan sweep deletes them
// once the grace has passed, never a committed message's.
func TestOrphanSweep(t *testing.T) {
	t.Parallel()
	forEachBackend(t, attachment.Config{}, func(t *testing.T, e *env) {
		_, w := e.mustAccept(attachmenttest.Message{Files: []attachmenttest.File{{Name: "kept.pdf", Data: pdf}}})
		// The crash: parts stored, no commit, no Finish.
		u := e.svc.NewUpload(e.tenant)
		for range 2 {
			e.storePart(u, "lost.pdf", pdf)
		}
		e.wantObjects("before the sweep", 3)
		e.clock.Advance(59 * time.Minute)
		if n, err := e.svc.SweepOrphans(e.ctx, e.clock.Now()); err != nil || n != 0 {
			t.Fatalf("sweep within the grace: %d, %v", n, err)
		}
		e.clock.Advance(2 * time.Minute)
		if n, err := e.svc.SweepOrphans(e.ctx, e.clock.Now()); err != nil || n != 1 {
			t.Fatalf("sweep after the grace: %d, %v", n, err)
		}
		e.wantObjects("after the sweep", 1)
		if got, code := e.download(w, e.manifest(w)[0].ID, 0, -1); code != "" || !bytes.Equal(got, pdf) {
			t.Fatalf("the committed file after the sweep: %q", code)
		}
		e.wantNoUploads("after the sweep")
	})
}

// A message still streaming when the sweep takes its upload cannot commit
// afterwards: its bytes are gone, so its event must not name them.
func TestSweptUploadCannotCommit(t *testing.T) {
	t.Parallel()
	forEachBackend(t, attachment.Config{}, func(t *testing.T, e *env) {
		u := e.svc.NewUpload(e.tenant)
		e.storePart(u, "slow.pdf", pdf)
		e.clock.Advance(2 * time.Hour)
		if n, err := e.svc.SweepOrphans(e.ctx, e.clock.Now()); err != nil || n != 1 {
			t.Fatalf("sweep: %d, %v", n, err)
		}
		ev, err := e.commitUpload(u)
		wantCode(t, "commit after the sweep", agentowl.ErrorCode(err), agentowl.ECodeUnavailable)
		u.Finish(e.ctx, false)
		if err := e.st.Read(e.ctx, func(tx agentowl.Tx) error {
			_, err := tx.EventGet(e.ctx, ev.ID)
			return err
		}); err != agentowl.ErrNotFound {
			t.Fatalf("event after the failed commit: %v", err)
		}
		e.wantRetained("after the failed commit", 0)
	})
}

// A message the channel had already accepted stores nothing again: its
// second upload's bytes go.
func TestDuplicateMessageStoresNothing(t *testing.T) {
	t.Parallel()
	forEachBackend(t, attachment.Config{}, func(t *testing.T, e *env) {
		m := attachmenttest.Message{DedupeKey: "<msg-1@example.com>", Files: []attachmenttest.File{{Name: "a.pdf", Data: pdf}}}
		first, _ := e.mustAccept(m)
		again, _, err := e.accept(m)
		if err != nil || again.ID != first.ID {
			t.Fatalf("duplicate: %v, %v", again, err)
		}
		e.wantObjects("after the duplicate", 1)
		e.wantNoUploads("after the duplicate")
	})
}

// Concurrent messages of one tenant near its quota never retain more than
// it, however their commits interleave.
func TestQuotaHoldsUnderConcurrency(t *testing.T) {
	t.Parallel()
	forEachBackend(t, attachment.Config{TenantRetainedBytes: 5000}, func(t *testing.T, e *env) {
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() {
				if _, _, err := e.accept(attachmenttest.Message{Files: []attachmenttest.File{{Name: "x", Size: 1000}}}); err != nil {
					t.Errorf("accept: %v", err)
				}
			})
		}
		wg.Wait()
		e.wantRetained("the quota", 5000)
		e.wantObjects("the quota", 5)
	})
}

// The maintenance hook clears orphaned uploads and expired files in
// batches of its limit, never a file inside its retention.
func TestDeleteExpiredHook(t *testing.T) {
	t.Parallel()
	forEachBackend(t, attachment.Config{}, func(t *testing.T, e *env) {
		for range 3 {
			e.mustAccept(attachmenttest.Message{Files: []attachmenttest.File{{Name: "old", Size: 100}}})
		}
		u := e.svc.NewUpload(e.tenant) // a crashed message
		e.storePart(u, "lost", []byte("lost"))
		e.clock.Advance(7 * 24 * time.Hour)
		_, fresh := e.mustAccept(attachmenttest.Message{Files: []attachmenttest.File{{Name: "new", Size: 100}}})
		if n, err := e.svc.DeleteExpired(e.ctx, e.clock.Now(), 2); err != nil || n != 3 {
			t.Fatalf("first batch: %d, %v; want the orphan and 2 files", n, err)
		}
		if n, err := e.svc.DeleteExpired(e.ctx, e.clock.Now(), 2); err != nil || n != 1 {
			t.Fatalf("second batch: %d, %v", n, err)
		}
		if n, err := e.svc.DeleteExpired(e.ctx, e.clock.Now(), 2); err != nil || n != 0 {
			t.Fatalf("third batch: %d, %v", n, err)
		}
		if keys := e.keys(); len(keys) != 1 || e.manifest(fresh)[0].Availability != "available" {
			t.Fatalf("objects left %v", keys)
		}
		e.wantRetained("after the batches", 100)
	})
}
