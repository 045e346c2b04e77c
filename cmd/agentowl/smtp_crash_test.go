package main

import (
	"fmt"
	"io"
	"net/smtp"
	"testing"
	"time"
)

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
// 250 and before any handoff could be delivered (it ran no delivery
// engine): acceptance is durable, with its handoff. With no attempt in
// flight at the kill, the restart has no dead lease to wait out (30 s on
// PostgreSQL); TestCrashDuringAttempt and TestThreeReplicasSurviveSIGKILL
// kill attempts in flight.
func TestCrashAfterSMTPAcceptance(t *testing.T) {
	forEachBackendBuilt(t, func(t *testing.T, s site, bin string) {
		rt := newWorkRuntime(t, "subject")
		smtpAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
		env := append(egressEnv(writeCA(t, rt.srv)), "AGENTOWL_SMTP_DOMAIN=mail.example.com")
		first := s.serve(t, bin, append(env, "AGENTOWL_DELIVERY=off"), "--smtp-listen", smtpAddr)
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
		if got := rt.handedOff(); len(got) != 0 {
			t.Fatalf("the runtime acknowledged %v before the kill", got)
		}

		s.serve(t, bin, env, "--smtp-listen", fmt.Sprintf("127.0.0.1:%d", freePort(t)))
		eventually(t, 60*time.Second, "every accepted message handed to the runtime after the restart", func() bool {
			return len(rt.handedOff()) == n
		})
		for i := range n {
			if rt.handedOff()[fmt.Sprintf("crash %d", i)] == 0 {
				t.Errorf("message %d was lost", i)
			}
		}
	})
}
