package work

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentowl/agentowl"
)

// The rules of agent work that need neither HTTP nor a store: callback and
// request formats, the statuses a callback may report, what an applied
// callback writes, the filters operators pass and the redrive refusals.
// RecordCallback's order and sequence rules, which need a store, are in
// record_callback_test.go; decisions in decision_rules_test.go.

// codeOf is err's agentowl code and parameter ("" when err is nil or of
// another kind).
func codeOf(err error) (code, param string) {
	var ae *agentowl.Error
	if errors.As(err, &ae) {
		return ae.Code, ae.Param
	}
	return "", ""
}

// checkCode fails the test unless err carries code and param (code ""
// means no error).
func checkCode(t *testing.T, what string, err error, code, param string) {
	t.Helper()
	if code == "" {
		if err != nil {
			t.Errorf("%s: %v, want no error", what, err)
		}
		return
	}
	if got, gotParam := codeOf(err); got != code || gotParam != param {
		t.Errorf("%s: %v (code %q, param %q), want code %q, param %q", what, err, got, gotParam, code, param)
	}
}

var allWorkStatuses = []agentowl.WorkStatus{agentowl.WorkPending, agentowl.WorkAccepted, agentowl.WorkRunning,
	agentowl.WorkNeedsInput, agentowl.WorkCompleted, agentowl.WorkFailed, agentowl.WorkCancelled}

// TestReportableIsWhatWorkMayBecome checks that the statuses a callback may
// report are exactly those the record's rule lets new work become: the
// parser and agentowl.WorkStatus.CanBecome agree, so RecordCallback's
// already_terminal check (CanBecome) refuses terminal work only.
func TestReportableIsWhatWorkMayBecome(t *testing.T) {
	t.Parallel()
	for _, s := range allWorkStatuses {
		if got, want := slices.Contains(reportable, s), agentowl.WorkPending.CanBecome(s); got != want {
			t.Errorf("%q: reportable %v, but pending may become it: %v", s, got, want)
		}
		for _, next := range reportable {
			if s.CanBecome(next) == s.Terminal() {
				t.Errorf("%q -> reported %q: CanBecome %v, Terminal %v; exactly one must hold", s, next, s.CanBecome(next), s.Terminal())
			}
		}
	}
}

// checkFilter pins a list filter's parser: every one of valid parses as
// itself, every one of invalid is invalid_field of param.
func checkFilter[T ~string](t *testing.T, name string, parse func(string) (T, error), param string, valid []T, invalid ...string) {
	t.Helper()
	for _, s := range valid {
		if got, err := parse(string(s)); err != nil || got != s {
			t.Errorf("%s(%q) = %q, %v", name, s, got, err)
		}
	}
	for _, v := range invalid {
		_, err := parse(v)
		checkCode(t, name+"("+v+")", err, agentowl.ECodeInvalidField, param)
	}
}

// TestParseStatus pins the work list's status filter: any work status or
// none.
func TestParseStatus(t *testing.T) {
	t.Parallel()
	checkFilter(t, "ParseStatus", ParseStatus, "status", append([]agentowl.WorkStatus{""}, allWorkStatuses...),
		"unresolved", "Pending", "ended", " running")
}

// TestParseAttentionStatus pins the inbox filter: a status or unresolved.
func TestParseAttentionStatus(t *testing.T) {
	t.Parallel()
	checkFilter(t, "ParseAttentionStatus", ParseAttentionStatus, "status", []agentowl.AttentionStatus{"", agentowl.AttentionOpen,
		agentowl.AttentionAcknowledged, agentowl.AttentionResolved, agentowl.AttentionUnresolved},
		"closed", "OPEN", "pending")
}

// TestParseMessageState pins the outbox filter: a message state or none.
func TestParseMessageState(t *testing.T) {
	t.Parallel()
	checkFilter(t, "ParseMessageState", ParseMessageState, "state", []agentowl.MessageState{"", agentowl.MessagePending,
		agentowl.MessageDelivered, agentowl.MessageFailed, agentowl.MessageCancelled},
		"sent", "Failed", "ended")
}

// callbackBody is a valid callback of work work_a with status and extra
// fields (",…" JSON members) spliced in.
func callbackBody(status, extra string) string {
	return `{"version":"agent-work.v1","callback_id":"work_a:1","work_id":"work_a","sequence":1,"status":"` + status +
		`","occurred_at":"2026-10-06T12:00:00.000Z"` + extra + `}`
}

const question = `{"id":"q1","revision":1,"kind":"question","prompt":"Which account?","allowed_decisions":["answer"],` +
	`"expires_at":"2026-10-07T12:00:00Z"}`

const digest = "0f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c4b5a69788796a5b4c3d2e1f0"

const approvalRequest = `{"id":"a1","revision":2,"kind":"approval","prompt":"Refund?","allowed_decisions":["approve","reject"],` +
	`"action":{"description":"Refund 20 EUR","digest":"` + digest + `"},"expires_at":"2026-10-07T12:00:00.5Z"}`

// TestParseCallbackRules pins which fields each status allows and the
// format of the others (TestParseCallback has the number and text
// edge cases).
func TestParseCallbackRules(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, body  string
		code, param string
	}{
		{"accepted", callbackBody("accepted", ""), "", ""},
		{"running with a session", callbackBody("running", `,"runtime_session_id":"sess-1"`), "", ""},
		{"completed with result", callbackBody("completed", `,"result":{"summary":"done","url":"https://r.example/1"}`), "", ""},
		{"completed without result", callbackBody("completed", ""), "", ""},
		{"needs_input with requests", callbackBody("needs_input", `,"requests":[`+question+`,`+approvalRequest+`]`), "", ""},
		{"failed with error", callbackBody("failed", `,"error":{"code":"boom","message":"it broke"}`), "", ""},
		{"cancelled with error", callbackBody("cancelled", `,"error":{}`), "", ""},
		{"failed without error", callbackBody("failed", ""), "", ""},

		{"pending is not reportable", callbackBody("pending", ""), agentowl.ECodeInvalidField, "status"},
		{"unknown status", callbackBody("done", ""), agentowl.ECodeInvalidField, "status"},
		{"result on running", callbackBody("running", `,"result":{"summary":"x"}`), agentowl.ECodeInvalidField, "result"},
		{"empty result", callbackBody("completed", `,"result":{}`), agentowl.ECodeInvalidField, "result"},
		{"result not an object", callbackBody("completed", `,"result":"done"`), agentowl.ECodeInvalidField, "result"},
		{"unknown result field", callbackBody("completed", `,"result":{"summary":"x","size":1}`), agentowl.ECodeUnknownField, "result.size"},
		{"long summary", callbackBody("completed", `,"result":{"summary":"`+strings.Repeat("s", maxSummaryBytes+1)+`"}`), agentowl.ECodeInvalidField, "result.summary"},
		{"http result url", callbackBody("completed", `,"result":{"url":"http://r.example/1"}`), agentowl.ECodeInvalidField, "result.url"},
		{"needs_input without requests", callbackBody("needs_input", ""), agentowl.ECodeMissingField, "requests"},
		{"requests on running", callbackBody("running", `,"requests":[`+question+`]`), agentowl.ECodeInvalidField, "requests"},
		{"empty requests", callbackBody("needs_input", `,"requests":[]`), agentowl.ECodeInvalidField, "requests"},
		{"error on completed", callbackBody("completed", `,"error":{"code":"x"}`), agentowl.ECodeInvalidField, "error"},
		{"error on running", callbackBody("running", `,"error":{"code":"x"}`), agentowl.ECodeInvalidField, "error"},
		{"error not an object", callbackBody("failed", `,"error":"boom"`), agentowl.ECodeInvalidField, "error"},
		{"unknown field", callbackBody("running", `,"progress":50`), agentowl.ECodeUnknownField, "progress"},
		{"other version", strings.Replace(callbackBody("running", ""), "agent-work.v1", "agent-work.v2", 1), agentowl.ECodeInvalidField, "version"},
		{"missing version", strings.Replace(callbackBody("running", ""), `"version":"agent-work.v1",`, "", 1), agentowl.ECodeMissingField, "version"},
		{"other work", strings.Replace(callbackBody("running", ""), `"work_id":"work_a"`, `"work_id":"work_b"`, 1), agentowl.ECodeInvalidField, "work_id"},
		{"missing sequence", strings.Replace(callbackBody("running", ""), `"sequence":1,`, "", 1), agentowl.ECodeMissingField, "sequence"},
		{"sequence 0", strings.Replace(callbackBody("running", ""), `"sequence":1`, `"sequence":0`, 1), agentowl.ECodeInvalidField, "sequence"},
		{"negative sequence", strings.Replace(callbackBody("running", ""), `"sequence":1`, `"sequence":-4`, 1), agentowl.ECodeInvalidField, "sequence"},
		{"fractional sequence", strings.Replace(callbackBody("running", ""), `"sequence":1`, `"sequence":1.5`, 1), agentowl.ECodeInvalidField, "sequence"},
		{"sequence past the half range", strings.Replace(callbackBody("running", ""), `"sequence":1`, `"sequence":4611686018427387904`, 1), agentowl.ECodeInvalidField, "sequence"},
		{"largest sequence", strings.Replace(callbackBody("running", ""), `"sequence":1`, `"sequence":4611686018427387903`, 1), "", ""},
		{"occurred_at not RFC 3339", strings.Replace(callbackBody("running", ""), "2026-10-06T12:00:00.000Z", "2026-10-06 12:00", 1), agentowl.ECodeInvalidField, "occurred_at"},
		{"occurred_at with offset", strings.Replace(callbackBody("running", ""), "2026-10-06T12:00:00.000Z", "2026-10-06T14:00:00+02:00", 1), "", ""},
		{"empty session", callbackBody("running", `,"runtime_session_id":""`), agentowl.ECodeInvalidField, "runtime_session_id"},
		{"long session", callbackBody("running", `,"runtime_session_id":"`+strings.Repeat("s", maxSessionIDBytes+1)+`"`), agentowl.ECodeInvalidField, "runtime_session_id"},
		{"array", `[` + callbackBody("running", "") + `]`, agentowl.ECodeInvalidJSON, ""},
		{"two objects", callbackBody("running", "") + callbackBody("running", ""), agentowl.ECodeInvalidJSON, ""},
	} {
		_, err := ParseCallback([]byte(c.body), "work_a")
		checkCode(t, c.name, err, c.code, c.param)
	}
}

// TestParseRequests pins the request format of a needs_input callback:
// each request is whole and valid, or the callback is refused.
func TestParseRequests(t *testing.T) {
	t.Parallel()
	rs, err := parseRequests(json.RawMessage(`[` + question + `,` + approvalRequest + `]`))
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 2 || rs[0].ID != "q1" || rs[0].Kind != KindQuestion || rs[0].Action != nil ||
		rs[1].Revision != 2 || rs[1].Action == nil || rs[1].Action.Digest != digest ||
		!rs[1].ExpiresAt.Equal(time.Date(2026, 10, 7, 12, 0, 0, 5e8, time.UTC)) {
		t.Fatalf("parsed %+v", rs)
	}
	if len(rs[0].Hash) != 32 || string(rs[0].Canonical) == question {
		t.Errorf("request 0: canonical %s, hash %x", rs[0].Canonical, rs[0].Hash)
	}
	edit := func(req, old, new string) string {
		if !strings.Contains(req, old) {
			t.Fatalf("%q not in %s", old, req)
		}
		return strings.Replace(req, old, new, 1)
	}
	many, most := make([]string, MaxRequests+1), make([]string, MaxRequests)
	for i := range many {
		many[i] = edit(question, `"q1"`, `"r`+itoa(i)+`"`)
	}
	copy(most, many)
	for _, c := range []struct {
		name, list  string
		code, param string
	}{
		{"not an array", `{"requests":` + question + `}`, agentowl.ECodeInvalidField, "requests"},
		{"too many", `[` + strings.Join(many, ",") + `]`, agentowl.ECodeInvalidField, "requests"},
		{"the most", `[` + strings.Join(most, ",") + `]`, "", ""},
		{"twice the same id", `[` + question + "," + edit(question, `"revision":1`, `"revision":2`) + `]`, agentowl.ECodeInvalidField, "requests[1].id"},
		{"not an object", `["q1"]`, agentowl.ECodeInvalidField, "requests[0]"},
		{"unknown field", `[` + edit(question, `{"id"`, `{"x":1,"id"`) + `]`, agentowl.ECodeUnknownField, "requests[0].x"},
		{"id with a space", `[` + edit(question, `"q1"`, `"q 1"`) + `]`, agentowl.ECodeInvalidField, "requests[0].id"},
		{"missing revision", `[` + edit(question, `"revision":1,`, ``) + `]`, agentowl.ECodeMissingField, "requests[0].revision"},
		{"revision 0", `[` + edit(question, `"revision":1`, `"revision":0`) + `]`, agentowl.ECodeInvalidField, "requests[0].revision"},
		{"quoted revision", `[` + edit(question, `"revision":1`, `"revision":"1"`) + `]`, agentowl.ECodeInvalidField, "requests[0].revision"},
		{"revision past int32", `[` + edit(question, `"revision":1`, `"revision":2147483648`) + `]`, agentowl.ECodeInvalidField, "requests[0].revision"},
		{"unknown kind", `[` + edit(question, `"question"`, `"poll"`) + `]`, agentowl.ECodeInvalidField, "requests[0].kind"},
		{"missing prompt", `[` + edit(question, `"prompt":"Which account?",`, ``) + `]`, agentowl.ECodeMissingField, "requests[0].prompt"},
		{"empty allowed", `[` + edit(question, `["answer"]`, `[]`) + `]`, agentowl.ECodeInvalidField, "requests[0].allowed_decisions"},
		{"approve on a question", `[` + edit(question, `["answer"]`, `["approve"]`) + `]`, agentowl.ECodeInvalidField, "requests[0].allowed_decisions"},
		{"answer on an approval", `[` + edit(approvalRequest, `["approve","reject"]`, `["answer"]`) + `]`, agentowl.ECodeInvalidField, "requests[0].allowed_decisions"},
		{"a decision twice", `[` + edit(approvalRequest, `["approve","reject"]`, `["approve","approve"]`) + `]`, agentowl.ECodeInvalidField, "requests[0].allowed_decisions"},
		{"edit", `[` + edit(approvalRequest, `["approve","reject"]`, `["approve","edit"]`) + `]`, agentowl.ECodeEditUnsupported, "requests[0].allowed_decisions"},
		{"approval without action", `[` + edit(approvalRequest, `"action":{"description":"Refund 20 EUR","digest":"`+digest+`"},`, ``) + `]`, agentowl.ECodeMissingField, "requests[0].action"},
		{"question with action", `[` + edit(question, `"prompt"`, `"action":{"description":"d","digest":"`+digest+`"},"prompt"`) + `]`, agentowl.ECodeInvalidField, "requests[0].action"},
		{"uppercase digest", `[` + edit(approvalRequest, digest, strings.ToUpper(digest)) + `]`, agentowl.ECodeInvalidField, "requests[0].action.digest"},
		{"unknown action field", `[` + edit(approvalRequest, `"description"`, `"tool":"x","description"`) + `]`, agentowl.ECodeUnknownField, "requests[0].action.tool"},
		{"expiry with offset", `[` + edit(question, `2026-10-07T12:00:00Z`, `2026-10-07T14:00:00+02:00`) + `]`, agentowl.ECodeInvalidField, "requests[0].expires_at"},
		{"missing expiry", `[` + edit(question, `,"expires_at":"2026-10-07T12:00:00Z"`, ``) + `]`, agentowl.ECodeMissingField, "requests[0].expires_at"},
	} {
		_, err := parseRequests(json.RawMessage(c.list))
		checkCode(t, c.name, err, c.code, c.param)
	}
}

// TestApplyCallback pins what an applied callback writes on the work:
// status and sequence always; requests only while needs_input (cleared by
// any other status); the result only on completion; an error kept once
// reported; EndedAt only when the status is terminal.
func TestApplyCallback(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 10, 6, 12, 0, 0, 0, time.UTC)
	reqs := json.RawMessage(`[{"id":"q1"}]`)
	boom := json.RawMessage(`{"code":"boom"}`)
	for _, c := range []struct {
		name      string
		before    agentowl.Work
		in        CallbackInput
		wantReqs  bool
		wantError bool
		wantEnded bool
	}{
		{"running", agentowl.Work{Status: agentowl.WorkAccepted, Sequence: 1},
			CallbackInput{Status: agentowl.WorkRunning, Sequence: 2}, false, false, false},
		{"needs_input keeps its requests", agentowl.Work{Status: agentowl.WorkRunning, Sequence: 2},
			CallbackInput{Status: agentowl.WorkNeedsInput, Sequence: 3, Requests: reqs}, true, false, false},
		{"running clears the requests", agentowl.Work{Status: agentowl.WorkNeedsInput, Sequence: 3, Requests: reqs},
			CallbackInput{Status: agentowl.WorkRunning, Sequence: 4}, false, false, false},
		{"completed ends it, clears the requests", agentowl.Work{Status: agentowl.WorkNeedsInput, Requests: reqs},
			CallbackInput{Status: agentowl.WorkCompleted, Sequence: 5, ResultSummary: "done", ResultURL: "https://r.example/1"}, false, false, true},
		{"failed ends it with its error", agentowl.Work{Status: agentowl.WorkRunning},
			CallbackInput{Status: agentowl.WorkFailed, Sequence: 6, Error: boom}, false, true, true},
		{"cancelled without error keeps none", agentowl.Work{Status: agentowl.WorkPending},
			CallbackInput{Status: agentowl.WorkCancelled, Sequence: 1}, false, false, true},
		{"an earlier error stays", agentowl.Work{Status: agentowl.WorkRunning, Error: boom},
			CallbackInput{Status: agentowl.WorkRunning, Sequence: 7}, false, true, false},
	} {
		w := c.before
		applyCallback(&w, &c.in, now)
		if w.Status != c.in.Status || w.Sequence != c.in.Sequence {
			t.Errorf("%s: status %q sequence %d, want %q %d", c.name, w.Status, w.Sequence, c.in.Status, c.in.Sequence)
		}
		if (w.Requests != nil) != c.wantReqs {
			t.Errorf("%s: requests %s, want set %v", c.name, w.Requests, c.wantReqs)
		}
		if (w.Error != nil) != c.wantError {
			t.Errorf("%s: error %s, want set %v", c.name, w.Error, c.wantError)
		}
		if (w.EndedAt != nil) != c.wantEnded || (w.EndedAt != nil && !w.EndedAt.Equal(now)) {
			t.Errorf("%s: ended at %v, want set %v (at %s)", c.name, w.EndedAt, c.wantEnded, now)
		}
		if c.in.Status == agentowl.WorkCompleted && (w.ResultSummary != c.in.ResultSummary || w.ResultURL != c.in.ResultURL) {
			t.Errorf("%s: result %q %q, want %q %q", c.name, w.ResultSummary, w.ResultURL, c.in.ResultSummary, c.in.ResultURL)
		}
	}
	// A result reported with another status is never written.
	w := agentowl.Work{Status: agentowl.WorkRunning, ResultSummary: "old"}
	applyCallback(&w, &CallbackInput{Status: agentowl.WorkRunning, Sequence: 2, ResultSummary: "new"}, now)
	if w.ResultSummary != "old" {
		t.Errorf("a running callback wrote the result %q", w.ResultSummary)
	}
}

// TestRedrivable pins the redrive refusals and that they are the outbox
// rule: a message may be redriven exactly when it has ended and may
// become pending again (agentowl.MessageState.CanBecome).
func TestRedrivable(t *testing.T) {
	t.Parallel()
	ended := time.Date(2026, 10, 6, 12, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		state agentowl.MessageState
		code  string
	}{
		{agentowl.MessagePending, agentowl.ECodeDeliveryPending},
		{agentowl.MessageDelivered, agentowl.ECodeAlreadyDelivered},
		{agentowl.MessageFailed, ""},
		{agentowl.MessageCancelled, ""},
	} {
		m := &agentowl.OutboxMessage{ID: "m1", State: c.state, EndedAt: &ended}
		err := redrivable(m)
		checkCode(t, string(c.state), err, c.code, "")
		if rule := c.state != agentowl.MessagePending && c.state.CanBecome(agentowl.MessagePending); rule != (err == nil) {
			t.Errorf("%s: redrivable %v, but the outbox rule says %v", c.state, err == nil, rule)
		}
	}
}

// TestDecisionDestination pins the push destination's format both ways.
func TestDecisionDestination(t *testing.T) {
	t.Parallel()
	d := DecisionDestination("ep_1", "work_2", "dec-3")
	if d != "decision:ep_1/work_2/dec-3" {
		t.Fatalf("DecisionDestination = %q", d)
	}
	if ep, w, dec, ok := parseDecisionDestination(d); !ok || ep != "ep_1" || w != "work_2" || dec != "dec-3" {
		t.Errorf("parse(%q) = %q %q %q %v", d, ep, w, dec, ok)
	}
	for _, bad := range []string{"endpoint:ep_1", "decision:ep_1/work_2", "ep_1/work_2/dec-3", ""} {
		if _, _, _, ok := parseDecisionDestination(bad); ok {
			t.Errorf("parse(%q) accepted", bad)
		}
	}
}

// TestCheckAcceptance pins the only answer to a decision push that counts
// as a receipt.
func TestCheckAcceptance(t *testing.T) {
	t.Parallel()
	for body, ok := range map[string]bool{
		`{"accepted":true,"decision_id":"d1"}`:           true,
		`{"decision_id":"d1","accepted":true}`:           true,
		`{"accepted":false,"decision_id":"d1"}`:          false,
		`{"accepted":true,"decision_id":"d2"}`:           false,
		`{"accepted":true}`:                              false,
		`{"accepted":"true","decision_id":"d1"}`:         false,
		`{"accepted":true,"decision_id":"d1","extra":1}`: false,
		`null`: false,
		``:     false,
		`ok`:   false,
	} {
		if err := CheckAcceptance([]byte(body), "d1"); (err == nil) != ok {
			t.Errorf("CheckAcceptance(%s) = %v, want ok %v", body, err, ok)
		}
	}
}

// TestEndpointInputRules pins the endpoint checks that need no URL policy:
// names, decision secrets and overdue durations.
func TestEndpointInputRules(t *testing.T) {
	t.Parallel()
	for name, ok := range map[string]bool{
		"runtime":                           true,
		" ":                                 false,
		"":                                  false,
		strings.Repeat("n", maxNameBytes):   true,
		strings.Repeat("n", maxNameBytes+1): false,
		"bad \xff utf-8":                    false,
	} {
		if err := checkName(name); (err == nil) != ok {
			t.Errorf("checkName(%q) = %v, want ok %v", name, err, ok)
		}
	}
	for secret, ok := range map[string]bool{
		strings.Repeat("s", minDecisionSecretBytes):   true,
		strings.Repeat("s", minDecisionSecretBytes-1): false,
		strings.Repeat("s", maxDecisionSecretBytes):   true,
		strings.Repeat("s", maxDecisionSecretBytes+1): false,
		"0123456789abcdef ":                           false,
		"0123456789abcdef\x7f":                        false,
		"0123456789abcdé":                             false,
	} {
		err := checkDecisionSecret(secret)
		if (err == nil) != ok {
			t.Errorf("checkDecisionSecret(%q) = %v, want ok %v", secret, err, ok)
		}
		if err != nil {
			checkCode(t, "checkDecisionSecret", err, agentowl.ECodeInvalidField, "decision_secret")
		}
	}
	d := func(v time.Duration) *time.Duration { return &v }
	for _, c := range []struct {
		o     agentowl.EndpointOverdue
		param string
	}{
		{agentowl.EndpointOverdue{}, ""},
		{agentowl.EndpointOverdue{AcceptWithin: d(0), ReportInterval: d(MaxOverdueDuration)}, ""},
		{agentowl.EndpointOverdue{AcceptWithin: d(-time.Second)}, "overdue.accept_within"},
		{agentowl.EndpointOverdue{AcceptWithin: d(1500 * time.Millisecond)}, "overdue.accept_within"},
		{agentowl.EndpointOverdue{ReportInterval: d(MaxOverdueDuration + time.Second)}, "overdue.report_interval"},
	} {
		code := ""
		if c.param != "" {
			code = agentowl.ECodeInvalidField
		}
		checkCode(t, "checkOverdue", checkOverdue(&c.o), code, c.param)
	}
}

// TestLatestRevision pins which item of a request a new revision is
// compared with: the highest revision of that request ID.
func TestLatestRevision(t *testing.T) {
	t.Parallel()
	items := []*agentowl.AttentionItem{
		{ID: "i1", RequestID: "q1", Revision: 1},
		{ID: "i3", RequestID: "q1", Revision: 3},
		{ID: "i2", RequestID: "q1", Revision: 2},
		{ID: "j9", RequestID: "q2", Revision: 9},
		{ID: "inc", Kind: KindIncident},
	}
	for id, want := range map[string]string{"q1": "i3", "q2": "j9", "q3": ""} {
		got := latestRevision(items, id)
		if (got == nil && want != "") || (got != nil && got.ID != want) {
			t.Errorf("latestRevision(%s) = %v, want %q", id, got, want)
		}
	}
}

// TestTruncate pins incident summaries' cut: at most n bytes of s, on a
// rune boundary, marked with an ellipsis.
func TestTruncate(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		s    string
		n    int
		want string
	}{
		{"short", 10, "short"},
		{"exactly", 7, "exactly"},
		{"abcdef", 3, "abc…"},
		{"aé", 2, "a…"}, // é is two bytes: never cut inside it
		{"ééé", 4, "éé…"},
	} {
		if got := truncate(c.s, c.n); got != c.want {
			t.Errorf("truncate(%q, %d) = %q, want %q", c.s, c.n, got, c.want)
		}
	}
}

// TestDeliveryIncidentSummary pins what an incident says about a failed
// delivery: what was sent, how long, and the last real failure before the
// window ended.
func TestDeliveryIncidentSummary(t *testing.T) {
	t.Parallel()
	deadline := time.Date(2026, 10, 9, 12, 0, 0, 0, time.UTC)
	w := &agentowl.Work{ID: "work_1", EndpointID: "ep_1"}
	handoff := &agentowl.OutboxMessage{ID: "m1", Kind: MessageKindHandoff, DeadlineAt: deadline, LastError: "retry window ended"}
	attempts := []*agentowl.Attempt{{StatusCode: 500, Error: "HTTP 500"}, {StatusCode: 503}, {Error: "retry window ended"}}
	got := deliveryIncidentSummary(handoff, w, attempts)
	for _, want := range []string{"Handoff delivery m1 of work work_1 to endpoint ep_1 failed", "3 attempts until 2026-10-09T12:00:00Z",
		"last error: HTTP 503 (then: retry window ended)"} {
		if !strings.Contains(got, want) {
			t.Errorf("summary %q lacks %q", got, want)
		}
	}
	push := &agentowl.OutboxMessage{ID: "m2", Kind: MessageKindDecision, Destination: DecisionDestination("ep_1", "work_1", "dec-7"),
		DeadlineAt: deadline}
	if got := deliveryIncidentSummary(push, w, nil); !strings.Contains(got, "Decision push of decision dec-7 (message m2)") ||
		!strings.Contains(got, "last error: none recorded") {
		t.Errorf("push summary %q", got)
	}
}
