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
package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

var (
	mode  = flag.String("break", "", "the requirement to violate")
	state = flag.String("state", "", "directory of executions")
	base  = os.Getenv("AAP_BASE_URL")
	token = os.Getenv("AAP_INSTANCE_CREDENTIAL")
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
