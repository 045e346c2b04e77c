package console_test

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/agentowl/agentowl/internal/store/storetest"
)

const endpointPages = "/console/t/default/endpoints"

// endpointAPI is the API's view of endpoint id.
func (s *site) endpointAPI(id string) map[string]any {
	s.t.Helper()
	return s.must(http.StatusOK, http.MethodGet, "/api/v1/tenants/default/endpoints/"+id, s.admin, nil)
}

// auditCount counts the audit entries of action on target.
func (s *site) auditCount(action, target string) int {
	s.t.Helper()
	n := 0
	for _, e := range s.must(http.StatusOK, http.MethodGet, "/api/v1/tenants/default/audit", s.admin, nil)["items"].([]any) {
		e := e.(map[string]any)
		if e["action"] == action && e["target"] == target && strings.HasPrefix(e["actor"].(string), "operator:") {
			n++
		}
	}
	return n
}

// Endpoints in the console: the list by name with URL, agent work and
// state (what an admin named it shown as text); pause and resume behind a
// confirmation that changes nothing; no change without the form's CSRF
// token; members read only and a member's post refused forbidden, as the
// API refuses it; both audited.
func TestConsoleEndpoints(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		s := startConversations(t, b)
		other := s.must(http.StatusCreated, http.MethodPost, "/api/v1/tenants/default/endpoints", s.admin, map[string]any{
			"name": "billing " + hostile, "url": "https://billing.example.com/events"})["id"].(string)
		c := s.client()
		c.signIn(s.admin)

		list := c.get(endpointPages)
		if list.Status != http.StatusOK || !strings.Contains(list.Body, ">support-agent</a>") ||
			!strings.Contains(list.Body, "https://runtime.example.com/events") || strings.Count(list.Body, "Delivering") != 2 ||
			strings.Count(list.Body, `class="pause"`) != 2 || !strings.Contains(list.Body, "events keep arriving") ||
			!strings.Contains(list.Body, `aria-current="page">Endpoints`) {
			t.Fatalf("list: %d %s", list.Status, list.Body)
		}
		if strings.Contains(list.Body, "<script>window.__xss") || strings.Contains(list.Body, "<img src=x") ||
			!strings.Contains(list.Body, "&lt;script&gt;window.__xss=1&lt;/script&gt;") {
			t.Fatal("an endpoint's name is not escaped")
		}
		row := func(body, id string) string {
			i := strings.Index(body, `data-id="`+id+`"`)
			if i < 0 {
				t.Fatalf("no row of %s", id)
			}
			j := strings.Index(body[i:], "</tr>")
			return body[i : i+j]
		}
		if r := row(list.Body, s.endpoint); !strings.Contains(r, ">on<") {
			t.Fatalf("agent work of %s: %s", s.endpoint, r)
		}
		if r := row(list.Body, other); !strings.Contains(r, ">off<") {
			t.Fatalf("agent work of %s: %s", other, r)
		}
		csrf := list.CSRF()
		pause := endpointPages + "/" + s.endpoint + "/pause"
		resume := endpointPages + "/" + s.endpoint + "/resume"

		// The first post only shows what would change.
		confirm := c.post(pause, url.Values{"csrf": {csrf}})
		if confirm.Status != http.StatusOK || !strings.Contains(confirm.Body, "Nothing has changed yet") ||
			!strings.Contains(confirm.Body, "support-agent") || s.endpointAPI(s.endpoint)["paused_at"] != nil {
			t.Fatalf("pause preview: %d %s", confirm.Status, confirm.Body)
		}
		wantForgedRefused(t, c, pause, csrf, "pause", func() string {
			if s.endpointAPI(s.endpoint)["paused_at"] != nil {
				return "paused the endpoint"
			}
			return ""
		})
		if p := c.post(endpointPages+"/ep_nope/pause", url.Values{"csrf": {csrf}, "step": {"submit"}}); p.Status != http.StatusNotFound ||
			!strings.Contains(p.Body, "not_found") || !strings.Contains(p.Body, `id="endpoints"`) {
			t.Fatalf("pausing an unknown endpoint: %d %s", p.Status, p.Body)
		}
		if p := c.post(endpointPages+"/ep_nope/pause", url.Values{"csrf": {csrf}}); p.Status != http.StatusNotFound {
			t.Fatalf("previewing a pause of an unknown endpoint: %d", p.Status)
		}
		done := c.post(pause, url.Values{"csrf": {confirm.CSRF()}, "step": {"submit"}})
		if done.Status != http.StatusSeeOther || done.Header.Get("Location") != endpointPages+"?done=paused" ||
			s.endpointAPI(s.endpoint)["paused_at"] == nil {
			t.Fatalf("pause: %d %v", done.Status, done.Header)
		}
		after := c.get(endpointPages + "?done=paused")
		if r := row(after.Body, s.endpoint); !strings.Contains(r, "Paused</span> since <time datetime=") || !strings.Contains(r, "Resume…") {
			t.Fatalf("the paused endpoint's row: %s", r)
		}
		if !strings.Contains(after.Body, "Endpoint paused") {
			t.Fatal("no confirmation of the pause")
		}

		// Members see the list without the forms; their posts are refused.
		m := s.client()
		m.signIn(s.operator("mia", "member"))
		mp := m.get(endpointPages)
		if mp.Status != http.StatusOK || !strings.Contains(mp.Body, "support-agent") || !strings.Contains(mp.Body, "Paused") ||
			strings.Contains(mp.Body, "/resume") || strings.Contains(mp.Body, "/pause") || strings.Contains(mp.Body, "Resume…") {
			t.Fatalf("a member's list: %d %s", mp.Status, mp.Body)
		}
		for _, form := range []url.Values{{"csrf": {mp.CSRF()}, "step": {"submit"}}, {"csrf": {mp.CSRF()}}} {
			if p := m.post(resume, form); p.Status != http.StatusForbidden || !strings.Contains(p.Body, "forbidden") ||
				s.endpointAPI(s.endpoint)["paused_at"] == nil {
				t.Fatalf("a member's resume (%v): %d %s", form, p.Status, p.Body)
			}
		}

		if p := c.post(resume, url.Values{"csrf": {csrf}}); p.Status != http.StatusOK || !strings.Contains(p.Body, "Confirm resume") {
			t.Fatalf("resume preview: %d %s", p.Status, p.Body)
		}
		if p := c.post(resume, url.Values{"csrf": {csrf}, "step": {"submit"}}); p.Status != http.StatusSeeOther ||
			s.endpointAPI(s.endpoint)["paused_at"] != nil {
			t.Fatalf("resume: %d %s", p.Status, p.Body)
		}
		if r := row(c.get(endpointPages).Body, s.endpoint); !strings.Contains(r, "Delivering") || !strings.Contains(r, "Pause…") {
			t.Fatalf("the resumed endpoint's row: %s", r)
		}
		target := "endpoint:" + s.endpoint
		if p, r := s.auditCount("endpoint.pause", target), s.auditCount("endpoint.resume", target); p != 1 || r != 1 {
			t.Fatalf("audit: %d endpoint.pause, %d endpoint.resume; want one each", p, r)
		}
	})
}

// TestBrowserPauseResumeEndpoint: an admin pauses an endpoint with its
// button and the confirmation, sees it Paused while an event's handoff
// waits, resumes it, and sees it Delivering as the held handoff goes out;
// the page works at desktop and phone size, and both steps are audited.
func TestBrowserPauseResumeEndpoint(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		rt := newDecisionRuntime(t)
		s := start(t, b, rt.trust)
		base := "/api/v1/tenants/default"
		ep := s.must(http.StatusCreated, http.MethodPost, base+"/endpoints", s.admin, map[string]any{"name": "support-agent",
			"url": rt.srv.URL + "/events", "config": map[string]any{"agent_work": true}})["id"].(string)
		in := s.must(http.StatusCreated, http.MethodPost, base+"/bindings", s.admin, map[string]any{"channel": "webhook", "endpoint_id": ep})
		ingressPath := strings.TrimPrefix(in["ingress_url"].(string), s.url)
		rowSel := fmt.Sprintf(`[data-id=%q]`, ep)
		state := fmt.Sprintf(`((document.querySelector('%s td[data-label="State"]') || {}).textContent || "")`, rowSel)

		ctx := tab(t)
		signIn(t, ctx, s, s.admin)
		click(t, ctx, `nav a[href$="/endpoints"]`, "Endpoints")
		accessible(t, ctx)
		waitFor(t, ctx, "the endpoint delivering", state+`.includes("Delivering")`)
		if got := eval[string](t, ctx, fmt.Sprintf(`document.querySelector('%s th a').textContent`, rowSel)); got != "support-agent" {
			t.Fatalf("the endpoint's label is %q, want its name", got)
		}
		if !eval[bool](t, ctx, `document.getElementById("pause-help").textContent.includes("events keep arriving")`) {
			t.Fatal("the page does not say what pausing does")
		}
		screenshot(t, ctx, "endpoints")

		// On a phone-sized screen nothing needs sideways scrolling.
		do(t, ctx, "a phone screen", chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile), chromedp.Navigate(s.url+endpointPages))
		waitTitle(t, ctx, "Endpoints")
		if w := eval[int](t, ctx, `document.documentElement.scrollWidth`); w > 390 {
			t.Errorf("the endpoints page is %dpx wide on a 390px screen", w)
		}
		screenshot(t, ctx, "phone-endpoints")
		do(t, ctx, "back to a desktop screen", chromedp.EmulateViewport(1280, 900), chromedp.Navigate(s.url+endpointPages))
		waitTitle(t, ctx, "Endpoints")

		click(t, ctx, rowSel+" button.pause", "Confirm pause")
		accessible(t, ctx)
		if s.endpointAPI(ep)["paused_at"] != nil {
			t.Fatal("the review step paused the endpoint")
		}
		screenshot(t, ctx, "endpoint-confirm")
		click(t, ctx, "#confirm", "Endpoints")
		waitFor(t, ctx, "the confirmation", `document.querySelector(".done") && document.querySelector(".done").textContent.includes("Endpoint paused")`)
		waitFor(t, ctx, "the endpoint paused", state+`.includes("Paused since")`)
		if s.endpointAPI(ep)["paused_at"] == nil {
			t.Fatal("the endpoint is not paused")
		}

		// An event while paused is recorded; its handoff waits.
		s.must(http.StatusAccepted, http.MethodPost, ingressPath, "", map[string]any{"text": "refund please"})
		items := s.must(http.StatusOK, http.MethodGet, base+"/work", s.admin, nil)["items"].([]any)
		w := items[0].(map[string]any)["id"].(string)
		delivery := func() map[string]any {
			d, _ := s.must(http.StatusOK, http.MethodGet, base+"/work/"+w, s.admin, nil)["delivery"].(map[string]any)
			return d
		}
		if d := delivery(); d["state"] == "delivered" || d["attempts"] != float64(0) {
			t.Fatalf("a handoff of a paused endpoint was attempted: %v", d)
		}

		click(t, ctx, rowSel+" button.resume", "Confirm resume")
		accessible(t, ctx)
		click(t, ctx, "#confirm", "Endpoints")
		waitFor(t, ctx, "the endpoint delivering again", state+`.includes("Delivering")`)
		if !eval[bool](t, ctx, `document.querySelector(".done").textContent.includes("Endpoint resumed")`) {
			t.Fatal("no confirmation of the resume")
		}
		for deadline := time.Now().Add(30 * time.Second); delivery()["state"] != "delivered"; time.Sleep(50 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("the held handoff was not delivered after resume: %v", delivery())
			}
		}
		target := "endpoint:" + ep
		if p, r := s.auditCount("endpoint.pause", target), s.auditCount("endpoint.resume", target); p != 1 || r != 1 {
			t.Fatalf("audit: %d endpoint.pause, %d endpoint.resume; want one each", p, r)
		}
	})
}
