package main

import (
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/smtp"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentowl/agentowl/internal/store/storetest"
)

// mailRuntime is an agent runtime at a TLS endpoint: it answers every
// handoff with status and records the subjects of those it acknowledged.
type mailRuntime struct {
	srv    *httptest.Server
	caFile string
	status atomic.Int32
	mu     sync.Mutex
	acked  map[string]int
}

func newMailRuntime(t *testing.T) *mailRuntime {
	t.Helper()
	rt := &mailRuntime{acked: map[string]int{}}
	rt.srv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var doc struct {
			Event struct {
				Channel string `json:"channel"`
				Payload struct {
					Subject string `json:"subject"`
				} `json:"payload"`
			} `json:"event"`
			Work *struct{ WorkID string } `json:"work"`
		}
		body, _ := io.ReadAll(r.Body)
		status := int(rt.status.Load())
		if json.Unmarshal(body, &doc) == nil && doc.Work != nil && doc.Event.Channel == "smtp" && status < 300 {
			rt.mu.Lock()
			rt.acked[doc.Event.Payload.Subject]++
			rt.mu.Unlock()
		}
		w.WriteHeader(status)
	}))
	t.Cleanup(rt.srv.Close)
	rt.caFile = filepath.Join(t.TempDir(), "runtime-ca.pem")
	if err := os.WriteFile(rt.caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: rt.srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	return rt
}

func (rt *mailRuntime) received() map[string]int {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	out := map[string]int{}
	for k, v := range rt.acked {
		out[k] = v
	}
	return out
}

// Every message the SMTP listener acknowledged with 250 reaches the agent
// runtime as work, though the server was killed -9 right after the last
// 250 and before any handoff could be delivered (the runtime answered 503
// until then): acceptance is durable, with its handoff.
func TestCrashAfterSMTPAcceptance(t *testing.T) {
	t.Parallel()
	bin := buildAgentowl(t)
	for _, b := range storetest.Backends(t) {
		t.Run(b.Name, func(t *testing.T) {
			t.Parallel()
			rt := newMailRuntime(t)
			rt.status.Store(http.StatusServiceUnavailable)
			smtpAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
			env := []string{"AGENTOWL_EGRESS_ALLOW_CIDRS=127.0.0.0/8", "AGENTOWL_EGRESS_CA_FILE=" + rt.caFile,
				"AGENTOWL_RETRY_MIN_DELAY=200ms", "AGENTOWL_RETRY_MAX_DELAY=1s", "AGENTOWL_SMTP_DOMAIN=mail.example.com"}
			if b.Name == "postgres" {
				env = append(env, "AGENTOWL_DATABASE_URL="+b.URL(t))
			}
			dataDir := t.TempDir()
			first := startServeWith(t, bin, dataDir, env, "--smtp-listen", smtpAddr)
			admin := site{dataDir: dataDir}.adminToken(t)
			tenant := first.url + "/api/v1/tenants/default"
			r := send(t, http.MethodPost, tenant+"/endpoints", admin, map[string]any{"name": "runtime", "url": rt.srv.URL + "/events",
				"config": map[string]any{"agent_work": true}})
			expectStatus(t, "create endpoint", r, http.StatusCreated)
			r = send(t, http.MethodPost, tenant+"/bindings", admin, map[string]any{"channel": "smtp", "endpoint_id": r.object(t)["id"]})
			expectStatus(t, "create binding", r, http.StatusCreated)
			addr := r.object(t)["address"].(string)

			const n = 20
			c, err := smtp.Dial(smtpAddr)
			if err != nil {
				t.Fatal(err)
			}
			for i := range n {
				msg := fmt.Sprintf("From: ivan@example.org\r\nSubject: crash %d\r\nMessage-ID: <crash-%d@example.org>\r\n\r\nBody %d.\r\n", i, i, i)
				if err := c.Mail("ivan@example.org"); err != nil {
					t.Fatal(err)
				}
				if err := c.Rcpt(addr); err != nil {
					t.Fatal(err)
				}
				w, err := c.Data()
				if err != nil {
					t.Fatal(err)
				}
				io.WriteString(w, msg)
				if err := w.Close(); err != nil { // the 250
					t.Fatalf("message %d: %v", i, err)
				}
			}
			first.kill9(t)
			c.Close()
			if got := rt.received(); len(got) != 0 {
				t.Fatalf("the runtime acknowledged %v before the kill", got)
			}

			rt.status.Store(http.StatusAccepted)
			startServeWith(t, bin, dataDir, env, "--smtp-listen", fmt.Sprintf("127.0.0.1:%d", freePort(t)))
			eventually(t, 60*time.Second, "every accepted message handed to the runtime after the restart", func() bool {
				return len(rt.received()) == n
			})
			for i := range n {
				if rt.received()[fmt.Sprintf("crash %d", i)] == 0 {
					t.Errorf("message %d was lost", i)
				}
			}
		})
	}
}
