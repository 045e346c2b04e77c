package httpapi_test

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentowl/agentowl/internal/ratelimit"
	"github.com/agentowl/agentowl/internal/work"
)

// callback is a minimal valid callback body.
func callback(workID, id string, seq int, status string) map[string]any {
	return map[string]any{"version": "agent-work.v1", "callback_id": id, "work_id": workID, "sequence": seq,
		"status": status, "occurred_at": "2026-10-06T12:00:00.000Z"}
}

// handedOff is one work handed to an agent-work endpoint, with a token.
type handedOff struct {
	endpointID, workID, token, credentialID, ingress string
}

// handOff creates an agent-work endpoint with a credential and a binding,
// and sends one event.
func (e *workEnv) handOff(t *testing.T) *handedOff {
	t.Helper()
	rt := newRuntime(t, e)
	id := e.endpoint(t, rt, true)["id"].(string)
	cred := e.credential(t, id, nil)
	_, in := e.binding(t, id, nil)
	e.send(t, in, map[string]any{"text": "please summarise"})
	items := e.listWork(t, "?endpoint="+id)
	if len(items) != 1 {
		t.Fatalf("work after one event: %v", items)
	}
	return &handedOff{endpointID: id, workID: items[0]["id"].(string), token: cred["token"].(string),
		credentialID: cred["id"].(string), ingress: in}
}

func (e *workEnv) post(h *handedOff, token string, body any, headers ...string) *response {
	e.t.Helper()
	return e.do(http.MethodPost, "/runtime/v1/work/"+h.workID+"/callbacks", token, body, headers...)
}

func receipt(t *testing.T, what string, r *response) map[string]any {
	t.Helper()
	return wantJSON(t, what, r, http.StatusOK)
}

func TestCallbackLifecycle(t *testing.T) {
	parallelWork(t, func(t *testing.T, e *workEnv) {
		h := e.handOff(t)
		w := h.workID
		if st := jsonAt(e.getWork(t, w), "runtime", "status"); st != "pending" {
			t.Fatalf("new work status %v, want pending", st)
		}
		acc := callback(w, w+":1", 1, "accepted")
		acc["runtime_session_id"] = "session-a"
		r := receipt(t, "accepted", e.post(h, h.token, acc))
		if r["callback_id"] != w+":1" || r["work_id"] != w || r["sequence"] != float64(1) || r["status"] != "accepted" ||
			r["work_status"] != "accepted" || r["stale"] != false || r["duplicate"] != false {
			t.Fatalf("receipt = %v", r)
		}
		e.clock.Advance(time.Second)
		for i, st := range []string{"running", "running"} {
			receipt(t, st, e.post(h, h.token, callback(w, fmt.Sprintf("%s:%d", w, i+2), i+2, st)))
		}
		ni := callback(w, w+":4", 4, "needs_input")
		ni["requests"] = []any{map[string]any{"id": "q1", "revision": 1, "kind": "question", "prompt": "Which account?",
			"allowed_decisions": []any{"answer"}, "expires_at": "2030-01-01T00:00:00Z"}}
		receipt(t, "needs_input", e.post(h, h.token, ni))
		wk := e.getWork(t, w)
		if jsonAt(wk, "runtime", "status") != "needs_input" || jsonAt(wk, "decision", "status") != "requested" ||
			len(jsonAt(wk, "runtime", "requests").([]any)) != 1 {
			t.Fatalf("needs_input work = %v", wk)
		}
		// Gaps are allowed.
		done := callback(w, w+":9", 9, "completed")
		done["result"] = map[string]any{"summary": "Report ready", "url": "https://runtime.example/results/report"}
		r = receipt(t, "completed after a gap", e.post(h, h.token, done))
		if r["work_status"] != "completed" {
			t.Fatalf("receipt = %v", r)
		}
		wk = e.getWork(t, w)
		rtm := wk["runtime"].(map[string]any)
		if rtm["status"] != "completed" || rtm["sequence"] != float64(9) || rtm["runtime_session_id"] != "session-a" ||
			jsonAt(wk, "runtime", "result", "url") != "https://runtime.example/results/report" || rtm["ended_at"] == nil ||
			rtm["requests"] != nil || rtm["callbacks"] != float64(5) || jsonAt(wk, "decision", "status") != "none" {
			t.Fatalf("completed work = %v", wk)
		}
		// The timeline: handoff, the delivery attempt, five callbacks; running is quiet.
		var kinds []string
		quiet := 0
		for _, it := range wk["timeline"].([]any) {
			m := it.(map[string]any)
			kinds = append(kinds, m["kind"].(string))
			if m["quiet"] == true {
				quiet++
			}
		}
		if quiet != 2 || kinds[0] != "handoff" || strings.Count(strings.Join(kinds, " "), "callback") != 5 {
			t.Errorf("timeline kinds %v, %d quiet", kinds, quiet)
		}
		// Terminal work is never reopened; a lower sequence is stale.
		expectRefused(t, "reopen completed work", e.post(h, h.token, callback(w, w+":10", 10, "running")),
			http.StatusConflict, "already_terminal")
		expectRefused(t, "complete again", e.post(h, h.token, callback(w, w+":11", 11, "completed")),
			http.StatusConflict, "already_terminal")
		r = receipt(t, "stale after completion", e.post(h, h.token, callback(w, w+":5", 5, "running")))
		if r["stale"] != true || r["work_status"] != "completed" {
			t.Fatalf("stale receipt = %v", r)
		}
		if st := jsonAt(e.getWork(t, w), "runtime", "status"); st != "completed" {
			t.Fatalf("a stale callback changed the status to %v", st)
		}
	})
}

func TestCallbackDuplicatesAndConflicts(t *testing.T) {
	parallelWork(t, func(t *testing.T, e *workEnv) {
		h := e.handOff(t)
		w := h.workID
		first := receipt(t, "running 2", e.post(h, h.token, callback(w, "cb-2", 2, "running")))
		e.clock.Advance(time.Minute)
		receipt(t, "running 3", e.post(h, h.token, callback(w, "cb-3", 3, "running")))

		// An exact retry returns the original receipt, even with the keys
		// in another order and other insignificant whitespace.
		raw := `{"version":"agent-work.v1","callback_id":"cb-2","work_id":"` + w + `","sequence":2,"status":"running","occurred_at":"2026-10-06T12:00:00.000Z"}`
		dup := receipt(t, "duplicate", e.post(h, h.token, strings.ReplaceAll(raw, ",", ",\n  ")))
		if dup["duplicate"] != true || dup["recorded_at"] != first["recorded_at"] || dup["work_status"] != "running" ||
			dup["sequence"] != float64(2) || dup["stale"] != false {
			t.Fatalf("duplicate receipt = %v, original %v", dup, first)
		}
		// The same callback ID with another timestamp, sequence or body.
		other := callback(w, "cb-2", 2, "running")
		other["occurred_at"] = "2026-10-06T12:00:01.000Z"
		expectRefused(t, "same ID, other timestamp", e.post(h, h.token, other), http.StatusConflict, "callback_conflict")
		expectRefused(t, "same ID, other sequence", e.post(h, h.token, callback(w, "cb-2", 7, "running")), http.StatusConflict, "callback_conflict")
		other = callback(w, "cb-2", 2, "running")
		other["runtime_session_id"] = "s"
		expectRefused(t, "same ID, other body", e.post(h, h.token, other), http.StatusConflict, "callback_conflict")
		// A sequence recorded under another ID.
		expectRefused(t, "sequence taken", e.post(h, h.token, callback(w, "cb-x", 3, "running")), http.StatusConflict, "sequence_conflict")
		expectRefused(t, "stale sequence taken", e.post(h, h.token, callback(w, "cb-y", 2, "accepted")), http.StatusConflict, "sequence_conflict")
		// A lower, unused sequence is stale: recorded, changes nothing.
		st := receipt(t, "stale", e.post(h, h.token, callback(w, "cb-1", 1, "accepted")))
		if st["stale"] != true || st["work_status"] != "running" || st["status"] != "accepted" {
			t.Fatalf("stale receipt = %v", st)
		}
		again := receipt(t, "stale duplicate", e.post(h, h.token, callback(w, "cb-1", 1, "accepted")))
		if again["stale"] != true || again["duplicate"] != true {
			t.Fatalf("stale duplicate receipt = %v", again)
		}
		wk := e.getWork(t, w)
		if jsonAt(wk, "runtime", "status") != "running" || jsonAt(wk, "runtime", "sequence") != float64(3) ||
			jsonAt(wk, "runtime", "callbacks") != float64(3) {
			t.Fatalf("work after stale = %v", wk["runtime"])
		}
		stale := 0
		for _, it := range wk["timeline"].([]any) {
			if jsonAt(it.(map[string]any), "callback", "stale") == true {
				stale++
			}
		}
		if stale != 1 {
			t.Errorf("timeline marks %d callbacks stale, want 1", stale)
		}
	})
}

func TestCallbackValidation(t *testing.T) {
	parallelWork(t, func(t *testing.T, e *workEnv) {
		h := e.handOff(t)
		w := h.workID
		with := func(k string, v any) map[string]any {
			c := callback(w, "c", 1, "completed")
			if v == nil {
				delete(c, k)
			} else {
				c[k] = v
			}
			return c
		}
		cases := []struct {
			what  string
			body  any
			code  string
			param string
		}{
			{"wrong version", with("version", "agent-work.v2"), "invalid_field", "version"},
			{"work_id of another work", with("work_id", "work_other"), "invalid_field", "work_id"},
			{"no callback_id", with("callback_id", nil), "missing_field", "callback_id"},
			{"empty callback_id", with("callback_id", ""), "invalid_field", "callback_id"},
			{"no sequence", with("sequence", nil), "missing_field", "sequence"},
			{"zero sequence", with("sequence", 0), "invalid_field", "sequence"},
			{"fractional sequence", with("sequence", 1.5), "invalid_field", "sequence"},
			{"unknown status", with("status", "done"), "invalid_field", "status"},
			{"pending is not reportable", with("status", "pending"), "invalid_field", "status"},
			{"bad timestamp", with("occurred_at", "yesterday"), "invalid_field", "occurred_at"},
			{"unknown field", with("progress", 50), "unknown_field", "progress"},
			{"result URL over http", with("result", map[string]any{"url": "http://runtime.example/r"}), "invalid_field", "result.url"},
			{"result URL with userinfo", with("result", map[string]any{"url": "https://u:p@runtime.example/r"}), "invalid_field", "result.url"},
			{"empty result", with("result", map[string]any{}), "invalid_field", "result"},
			{"unknown result field", with("result", map[string]any{"summary": "x", "size": 1}), "unknown_field", "result.size"},
			{"requests without needs_input", with("requests", []any{map[string]any{"id": "q"}}), "invalid_field", "requests"},
			{"error with completed", with("error", map[string]any{"code": "x"}), "invalid_field", "error"},
		}
		for _, c := range cases {
			r := e.post(h, h.token, c.body)
			expectRefused(t, c.what, r, http.StatusBadRequest, c.code)
			if p, _ := jsonAt(r.JSON(t), "error", "param").(string); p != c.param {
				t.Errorf("%s: param %q, want %q", c.what, p, c.param)
			}
		}
		ni := callback(w, "n", 1, "needs_input")
		expectRefused(t, "needs_input without requests", e.post(h, h.token, ni), http.StatusBadRequest, "missing_field")
		ni["requests"] = []any{}
		expectRefused(t, "needs_input with no requests", e.post(h, h.token, ni), http.StatusBadRequest, "invalid_field")
		running := callback(w, "n", 1, "running")
		running["result"] = map[string]any{"summary": "x"}
		expectRefused(t, "result with running", e.post(h, h.token, running), http.StatusBadRequest, "invalid_field")
		expectRefused(t, "not JSON", e.post(h, h.token, "{"), http.StatusBadRequest, "invalid_json")
		expectRefused(t, "an array", e.post(h, h.token, "[]"), http.StatusBadRequest, "invalid_json")
		expectRefused(t, "two objects", e.post(h, h.token, `{"a":1} {"b":2}`), http.StatusBadRequest, "invalid_json")
		expectRefused(t, "text/plain", e.post(h, h.token, callback(w, "c", 1, "accepted"), "Content-Type", "text/plain"),
			http.StatusBadRequest, "invalid_content_type")
		failed := callback(w, "f", 1, "failed")
		failed["error"] = map[string]any{"code": "tool_error", "message": "The CRM timed out."}
		receipt(t, "failed with an error", e.post(h, h.token, failed))
		if got := jsonAt(e.getWork(t, w), "runtime", "error", "code"); got != "tool_error" {
			t.Errorf("work error code %v", got)
		}
		if jsonAt(e.getWork(t, w), "runtime", "status") != "failed" {
			t.Error("work not failed")
		}
		if n := jsonAt(e.getWork(t, w), "runtime", "callbacks"); n != float64(1) {
			t.Errorf("refused callbacks were recorded: %v", n)
		}
	})
}

func TestCallbackBodyLimit(t *testing.T) {
	parallelWork(t, func(t *testing.T, e *workEnv) {
		h := e.handOff(t)
		w := h.workID
		big := callback(w, "big", 1, "completed")
		big["result"] = map[string]any{"summary": "x"}
		data := string(mustJSON(t, big))
		// Exactly 64 KiB is accepted (padding is insignificant whitespace).
		fits := data[:len(data)-1] + strings.Repeat(" ", 64<<10-len(data)) + "}"
		if len(fits) != 64<<10 {
			t.Fatalf("test body is %d bytes", len(fits))
		}
		receipt(t, "64 KiB", e.post(h, h.token, fits))
		over := callback(w, "big2", 2, "running")
		data = string(mustJSON(t, over))
		tooBig := data[:len(data)-1] + strings.Repeat(" ", 64<<10+1-len(data)) + "}"
		expectRefused(t, "64 KiB + 1", e.post(h, h.token, tooBig), http.StatusRequestEntityTooLarge, "request_too_large")
	})
}

func TestCallbackRateLimitAcrossCredentials(t *testing.T) {
	parallelWork(t, func(t *testing.T, e *workEnv) {
		h := e.handOff(t)
		second := e.credential(t, h.endpointID, nil)["token"].(string)
		// Another endpoint's budget is separate.
		other := e.handOff(t)
		for i := range 60 {
			tok := h.token
			if i%2 == 1 {
				tok = second
			}
			receipt(t, fmt.Sprintf("callback %d", i+1), e.post(h, tok, callback(h.workID, "c"+strconv.Itoa(i+1), i+1, "running")))
		}
		for _, tok := range []string{h.token, second} {
			r := e.post(h, tok, callback(h.workID, "c61", 61, "running"))
			expectRefused(t, "the 61st request in the minute", r, http.StatusTooManyRequests, "rate_limited")
			if ra, err := strconv.Atoi(r.Header.Get("Retry-After")); err != nil || ra < 1 || ra > 61 {
				t.Errorf("Retry-After %q", r.Header.Get("Retry-After"))
			}
		}
		// Duplicates count too: it is requests that are limited.
		expectRefused(t, "a duplicate over the limit", e.post(h, h.token, callback(h.workID, "c1", 1, "running")),
			http.StatusTooManyRequests, "rate_limited")
		receipt(t, "another endpoint", e.post(other, other.token, callback(other.workID, "o1", 1, "accepted")))
		e.clock.Advance(time.Minute)
		receipt(t, "the next minute", e.post(h, second, callback(h.workID, "c61", 61, "running")))
	})
}

func TestCallbackCap(t *testing.T) {
	t.Parallel()
	forEachWorkBackend(t, work.Config{MaxCallbacksPerWork: 3}, func(t *testing.T, e *workEnv) {
		h := e.handOff(t)
		w := h.workID
		receipt(t, "1", e.post(h, h.token, callback(w, "c5", 5, "running")))
		receipt(t, "2 (stale counts)", e.post(h, h.token, callback(w, "c1", 1, "accepted")))
		receipt(t, "3", e.post(h, h.token, callback(w, "c6", 6, "running")))
		expectRefused(t, "the 4th", e.post(h, h.token, callback(w, "c7", 7, "completed")), http.StatusConflict, "callback_limit_reached")
		expectRefused(t, "a stale 4th", e.post(h, h.token, callback(w, "c2", 2, "running")), http.StatusConflict, "callback_limit_reached")
		if r := receipt(t, "a duplicate still answers", e.post(h, h.token, callback(w, "c6", 6, "running"))); r["duplicate"] != true {
			t.Fatalf("duplicate after the cap = %v", r)
		}
	})
}

func TestCallbackCredentials(t *testing.T) {
	t.Parallel()
	forEachWorkBackend(t, work.Config{CallbackLimit: ratelimit.Limit{Events: 1000, Per: time.Minute}}, func(t *testing.T, e *workEnv) {
		h := e.handOff(t)
		w := h.workID
		seq := 0
		next := func() map[string]any {
			seq++
			return callback(w, "c"+strconv.Itoa(seq), seq, "running")
		}
		// Rotation with overlap: both live credentials work, then the old one is revoked.
		newer := e.credential(t, h.endpointID, nil)
		receipt(t, "old credential", e.post(h, h.token, next()))
		receipt(t, "new credential", e.post(h, newer["token"].(string), next()))
		wantJSON(t, "revoke old", e.do(http.MethodDelete, tenantPath+"/runtime-credentials/"+h.credentialID, e.operatorToken, nil), http.StatusOK)
		expectRefused(t, "revoked", e.post(h, h.token, next()), http.StatusUnauthorized, "unauthenticated")
		receipt(t, "new credential after revocation", e.post(h, newer["token"].(string), next()))

		// Expiry.
		short := e.credential(t, h.endpointID, map[string]any{"days": 1})["token"].(string)
		receipt(t, "short-lived", e.post(h, short, next()))
		e.clock.Advance(24 * time.Hour)
		expectRefused(t, "expired", e.post(h, short, next()), http.StatusUnauthorized, "unauthenticated")

		// Another endpoint's credential: the work is not found for it.
		other := e.handOff(t)
		expectRefused(t, "another endpoint's credential", e.post(h, other.token, next()), http.StatusNotFound, "not_found")
		expectRefused(t, "unknown work", e.do(http.MethodPost, "/runtime/v1/work/work_unknown/callbacks", newer["token"].(string),
			callback("work_unknown", "u", 1, "running")), http.StatusNotFound, "not_found")

		// Without the callbacks:write scope.
		reader := e.credential(t, h.endpointID, map[string]any{"scopes": []string{"decisions:read"}})["token"].(string)
		expectRefused(t, "no callbacks:write scope", e.post(h, reader, next()), http.StatusForbidden, "insufficient_scope")

		// Other kinds never work here, and runtime tokens never work elsewhere.
		prov := wantJSON(t, "provisioner token", e.do(http.MethodPost, tenantPath+"/provisioner-tokens", e.operatorToken, map[string]any{}),
			http.StatusCreated)["token"].(string)
		expectRefused(t, "operator token", e.post(h, e.operatorToken, next()), http.StatusForbidden, "forbidden")
		expectRefused(t, "provisioner token", e.post(h, prov, next()), http.StatusForbidden, "forbidden")
		expectRefused(t, "no credential", e.post(h, "", next()), http.StatusUnauthorized, "unauthenticated")
		expectRefused(t, "garbage", e.post(h, "owl_rt_garbage", next()), http.StatusUnauthorized, "unauthenticated")
		expectRefused(t, "a runtime token on the operator API", e.do(http.MethodGet, tenantPath+"/work", newer["token"].(string), nil),
			http.StatusUnauthorized, "unauthenticated")
		expectRefused(t, "a runtime token on the provider API", e.do(http.MethodPost, "/v1/requests", newer["token"].(string),
			map[string]any{"tool": "t", "arguments": map[string]any{}, "timeout": "1m"}, "Idempotency-Key", "k"),
			http.StatusUnauthorized, "unauthenticated")
	})
}
