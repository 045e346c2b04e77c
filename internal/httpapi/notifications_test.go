package httpapi_test

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentowl/agentowl/internal/work"
)

// In-app notifications (docs/console.md): every rule over HTTP, on every
// backend. A tenant's operators get one notice per cause (work completed,
// an incident, a runtime question or approval, a pending AAP request),
// filtered by their preferences; routine progress is quiet; duplicates and
// retries add nothing.

// notices lists token's notices; it returns the items and the unread count.
func (e *workEnv) notices(t *testing.T, token, query string) ([]map[string]any, float64) {
	t.Helper()
	body := wantJSON(t, "list notifications", e.do(http.MethodGet, tenantPath+"/notifications"+query, token, nil), http.StatusOK)
	return itemsOf(t, body), body["unread"].(float64)
}

// causes returns token's notices as sorted "cause subject-id" strings.
func (e *workEnv) causes(t *testing.T, token string) []string {
	t.Helper()
	items, _ := e.notices(t, token, "?limit=1000")
	var out []string
	for _, it := range items {
		out = append(out, fmt.Sprintf("%s %s", it["cause"], jsonAt(it, "subject", "id")))
	}
	sort.Strings(out)
	return out
}

// operatorToken adds an operator of role to tenant default and returns its token.
func (e *workEnv) addOperator(t *testing.T, name, role string) string {
	t.Helper()
	wantJSON(t, "create "+name, e.do(http.MethodPost, tenantPath+"/operators", e.operatorToken, map[string]any{"name": name, "role": role}),
		http.StatusCreated)
	return wantJSON(t, name+"'s token", e.do(http.MethodPost, tenantPath+"/operator-tokens", e.operatorToken,
		map[string]any{"operator": name}), http.StatusCreated)["token"].(string)
}

func (e *workEnv) setPrefs(t *testing.T, token string, kinds, endpoints []string) map[string]any {
	t.Helper()
	return wantJSON(t, "set preferences", e.do(http.MethodPut, tenantPath+"/notifications/preferences", token,
		map[string]any{"muted_kinds": kinds, "muted_endpoints": endpoints}), http.StatusOK)
}

func TestNotificationRules(t *testing.T) {
	parallelWork(t, func(t *testing.T, e *workEnv) {
		admin := e.operatorToken
		mia := e.addOperator(t, "mia", "member")
		noResults := e.addOperator(t, "no-results", "member")
		noEndpoint := e.addOperator(t, "no-endpoint", "member")
		h := e.handOff(t)
		w := h.workID
		e.setPrefs(t, noResults, []string{"result"}, []string{})
		prefs := e.setPrefs(t, noEndpoint, []string{}, []string{h.endpointID})
		if fmt.Sprint(prefs["muted_endpoints"]) != "["+h.endpointID+"]" {
			t.Fatalf("preferences = %v", prefs)
		}

		// Routine progress is quiet.
		receipt(t, "accepted", e.post(h, h.token, callback(w, w+":1", 1, "accepted")))
		receipt(t, "running", e.post(h, h.token, callback(w, w+":2", 2, "running")))
		if got := e.causes(t, admin); len(got) != 0 {
			t.Fatalf("progress notified: %v", got)
		}

		// Input requests: one notice per request item and recipient, deep
		// linked to the item; the exact duplicate adds nothing.
		exp := e.expiry(time.Hour)
		for range 3 {
			receipt(t, "needs_input", e.needsInput(h, 3, approvalRequest("a1", 1, digestA, exp), questionRequest("q1", 1, exp)))
		}
		a1, q1 := e.itemFor(t, w, "a1", 1)["id"].(string), e.itemFor(t, w, "q1", 1)["id"].(string)
		wantInput := []string{"needs_input " + a1, "needs_input " + q1}
		sort.Strings(wantInput)
		for _, tok := range []string{admin, mia, noResults} {
			if got := e.causes(t, tok); strings.Join(got, ",") != strings.Join(wantInput, ",") {
				t.Fatalf("input notices = %v, want %v", got, wantInput)
			}
		}
		if got := e.causes(t, noEndpoint); len(got) != 0 {
			t.Fatalf("the endpoint's muter got %v", got)
		}
		items, unread := e.notices(t, mia, "")
		if unread != 2 || len(items) != 2 {
			t.Fatalf("mia: %d unread of %v", int(unread), items)
		}
		for _, it := range items {
			id := jsonAt(it, "subject", "id").(string)
			if it["kind"] != "input" || jsonAt(it, "subject", "type") != "attention" || it["endpoint_id"] != h.endpointID ||
				it["link"] != "/console/t/default/attention/"+id || it["read"] != false {
				t.Fatalf("input notice = %v", it)
			}
			if id == q1 && it["title"] != "Question: Which account?" {
				t.Errorf("question title = %q", it["title"])
			}
		}

		// A revision is a new request item, and a new notice.
		receipt(t, "revision 2", e.needsInput(h, 4, approvalRequest("a1", 2, digestB, exp)))
		if got := e.causes(t, mia); len(got) != 3 {
			t.Fatalf("after revision 2: %v", got)
		}

		// 50 concurrent duplicate completions: one result notice per
		// recipient who wants results.
		e.clock.Advance(time.Second)
		done := callback(w, w+":9", 9, "completed")
		done["result"] = map[string]any{"summary": "Report ready", "url": "https://runtime.example/r/1"}
		var wg sync.WaitGroup
		statuses := make(chan int, 50)
		for range 50 {
			wg.Go(func() { statuses <- e.post(h, h.token, done).Status })
		}
		wg.Wait()
		close(statuses)
		for st := range statuses {
			if st != http.StatusOK {
				t.Fatalf("a duplicate completion answered %d", st)
			}
		}
		for _, tok := range []string{admin, mia} {
			n := 0
			for _, c := range e.causes(t, tok) {
				if c == "work_completed "+w {
					n++
				}
			}
			if n != 1 {
				t.Fatalf("%d result notices, want 1: %v", n, e.causes(t, tok))
			}
		}
		if got := e.causes(t, noResults); len(got) != 3 {
			t.Fatalf("the results muter got %v", got)
		}
		items, _ = e.notices(t, admin, "?limit=1")
		if n := items[0]; n["cause"] != "work_completed" || n["kind"] != "result" || n["title"] != "Work "+w+" completed: Report ready" ||
			n["link"] != "/console/t/default/work/"+w || jsonAt(n, "subject", "type") != "work" {
			t.Fatalf("result notice = %v", n)
		}

		// Failed work: its incident is one failure notice; a stale callback
		// and cancelled work notify nobody.
		h2 := e.handOff(t)
		receipt(t, "stale-free accepted", e.post(h2, h2.token, callback(h2.workID, "c2", 2, "accepted")))
		e.clock.Advance(time.Second)
		fail := callback(h2.workID, "c3", 3, "failed")
		fail["error"] = map[string]any{"message": "the mailbox is gone"}
		for range 2 {
			receipt(t, "failed", e.post(h2, h2.token, fail))
		}
		receipt(t, "stale", e.post(h2, h2.token, callback(h2.workID, "c1", 1, "running")))
		inc := e.incidents(t, h2.workID)
		if len(inc) != 1 {
			t.Fatalf("incidents = %v", inc)
		}
		h3 := e.handOff(t)
		e.clock.Advance(time.Second)
		receipt(t, "cancelled", e.post(h3, h3.token, callback(h3.workID, "c1", 1, "cancelled")))
		items, _ = e.notices(t, mia, "?limit=1")
		if n := items[0]; n["cause"] != "incident" || n["kind"] != "failure" || jsonAt(n, "subject", "id") != inc[0]["id"] ||
			!strings.Contains(n["title"].(string), "the mailbox is gone") {
			t.Fatalf("failure notice = %v", n)
		}
		for _, c := range e.causes(t, mia) {
			if strings.Contains(c, h3.workID) {
				t.Fatalf("cancelled work notified: %v", c)
			}
		}
		// The muter of h's endpoint hears about the other endpoint's failure.
		if got := e.causes(t, noEndpoint); len(got) != 1 || got[0] != "incident "+inc[0]["id"].(string) {
			t.Fatalf("the endpoint muter got %v", got)
		}

		// Read state per recipient.
		items, unread = e.notices(t, mia, "")
		if unread != float64(len(items)) {
			t.Fatalf("unread %v of %d", unread, len(items))
		}
		first := items[0]["id"].(string)
		r := wantJSON(t, "read", e.do(http.MethodPost, tenantPath+"/notifications/"+first+"/read", mia, nil), http.StatusOK)
		if r["read"] != true || r["read_at"] == nil {
			t.Fatalf("read = %v", r)
		}
		again := wantJSON(t, "read again", e.do(http.MethodPost, tenantPath+"/notifications/"+first+"/read", mia, nil), http.StatusOK)
		if again["read_at"] != r["read_at"] {
			t.Errorf("reading again moved read_at")
		}
		if _, u := e.notices(t, mia, ""); u != unread-1 {
			t.Fatalf("unread after one read: %v", u)
		}
		if _, u := e.notices(t, admin, ""); u != unread {
			t.Fatalf("another recipient's unread changed: %v", u)
		}
		if got, _ := e.notices(t, mia, "?unread=true"); len(got) != len(items)-1 {
			t.Fatalf("unread filter: %d", len(got))
		}
		expectRefused(t, "another operator's notice", e.do(http.MethodGet, tenantPath+"/notifications/"+first, admin, nil),
			http.StatusNotFound, "not_found")
		expectRefused(t, "reading another operator's notice", e.do(http.MethodPost, tenantPath+"/notifications/"+first+"/read", admin, nil),
			http.StatusNotFound, "not_found")
		all := wantJSON(t, "read all", e.do(http.MethodPost, tenantPath+"/notifications/read-all", mia, nil), http.StatusOK)
		if all["marked"] != unread-1 {
			t.Fatalf("read-all = %v", all)
		}
		if _, u := e.notices(t, mia, ""); u != 0 {
			t.Fatalf("unread after read-all: %v", u)
		}

		// Pages.
		page, _ := e.notices(t, admin, "?limit=2")
		body := wantJSON(t, "page", e.do(http.MethodGet, tenantPath+"/notifications?limit=2", admin, nil), http.StatusOK)
		rest, _ := e.notices(t, admin, "?limit=1000&after="+body["next"].(string))
		full, _ := e.notices(t, admin, "?limit=1000")
		if len(page)+len(rest) != len(full) || rest[0]["id"] != full[2]["id"] {
			t.Fatalf("pages %v + %v != %v", page, rest, full)
		}
		expectRefused(t, "bad page token", e.do(http.MethodGet, tenantPath+"/notifications?after=nope", admin, nil),
			http.StatusBadRequest, "invalid_field")
		expectRefused(t, "bad unread", e.do(http.MethodGet, tenantPath+"/notifications?unread=1", admin, nil),
			http.StatusBadRequest, "invalid_field")
	})
}

// A pending AAP request notifies input; one a policy decides at once does
// not. A handoff that exhausts its retries notifies a failure once, however
// often the sweep runs.
func TestNotificationApprovalsAndDeliveryIncidents(t *testing.T) {
	t.Parallel()
	forEachWorkBackend(t, work.Config{HandoffWindow: time.Minute}, func(t *testing.T, e *workEnv) {
		inst := newInstance(t, e.env)
		wantJSON(t, "policy", e.do(http.MethodPost, tenantPath+"/policies", e.operatorToken, map[string]any{
			"tool": "issue_refund", "condition": "arguments.amount <= 1000", "effect": "approve"}), http.StatusCreated)
		small := refundBody()
		small["arguments"] = map[string]any{"amount": 10}
		submit(t, e.env, inst.Credential, small)
		body := refundBody()
		body["agent_reasoning"] = `<script>alert(1)</script>`
		req := submit(t, e.env, inst.Credential, body)
		got := e.causes(t, e.operatorToken)
		if len(got) != 1 || got[0] != "approval_pending att_aap_"+req.ID {
			t.Fatalf("AAP notices = %v", got)
		}
		items, _ := e.notices(t, e.operatorToken, "")
		if n := items[0]; n["kind"] != "input" || n["link"] != "/console/t/default/attention/att_aap_"+req.ID ||
			!strings.Contains(n["title"].(string), "issue_refund") || n["endpoint_id"] != nil {
			t.Fatalf("AAP notice = %v", n)
		}

		rt := newRuntime(t, e)
		rt.answer(500, 500, 500, 500, 500, 500, 500, 500, 500, 500, 500, 500, 500, 500, 500, 500, 500, 500, 500, 500)
		id := e.endpoint(t, rt, true)["id"].(string)
		_, in := e.binding(t, id, nil)
		e.send(t, in, map[string]any{"text": "please summarise"})
		workID := e.listWork(t, "?endpoint="+id)[0]["id"].(string)
		e.failedMessage(t, workID, work.MessageKindHandoff)
		for range 3 {
			if _, err := e.work.RecordDeliveryIncidents(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
		inc := e.incidents(t, workID)
		if len(inc) != 1 {
			t.Fatalf("incidents = %v", inc)
		}
		got = e.causes(t, e.operatorToken)
		if len(got) != 2 || !strings.Contains(strings.Join(got, ","), "incident "+inc[0]["id"].(string)) {
			t.Fatalf("notices after the failed handoff = %v", got)
		}
	})
}

func TestNotificationPreferencesAndIsolation(t *testing.T) {
	parallelWork(t, func(t *testing.T, e *workEnv) {
		path := tenantPath + "/notifications/preferences"
		def := wantJSON(t, "defaults", e.do(http.MethodGet, path, e.operatorToken, nil), http.StatusOK)
		if fmt.Sprint(def) != "map[muted_endpoints:[] muted_kinds:[]]" {
			t.Fatalf("default preferences = %v", def)
		}
		put := func(body any) *response { return e.do(http.MethodPut, path, e.operatorToken, body) }
		expectRefused(t, "unknown kind", put(map[string]any{"muted_kinds": []string{"progress"}, "muted_endpoints": []string{}}),
			http.StatusBadRequest, "invalid_field")
		expectRefused(t, "unknown endpoint", put(map[string]any{"muted_kinds": []string{}, "muted_endpoints": []string{"ep_nope"}}),
			http.StatusBadRequest, "invalid_field")
		expectRefused(t, "missing field", put(map[string]any{"muted_kinds": []string{}}), http.StatusBadRequest, "missing_field")
		expectRefused(t, "unknown field", put(map[string]any{"muted_kinds": []string{}, "muted_endpoints": []string{}, "email": true}),
			http.StatusBadRequest, "unknown_field")
		expectRefused(t, "wrong type", put(map[string]any{"muted_kinds": "result", "muted_endpoints": []string{}}),
			http.StatusBadRequest, "invalid_field")
		many := make([]string, 101)
		for i := range many {
			many[i] = fmt.Sprint("ep_", i)
		}
		expectRefused(t, "too many endpoints", put(map[string]any{"muted_kinds": []string{}, "muted_endpoints": many}),
			http.StatusBadRequest, "invalid_field")
		if got := wantJSON(t, "after refusals", e.do(http.MethodGet, path, e.operatorToken, nil), http.StatusOK); fmt.Sprint(got) != fmt.Sprint(def) {
			t.Fatalf("a refused update changed the preferences: %v", got)
		}

		// Another tenant: its endpoint cannot be muted here, and its
		// operators see none of this tenant's notices.
		other, err := e.access.Bootstrap(context.Background(), "other")
		if err != nil {
			t.Fatal(err)
		}
		rt := newRuntime(t, e)
		oep := wantJSON(t, "other endpoint", e.do(http.MethodPost, "/api/v1/tenants/other/endpoints", other.Token,
			map[string]any{"name": "theirs", "url": rt.URL()}), http.StatusCreated)["id"].(string)
		expectRefused(t, "another tenant's endpoint", put(map[string]any{"muted_kinds": []string{}, "muted_endpoints": []string{oep}}),
			http.StatusBadRequest, "invalid_field")
		inst := newInstance(t, e.env)
		submit(t, e.env, inst.Credential, refundBody())
		items, _ := e.notices(t, e.operatorToken, "")
		if len(items) != 1 {
			t.Fatalf("notices = %v", items)
		}
		id := items[0]["id"].(string)
		for _, p := range []string{"/notifications", "/notifications/" + id, "/notifications/preferences"} {
			expectRefused(t, "other tenant's operator on "+p, e.do(http.MethodGet, tenantPath+p, other.Token, nil), http.StatusNotFound, "not_found")
		}
		expectRefused(t, "their notice by its ID in their tenant", e.do(http.MethodGet, "/api/v1/tenants/other/notifications/"+id, other.Token, nil),
			http.StatusNotFound, "not_found")
		theirs := wantJSON(t, "their list", e.do(http.MethodGet, "/api/v1/tenants/other/notifications", other.Token, nil), http.StatusOK)
		if len(theirs["items"].([]any)) != 0 {
			t.Fatalf("the other tenant sees %v", theirs)
		}
	})
}
