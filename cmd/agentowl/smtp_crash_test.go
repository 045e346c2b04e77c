package main

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/smtp"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// mailRuntime is an agent runtime at a TLS endpoint: it answers every
// handoff with status and records the subjects of those it acknowledged.
type mailRuntime struct {
	srv    *httptest.Server
	status atomic.Int32
	mu     sync.Mutex
	acked  map[string]int
}

func newMailRuntime(t *testing.T) *mailRuntime {
	t.Helper()
	rt := &mailRuntime{acked: map[string]int{}}
	rt.srv = newTLSServer(t, func(w http.ResponseWriter, r *http.Request) {
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
	})
	return rt
}

func (rt *mailRuntime) received() map[string]int {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	return maps.Clone(rt.acked)
}

// startMail starts a message from one address to another on c (MAIL,
// RCPT, DATA) and returns the writer of its data; closing it ends the
// message.
func startMail(t *testing.T, c *smtp.Client, from, to string) io.WriteCloser {
	t.Helper()
	if err := c.Mail(from); err != nil {
		t.Fatal(err)
	}
	if err := c.Rcpt(to); err != nil {
		t.Fatal(err)
	}
	w, err := c.Data()
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// Every message the SMTP listener acknowledged with 250 reaches the agent
// runtime as work, though the server was killed -9 right after the last
// 250 and before any handoff could be delivered (the runtime answered 503
// until then): acceptance is durable, with its handoff.
func TestCrashAfterSMTPAcceptance(t *testing.T) {
	forEachBackendBuilt(t, func(t *testing.T, s site, bin string) {
		rt := newMailRuntime(t)
		rt.status.Store(http.StatusServiceUnavailable)
		smtpAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
		env := append(egressEnv(writeCA(t, rt.srv)), "AGENTOWL_SMTP_DOMAIN=mail.example.com")
		first := s.serve(t, bin, env, "--smtp-listen", smtpAddr)
		admin := s.adminToken(t)
		_, bnd := bindAgentWork(t, first.url, admin, map[string]any{"name": "runtime", "url": rt.srv.URL + "/events"},
			map[string]any{"channel": "smtp"})
		addr := bnd["address"].(string)

		const n = 20
		c, err := smtp.Dial(smtpAddr)
		if err != nil {
			t.Fatal(err)
		}
		for i := range n {
			msg := fmt.Sprintf("From: ivan@example.org\r\nSubject: crash %d\r\nMessage-ID: <crash-%d@example.org>\r\n\r\nBody %d.\r\n", i, i, i)
			w := startMail(t, c, "ivan@example.org", addr)
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
		s.serve(t, bin, env, "--smtp-listen", fmt.Sprintf("127.0.0.1:%d", freePort(t)))
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
