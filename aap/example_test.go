package aap_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/agentowl/agentowl/aap"
	"github.com/agentowl/agentowl/aap/sqlite"
	"github.com/agentowl/agentowl/webhook"
)

// stubProvider is a minimal stand-in for an AAP provider, enough for the
// examples: requests stay pending until approve is called; POST
// /v1/instances verifies the receiver like a real provider.
type stubProvider struct {
	mu       sync.Mutex
	requests map[string]map[string]any
	receiver http.Handler
}

func (p *stubProvider) approve(id string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := time.Now().UTC()
	r := p.requests[id]
	r["status"] = "approved"
	r["decision"] = map[string]any{"status": "approved", "decided_at": now.Format(time.RFC3339),
		"expires_at": now.Add(5 * time.Minute).Format(time.RFC3339)}
}

func (p *stubProvider) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	defer p.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	switch {
	case r.Method == http.MethodPost && r.URL.Path == "/v1/requests":
		var in map[string]any
		_ = json.NewDecoder(r.Body).Decode(&in)
		id := "7ab8c8ec-7b2d-4fd6-9b52-752f9515eb71"
		now := time.Now().UTC()
		in["id"], in["status"], in["created_at"], in["deadline_at"] = id, "pending", now.Format(time.RFC3339), now.Add(30*time.Minute).Format(time.RFC3339)
		p.requests[id] = in
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(in)
	case r.Method == http.MethodGet:
		_ = json.NewEncoder(w).Encode(p.requests[filepath.Base(r.URL.Path)])
	case r.URL.Path == "/v1/instances":
		var in struct{ Delivery map[string]string }
		_ = json.NewDecoder(r.Body).Decode(&in)
		// Verify the receiver before creating the instance.
		instanceID := "b29a43a7-1949-4b9f-9d61-b7ae66f85d31"
		body, _ := json.Marshal(map[string]string{"id": "c9bb5281-f9a5-4660-b27e-0b1cbbad81b6", "type": "webhook.verification",
			"registration_id": in.Delivery["registration_id"], "instance_id": instanceID,
			"created_at": time.Now().UTC().Format(time.RFC3339), "challenge": "2edc34d7-cc57-44b1-8705-2fa608d3224a"})
		key, _ := webhook.ParseSecret(in.Delivery["signing_secret"])
		req := httptest.NewRequest(http.MethodPost, in.Delivery["url"], bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		key.SetHeaders(req.Header, "c9bb5281-f9a5-4660-b27e-0b1cbbad81b6", time.Now(), body)
		rec := httptest.NewRecorder()
		p.receiver.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			w.WriteHeader(http.StatusUnprocessableEntity)
			return
		}
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(map[string]any{
			"instance":   map[string]any{"id": instanceID, "name": "refund-agent", "delivery": map[string]string{"type": "webhook", "url": in.Delivery["url"], "registration_id": in.Delivery["registration_id"]}},
			"credential": map[string]string{"token": "owl_inst_example"},
		})
	}
}

// A harness submits an intercepted call, suspends while it is pending, and
// runs it once when a wake-up finds it approved.
func ExampleAdapter() {
	dir, _ := os.MkdirTemp("", "aap-example")
	defer os.RemoveAll(dir)
	ctx := context.Background()
	stub := &stubProvider{requests: map[string]map[string]any{}}
	srv := httptest.NewServer(stub)
	defer srv.Close()

	store, _ := sqlite.Open(ctx, filepath.Join(dir, "harness.db"))
	defer store.Close()
	adapter, _ := aap.NewAdapter(aap.AdapterConfig{
		Provider: &aap.Client{BaseURL: srv.URL, Token: "owl_inst_example"},
		Store:    store,
		Run: func(ctx context.Context, e *aap.Execution) (json.RawMessage, error) {
			fmt.Printf("issue_refund %s\n", e.Call.Arguments)
			return json.RawMessage(`{"refund":"issued"}`), nil
		},
	})

	call := aap.Call{Tool: "issue_refund", Arguments: json.RawMessage(`{"payment_id":"payment_123","amount":4900,"currency":"GBP"}`), Timeout: "30m"}
	e, _ := adapter.Submit(ctx, "4dc635f0-9423-4a98-99cc-33d2168fcbb2", call)
	fmt.Println(e.State) // the process may exit here

	stub.approve(e.RequestID)
	e, _ = adapter.Resume(ctx, e.RequestID) // on the wake-up for this request
	fmt.Println(e.State, string(e.Result))
	e, _ = adapter.Resume(ctx, e.RequestID) // a duplicate wake-up
	fmt.Println(e.State)
	// Output:
	// waiting
	// issue_refund {"payment_id":"payment_123","amount":4900,"currency":"GBP"}
	// finished {"refund":"issued"}
	// finished
}

// A receiver accepts a signed notification for an instance bound to one of
// its registrations, records it once, and hands it out as a wake-up.
func ExampleReceiver() {
	dir, _ := os.MkdirTemp("", "aap-example")
	defer os.RemoveAll(dir)
	ctx := context.Background()
	store, _ := sqlite.Open(ctx, filepath.Join(dir, "receiver.db"))
	defer store.Close()
	receiver, _ := aap.NewReceiver(aap.ReceiverConfig{Store: store})

	// Provisioning stored the registration and the provider's verification
	// bound the instance to it.
	secret := "whsec_AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="
	_ = receiver.Register(ctx, "8246931c-4ce0-4c15-a94a-e9c078ad06e2", secret)
	_ = store.BindRegistration(ctx, "8246931c-4ce0-4c15-a94a-e9c078ad06e2", "b29a43a7-1949-4b9f-9d61-b7ae66f85d31", true)

	body := []byte(`{"id":"f4b96ac4-404d-4f6a-9a03-a0565edc4922","type":"request.resolved",` +
		`"instance_id":"b29a43a7-1949-4b9f-9d61-b7ae66f85d31","request_id":"7ab8c8ec-7b2d-4fd6-9b52-752f9515eb71",` +
		`"created_at":"2026-09-16T12:02:00Z"}`)
	key, _ := webhook.ParseSecret(secret)
	for range 2 { // the provider retries: the second one is a duplicate
		req := httptest.NewRequest(http.MethodPost, "/aap/events", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		key.SetHeaders(req.Header, "f4b96ac4-404d-4f6a-9a03-a0565edc4922", time.Now(), body)
		rec := httptest.NewRecorder()
		receiver.ServeHTTP(rec, req)
		fmt.Println(rec.Code)
	}
	wakeups, _ := receiver.Wakeups(ctx, time.Minute, 10)
	for _, w := range wakeups {
		fmt.Println("resume request", w.RequestID)
		_ = receiver.Ack(ctx, w.EventID)
	}
	// Output:
	// 204
	// 204
	// resume request 7ab8c8ec-7b2d-4fd6-9b52-752f9515eb71
}

// A provisioner stores the registration on the receiver, then creates the
// instance; the provider verifies the receiver before it answers.
func ExampleProvisioner() {
	dir, _ := os.MkdirTemp("", "aap-example")
	defer os.RemoveAll(dir)
	ctx := context.Background()
	store, _ := sqlite.Open(ctx, filepath.Join(dir, "receiver.db"))
	defer store.Close()
	receiver, _ := aap.NewReceiver(aap.ReceiverConfig{Store: store})
	srv := httptest.NewServer(&stubProvider{receiver: receiver})
	defer srv.Close()

	p := &aap.Provisioner{Provider: &aap.Client{BaseURL: srv.URL, Token: "owl_prov_example"}, Registrations: store}
	sub := aap.NewSubmission("refund-agent", "https://harness.example.com/aap/events")
	_ = sub.Save(filepath.Join(dir, "submission.json")) // reuse it if this has to be retried
	cred, err := p.Provision(ctx, sub)
	if err != nil {
		fmt.Println(err)
		return
	}
	_ = cred.Save(filepath.Join(dir, "credential.json")) // mode 0600, for the harness
	reg, _ := store.GetRegistration(ctx, sub.RegistrationID)
	fmt.Println(cred.InstanceID, reg.InstanceID == cred.InstanceID, reg.Confirmed)
	// Output:
	// b29a43a7-1949-4b9f-9d61-b7ae66f85d31 true true
}
