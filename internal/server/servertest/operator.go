package servertest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"
)

// Operator calls a test server's operator API as an operator of tenant
// "default" (the server's bootstrap token, say). The tests that stand a
// real server behind something else (an approval kit, the MCP gateway)
// drive its operator side through it.
type Operator struct {
	T testing.TB
	// URL is the server's base URL, or that of a front that stays put while
	// the server restarts.
	URL   string
	Token string
}

// Call sends body (unless nil) as JSON to path under tenant "default"'s
// operator API, decodes the answer into out (unless nil) and returns its
// status. An answer of 300 or more, but for 409 Conflict, fails the test.
func (o Operator) Call(method, path string, body, out any) int {
	o.T.Helper()
	req, err := NewRequest(method, o.URL+"/api/v1/tenants/default"+path, o.Token, body)
	if err != nil {
		o.T.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		o.T.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode >= 300 && resp.StatusCode != http.StatusConflict {
		o.T.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, raw)
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			o.T.Fatal(err)
		}
	}
	return resp.StatusCode
}

// ProvisionerToken creates a provisioner token (label, no expiry) and
// returns it.
func (o Operator) ProvisionerToken(label string) string {
	o.T.Helper()
	var tok struct{ Token string }
	o.Call(http.MethodPost, "/provisioner-tokens", map[string]any{"label": label, "days": 0}, &tok)
	return tok.Token
}

// Decide approves (valid for validity) or denies the request id, with note
// unless empty; it reports false if the request was no longer pending.
func (o Operator) Decide(id string, approve bool, validity time.Duration, note string) bool {
	o.T.Helper()
	body := map[string]any{"decision": "deny"}
	if approve {
		body = map[string]any{"decision": "approve", "valid_for": fmt.Sprintf("%ds", int(validity.Seconds()))}
	}
	if note != "" {
		body["note"] = note
	}
	return o.Call(http.MethodPost, "/approvals/"+id+"/decision", body, nil) == http.StatusOK
}

// SyncLimit bounds, in real time, a test's wait for a server's
// asynchronous work. Waits synchronize; they assert nothing about
// durations, and only a condition that never holds meets the bound.
const SyncLimit = 20 * time.Second

// Eventually polls cond until it holds, failing the test after SyncLimit.
func Eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(SyncLimit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}
