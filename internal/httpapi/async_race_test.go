package httpapi_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/google/uuid"

	"github.com/agentowl/agentowl/webhook"
)

// A replacement receiver is still being verified when the instance is
// deleted: deletion wins, the update commits nothing and answers 404.
func TestAsyncDeletionWinsOverVerification(t *testing.T) {
	forEachAsyncBackend(t, func(t *testing.T, e *asyncEnv) {
		prov, _ := provisionerToken(t, e.env, "default")
		h := e.provisionHooked(t, prov, newReceiver(t, e))

		inVerification, release := make(chan struct{}), make(chan struct{})
		slow := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			var msg struct{ Challenge string }
			body, _ := io.ReadAll(r.Body)
			_ = json.Unmarshal(body, &msg)
			close(inVerification)
			<-release
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(map[string]string{"challenge": msg.Challenge})
		}))
		defer slow.Close()
		patched := make(chan *response, 1)
		go func() {
			patched <- e.do("PATCH", "/v1/instances/"+h.ID, prov, map[string]any{"instance_name": "renamed", "delivery": map[string]any{
				"type": "webhook", "url": slow.URL + "/hook", "registration_id": uuid.NewString(), "signing_secret": webhook.NewSecret(),
			}}, "Idempotency-Key", newKey())
		}()
		<-inVerification
		wantStatus(t, e.do("DELETE", "/v1/instances/"+h.ID, prov, nil), http.StatusNoContent)
		close(release)
		r := <-patched
		wantError(t, r, http.StatusNotFound, "not_found", "")
		wantError(t, e.do("GET", "/v1/instances/"+h.ID, prov, nil), http.StatusNotFound, "not_found", "")
		// The deletion record stands: repeated deletion is still 204.
		wantStatus(t, e.do("DELETE", "/v1/instances/"+h.ID, prov, nil), http.StatusNoContent)
	})
}
