package httpapi_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agentowl/agentowl"
)

// badTexts are the two kinds of text no store keeps alike: U+0000 (a JSON
// escape; PostgreSQL refuses it in text) and a byte that is not UTF-8
// (PostgreSQL refuses it; SQLite kept it and served back invalid JSON).
var badTexts = map[string]string{"NUL": `a\u0000b`, "0xFF": "a\xffb"}

// textCase is one text input: body is a JSON template whose BAD is replaced
// by a bad text; param is the field path the refusal must name.
type textCase struct {
	name, method, path, token string
	body                      string
	headers                   []string
	param                     string
}

// NUL/invalid-UTF-8 cases for every text field, on every surface: each is
// refused with 400 invalid_field naming the field (invalid_json where no
// field can be named) before any use-case runs, on both stores alike.
func TestTextInputRule(t *testing.T) {
	parallelWork(t, func(t *testing.T, e *workEnv) {
		oh := newOpHarness(t, e.env)
		prov, _ := oh.provisioner("default")
		instID, cred := oh.provision(prov, nil)
		req := oh.submit(cred, "deploy", map[string]any{"env": "prod"}, "1h")
		h := e.handOff(t)
		ok(t, "needs_input", e.needsInput(h, 2, questionRequest("q1", 1, e.expiry(time.Hour))))
		att := e.itemFor(t, h.workID, "q1", 1)["id"].(string)
		key := func() []string { return []string{"Idempotency-Key", agentowl.NewID("")} }
		cb := func(seq, status, extra string) string {
			return `{"version":"agent-work.v1","callback_id":"` + h.workID + `:` + seq + `","work_id":"` + h.workID +
				`","sequence":` + seq + `,"status":"` + status + `","occurred_at":"2026-10-06T12:00:00.000Z"` + extra + `}`
		}
		question := `{"id":"q9","revision":1,"kind":"question","prompt":"BAD","allowed_decisions":["answer"],"expires_at":"2030-01-01T00:00:00Z"}`
		approval := `{"id":"a9","revision":1,"kind":"approval","prompt":"May I?","allowed_decisions":["approve"],` +
			`"expires_at":"2030-01-01T00:00:00Z","action":{"description":"BAD","digest":"` + strings.Repeat("a", 64) + `"}}`
		op, rt := e.operatorToken, h.token
		cases := []textCase{
			// provider /v1
			{"instance name", "POST", "/v1/instances", prov, `{"instance_name":"BAD"}`, key(), "instance_name"},
			{"instance rename", "PATCH", "/v1/instances/" + instID, prov, `{"instance_name":"BAD"}`, key(), "instance_name"},
			{"tool", "POST", "/v1/requests", cred, `{"tool":"BAD","arguments":{},"timeout":"1h"}`, key(), "tool"},
			{"argument", "POST", "/v1/requests", cred, `{"tool":"t","arguments":{"k":"BAD"},"timeout":"1h"}`, key(), "arguments.k"},
			{"argument in a list", "POST", "/v1/requests", cred, `{"tool":"t","arguments":{"k":[{"x":"ok"},"BAD"]},"timeout":"1h"}`, key(), "arguments.k[1]"},
			{"argument name", "POST", "/v1/requests", cred, `{"tool":"t","arguments":{"BAD":1},"timeout":"1h"}`, key(), "arguments"},
			{"agent_reasoning", "POST", "/v1/requests", cred, `{"tool":"t","arguments":{},"timeout":"1h","agent_reasoning":"BAD"}`, key(), "agent_reasoning"},
			{"context", "POST", "/v1/requests", cred, `{"tool":"t","arguments":{},"timeout":"1h","context":{"a":{"b":"BAD"}}}`, key(), "context.a.b"},
			// operator /api/v1
			{"tenant name", "POST", "/api/v1/tenants", op, `{"name":"BAD"}`, nil, "name"},
			{"operator name", "POST", tenantPath + "/operators", op, `{"name":"BAD","role":"member"}`, nil, "name"},
			{"operator token label", "POST", tenantPath + "/operator-tokens", op, `{"operator":"admin","label":"BAD"}`, nil, "label"},
			{"provisioner token label", "POST", tenantPath + "/provisioner-tokens", op, `{"label":"BAD"}`, nil, "label"},
			{"policy name", "POST", tenantPath + "/policies", op, `{"name":"BAD","tool":"t","effect":"approve"}`, nil, "name"},
			{"policy tool", "POST", tenantPath + "/policies", op, `{"name":"p","tool":"BAD","effect":"approve"}`, nil, "tool"},
			{"policy condition", "POST", tenantPath + "/policies", op, `{"name":"p","tool":"t","condition":"args.a == \"BAD\"","effect":"approve"}`, nil, "condition"},
			{"policy note", "POST", tenantPath + "/policies", op, `{"name":"p","tool":"t","note":"BAD","effect":"approve"}`, nil, "note"},
			{"decision note", "POST", tenantPath + "/approvals/" + req["id"].(string) + "/decision", op, `{"decision":"approve","note":"BAD"}`, nil, "note"},
			{"approval validity", "PATCH", tenantPath + "/instances/" + instID, op, `{"approval_validity":"BAD"}`, nil, "approval_validity"},
			{"endpoint name", "POST", tenantPath + "/endpoints", op, `{"name":"BAD","url":"https://runtime.example/x"}`, nil, "name"},
			{"endpoint config", "PATCH", tenantPath + "/endpoints/" + h.endpointID, op, `{"config":{"BAD":true}}`, nil, "config"},
			{"runtime credential label", "POST", tenantPath + "/endpoints/" + h.endpointID + "/runtime-credentials", op, `{"label":"BAD"}`, nil, "label"},
			{"binding name", "POST", tenantPath + "/bindings", op, `{"channel":"webhook","name":"BAD","endpoint_id":"` + h.endpointID + `"}`, nil, "name"},
			{"attention answer", "POST", tenantPath + "/attention/" + att + "/decision", op,
				`{"decision_id":"d1","request_revision":1,"decision":"answer","answer":"BAD"}`, nil, "answer"},
			{"attention assignee", "POST", tenantPath + "/attention/" + att + "/ack", op, `{"assignee":"BAD"}`, nil, "assignee"},
			// runtime /runtime/v1
			{"callback summary", "POST", "/runtime/v1/work/" + h.workID + "/callbacks", rt, cb("3", "completed", `,"result":{"summary":"BAD"}`), nil, "result.summary"},
			{"callback prompt", "POST", "/runtime/v1/work/" + h.workID + "/callbacks", rt, cb("3", "needs_input", `,"requests":[`+question+`]`), nil, "requests[0].prompt"},
			{"callback description", "POST", "/runtime/v1/work/" + h.workID + "/callbacks", rt, cb("3", "needs_input", `,"requests":[`+approval+`]`), nil, "requests[0].action.description"},
			{"callback error", "POST", "/runtime/v1/work/" + h.workID + "/callbacks", rt, cb("3", "failed", `,"error":{"message":"BAD"}`), nil, "error.message"},
			{"callback session", "POST", "/runtime/v1/work/" + h.workID + "/callbacks", rt, cb("3", "running", `,"runtime_session_id":"BAD"`), nil, "runtime_session_id"},
			// ingress /in: the payload is opaque, but it is JSON, stored and
			// served back as JSON, so the same rule holds inside it.
			{"event payload", "POST", h.ingress, "", `{"text":"BAD"}`, nil, "text"},
			{"event payload name", "POST", h.ingress, "", `{"BAD":"x"}`, nil, ""},
		}
		for _, c := range cases {
			for kind, bad := range badTexts {
				body := strings.ReplaceAll(c.body, "BAD", bad)
				r := e.do(c.method, c.path, c.token, []byte(body), c.headers...)
				code := "invalid_field"
				if c.param == "" {
					code = "invalid_json"
				}
				if r.Status != http.StatusBadRequest || r.ErrorCode(t) != code {
					t.Errorf("%s with %s: got %d %s, want 400 %s", c.name, kind, r.Status, r.Body, code)
					continue
				}
				if e, _ := r.JSON(t)["error"].(map[string]any); c.param != "" && e["param"] != c.param {
					t.Errorf("%s with %s: error.param %v, want %q: %s", c.name, kind, e["param"], c.param, r.Body)
				}
			}
		}
		// Path values and query parameters are lookup keys: the same rule.
		for _, bad := range []string{"%00", "%FF"} {
			for _, c := range []struct {
				path, token string
				status      int
				code, param string
			}{
				{tenantPath + "/endpoints/a" + bad, op, 404, "not_found", ""},
				{"/api/v1/tenants/a" + bad + "/policies", op, 404, "not_found", ""},
				{tenantPath + "/approvals?instance=" + bad, op, 400, "invalid_field", "instance"},
				{tenantPath + "/work?endpoint=" + bad, op, 400, "invalid_field", "endpoint"},
				{tenantPath + "/attention?work=" + bad, op, 400, "invalid_field", "work"},
				{"/v1/requests/" + bad, cred, 404, "not_found", ""},
			} {
				r := e.do("GET", c.path, c.token, nil)
				if r.Status != c.status || r.ErrorCode(t) != c.code {
					t.Errorf("GET %s: got %d %s, want %d %s", c.path, r.Status, r.Body, c.status, c.code)
				} else if e, _ := r.JSON(t)["error"].(map[string]any); c.param != "" && e["param"] != c.param {
					t.Errorf("GET %s: error.param %v, want %q", c.path, e["param"], c.param)
				}
			}
		}
		// Nothing of the refused input was stored.
		if ts := oh.list(op, "/api/v1/tenants"); len(ts) != 1 {
			t.Errorf("tenants after refusals: %v", ts)
		}
		if ps := oh.list(op, tenantPath+"/policies"); len(ps) != 0 {
			t.Errorf("policies after refusals: %v", ps)
		}
		if ws := e.listWork(t, ""); len(ws) != 1 {
			t.Errorf("work after refused events: %v", ws)
		}
		if st := jsonAt(e.getWork(t, h.workID), "runtime", "status"); st != "needs_input" {
			t.Errorf("work status after refused callbacks: %v", st)
		}
	})
}

// ok fails the test unless r is a 2xx answer.
func ok(t *testing.T, what string, r *response) {
	t.Helper()
	if r.Status/100 != 2 {
		t.Fatalf("%s: %d %s", what, r.Status, r.Body)
	}
}

// Duplicate member names in any JSON object received are refused with 400
// invalid_json naming the path, on every surface, before any use-case
// runs (issue 27: {"amount":5000,"amount":1} was auto-approved by a policy
// "arguments.amount <= 10", CEL reading the last value, while the raw
// bytes with both went to the tool, whose parser may keep the first).
func TestDuplicateMemberNames(t *testing.T) {
	parallelWork(t, func(t *testing.T, e *workEnv) {
		oh := newOpHarness(t, e.env)
		prov, _ := oh.provisioner("default")
		_, cred := oh.provision(prov, nil)
		op := e.operatorToken
		if r := e.do("POST", tenantPath+"/policies", op, []byte(`{"name":"small refunds","tool":"refund","condition":"arguments.amount <= 10","effect":"approve"}`)); r.Status != http.StatusCreated {
			t.Fatalf("policy: %d %s", r.Status, r.Body)
		}
		req := oh.submit(cred, "deploy", map[string]any{"env": "prod"}, "1h")
		h := e.handOff(t)
		key := func() []string { return []string{"Idempotency-Key", agentowl.NewID("")} }
		cb := `{"version":"agent-work.v1","callback_id":"` + h.workID + `:2","work_id":"` + h.workID +
			`","sequence":2,"status":"running","status":"completed","occurred_at":"2026-10-06T12:00:00.000Z"}`
		for _, c := range []textCase{
			{"the policy bypass", "POST", "/v1/requests", cred, `{"tool":"refund","arguments":{"amount":5000,"amount":1},"timeout":"1h"}`, key(), "arguments.amount"},
			{"a top-level member", "POST", "/v1/requests", cred, `{"tool":"refund","tool":"deploy","arguments":{},"timeout":"1h"}`, key(), "tool"},
			{"deep in the arguments", "POST", "/v1/requests", cred, `{"tool":"t","arguments":{"lines":[{"sku":"a"},{"sku":"b","sku":"c"}]},"timeout":"1h"}`, key(), "arguments.lines[1].sku"},
			{"an operator's decision", "POST", tenantPath + "/approvals/" + req["id"].(string) + "/decision", op, `{"decision":"deny","decision":"approve"}`, nil, "decision"},
			{"a runtime callback", "POST", "/runtime/v1/work/" + h.workID + "/callbacks", h.token, cb, nil, "status"},
			{"an inbound event", "POST", h.ingress, "", `{"text":"refund me","text":"hi"}`, nil, "text"},
		} {
			r := e.do(c.method, c.path, c.token, []byte(c.body), c.headers...)
			if r.Status != http.StatusBadRequest || r.ErrorCode(t) != "invalid_json" {
				t.Errorf("%s: got %d %s, want 400 invalid_json", c.name, r.Status, r.Body)
				continue
			}
			if e, _ := r.JSON(t)["error"].(map[string]any); e["param"] != c.param {
				t.Errorf("%s: error.param %v, want %q: %s", c.name, e["param"], c.param, r.Body)
			}
		}
		// Nothing of the refused input was stored or decided.
		if rs := oh.list(op, tenantPath+"/approvals"); len(rs) != 1 {
			t.Errorf("requests after refusals: %d, want the one pending", len(rs))
		}
		if ws := e.listWork(t, ""); len(ws) != 1 {
			t.Errorf("work after a refused event: %d", len(ws))
		}
		if st := jsonAt(e.getWork(t, h.workID), "runtime", "status"); st == "completed" || st == "running" {
			t.Errorf("work status after a refused callback: %v", st)
		}
	})
}
