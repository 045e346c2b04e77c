package smtp_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/smtp"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/agentowl/agentowl"
	"github.com/agentowl/agentowl/internal/blob/blobtest"
	"github.com/agentowl/agentowl/internal/server/servertest"
	"github.com/agentowl/agentowl/internal/store/storetest"
)

// BenchmarkSMTPAttachments sends a 20 MiB message with 10 attachments
// through the real SMTP listener into each object store (ingest: MB/s of
// the message as sent, until the 250), then downloads its files over the
// runtime API (download: MB/s of the files). peak-heap-MiB is the most the
// process heap grew above its level before a message while it was sent
// and ingested, less the message the client holds: streaming keeps it
// under twice the largest part (1.45 MiB). SQLite store.
func BenchmarkSMTPAttachments(b *testing.B) {
	for _, bb := range blobtest.Backends() {
		b.Run(bb.Name, func(b *testing.B) {
			sc := servertest.Config(b, storetest.Backends(b)[0])
			sc.NoDelivery, sc.BlobURL = true, bb.URL(b)
			sc.SMTP.Listen, sc.Ingress.SMTPDomain = "127.0.0.1:0", "mail.example.com"
			srv := servertest.Start(b, sc)
			api := func(method, path string, body any) map[string]any {
				data, _ := json.Marshal(body)
				req, _ := http.NewRequest(method, srv.URL()+"/api/v1/tenants/default"+path, bytes.NewReader(data))
				req.Header.Set("Authorization", "Bearer "+srv.BootstrapToken())
				req.Header.Set("Content-Type", "application/json")
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				defer resp.Body.Close()
				var out map[string]any
				_ = json.NewDecoder(resp.Body).Decode(&out)
				return out
			}
			ep := api(http.MethodPost, "/endpoints", map[string]any{"name": "rt", "url": "https://runtime.example.com/e",
				"config": map[string]any{"agent_work": true}})["id"].(string)
			addr := api(http.MethodPost, "/bindings", map[string]any{"channel": "smtp", "endpoint_id": ep})["address"].(string)
			token := api(http.MethodPost, "/endpoints/"+ep+"/runtime-credentials", map[string]any{"scopes": []string{"attachments:read"}})["token"].(string)
			var parts []part
			for i := range 10 {
				parts = append(parts, file(fmt.Sprintf("f%d.bin", i), "application/octet-stream", pattern(1_520_000+i)))
			}
			message := func(i int) []byte {
				return []byte(mixed(fmt.Sprintf("bench-%d-%d", i, time.Now().UnixNano()), parts...))
			}
			send := func(msg []byte) {
				if err := smtp.SendMail(srv.SMTPAddr(), nil, "ann@example.org", []string{addr}, msg); err != nil {
					b.Fatal(err)
				}
			}
			b.Run("ingest", func(b *testing.B) {
				size := 0
				for i := 0; b.Loop(); i++ {
					b.StopTimer()
					msg := message(i)
					b.StartTimer()
					send(msg)
					size = len(msg)
				}
				b.SetBytes(int64(size))
			})
			// The live heap while a message is ingested, sampled after a
			// collection every 10ms, above its level with the message already
			// built (the client's copy is not the server's).
			b.Run("heap", func(b *testing.B) {
				var peak int64
				for i := 0; b.Loop(); i++ {
					msg := message(1000 + i)
					runtime.GC()
					var ms runtime.MemStats
					runtime.ReadMemStats(&ms)
					base := int64(ms.HeapAlloc)
					stop := make(chan struct{})
					var wg sync.WaitGroup
					wg.Go(func() {
						for {
							select {
							case <-stop:
								return
							case <-time.After(10 * time.Millisecond):
							}
							runtime.GC()
							var m runtime.MemStats
							runtime.ReadMemStats(&m)
							peak = max(peak, int64(m.HeapAlloc)-base)
						}
					})
					send(msg)
					close(stop)
					wg.Wait()
				}
				b.ReportMetric(float64(peak)/(1<<20), "peak-live-heap-MiB")
			})
			var work string
			var ids []string
			ctx := context.Background()
			if err := srv.Store().Read(ctx, func(tx agentowl.Tx) error {
				tn, _ := tx.TenantGetByName(ctx, "default")
				ws, err := tx.WorkList(ctx, agentowl.WorkListParams{TenantID: tn.ID, Limit: 1})
				if err != nil || len(ws) == 0 {
					return fmt.Errorf("no work: %v", err)
				}
				work = ws[0].ID
				as, err := tx.AttachmentListByEvent(ctx, ws[0].EventID)
				for _, a := range as {
					ids = append(ids, a.ID)
				}
				return err
			}); err != nil {
				b.Fatal(err)
			}
			b.Run("download", func(b *testing.B) {
				var total int64
				for b.Loop() {
					total = 0
					for _, id := range ids {
						req, _ := http.NewRequest(http.MethodGet, srv.URL()+"/runtime/v1/work/"+work+"/attachments/"+id, nil)
						req.Header.Set("Authorization", "Bearer "+token)
						resp, err := http.DefaultClient.Do(req)
						if err != nil || resp.StatusCode != http.StatusOK {
							b.Fatalf("download: %v %v", resp, err)
						}
						n, _ := io.Copy(io.Discard, resp.Body)
						resp.Body.Close()
						total += n
					}
				}
				b.SetBytes(total)
			})
		})
	}
}
