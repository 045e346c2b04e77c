package workclient_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/agentowl/agentowl/webhook"
	"github.com/agentowl/agentowl/workclient"
)

// A runtime's handoff handler: verify the signature with the endpoint's
// signing secret, read the work block, acknowledge, then report.
func ExampleVerifier() {
	secret := webhook.NewSecret() // printed once by `agentowl endpoints create`
	v := &workclient.Verifier{Secrets: []string{secret}}

	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ho, err := v.VerifyRequest(r)
		if err != nil {
			http.Error(w, "invalid handoff", http.StatusUnauthorized)
			return
		}
		// Store ho durably before answering 2xx; AgentOwl retries otherwise,
		// with the same work_id.
		fmt.Println("work", ho.Work.WorkID, "generation", ho.Work.Generation, "payload", string(ho.Event.Payload))
		w.WriteHeader(http.StatusAccepted)
	})

	// What AgentOwl sends (see docs/agent-work.md).
	body := `{"id":"2b0ad4c4-9c8a-4a8e-a9f1-0f6f5d1f3c11","type":"event.received","created_at":"2026-10-06T12:00:00Z",` +
		`"event":{"id":"evt_example","channel":"webhook","binding_id":"bnd_example","conversation_id":"conv_example",` +
		`"follow_up":false,"sender":"","received_at":"2026-10-06T12:00:00Z","headers":{},"payload":{"text":"Summarise ticket 7"},` +
		`"attachments":[]},"work":{"version":"agent-work.v1","work_id":"work_example","conversation_id":"conv_example",` +
		`"generation":1,"callback_url":"https://agentowl.example/runtime/v1/work/work_example/callbacks","credential_id":"rtc_example"}}`
	req := httptest.NewRequest(http.MethodPost, "/agentowl/events", strings.NewReader(body))
	key, _ := webhook.ParseSecret(secret)
	key.SetHeaders(req.Header, "2b0ad4c4-9c8a-4a8e-a9f1-0f6f5d1f3c11", time.Now(), []byte(body))
	rec := httptest.NewRecorder()
	handler.ServeHTTP(rec, req)
	fmt.Println("answered", rec.Code)
	// Output:
	// work work_example generation 1 payload {"text":"Summarise ticket 7"}
	// answered 202
}

// Reporting progress and the outcome. Retries (429, 5xx, network errors)
// resend the same callback ID, sequence, timestamp and body.
func ExampleReporter() {
	agentowl := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var cb workclient.Callback
		_ = json.Unmarshal(body, &cb)
		_ = json.NewEncoder(w).Encode(workclient.Receipt{CallbackID: cb.CallbackID, WorkID: cb.WorkID, Sequence: cb.Sequence,
			Status: cb.Status, WorkStatus: string(cb.Status)})
	}))
	defer agentowl.Close()

	work := &workclient.Work{Version: workclient.Version, WorkID: "work_example", CallbackURL: agentowl.URL}
	client := &workclient.Client{Token: "owl_rt_…"} // the runtime credential
	r := client.Reporter(work, 0)
	ctx := context.Background()
	rc, _ := r.Report(ctx, workclient.Accepted, func(cb *workclient.Callback) { cb.RuntimeSessionID = "session_1" })
	fmt.Println(rc.CallbackID, rc.WorkStatus)
	rc, _ = r.Report(ctx, workclient.Completed, func(cb *workclient.Callback) {
		cb.Result = &workclient.Result{Summary: "Report ready", URL: "https://runtime.example/results/report"}
	})
	fmt.Println(rc.CallbackID, rc.WorkStatus)
	// Output:
	// work_example:1 accepted
	// work_example:2 completed
}

// Handling a refusal: only retryable errors are worth sending again.
func ExampleError() {
	agentowl := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusConflict)
		fmt.Fprint(w, `{"error":{"type":"conflict","code":"already_terminal","message":"Work is already completed.","request_id":"r"}}`)
	}))
	defer agentowl.Close()
	client := &workclient.Client{Token: "owl_rt_…"}
	work := &workclient.Work{WorkID: "work_example"}
	_, err := client.Post(context.Background(), agentowl.URL, workclient.NewCallback(work, 7, workclient.Running, time.Now()))
	if e, ok := err.(*workclient.Error); ok {
		fmt.Println(e.StatusCode, e.Code, "retryable:", e.Retryable())
	}
	// Output: 409 already_terminal retryable: false
}
