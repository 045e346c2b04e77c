package main

import (
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentowl/agentowl/internal/ingress/twilio"
)

// TestCrashBetweenSMSAcceptanceAndHandoff sends signed SMS from several
// senders at once to a server that hands nothing off (it runs no delivery
// engine), kills it -9 in the middle of the stream, and restarts it: every
// SMS that was answered 200 reaches the runtime, as one work, and is one
// event of its sender's conversation. Requests cut off by the kill may or
// may not have been accepted; none is half-recorded. With no attempt in
// flight at the kill, the restart has no dead lease to wait out (30 s on
// PostgreSQL); TestCrashDuringAttempt and TestThreeReplicasSurviveSIGKILL
// kill attempts in flight.
func TestCrashBetweenSMSAcceptanceAndHandoff(t *testing.T) {
	forEachBackendBuilt(t, func(t *testing.T, s site, bin string) {
		rt := newWorkRuntime(t, "message_sid")
		env := egressEnv(writeCA(t, rt.srv))
		first := s.serve(t, bin, append(env, "AGENTOWL_DELIVERY=off"))
		admin := s.adminToken(t)
		const token = "0123456789abcdef0123456789abcdef"
		_, bnd := bindAgentWork(t, first.url, admin, map[string]any{"name": "rt", "url": rt.srv.URL + "/work"},
			map[string]any{"channel": "sms", "auth_token": token})
		ingressURL := bnd["ingress_url"].(string)

		// Four senders, two requests at a time each, until the kill.
		var accepted sync.Map // MessageSid → sender
		var sent atomic.Int32
		stop := make(chan struct{})
		var wg sync.WaitGroup
		client := &http.Client{Timeout: 10 * time.Second}
		for w := range 8 {
			from := fmt.Sprintf("+1555000000%d", w%4)
			wg.Go(func() {
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					default:
					}
					sid := fmt.Sprintf("SM%d-%d", w, i)
					form := url.Values{"MessageSid": {sid}, "From": {from}, "To": {"+15559990000"}, "Body": {"message " + sid},
						"SmsStatus": {"received"}}
					req, _ := http.NewRequest(http.MethodPost, ingressURL, strings.NewReader(form.Encode()))
					req.Header.Set("Content-Type", twilio.ContentType)
					req.Header.Set(twilio.HeaderSignature, twilio.Signature([]byte(token), ingressURL, form))
					sent.Add(1)
					resp, err := client.Do(req)
					if err != nil {
						return // the server is gone
					}
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode == http.StatusOK {
						accepted.Store(sid, from)
					}
				}
			})
		}
		eventually(t, 30*time.Second, "SMS to be accepted", func() bool {
			n := 0
			accepted.Range(func(any, any) bool { n++; return true })
			return n >= 100
		})
		first.kill9(t)
		close(stop)
		wg.Wait()
		var sids []string
		accepted.Range(func(k, _ any) bool { sids = append(sids, k.(string)); return true })
		t.Logf("%d SMS sent, %d answered 200 before kill -9", sent.Load(), len(sids))
		if got := rt.handedOff(); len(got) != 0 {
			t.Fatalf("the runtime was handed %v before the kill", got)
		}

		second := s.serve(t, bin, env)
		eventually(t, 90*time.Second, "every accepted SMS handed to the runtime", func() bool {
			got := rt.handedOff()
			for _, sid := range sids {
				if got[sid] == 0 {
					return false
				}
			}
			return true
		})
		for sid, n := range rt.handedOff() {
			if n != 1 {
				t.Errorf("SMS %s was handed off as %d different work, want one", sid, n)
			}
		}
		// Each accepted SMS is one event of its sender's one open
		// conversation.
		r := send(t, http.MethodGet, second.url+"/api/v1/tenants/default/conversations?channel=sms", admin, nil)
		expectStatus(t, "list conversations", r, http.StatusOK)
		convs := itemsOf(t, r.object(t))
		if len(convs) != 4 {
			t.Fatalf("%d conversations, want one per sender: %v", len(convs), convs)
		}
		events := map[string]int{}
		for _, c := range convs {
			cursor := ""
			for {
				r := send(t, http.MethodGet, second.url+"/api/v1/tenants/default/conversations/"+c["id"].(string)+"/events"+cursor, admin, nil)
				expectStatus(t, "conversation events", r, http.StatusOK)
				doc := r.object(t)
				for _, ev := range itemsOf(t, doc) {
					sid := get(ev, "payload", "message_sid").(string)
					events[sid]++
					if ev["sender"] != c["key"] {
						t.Errorf("SMS %s from %v is in the conversation of %v", sid, ev["sender"], c["key"])
					}
				}
				next, _ := doc["next"].(string)
				if next == "" {
					break
				}
				cursor = "?after=" + next
			}
		}
		for _, sid := range sids {
			if events[sid] != 1 {
				t.Errorf("accepted SMS %s is %d events, want 1", sid, events[sid])
			}
		}
		for sid, n := range events {
			if n != 1 {
				t.Errorf("SMS %s is %d events", sid, n)
			}
		}
	})
}
