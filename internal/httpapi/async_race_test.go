package httpapi_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/agentowl/agentowl"
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
				"type": "webhook", "url": slow.URL + "/hook", "registration_id": agentowl.NewID(""), "signing_secret": webhook.NewSecret(),
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

// gatedReceiver answers receiver verifications with their challenge after
// checking their signature, but holds the first one until released. It
// records the instance ID of every verification.
type gatedReceiver struct {
	t       *testing.T
	srv     *httptest.Server
	arrived chan struct{} // closed when the first verification arrives
	release func()

	mu        sync.Mutex
	secrets   map[string]string // registration ID -> secret
	instances []string          // instance_id of each verification
}

func newGatedReceiver(t *testing.T, clock *fakeClock) *gatedReceiver {
	g := &gatedReceiver{t: t, arrived: make(chan struct{}), secrets: map[string]string{}}
	gate := make(chan struct{})
	g.release = sync.OnceFunc(func() { close(gate) })
	var first sync.Once
	g.srv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var msg receiverMessage
		_ = json.Unmarshal(body, &msg)
		g.mu.Lock()
		secret := g.secrets[msg.RegistrationID]
		g.instances = append(g.instances, msg.InstanceID)
		g.mu.Unlock()
		if err := checkSignature(r.Header, body, secret, clock.Now(), msg.ID); err != nil || msg.Type != "webhook.verification" {
			t.Errorf("gated receiver: %s with signature error %v", msg.Type, err)
			http.Error(w, "refused", http.StatusUnauthorized)
			return
		}
		first.Do(func() { close(g.arrived); <-gate })
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]string{"challenge": msg.Challenge})
	}))
	t.Cleanup(g.srv.Close)
	t.Cleanup(g.release) // before the server closes, which waits for the held handler
	return g
}

// input registers a fresh registration and returns its delivery input.
func (g *gatedReceiver) input() map[string]any {
	regID, secret := agentowl.NewID(""), webhook.NewSecret()
	g.mu.Lock()
	g.secrets[regID] = secret
	g.mu.Unlock()
	return map[string]any{"type": "webhook", "url": g.srv.URL + "/hook", "registration_id": regID, "signing_secret": secret}
}

func (g *gatedReceiver) verifiedInstances() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]string(nil), g.instances...)
}

// await waits for the first verification to arrive, for at most syncLimit.
func (g *gatedReceiver) await(t *testing.T) {
	t.Helper()
	select {
	case <-g.arrived:
	case <-time.After(syncLimit):
		t.Fatal("the first verification never arrived")
	}
}

// answeredWhileHeld waits for the response on ch while g holds the first
// verification; a response that only comes once g lets go fails the test.
func answeredWhileHeld(t *testing.T, g *gatedReceiver, ch <-chan *response, what string) *response {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(syncLimit):
		g.release()
		r := <-ch
		t.Fatalf("%s was not answered while the first submission's verification was in progress; after it: %d %s", what, r.Status, r.Body)
		return nil
	}
}

// deliveryURL is the url of an instance's delivery as the wire shows it.
func deliveryURL(t *testing.T, raw json.RawMessage) string {
	t.Helper()
	var d struct{ URL string }
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatalf("delivery %s: %v", raw, err)
	}
	return d.URL
}

// Two creations with one Idempotency-Key and different receivers, the
// second sent while the first receiver is still being verified: the second
// is idempotency_conflict at once, without verifying its receiver, and the
// instance that commits has the verified receiver and the verified ID.
// The same holds for two updates replacing an instance's receiver.
func TestAsyncSameKeyOtherReceiverWhileVerifying(t *testing.T) {
	forEachAsyncBackend(t, func(t *testing.T, e *asyncEnv) {
		prov, _ := provisionerToken(t, e.env, "default")
		other := newReceiver(t, e)
		t.Run("create", func(t *testing.T) {
			gated := newGatedReceiver(t, e.clock)
			key := newKey()
			body := map[string]any{"delivery": gated.input()}
			firstDone := make(chan *response, 1)
			go func() { firstDone <- e.do("POST", "/v1/instances", prov, body, "Idempotency-Key", key) }()
			gated.await(t)
			regID, secret := other.register()
			secondDone := make(chan *response, 1)
			go func() {
				secondDone <- e.do("POST", "/v1/instances", prov, map[string]any{"delivery": other.input(regID, secret)}, "Idempotency-Key", key)
			}()
			wantError(t, answeredWhileHeld(t, gated, secondDone, "the second creation"), http.StatusConflict, "idempotency_conflict", "")
			gated.release()
			first := <-firstDone
			wantStatus(t, first, http.StatusCreated)
			var p wireProvisioned
			decodeInto(t, first.Body, &p)
			if url := deliveryURL(t, p.Instance.Delivery); url != gated.srv.URL+"/hook" {
				t.Fatalf("the instance committed with receiver %s, want the verified %s", url, gated.srv.URL+"/hook")
			}
			if v := gated.verifiedInstances(); len(v) != 1 || v[0] != p.Instance.ID {
				t.Fatalf("verified instance IDs %v, want just the committed %s", v, p.Instance.ID)
			}
			if n := len(other.verifications()); n != 0 {
				t.Fatalf("the conflicting receiver got %d verifications", n)
			}
			if ids := liveInstances(t, e.env); len(ids) != 1 || ids[0] != p.Instance.ID {
				t.Fatalf("live instances %v, want just %s", ids, p.Instance.ID)
			}
			wantStatus(t, e.do("POST", "/v1/instances", prov, body, "Idempotency-Key", key), http.StatusOK)
		})
		t.Run("update", func(t *testing.T) {
			h := e.provisionHooked(t, prov, other)
			gated := newGatedReceiver(t, e.clock)
			key := newKey()
			firstDone := make(chan *response, 1)
			go func() {
				firstDone <- e.do("PATCH", "/v1/instances/"+h.ID, prov, map[string]any{"delivery": gated.input()}, "Idempotency-Key", key)
			}()
			gated.await(t)
			before := len(other.verifications())
			regID, secret := other.register()
			secondDone := make(chan *response, 1)
			go func() {
				secondDone <- e.do("PATCH", "/v1/instances/"+h.ID, prov, map[string]any{"delivery": other.input(regID, secret)}, "Idempotency-Key", key)
			}()
			wantError(t, answeredWhileHeld(t, gated, secondDone, "the second update"), http.StatusConflict, "idempotency_conflict", "")
			gated.release()
			wantStatus(t, <-firstDone, http.StatusOK)
			r := e.do("GET", "/v1/instances/"+h.ID, prov, nil)
			wantStatus(t, r, http.StatusOK)
			var inst wireInstance
			decodeInto(t, r.Body, &inst)
			if url := deliveryURL(t, inst.Delivery); url != gated.srv.URL+"/hook" {
				t.Fatalf("the update committed receiver %s, want the verified %s", url, gated.srv.URL+"/hook")
			}
			if n := len(other.verifications()); n != before {
				t.Fatalf("the conflicting receiver got %d verifications", n-before)
			}
		})
	})
}

// The same creation sent twice at once makes one verification and one
// instance, the one whose ID was verified; both answers carry it.
func TestAsyncSameKeySameInputWhileVerifying(t *testing.T) {
	forEachAsyncBackend(t, func(t *testing.T, e *asyncEnv) {
		prov, _ := provisionerToken(t, e.env, "default")
		gated := newGatedReceiver(t, e.clock)
		key := newKey()
		body := map[string]any{"delivery": gated.input()}
		done := make(chan *response, 2)
		go func() { done <- e.do("POST", "/v1/instances", prov, body, "Idempotency-Key", key) }()
		gated.await(t)
		go func() { done <- e.do("POST", "/v1/instances", prov, body, "Idempotency-Key", key) }()
		gated.release()
		statuses, ids, tokens := map[int]int{}, map[string]bool{}, map[string]bool{}
		for range 2 {
			r := <-done
			statuses[r.Status]++
			var p wireProvisioned
			decodeInto(t, r.Body, &p)
			ids[p.Instance.ID], tokens[p.Credential.Token] = true, true
		}
		if statuses[http.StatusCreated] != 1 || statuses[http.StatusOK] != 1 || len(ids) != 1 || len(tokens) != 1 {
			t.Fatalf("statuses %v, %d instances, %d credentials; want one 201 and one 200 with one instance and credential", statuses, len(ids), len(tokens))
		}
		v := gated.verifiedInstances()
		if len(v) != 1 || !ids[v[0]] {
			t.Fatalf("verified instance IDs %v; want one verification, of the committed instance %v", v, ids)
		}
		if live := liveInstances(t, e.env); len(live) != 1 {
			t.Fatalf("live instances %v, want one", live)
		}
	})
}
