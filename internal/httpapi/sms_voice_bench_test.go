package httpapi_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/agentowl/agentowl/internal/ingress/twilio"
	"github.com/agentowl/agentowl/internal/store/storetest"
)

// BenchmarkSMSIngress accepts b.N signed SMS webhooks on one sms binding
// from 32 clients (1,000 senders, so most messages continue a
// conversation) and waits until a local HTTPS runtime has acknowledged
// every handoff. ops/s and the latencies are of the webhooks answered 200
// (signature checked, event, conversation, work and handoff committed);
// handed-off/s runs until the runtime has them all.
//
//	go test -run '^$' -bench SMSIngress -benchtime 20000x ./internal/httpapi/
func BenchmarkSMSIngress(b *testing.B) {
	for _, be := range storetest.Backends(b) {
		b.Run(be.Name, func(b *testing.B) {
			s, epID, got := startBenchRuntime(b, be)
			in := s.mustPost(b, tenantPath+"/bindings", map[string]any{"channel": "sms", "endpoint_id": epID, "auth_token": authToken},
				http.StatusCreated)
			ingressURL := in["ingress_url"].(string)
			b.ResetTimer()
			start := time.Now()
			runClients(b, b.N, func(_, i int) error {
				form := url.Values{"MessageSid": {fmt.Sprintf("SM%032d", i)}, "AccountSid": {"AC0001"},
					"From": {fmt.Sprintf("+1555%07d", i%1000)}, "To": {"+15550000000"}, "Body": {"Where is my order 7?"},
					"NumMedia": {"0"}, "SmsStatus": {"received"}, "ApiVersion": {"2010-04-01"}}
				req, _ := http.NewRequest(http.MethodPost, ingressURL, bytes.NewReader([]byte(form.Encode())))
				req.Header.Set("Content-Type", twilio.ContentType)
				req.Header.Set(twilio.HeaderSignature, twilio.Signature([]byte(authToken), ingressURL, form))
				resp, err := s.client.Do(req)
				if err != nil {
					return err
				}
				out, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					return fmt.Errorf("sms: %d %s", resp.StatusCode, out)
				}
				return nil
			})
			reportHandedOff(b, start, got)
		})
	}
}
