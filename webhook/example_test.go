package webhook_test

import (
	"fmt"
	"net/http"
	"time"

	"github.com/agentowl/agentowl/webhook"
)

func Example() {
	key, _ := webhook.ParseSecret("whsec_AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=")
	body := []byte(`{"id":"evt_1","type":"request.resolved"}`)
	sent := time.Unix(1789560121, 0)

	h := http.Header{}
	key.SetHeaders(h, "evt_1", sent, body) // the sender, per attempt

	id, err := key.Verify(h, body, sent.Add(time.Minute), webhook.DefaultTolerance) // the receiver
	fmt.Println(id, err)
	// Output: evt_1 <nil>
}
