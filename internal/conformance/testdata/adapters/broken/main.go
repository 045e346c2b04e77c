// Command broken is a small synchronous AAP adapter written from the
// specification with the standard library only, speaking the
// agentowl-adapter preset's stdin/stdout contract. Without -break it is
// correct; each -break mode violates exactly one adapter requirement, so
// the conformance kit's adapter checks can be shown to fail on their own
// violation (internal/conformance/adapter_test.go).
//
//	wrong-args        submits other arguments than it was given
//	no-immediate      expects every creation answer to be pending
//	deny-as-allow     runs a denied call
//	expired-as-deny   reports an expired request as a denial
//	cancelled-as-deny reports a cancelled request as a denial
//	ignore-expires-at runs an approval whose expires_at has passed
//	rerun             forgets that the call already ran
//	new-key-on-retry  retries a failed submission with a new key
//	fail-on-cut       gives up when a long poll is cut
//	no-cancel         exits on SIGTERM without cancelling the request
//
// With -mode async it is an asynchronous harness: it suspends instead of
// long polling, and its receiving service (the same program with -receive
// ADDR) resumes it when a notification comes. Its own break modes:
//
//	drop-early         drops a notification for a request it has not saved yet
//	trust-notification runs the call when the read after a notification fails
//	forget-abandoned   resumes an abandoned execution
//	rerun-duplicate    runs the call again on a duplicate notification
package main

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

var (
	mode    = flag.String("break", "", "the requirement to violate")
	state   = flag.String("state", "", "directory of executions")
	harness = flag.String("mode", "sync", "sync: long poll; async: suspend, and let the receiving service resume")
	receive = flag.String("receive", "", "serve the receiving service on this address")
	base    = os.Getenv("AAP_BASE_URL")
	token   = os.Getenv("AAP_INSTANCE_CREDENTIAL")
)

type request struct {
	ID       string `json:"id"`
	Status   string `json:"status"`
	Decision *struct {
		ExpiresAt *time.Time `json:"expires_at"`
	} `json:"decision"`
}

type apiErr struct {
	status     int
	retryAfter time.Duration
}

func (e *apiErr) Error() string { return fmt.Sprintf("provider answered %d", e.status) }

func call(ctx context.Context, method, path, key string, body []byte) (*request, error) {
	req, err := http.NewRequestWithContext(ctx, method, base+path, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode > 299 {
		n, _ := strconv.Atoi(resp.Header.Get("Retry-After"))
		return nil, &apiErr{status: resp.StatusCode, retryAfter: time.Duration(n) * time.Second}
	}
	var r request
	return &r, json.Unmarshal(data, &r)
}

func newKey() string {
	b := make([]byte, 16)
	rand.Read(b)
	return hex.EncodeToString(b)
}

func out(outcome, reason string) {
	json.NewEncoder(os.Stdout).Encode(map[string]string{"outcome": outcome, "reason": reason})
	if outcome == "ran" {
		os.Exit(0)
	}
	os.Exit(2)
}

func main() {
	flag.Parse()
	if *receive != "" {
		serveReceiver()
		return
	}
	var in struct {
		ID        string          `json:"id"`
		Tool      string          `json:"tool"`
		Arguments json.RawMessage `json:"arguments"`
		Timeout   string          `json:"timeout"`
	}
	if err := json.NewDecoder(os.Stdin).Decode(&in); err != nil {
		out("error", err.Error())
	}
	done := filepath.Join(*state, "ran-"+in.ID)
	if _, err := os.Stat(done); err == nil && *mode != "rerun" {
		out("already_ran", "")
	}
	if *mode == "wrong-args" {
		in.Arguments = json.RawMessage(`{"target":"elsewhere"}`)
	}
	body, _ := json.Marshal(map[string]any{"tool": in.Tool, "arguments": in.Arguments, "timeout": in.Timeout})
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	key := in.ID
	var r *request
	for {
		var err error
		r, err = call(ctx, http.MethodPost, "/v1/requests", key, body)
		var ae *apiErr
		if errors.As(err, &ae) && ae.status >= 500 {
			time.Sleep(max(ae.retryAfter, time.Second))
			if *mode == "new-key-on-retry" {
				key = newKey()
			}
			continue
		}
		if err != nil {
			out("error", err.Error())
		}
		break
	}
	if r.Status != "pending" && *mode == "no-immediate" {
		out("error", "unexpected status "+r.Status+" at creation")
	}
	if *harness == "async" && r.Status == "pending" {
		suspend(ctx, in.ID, r.ID)
	}
	for r.Status == "pending" {
		next, err := call(ctx, http.MethodGet, "/v1/requests/"+r.ID+"?wait=30s", "", nil)
		if ctx.Err() != nil {
			if *mode != "no-cancel" {
				call(context.Background(), http.MethodDelete, "/v1/requests/"+r.ID, "", nil)
			}
			out("abandoned", "terminated")
		}
		if err != nil {
			if *mode == "fail-on-cut" {
				out("error", err.Error())
			}
			time.Sleep(time.Second)
			continue
		}
		r = next
	}
	switch r.Status {
	case "approved":
		if *mode != "ignore-expires-at" && !time.Now().Before(*r.Decision.ExpiresAt) {
			out("expired", "the approval expired before the call could start")
		}
		os.WriteFile(done, nil, 0o600)
		out("ran", "")
	case "denied":
		if *mode == "deny-as-allow" {
			out("ran", "")
		}
		out("denied", "")
	case "expired":
		if *mode == "expired-as-deny" {
			out("denied", "")
		}
		out("expired", "")
	case "cancelled":
		if *mode == "cancelled-as-deny" {
			out("denied", "")
		}
		out("cancelled", "")
	}
	out("error", "unknown status "+r.Status)
}

// The asynchronous harness keeps each execution as files in -state:
// req-<request ID> holds the call ID, exec-<call ID> its state (waiting,
// abandoned, then the outcome), event-<webhook-id> a received event.

func put(name, value string) {
	tmp := filepath.Join(*state, name+".tmp")
	os.WriteFile(tmp, []byte(value), 0o600)
	os.Rename(tmp, filepath.Join(*state, name))
}

func get(name string) string {
	b, _ := os.ReadFile(filepath.Join(*state, name))
	return string(b)
}

// suspend saves the execution and waits for the receiving service to
// settle it; SIGTERM abandons it (and cancels the request).
func suspend(ctx context.Context, callID, requestID string) {
	put("exec-"+callID, "waiting")
	put("req-"+requestID, callID)
	for {
		switch st := get("exec-" + callID); st {
		case "waiting":
		case "ran":
			out("resumed", "the receiving service ran the call")
		default:
			out(st, "")
		}
		select {
		case <-ctx.Done():
			put("exec-"+callID, "abandoned")
			call(context.Background(), http.MethodDelete, "/v1/requests/"+requestID, "", nil)
			out("abandoned", "terminated")
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// serveReceiver is the receiving service: Standard Webhooks verification,
// the expected registration, then a goroutine per notification that
// resumes its execution.
func serveReceiver() {
	key, _ := base64.StdEncoding.DecodeString(strings.TrimPrefix(os.Getenv("AAP_SIGNING_SECRET"), "whsec_"))
	registration := os.Getenv("AAP_REGISTRATION_ID")
	var mu sync.Mutex
	http.HandleFunc("POST /", func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		id, ts := r.Header.Get("webhook-id"), r.Header.Get("webhook-timestamp")
		m := hmac.New(sha256.New, key)
		m.Write([]byte(id + "." + ts + "."))
		m.Write(body)
		sec, _ := strconv.ParseInt(ts, 10, 64)
		valid := false
		for _, sig := range strings.Fields(r.Header.Get("webhook-signature")) {
			valid = valid || hmac.Equal([]byte(sig), []byte("v1,"+base64.StdEncoding.EncodeToString(m.Sum(nil))))
		}
		var msg struct {
			ID, Type, Challenge string
			RegistrationID      string `json:"registration_id"`
			InstanceID          string `json:"instance_id"`
			RequestID           string `json:"request_id"`
		}
		json.Unmarshal(body, &msg)
		if !valid || msg.ID != id || time.Since(time.Unix(sec, 0)).Abs() > 5*time.Minute {
			http.Error(w, "not verified", http.StatusUnauthorized)
			return
		}
		mu.Lock()
		defer mu.Unlock()
		switch {
		case msg.Type == "webhook.verification" && msg.RegistrationID == registration && get("instance") == "":
			put("instance", msg.InstanceID)
			json.NewEncoder(w).Encode(map[string]string{"challenge": msg.Challenge})
		case msg.Type == "request.resolved" && msg.InstanceID == get("instance"):
			if get("event-"+id) == "" || *mode == "rerun-duplicate" {
				put("event-"+id, msg.RequestID)
				go resume(msg.RequestID)
			}
			w.WriteHeader(http.StatusNoContent)
		default:
			http.Error(w, "unexpected", http.StatusForbidden)
		}
	})
	ln, err := net.Listen("tcp", *receive)
	if err != nil {
		fmt.Println(err)
		os.Exit(1)
	}
	http.Serve(ln, nil)
}

// resume applies the request's decision to its execution: only an
// execution still waiting, only after reading the request.
func resume(requestID string) {
	var callID string
	for callID = get("req-" + requestID); callID == ""; callID = get("req-" + requestID) {
		if *mode == "drop-early" {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	for {
		if st := get("exec-" + callID); st != "waiting" && !(st == "abandoned" && *mode == "forget-abandoned") &&
			!(st == "ran" && *mode == "rerun-duplicate") {
			return
		}
		r, err := call(context.Background(), http.MethodGet, "/v1/requests/"+requestID, "", nil)
		if err != nil {
			if *mode == "trust-notification" {
				ran(callID)
				return
			}
			time.Sleep(500 * time.Millisecond)
			continue
		}
		switch r.Status {
		case "pending":
			return
		case "approved":
			if !time.Now().Before(*r.Decision.ExpiresAt) {
				put("exec-"+callID, "expired")
				return
			}
			ran(callID)
		default:
			put("exec-"+callID, map[string]string{"denied": "denied", "expired": "expired", "cancelled": "cancelled"}[r.Status])
		}
		return
	}
}

func ran(callID string) {
	fmt.Println(`{"outcome":"ran"}`)
	put("exec-"+callID, "ran")
}
