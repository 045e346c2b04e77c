package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentowl/agentowl"
	"github.com/agentowl/agentowl/internal/attachment/attachmenttest"
	"github.com/agentowl/agentowl/internal/server"
)

// TestCLIAttachments runs the seed's line, agentowl attachments download
// <event> <attachment> <new-file>, and the manifest listing against a server
// on each backend.
func TestCLIAttachments(t *testing.T) {
	forEachBackend(t, func(t *testing.T, s site) {
		r := s.startWith(t, nil, func(cfg *server.Config) {
			cfg.Ingress.Mail.MaxPartBytes = 1000 // the file ceiling of retained attachments
		})
		token := s.adminToken(t)
		ev := storeMessage(t, r, attachmenttest.File{Name: "report.pdf", ContentType: "application/pdf", Data: []byte("%PDF-1.7 the report")},
			attachmenttest.File{Name: "big.bin", Size: 1001})

		table := r.cli(t, token, "attachments", "list", ev.ID).ok(t)
		header, rows := parseTable(t, table)
		expectHeader(t, "attachments list", header, "ID", "NAME", "SIZE", "AVAILABILITY", "EXPIRES", "DECLARED", "SNIFFED", "SHA256")
		if len(rows) != 2 || rows[0][1] != "report.pdf" || rows[0][3] != "available" || rows[1][3] != "blocked" {
			t.Fatalf("attachments list:\n%s", table)
		}
		items := itemsOf(t, cliJSON(t, r.cli(t, token, "--json", "attachments", "list", ev.ID)))
		report, big := items[0]["id"].(string), items[1]["id"].(string)

		dir := t.TempDir()
		target := filepath.Join(dir, "saved.pdf")
		msg := r.cli(t, token, "attachments", "download", ev.ID, report, target).ok(t)
		if !strings.Contains(msg, "Saved "+target) || !strings.Contains(msg, items[0]["sha256"].(string)) {
			t.Fatalf("download said %q", msg)
		}
		data, err := os.ReadFile(target)
		if err != nil || string(data) != "%PDF-1.7 the report" {
			t.Fatalf("saved file: %q, %v", data, err)
		}
		if fi, _ := os.Stat(target); fi.Mode().Perm() != 0o600 {
			t.Fatalf("saved file mode %v", fi.Mode().Perm())
		}
		onlyFiles(t, dir, "saved.pdf")

		// An existing file is never replaced.
		r.cli(t, token, "attachments", "download", ev.ID, report, target).failed(t, "refusing to overwrite "+target)
		other := filepath.Join(dir, "mine.txt")
		if err := os.WriteFile(other, []byte("keep me"), 0o644); err != nil {
			t.Fatal(err)
		}
		r.cli(t, token, "attachments", "download", ev.ID, report, other).failed(t, "refusing to overwrite")
		if data, _ := os.ReadFile(other); string(data) != "keep me" {
			t.Fatalf("the existing file was changed: %q", data)
		}

		// Refusals leave no file behind.
		r.cli(t, token, "attachments", "download", ev.ID, big, filepath.Join(dir, "big.bin")).failed(t, "attachment_blocked")
		r.cli(t, token, "attachments", "download", ev.ID, "att_unknown", filepath.Join(dir, "x")).failed(t, "not_found")
		r.cli(t, token, "attachments", "download", "evt_unknown", report, filepath.Join(dir, "x")).failed(t, "not_found")

		// Bytes that differ from the recorded SHA-256 are not saved.
		var a *agentowl.Attachment
		if err := r.m.Store().Read(context.Background(), func(tx agentowl.Tx) (err error) {
			a, err = tx.AttachmentGet(context.Background(), report)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		w, err := r.m.Blobs().Create(context.Background(), a.BlobKey)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write([]byte("%PDF-1.7 the REPORT")); err != nil {
			t.Fatal(err)
		}
		if _, err := w.Close(); err != nil {
			t.Fatal(err)
		}
		r.cli(t, token, "attachments", "download", ev.ID, report, filepath.Join(dir, "tampered.pdf")).failed(t, "SHA-256")
		onlyFiles(t, dir, "mine.txt", "saved.pdf")
	})
}

// storeMessage stores an event with files at a fresh binding of tenant
// default, through the real retaining writer.
func storeMessage(t *testing.T, r *running, files ...attachmenttest.File) *agentowl.Event {
	t.Helper()
	ctx := context.Background()
	st := r.m.Store()
	var b *agentowl.Binding
	err := st.Write(ctx, func(tx agentowl.Tx) error {
		tn, err := tx.TenantGetByName(ctx, "default")
		if err != nil {
			return err
		}
		now := time.Now()
		ep := &agentowl.Endpoint{ID: agentowl.NewID("ep"), TenantID: tn.ID, Name: "mail-runtime", URL: "https://runtime.example.com/",
			SigningSecret: []byte("sealed"), CreatedAt: now, UpdatedAt: now}
		b = &agentowl.Binding{ID: agentowl.NewID("bnd"), TenantID: tn.ID, Channel: "webhook", Name: "mail", EndpointID: ep.ID,
			TokenHash: agentowl.HashToken(agentowl.NewID("in")), CreatedAt: now}
		if err := tx.EndpointCreate(ctx, ep); err != nil {
			return err
		}
		return tx.BindingCreate(ctx, b)
	})
	if err != nil {
		t.Fatal(err)
	}
	ev, err := attachmenttest.Accept(ctx, st, r.m.Attachments(), b, attachmenttest.Message{Files: files}, time.Now(), nil)
	if err != nil {
		t.Fatal(err)
	}
	return ev
}

// onlyFiles fails unless dir holds exactly names: no temporary file is left.
func onlyFiles(t *testing.T, dir string, names ...string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range entries {
		got = append(got, e.Name())
	}
	if strings.Join(got, ",") != strings.Join(names, ",") {
		t.Fatalf("%s holds %v, want %v", dir, got, names)
	}
}
