package console_test

import (
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/agentowl/agentowl/internal/ingress/twilio"
	"github.com/agentowl/agentowl/internal/server"
	"github.com/agentowl/agentowl/internal/store/storetest"
)

// Issue 26 without a browser: each page of a realistic tenant tells the
// whole story in names, and what senders and agents wrote stays text.

var (
	idCode   = regexp.MustCompile(`(?s)<code class="id"[^>]*>.*?</code>`)
	details  = regexp.MustCompile(`(?s)<details>.*?</details>`)
	anyTag   = regexp.MustCompile(`(?s)<[^>]*>`)
	rawIDs   = regexp.MustCompile(`\b(ep|bnd|conv)_[0-9A-Za-z]+`)
	itemRows = regexp.MustCompile(`<li class="item [^"]*" data-id="([^"]+)"`)
)

// visible is the text a person reads on a page, without the secondary
// copyable IDs and what is one click away (<details>).
func visible(body string) string {
	return anyTag.ReplaceAllString(details.ReplaceAllString(idCode.ReplaceAllString(body, ""), ""), " ")
}

// namesNotIDs fails when the page shows an endpoint, binding or
// conversation ID other than as a secondary copyable ID.
func namesNotIDs(t *testing.T, what, body string) {
	t.Helper()
	if m := rawIDs.FindAllString(visible(body), -1); m != nil {
		t.Errorf("%s shows IDs where a name exists: %v", what, m)
	}
}

// escaped fails when what a sender or agent wrote reached the page as
// markup.
func escaped(t *testing.T, what, body string) {
	t.Helper()
	if strings.Contains(body, "<script>window.__xss") || strings.Contains(body, `<img src=x onerror`) {
		t.Errorf("%s renders the hostile text as markup", what)
	}
}

func storySite(t *testing.T, b storetest.Backend, adjust func(*server.Config)) (*site, *tenantStory, *browserless) {
	s := start(t, b, func(cfg *server.Config) {
		cfg.NoDelivery = true
		if adjust != nil {
			adjust(cfg)
		}
	})
	st := s.seedStory()
	c := s.client()
	c.signIn(s.admin)
	return s, st, c
}

func TestStoryItemPages(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		s, st, c := storySite(t, b, nil)
		at := "/console/t/default/attention/"

		// The runtime approval about the email reply: the reply with its
		// sender, recipients, subject, text and PDF, the first message of
		// the thread, and the agent's reports, routine progress quiet.
		p := c.get(at + st.Approval)
		if p.Status != http.StatusOK {
			t.Fatalf("approval item: %d", p.Status)
		}
		for _, want := range []string{"Ann Example &lt;ann@example.com&gt;", "Support &lt;support@example.com&gt;",
			`<dd class="subject">Re: Refund for order A-1234</dd>`, "Here is the invoice showing both captures.",
			"&lt;script&gt;window.__xss=1&lt;/script&gt;", st.PDFName, "I was charged twice for order A-1234",
			"Support inbox", "Support desk", `class="report quiet"`, "Refund 49.00 EUR to the card ending 4242", st.Digest,
			`id="story-conversation">Refund for order A-1234</a>`} {
			if !strings.Contains(p.Body, want) {
				t.Errorf("the approval item lacks %q", want)
			}
		}
		escaped(t, "the approval item", p.Body)
		namesNotIDs(t, "the approval item", p.Body)
		if strings.Index(p.Body, `id="story"`) > strings.Index(p.Body, `id="act"`) {
			t.Error("the story is not above the decision")
		}
		pdf := regexp.MustCompile(`href="(/console/t/default/events/[^"]+/attachments/[^"]+)" download>` + regexp.QuoteMeta(st.PDFName)).FindStringSubmatch(p.Body)
		if pdf == nil {
			t.Fatalf("no download link of the PDF on the item page")
		}
		if got := c.get(pdf[1]); got.Status != http.StatusOK || got.Body != string(st.PDF) {
			t.Fatalf("the PDF download: %d %q", got.Status, got.Body)
		}

		// The question about the SMS: the number, the text, the earlier SMS.
		p = c.get(at + st.Question)
		for _, want := range []string{"&#43;15551230001", "&#43;15559870000", "Tracking says delivered on Friday", "Hi, my parcel for order B-77",
			"Support SMS", "Open a claim with the carrier", `class="rel expiry soon"`} {
			if !strings.Contains(p.Body, want) {
				t.Errorf("the question lacks %q", want)
			}
		}
		namesNotIDs(t, "the question", p.Body)

		// The incident: the first email and the failure the agent reported.
		p = c.get(at + st.Incident)
		for _, want := range []string{"I was charged twice", "crm_unavailable The CRM did not answer", `<dd class="subject">Refund for order A-1234</dd>`} {
			if !strings.Contains(p.Body, want) {
				t.Errorf("the incident lacks %q", want)
			}
		}
		namesNotIDs(t, "the incident", p.Body)

		// The AAP request: its tool, arguments whole and pretty-printed, the
		// agent's reasoning marked as its claim, the digest.
		for _, path := range []string{at + st.AAPItem, "/console/t/default/approvals/" + st.AAP} {
			p = c.get(path)
			for _, want := range []string{`<span class="tag" id="tool">issue_refund</span>`, "  &#34;currency&#34;: &#34;EUR&#34;,",
				strings.Repeat("A long line that must wrap, never be clipped. ", 4), "the agent's claim, unverified",
				"The invoice shows two captures for one order.", `id="aap-digest"`} {
				if !strings.Contains(p.Body, want) {
					t.Errorf("%s lacks %q", path, want)
				}
			}
			escaped(t, path, p.Body)
			namesNotIDs(t, path, p.Body)
		}

		// The work list names each work's channel, sender and subject.
		p = c.get("/console/t/default/work")
		for _, want := range []string{"Re: Refund for order A-1234", "ann@example.com", "Tracking says delivered on Friday", "&#43;15551230001",
			">sms<", ">cloudflare-email<", "Support desk"} {
			if !strings.Contains(p.Body, want) {
				t.Errorf("the work list lacks %q", want)
			}
		}
		namesNotIDs(t, "the work list", p.Body)
		p = c.get("/console/t/default/work/" + st.EmailWork2)
		if !strings.Contains(p.Body, "Here is the invoice") || !strings.Contains(p.Body, st.PDFName) {
			t.Errorf("the work page lacks its message")
		}
		namesNotIDs(t, "a work page", p.Body)
		_ = s
	})
}

// TestThreadConversations: the conversation list names the peer, the
// subject or first line, the channel, the last activity and the open work;
// a conversation reads as a thread with files and each work's statuses.
func TestThreadConversations(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		_, st, c := storySite(t, b, nil)
		p := c.get("/console/t/default/conversations")
		row := func(conv string) string {
			i := strings.Index(p.Body, `<tr data-id="`+conv+`"`)
			if i < 0 {
				t.Fatalf("no row of %s", conv)
			}
			return p.Body[i : i+strings.Index(p.Body[i:], "</tr>")]
		}
		email, text := row(st.EmailConv), row(st.SMSConv)
		for _, want := range []string{">ann@example.com</a>", "Refund for order A-1234", "cloudflare-email", "Support inbox", "just now",
			`class="open-work">1<`} {
			if !strings.Contains(email, want) {
				t.Errorf("the email conversation's row lacks %q:\n%s", want, email)
			}
		}
		for _, want := range []string{">&#43;15551230001</a>", "Hi, my parcel for order B-77", ">sms<", `class="open-work">2<`} {
			if !strings.Contains(text, want) {
				t.Errorf("the SMS conversation's row lacks %q:\n%s", want, text)
			}
		}
		namesNotIDs(t, "the conversation list", p.Body)

		p = c.get("/console/t/default/conversations/" + st.EmailConv)
		if p.Status != http.StatusOK || !strings.Contains(p.Body, "<title>Conversation: Refund for order A-1234") {
			t.Fatalf("the email conversation: %d", p.Status)
		}
		first, second := strings.Index(p.Body, "I was charged twice"), strings.Index(p.Body, "Here is the invoice")
		if first < 0 || second < first {
			t.Errorf("the thread is not in order: %d, %d", first, second)
		}
		for _, want := range []string{st.PDFName, "runtime: failed", "runtime: needs_input", "delivery: queued",
			"<summary>Payload and headers</summary>", `<dd class="subject">Re: Refund for order A-1234</dd>`} {
			if !strings.Contains(p.Body, want) {
				t.Errorf("the email thread lacks %q", want)
			}
		}
		escaped(t, "the email thread", p.Body)
		namesNotIDs(t, "the email thread", p.Body)
	})
}

// TestUrgencyNeedsAttention: Needs attention counts per kind and status and
// lists the soonest expiry first, then what never expires, across pages;
// the sort switch lists newest first.
func TestUrgencyNeedsAttention(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		s, st, c := storySite(t, b, func(cfg *server.Config) { cfg.Console.PageSize = 2 })
		want := []string{st.Question, st.AAPItem, st.Approval, st.Incident}
		var got []string
		path := "/console/t/default/attention"
		for range 5 {
			p := c.get(path)
			if p.Status != http.StatusOK {
				t.Fatalf("%s: %d %s", path, p.Status, p.Body)
			}
			for _, m := range itemRows.FindAllStringSubmatch(p.Body, -1) {
				got = append(got, m[1])
			}
			next := regexp.MustCompile(`href="(/console/t/default/attention\?[^"]*after=[^"]+)">More items`).FindStringSubmatch(p.Body)
			if next == nil {
				break
			}
			path = strings.ReplaceAll(next[1], "&amp;", "&")
		}
		if strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("by urgency, pages of 2: %v, want %v", got, want)
		}
		p := c.get("/console/t/default/attention")
		for _, w := range []string{`<strong id="count-total">4</strong> waiting`, `id="count-soon">1 expires within 15 min`,
			`data-kind="approval" data-status="open">2 approvals open`, `data-kind="question" data-status="open">1 question open`,
			`data-kind="incident" data-status="open">1 incident open`} {
			if !strings.Contains(p.Body, w) {
				t.Errorf("the counts lack %q", w)
			}
		}
		if !regexp.MustCompile(`data-id="` + st.Question + `"[\s\S]*?class="rel expiry soon" datetime="[^"]+" title="[^"]+ UTC">expires in \d+ min</time>`).MatchString(p.Body) {
			t.Error("the question expiring in 10 min is not marked with its relative and absolute time")
		}
		var newest, api []string
		for _, m := range itemRows.FindAllStringSubmatch(c.get("/console/t/default/attention?sort=newest").Body, -1) {
			newest = append(newest, m[1])
		}
		for _, it := range s.must(http.StatusOK, http.MethodGet, "/api/v1/tenants/default/attention?limit=2", s.admin, nil)["items"].([]any) {
			api = append(api, it.(map[string]any)["id"].(string))
		}
		if strings.Join(newest, " ") != strings.Join(api, " ") {
			t.Errorf("newest first: %v, the API's %v", newest, api)
		}
		if p := c.get("/console/t/default/attention?sort=sideways"); p.Status != http.StatusBadRequest || !strings.Contains(p.Body, "sort must be") {
			t.Errorf("a bad sort: %d", p.Status)
		}
		if p := c.get("/console/t/default/attention?after=d999.x"); p.Status != http.StatusOK {
			t.Errorf("a page link past the end: %d", p.Status)
		}
		if p := c.get("/console/t/default/attention?after=zz"); p.Status != http.StatusBadRequest {
			t.Errorf("a bad page link: %d", p.Status)
		}
	})
}

// TestStoryOneWayToDecide: no page decides an AAP request in one click; the
// approval page's forms review first, and a submission must carry the
// digest that was reviewed.
func TestStoryOneWayToDecide(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		s, st, c := storySite(t, b, nil)
		if p := c.get("/console/t/default/approvals"); strings.Contains(p.Body, "<form method=\"post\"") && strings.Contains(p.Body, "/decide") {
			t.Error("the Approvals list has a decision form")
		}
		page := c.get("/console/t/default/approvals/" + st.AAP)
		if n, m := strings.Count(page.Body, `/decide"`), strings.Count(page.Body, `name="step" value="preview"`); n != 2 || m != 2 {
			t.Errorf("the approval page's decision forms: %d, %d previews", n, m)
		}
		decide := "/console/t/default/approvals/" + st.AAP + "/decide"
		review := c.post(decide, url.Values{"csrf": {page.CSRF()}, "step": {"preview"}, "decision": {"deny"}, "note": {"Not <b>now</b>"}})
		if review.Status != http.StatusOK || !strings.Contains(review.Body, "Nothing has been submitted yet") ||
			!strings.Contains(review.Body, "Not &lt;b&gt;now&lt;/b&gt;") || !strings.Contains(review.Body, `id="confirm-digest">`) {
			t.Fatalf("the review: %d %s", review.Status, review.Body)
		}
		status := func() any {
			return s.must(http.StatusOK, http.MethodGet, "/api/v1/tenants/default/attention/"+st.AAPItem, s.admin, nil)["status"]
		}
		if status() != "open" {
			t.Fatal("the review decided")
		}
		if p := c.post(decide, url.Values{"csrf": {page.CSRF()}, "step": {"submit"}, "decision": {"deny"}, "digest": {strings.Repeat("0", 64)}}); p.Status != http.StatusConflict && p.Status != http.StatusUnprocessableEntity {
			t.Errorf("a submission of another digest: %d", p.Status)
		} else if !strings.Contains(p.Body, "digest_mismatch") || status() != "open" {
			t.Errorf("a submission of another digest: %s", p.Body)
		}
		if p := c.post(decide, url.Values{"csrf": {page.CSRF()}, "step": {"preview"}, "decision": {"deny"}, "valid_for": {"5m"}}); p.Status != http.StatusBadRequest && p.Status != http.StatusUnprocessableEntity {
			t.Errorf("a denial with a validity: %d", p.Status)
		}
		digest := regexp.MustCompile(`name="digest" value="([0-9a-f]{64})"`).FindStringSubmatch(review.Body)
		if p := c.post(decide, url.Values{"csrf": {page.CSRF()}, "step": {"submit"}, "decision": {"deny"}, "note": {"Not <b>now</b>"},
			"digest": {digest[1]}}); p.Status != http.StatusSeeOther {
			t.Fatalf("the confirmed denial: %d %s", p.Status, p.Body)
		}
		if st := status(); st != "resolved" {
			t.Errorf("after the confirmed denial: %v", st)
		}
	})
}

// TestStoryEmptyStates: an empty tenant's Needs attention, Agent work,
// Conversations and Approvals say what would appear and link the document
// that sets it up.
func TestStoryEmptyStates(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		s := start(t, b, nil)
		c := s.client()
		c.signIn(s.admin)
		for page, doc := range map[string]string{"attention": "connect-agent-runtime.md", "work": "connect-agent-runtime.md",
			"conversations": "channels.md", "approvals": "harness-kit.md"} {
			p := c.get("/console/t/default/" + page)
			if p.Status != http.StatusOK || !strings.Contains(p.Body, `id="empty"`) || !strings.Contains(p.Body, "/docs/"+doc+`"`) {
				t.Errorf("empty %s: %d, no guide to %s", page, p.Status, doc)
			}
		}
	})
}

// TestStoryVoiceAndWebhook: a call's item shows the caller, its status
// timeline and its transcription; a webhook event's item shows its payload
// pretty-printed.
func TestStoryVoiceAndWebhook(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		s := start(t, b, func(cfg *server.Config) { cfg.NoDelivery = true })
		base := "/api/v1/tenants/default"
		ep := s.must(http.StatusCreated, http.MethodPost, base+"/endpoints", s.admin, map[string]any{"name": "Phone desk",
			"url": "https://runtime.example.com/events", "config": map[string]any{"agent_work": true}})["id"].(string)
		tok := s.must(http.StatusCreated, http.MethodPost, base+"/endpoints/"+ep+"/runtime-credentials", s.admin,
			map[string]any{"scopes": []string{"callbacks:write"}})["token"].(string)
		const authToken = "12345678901234567890123456789012"
		voice := s.must(http.StatusCreated, http.MethodPost, base+"/bindings", s.admin, map[string]any{"channel": "voice",
			"endpoint_id": ep, "name": "Support line", "auth_token": authToken})["ingress_url"].(string)
		for _, f := range []url.Values{
			{"CallStatus": {"ringing"}},
			{"CallStatus": {"in-progress"}},
			{"CallStatus": {"completed"}, "CallDuration": {"42"}},
			{"CallStatus": {"completed"}, "TranscriptionSid": {"TR1"}, "TranscriptionStatus": {"completed"},
				"TranscriptionText": {"Please call me back about my refund <b>today</b>."}},
		} {
			f.Set("CallSid", "CA0001")
			f.Set("From", "+15550100001")
			f.Set("To", "+15559870000")
			f.Set("Direction", "inbound")
			req, _ := http.NewRequest(http.MethodPost, voice, strings.NewReader(f.Encode()))
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			req.Header.Set("X-Twilio-Signature", twilioSignature(authToken, voice, f))
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("voice event %v: %d", f, resp.StatusCode)
			}
		}
		hook := s.must(http.StatusCreated, http.MethodPost, base+"/bindings", s.admin, map[string]any{"channel": "webhook",
			"endpoint_id": ep, "name": "CRM events"})["ingress_url"].(string)
		s.must(http.StatusAccepted, http.MethodPost, strings.TrimPrefix(hook, s.url), "", map[string]any{"type": "order.disputed",
			"order": map[string]any{"id": "C-9", "lines": []any{"one", strings.Repeat("averylongvaluewithoutspaces", 12)}}})
		works := s.must(http.StatusOK, http.MethodGet, base+"/work", s.admin, nil)["items"].([]any)
		hookWork, callWork := works[0].(map[string]any)["id"].(string), works[1].(map[string]any)["id"].(string)
		cb := func(w, status string, extra map[string]any) {
			body := map[string]any{"version": "agent-work.v1", "callback_id": w + ":1", "work_id": w, "sequence": 1, "status": status,
				"occurred_at": "2026-10-06T12:00:00Z"}
			for k, v := range extra {
				body[k] = v
			}
			s.must(http.StatusOK, http.MethodPost, "/runtime/v1/work/"+w+"/callbacks", tok, body)
		}
		cb(callWork, "needs_input", map[string]any{"requests": []any{map[string]any{"id": "cb", "revision": 1, "kind": "question",
			"prompt": "Call the customer back now?", "allowed_decisions": []any{"answer"}, "expires_at": "2099-01-01T00:00:00Z"}}})
		cb(hookWork, "failed", map[string]any{"error": map[string]any{"code": "bad_order", "message": "Unknown order."}})
		items := s.must(http.StatusOK, http.MethodGet, base+"/attention", s.admin, nil)["items"].([]any)
		ids := map[string]string{}
		for _, it := range items {
			ids[it.(map[string]any)["kind"].(string)] = it.(map[string]any)["id"].(string)
		}
		c := s.client()
		c.signIn(s.admin)
		p := c.get("/console/t/default/attention/" + ids["question"])
		tl := p.Body[strings.Index(p.Body, `id="call-timeline"`):]
		tl = tl[:strings.Index(tl, "</ol>")]
		for _, want := range []string{"status: <strong>ringing</strong>", "status: <strong>in-progress</strong>", "status: <strong>completed</strong>",
			"transcription: <strong>completed</strong> <q>Please call me back about my refund &lt;b&gt;today&lt;/b&gt;.</q>"} {
			if !strings.Contains(tl, want) {
				t.Errorf("the call timeline lacks %q:\n%s", want, tl)
			}
		}
		for _, want := range []string{"<dt>Caller</dt><dd class=\"sender\">&#43;15550100001</dd>", "Support line",
			`<div class="msg-text">Please call me back about my refund &lt;b&gt;today&lt;/b&gt;.</div>`} {
			if !strings.Contains(p.Body, want) {
				t.Errorf("the call's item lacks %q", want)
			}
		}
		p = c.get("/console/t/default/attention/" + ids["incident"])
		for _, want := range []string{`<pre class="args payload">{
  &#34;order&#34;: {
    &#34;id&#34;: &#34;C-9&#34;,`, "CRM events", "bad_order Unknown order."} {
			if !strings.Contains(p.Body, want) {
				t.Errorf("the webhook's incident lacks %q", want)
			}
		}
	})
}

func twilioSignature(authToken, fullURL string, form url.Values) string {
	return twilio.Signature([]byte(authToken), fullURL, form)
}
