package main

import (
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/smtp"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentowl/agentowl"
	"github.com/agentowl/agentowl/internal/attachment"
	"github.com/agentowl/agentowl/internal/blob"
	"github.com/agentowl/agentowl/internal/clocktest"
	"github.com/agentowl/agentowl/internal/server"
)

// TestAttachmentsKilledBeforeCommit kills -9 the built server while a
// message's attachment bytes are stored and its event is not yet
// committed: no manifest names bytes that are missing, and the orphan sweep
// deletes the stranded bytes (temporary files included) once the grace has
// passed, leaving a committed message's file intact.
func TestAttachmentsKilledBeforeCommit(t *testing.T) {
	forEachBackendBuilt(t, func(t *testing.T, s site, bin string) {
		smtpAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
		p := s.serve(t, bin, []string{"AGENTOWL_SMTP_LISTEN=" + smtpAddr, "AGENTOWL_SMTP_DOMAIN=mail.example.com"})
		expectStatus(t, "assign the mail domain", send(t, http.MethodPost, p.url+"/api/v1/mail-domains", s.adminToken(t),
			map[string]any{"domain": "mail.example.com", "tenant": "default"}), http.StatusCreated)
		bindAgentWork(t, p.url, s.adminToken(t), map[string]any{"name": "mail", "url": "https://runtime.example.com/events"},
			map[string]any{"channel": "smtp", "address": "crash@mail.example.com"})

		message := func(subject string, files ...string) string {
			var b strings.Builder
			fmt.Fprintf(&b, "From: ann@example.org\r\nSubject: %s\r\nMessage-ID: <%s@example.org>\r\n"+
				"Content-Type: multipart/mixed; boundary=b\r\n\r\n", subject, subject)
			for i, data := range files {
				fmt.Fprintf(&b, "--b\r\nContent-Type: application/octet-stream\r\nContent-Disposition: attachment; filename=f%d.bin\r\n"+
					"Content-Transfer-Encoding: base64\r\n\r\n", i)
				enc := base64.StdEncoding.EncodeToString([]byte(data))
				for len(enc) > 76 {
					b.WriteString(enc[:76] + "\r\n")
					enc = enc[76:]
				}
				b.WriteString(enc + "\r\n")
			}
			return b.String()
		}
		kept := strings.Repeat("kept bytes ", 1000)
		if err := smtp.SendMail(smtpAddr, nil, "ann@example.org", []string{"crash@mail.example.com"},
			[]byte(message("kept", kept)+"--b--\r\n")); err != nil {
			t.Fatalf("send the kept message: %v", err)
		}

		// The second message stops half-way through its second file.
		c, err := smtp.Dial(smtpAddr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		w := startMail(t, c, "ann@example.org", "crash@mail.example.com")
		half := message("lost", strings.Repeat("first ", 20000), strings.Repeat("second ", 200000))
		if _, err := io.WriteString(w, half[:len(half)-1000]); err != nil {
			t.Fatal(err)
		}
		dir := filepath.Join(s.dataDir, blob.DefaultDir)
		if !within(30*time.Second, func() bool { return len(files(t, dir, false)) == 2 }) {
			t.Fatalf("the first file of the second message was never stored: %v", files(t, dir, true))
		}
		p.kill9(t)

		ctx := context.Background()
		key, err := server.KeyFile(s.dataDir)
		if err != nil {
			t.Fatal(err)
		}
		st, _, err := server.OpenStore(ctx, s.dataDir, s.dbURL, key, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		blobs, err := blob.Open(ctx, "", s.dataDir)
		if err != nil {
			t.Fatal(err)
		}
		defer blobs.Close()
		var records []*agentowl.Attachment
		var uploads []*agentowl.AttachmentUpload
		read := func() {
			t.Helper()
			err := st.Read(ctx, func(tx agentowl.Tx) error {
				tn, err := tx.TenantGetByName(ctx, "default")
				if err != nil {
					return err
				}
				ws, err := tx.WorkList(ctx, agentowl.WorkListParams{TenantID: tn.ID, Limit: 10})
				if err != nil || len(ws) != 1 {
					return fmt.Errorf("work %d, %v; want the kept message's only", len(ws), err)
				}
				if records, err = tx.AttachmentListByEvent(ctx, ws[0].EventID); err != nil {
					return err
				}
				uploads, err = tx.AttachmentUploadStale(ctx, time.Now().Add(1000*time.Hour), 10)
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
		}
		read()
		if len(records) != 1 || len(uploads) != 1 {
			t.Fatalf("after the kill: %d attachments of the kept message, %d uploads; want 1 and 1 (the stranded one)", len(records), len(uploads))
		}

		now := time.Now()
		svc, err := attachment.New(st, blobs, clocktest.New(now), attachment.Config{}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if n, err := svc.SweepOrphans(ctx, now); err != nil || n != 0 {
			t.Fatalf("sweep inside the grace: %d, %v", n, err)
		}
		if n, err := svc.SweepOrphans(ctx, now.Add(61*time.Minute)); err != nil || n != 1 {
			t.Fatalf("sweep after the grace: %d, %v", n, err)
		}
		if left := files(t, dir, true); len(left) != 1 || !strings.HasSuffix(left[0], records[0].ID) {
			t.Fatalf("objects after the sweep %v, want the kept file only", left)
		}
		read()
		if len(uploads) != 0 {
			t.Fatalf("%d uploads after the sweep", len(uploads))
		}
		if err := blobs.Verify(ctx, records[0].BlobKey, records[0].Size, records[0].SHA256); err != nil {
			t.Fatalf("the kept file after the sweep: %v", err)
		}
	})
}

// files lists the files under dir: finished objects only, or with
// temporary files too.
func files(t *testing.T, dir string, withTemp bool) []string {
	t.Helper()
	var out []string
	_ = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && (withTemp || !strings.HasSuffix(path, ".tmp")) {
			out = append(out, path)
		}
		return nil
	})
	return out
}
