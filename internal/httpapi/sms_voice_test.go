package httpapi_test

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentowl/agentowl/internal/ingress"
	"github.com/agentowl/agentowl/internal/ingress/twilio"
	"github.com/agentowl/agentowl/internal/store/storetest"
	"github.com/agentowl/agentowl/internal/work"
)

// Tests of the sms and voice channels (docs/channels.md): signed
// Twilio-compatible form posts, on every backend, with the real delivery
// engine handing events to a local runtime.

const authToken = "0123456789abcdef0123456789abcdef"

// providerBinding creates an sms or voice binding to endpoint and returns
// its ID and ingress URL as shown once (the URL the provider signs).
func (e *workEnv) providerBinding(t *testing.T, channel, endpointID string) (id, ingressURL string) {
	t.Helper()
	b := wantJSON(t, "create "+channel+" binding", e.do(http.MethodPost, tenantPath+"/bindings", e.operatorToken,
		map[string]any{"channel": channel, "endpoint_id": endpointID, "auth_token": authToken}), http.StatusCreated)
	return b["id"].(string), b["ingress_url"].(string)
}

// twilioPost posts form to path on the server as the provider does, signed
// over signedURL with token; extra are more header name, value pairs.
func (e *env) twilioPost(path, signedURL, token string, form url.Values, extra ...string) *response {
	e.t.Helper()
	headers := append([]string{"Content-Type", twilio.ContentType,
		twilio.HeaderSignature, twilio.Signature([]byte(token), signedURL, form)}, extra...)
	return e.do(http.MethodPost, path, "", form.Encode(), headers...)
}

// provider sends signed requests to one binding.
type provider struct {
	e         *workEnv
	ingress   string // the ingress URL the provider was configured with
	path      string // where the request arrives (the same path, unless a proxy rewrote it)
	bindingID string
}

func (e *workEnv) provider(t *testing.T, channel, endpointID string) *provider {
	id, u := e.providerBinding(t, channel, endpointID)
	return &provider{e: e, ingress: u, path: strings.TrimPrefix(u, e.srv.URL), bindingID: id}
}

// send posts a signed form and expects the empty TwiML answer.
func (p *provider) send(t *testing.T, form url.Values) {
	t.Helper()
	r := p.e.twilioPost(p.path, p.ingress, authToken, form)
	if r.Status != http.StatusOK || string(r.Body) != twilio.EmptyResponse || !strings.HasPrefix(r.Header.Get("Content-Type"), "text/xml") {
		t.Fatalf("signed post of %v: %d %s %s", form, r.Status, r.Header.Get("Content-Type"), r.Body)
	}
}

func sms(sid, from, body string, more ...string) url.Values {
	v := url.Values{"MessageSid": {sid}, "SmsSid": {sid}, "AccountSid": {"AC0001"}, "From": {from}, "To": {"+15550000000"},
		"Body": {body}, "NumMedia": {"0"}, "SmsStatus": {"received"}, "ApiVersion": {"2010-04-01"}}
	for i := 0; i+1 < len(more); i += 2 {
		v.Set(more[i], more[i+1])
	}
	return v
}

// conversations lists the tenant's conversations matching query.
func (e *env) conversations(t *testing.T, query string) []map[string]any {
	t.Helper()
	doc := wantJSON(t, "list conversations", e.do(http.MethodGet, tenantPath+"/conversations?limit=1000&"+query, e.operatorToken, nil),
		http.StatusOK)
	var out []map[string]any
	for _, it := range doc["items"].([]any) {
		out = append(out, it.(map[string]any))
	}
	return out
}

// conversationEvents lists a conversation's events.
func (e *env) conversationEvents(t *testing.T, id string) []map[string]any {
	t.Helper()
	doc := wantJSON(t, "conversation events", e.do(http.MethodGet, tenantPath+"/conversations/"+id+"/events", e.operatorToken, nil),
		http.StatusOK)
	var out []map[string]any
	for _, it := range doc["items"].([]any) {
		out = append(out, it.(map[string]any))
	}
	return out
}

// settle waits until every handoff is acknowledged, so that a day of the
// fake clock cannot overtake an attempt in flight (its lease would lapse).
func (e *workEnv) settle(t *testing.T) {
	t.Helper()
	eventually(t, syncLimit, "every handoff acknowledged", func() bool {
		for _, w := range e.listWork(t, "") {
			if jsonAt(w, "delivery", "state") != "delivered" {
				return false
			}
		}
		return true
	})
}

// deliveryOf returns the runtime's delivery of event id, failing the test
// if it has none.
func deliveryOf(t *testing.T, ds []*delivered, eventID string) *delivered {
	t.Helper()
	for _, d := range ds {
		if jsonAt(d.Doc, "event", "id") == eventID {
			return d
		}
	}
	t.Fatalf("no delivery of event %s among %d", eventID, len(ds))
	return nil
}

// linkTarget is a server that media or recording links point at; it
// counts the requests it gets (none: links are never fetched).
func linkTarget(t *testing.T) (base string, fetched *atomic.Int32) {
	fetched = &atomic.Int32{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fetched.Add(1) }))
	t.Cleanup(srv.Close)
	return srv.URL, fetched
}

// TestSMSChannel: signed messages become events and work; a sender's
// messages thread while each follows the last by less than 24 hours (a
// sliding window); the provider's retries are one event; media are links,
// never fetched; follow-ups carry the runtime session.
func TestSMSChannel(t *testing.T) {
	parallelWork(t, func(t *testing.T, e *workEnv) {
		media, fetched := linkTarget(t)
		rt := newRuntime(t, e)
		ep := e.endpoint(t, rt, true)["id"].(string)
		cred := e.credential(t, ep, nil)["token"].(string)
		p := e.provider(t, "sms", ep)
		alice, bob := "+15551230001", "+15551230002"

		p.send(t, sms("SM1", alice, "hello\nthere"))
		convs := e.conversations(t, "channel=sms")
		if len(convs) != 1 || convs[0]["key"] != alice || convs[0]["status"] != "open" || convs[0]["binding_id"] != p.bindingID {
			t.Fatalf("conversations = %v", convs)
		}
		conv1 := convs[0]["id"].(string)
		evs := e.conversationEvents(t, conv1)
		if len(evs) != 1 || evs[0]["sender"] != alice || evs[0]["follow_up"] != false || len(evs[0]["work"].([]any)) != 1 {
			t.Fatalf("events = %v", evs)
		}
		d := deliveryOf(t, rt.wait(t, 1), evs[0]["id"].(string))
		ev := d.Doc["event"].(map[string]any)
		if ev["channel"] != "sms" || ev["sender"] != alice || ev["conversation_id"] != conv1 ||
			jsonAt(ev, "payload", "body") != "hello\nthere" || jsonAt(ev, "payload", "message_sid") != "SM1" ||
			jsonAt(ev, "payload", "from") != alice || jsonAt(ev, "payload", "to") != "+15550000000" ||
			jsonAt(ev, "payload", "params", "AccountSid") != "AC0001" || len(ev["attachments"].([]any)) != 0 ||
			jsonAt(d.Doc, "work", "conversation_id") != conv1 {
			t.Fatalf("handoff = %s", d.Body)
		}
		if strings.Contains(string(d.Body), twilio.HeaderSignature) {
			t.Errorf("the handoff forwards the provider's signature: %s", d.Body)
		}
		// The provider retries: one event, one work.
		p.send(t, sms("SM1", alice, "hello\nthere"))
		if n := len(e.conversationEvents(t, conv1)); n != 1 || len(e.listWork(t, "")) != 1 {
			t.Fatalf("after a retry: %d events, %d work", n, len(e.listWork(t, "")))
		}
		// The runtime establishes a session.
		w1 := e.listWork(t, "")[0]["id"].(string)
		cb := callback(w1, w1+":1", 1, "accepted")
		cb["runtime_session_id"] = "sess-sms"
		wantJSON(t, "callback", e.do(http.MethodPost, "/runtime/v1/work/"+w1+"/callbacks", cred, cb), http.StatusOK)

		// 23h59 later an MMS joins; 23h59 after that (47h58 after the first)
		// another still joins: the window slides with every message.
		e.settle(t)
		e.clock.Advance(23*time.Hour + 59*time.Minute)
		p.send(t, sms("SM2", alice, "photos", "NumMedia", "2", "MediaUrl0", media+"/m/0", "MediaContentType0", "image/jpeg",
			"MediaUrl1", media+"/m/1"))
		e.settle(t)
		e.clock.Advance(23*time.Hour + 59*time.Minute)
		p.send(t, sms("SM3", alice, "still there?"))
		evs = e.conversationEvents(t, conv1)
		if len(evs) != 3 || evs[1]["follow_up"] != true || evs[2]["follow_up"] != true {
			t.Fatalf("events after 23h59 gaps = %v", evs)
		}
		ds := rt.wait(t, 3)
		mms := deliveryOf(t, ds, evs[1]["id"].(string))
		atts := jsonAt(mms.Doc, "event", "attachments").([]any)
		if len(atts) != 2 || jsonAt(atts[0].(map[string]any), "url") != media+"/m/0" ||
			jsonAt(atts[0].(map[string]any), "content_type") != "image/jpeg" || jsonAt(atts[0].(map[string]any), "kind") != "link" ||
			jsonAt(mms.Doc, "event", "payload", "num_media") != float64(2) {
			t.Fatalf("MMS handoff = %s", mms.Body)
		}
		for _, id := range []string{evs[1]["id"].(string), evs[2]["id"].(string)} {
			d := deliveryOf(t, ds, id)
			if jsonAt(d.Doc, "work", "runtime_session_id") != "sess-sms" || jsonAt(d.Doc, "event", "follow_up") != true {
				t.Errorf("follow-up handoff lacks the session: %s", d.Body)
			}
		}

		// 24h01 of silence: a new conversation, without the session; the old
		// one ended when its window closed.
		lastAt := e.clock.Now()
		e.settle(t)
		e.clock.Advance(24*time.Hour + time.Minute)
		p.send(t, sms("SM4", alice, "back again"))
		convs = e.conversations(t, "channel=sms")
		if len(convs) != 2 || convs[0]["id"] == conv1 || convs[0]["key"] != alice || convs[0]["status"] != "open" {
			t.Fatalf("conversations after 24h01 = %v", convs)
		}
		old := wantJSON(t, "inspect", e.do(http.MethodGet, tenantPath+"/conversations/"+conv1, e.operatorToken, nil), http.StatusOK)
		if old["status"] != "ended" || old["ended_at"] != lastAt.Add(24*time.Hour).UTC().Format(time.RFC3339) ||
			old["events"] != float64(3) || old["runtime_session_id"] != "sess-sms" {
			t.Fatalf("the first conversation = %v", old)
		}
		conv2 := convs[0]["id"].(string)
		fresh := deliveryOf(t, rt.wait(t, 4), e.conversationEvents(t, conv2)[0]["id"].(string))
		if jsonAt(fresh.Doc, "event", "follow_up") != false || jsonAt(fresh.Doc, "work", "runtime_session_id") != nil ||
			jsonAt(fresh.Doc, "work", "conversation_id") != conv2 {
			t.Fatalf("handoff after the window = %s", fresh.Body)
		}

		// Another sender has a conversation of their own.
		p.send(t, sms("SM5", bob, "hi"))
		if convs := e.conversations(t, "binding="+p.bindingID); len(convs) != 3 ||
			(convs[0]["key"] != bob && convs[1]["key"] != bob) { // both latest at the same time: in order of ID
			t.Fatalf("conversations with a second sender = %v", convs)
		}
		// A status callback of a message the account sent records nothing.
		p.send(t, url.Values{"MessageSid": {"SM6"}, "MessageStatus": {"delivered"}, "From": {"+15550000000"}, "To": {bob}})
		if n := len(e.conversations(t, "")); n != 3 || len(e.listWork(t, "")) != 5 {
			t.Fatalf("after a status callback: %d conversations, %d work", n, len(e.listWork(t, "")))
		}
		// A reset ends the sender's conversation within its window: the next
		// message starts a new one.
		wantJSON(t, "reset", e.do(http.MethodPost, tenantPath+"/conversations/"+conv2+"/reset", e.operatorToken,
			map[string]any{"force": true}), http.StatusOK)
		p.send(t, sms("SM7", alice, "after the reset"))
		if convs := e.conversations(t, "status=open&binding="+p.bindingID); len(convs) != 2 || convs[0]["id"] == conv2 ||
			(convs[0]["key"] != alice && convs[1]["key"] != alice) {
			t.Fatalf("open conversations after the reset = %v", convs)
		}
		rt.wait(t, 6)
		if n := fetched.Load(); n != 0 {
			t.Errorf("the media links were fetched %d times", n)
		}
	})
}

// TestSMSRefusals: every refused request has its status and code and
// records nothing.
func TestSMSRefusals(t *testing.T) {
	parallelWork(t, func(t *testing.T, e *workEnv) {
		rt := newRuntime(t, e)
		ep := e.endpoint(t, rt, true)["id"].(string)
		p := e.provider(t, "sms", ep)
		other := e.provider(t, "sms", ep)
		voice := e.provider(t, "voice", ep)
		form := sms("SM1", "+15551230001", "hi")
		sig := twilio.Signature([]byte(authToken), p.ingress, form)
		post := func(path, body string, headers ...string) *response {
			return e.do(http.MethodPost, path, "", body, append([]string{"Content-Type", twilio.ContentType}, headers...)...)
		}
		tampered := sms("SM1", "+15551230001", "hi!")
		for name, c := range map[string]struct {
			r      *response
			status int
			code   string
			param  string
		}{
			"no signature":           {post(p.path, form.Encode()), 403, "invalid_provider_signature", ""},
			"an empty signature":     {post(p.path, form.Encode(), twilio.HeaderSignature, ""), 403, "invalid_provider_signature", ""},
			"another auth token":     {e.twilioPost(p.path, p.ingress, "fedcba9876543210fedcba9876543210", form), 403, "invalid_provider_signature", ""},
			"another URL signed":     {e.twilioPost(p.path, strings.Replace(p.ingress, "http://", "https://", 1), authToken, form), 403, "invalid_provider_signature", ""},
			"another binding's URL":  {e.twilioPost(other.path, p.ingress, authToken, form), 403, "invalid_provider_signature", ""},
			"a query not signed":     {e.twilioPost(p.path+"?x=1", p.ingress, authToken, form), 403, "invalid_provider_signature", ""},
			"a tampered body":        {post(p.path, tampered.Encode(), twilio.HeaderSignature, sig), 403, "invalid_provider_signature", ""},
			"JSON":                   {e.do(http.MethodPost, p.path, "", map[string]any{"From": "+1"}), 400, "invalid_content_type", ""},
			"not a form encoding":    {post(p.path, "From=%zz", twilio.HeaderSignature, sig), 400, "invalid_request", ""},
			"over the size limit":    {post(p.path, "Body="+strings.Repeat("x", 256<<10)), 413, "request_too_large", ""},
			"no MessageSid":          {e.twilioPost(p.path, p.ingress, authToken, url.Values{"From": {"+1"}}), 400, "missing_field", "MessageSid"},
			"no From":                {e.twilioPost(p.path, p.ingress, authToken, url.Values{"MessageSid": {"SM9"}}), 400, "missing_field", "From"},
			"NumMedia over 10":       {e.twilioPost(p.path, p.ingress, authToken, sms("SM9", "+1", "", "NumMedia", "11")), 400, "invalid_field", "NumMedia"},
			"a media link not https": {e.twilioPost(p.path, p.ingress, authToken, sms("SM9", "+1", "", "NumMedia", "1", "MediaUrl0", "file:///etc/passwd")), 400, "invalid_field", "MediaUrl0"},
			"a NUL in the body":      {e.twilioPost(p.path, p.ingress, authToken, sms("SM9", "+1", "a\x00b")), 400, "invalid_field", "Body"},
			"a From of two lines":    {e.twilioPost(p.path, p.ingress, authToken, sms("SM9", "+1\n+2", "")), 400, "invalid_field", "From"},
			"an unknown token":       {e.twilioPost("/in/sms/in_nope", e.srv.URL+"/in/sms/in_nope", authToken, form), 404, "not_found", ""},
			"a voice token":          {e.twilioPost(strings.Replace(voice.path, "/in/voice/", "/in/sms/", 1), strings.Replace(voice.ingress, "/in/voice/", "/in/sms/", 1), authToken, form), 404, "not_found", ""},
		} {
			if c.r.Status != c.status || c.r.ErrorCode(t) != c.code {
				t.Errorf("%s: %d %s, want %d %s: %s", name, c.r.Status, c.r.ErrorCode(t), c.status, c.code, c.r.Body)
			}
			if got, _ := jsonAt(c.r.JSON(t), "error", "param").(string); got != c.param {
				t.Errorf("%s: param %q, want %q", name, got, c.param)
			}
		}
		if convs := e.conversations(t, ""); len(convs) != 0 || len(e.listWork(t, "")) != 0 {
			t.Fatalf("refused requests recorded %v", convs)
		}
		// A deleted binding stops answering.
		wantJSON(t, "delete binding", e.do(http.MethodDelete, tenantPath+"/bindings/"+p.bindingID, e.operatorToken, nil), http.StatusNoContent)
		expectRefused(t, "deleted binding", e.twilioPost(p.path, p.ingress, authToken, form), http.StatusNotFound, "not_found")
		if len(e.conversations(t, "")) != 0 {
			t.Fatal("a deleted binding recorded an event")
		}
	})
}

// TestProviderSignsThePublicURL: behind a proxy, the provider signs the
// public ingress URL (AGENTOWL_PUBLIC_URL and the path, query included),
// not the address the server listens on.
func TestProviderSignsThePublicURL(t *testing.T) {
	t.Parallel()
	for _, b := range storetest.Backends(t) {
		t.Run(b.Name, func(t *testing.T) {
			t.Parallel()
			e := setupWorkWith(t, b, work.Config{PublicURL: "https://agentowl.example/owl"}, ingress.Config{})
			rt := newRuntime(t, e)
			ep := e.endpoint(t, rt, true)["id"].(string)
			_, u := e.providerBinding(t, "sms", ep)
			if !strings.HasPrefix(u, "https://agentowl.example/owl/in/sms/in_") {
				t.Fatalf("ingress URL %s is not under the public URL", u)
			}
			path := strings.TrimPrefix(u, "https://agentowl.example/owl") // the proxy strips its prefix
			expectRefused(t, "signed over the listening address", e.twilioPost(path, e.srv.URL+path, authToken, sms("SM1", "+1", "x")),
				http.StatusForbidden, "invalid_provider_signature")
			if r := e.twilioPost(path, u, authToken, sms("SM1", "+1", "x")); r.Status != http.StatusOK {
				t.Fatalf("signed over the public URL: %d %s", r.Status, r.Body)
			}
			// A webhook URL configured with a query string is signed with it.
			if r := e.twilioPost(path+"?tag=a%20b", u+"?tag=a%20b", authToken, sms("SM2", "+1", "y")); r.Status != http.StatusOK {
				t.Fatalf("signed with its query: %d %s", r.Status, r.Body)
			}
			if n := len(e.listWork(t, "")); n != 2 {
				t.Fatalf("%d work, want 2", n)
			}
		})
	}
}

func call(sid, status string, more ...string) url.Values {
	v := url.Values{"CallSid": {sid}, "AccountSid": {"AC0001"}, "From": {"+15551230001"}, "To": {"+15550000000"},
		"Direction": {"inbound"}, "ApiVersion": {"2010-04-01"}}
	if status != "" {
		v.Set("CallStatus", status)
	}
	for i := 0; i+1 < len(more); i += 2 {
		v.Set(more[i], more[i+1])
	}
	return v
}

// TestVoiceCallSession: a call's lifecycle events form one conversation. A
// storm of status callbacks, concurrent and repeated, hands off one work
// (the call's first event); the call's end, its completed recording and
// its transcription become work too; everything else is recorded only.
func TestVoiceCallSession(t *testing.T) {
	parallelWork(t, func(t *testing.T, e *workEnv) {
		recordings, fetched := linkTarget(t)
		rt := newRuntime(t, e)
		ep := e.endpoint(t, rt, true)["id"].(string)
		p := e.provider(t, "voice", ep)

		// The storm: 30 concurrent requests, 10 of each status, before the
		// call is answered.
		var wg sync.WaitGroup
		for i := range 30 {
			status := []string{"ringing", "queued", "in-progress"}[i%3]
			wg.Go(func() { p.send(t, call("CA1", status)) })
		}
		wg.Wait()
		convs := e.conversations(t, "channel=voice")
		if len(convs) != 1 || convs[0]["key"] != "CA1" {
			t.Fatalf("conversations after the storm = %v", convs)
		}
		conv := convs[0]["id"].(string)
		evs := e.conversationEvents(t, conv)
		if len(evs) != 3 {
			t.Fatalf("%d events after the storm, want one per status: %v", len(evs), evs)
		}
		if n := len(e.listWork(t, "")); n != 1 {
			t.Fatalf("%d work after the storm, want 1", n)
		}
		recorded := 0
		for _, ev := range evs {
			if ev["handoff"] == "recorded" {
				recorded++
				if len(ev["work"].([]any)) != 0 || ev["follow_up"] != true {
					t.Errorf("a recorded lifecycle event = %v", ev)
				}
			}
		}
		if recorded != 2 {
			t.Fatalf("%d events recorded only, want 2: %v", recorded, evs)
		}

		// The end of the call, the recording and the transcription: work.
		p.send(t, call("CA1", "completed", "CallDuration", "42"))
		p.send(t, call("CA1", "completed", "CallDuration", "42")) // the provider's retry
		recURL := recordings + "/Recordings/RE1"
		p.send(t, url.Values{"CallSid": {"CA1"}, "AccountSid": {"AC0001"}, "RecordingSid": {"RE1"}, "RecordingUrl": {recURL},
			"RecordingStatus": {"in-progress"}})
		p.send(t, url.Values{"CallSid": {"CA1"}, "AccountSid": {"AC0001"}, "RecordingSid": {"RE1"}, "RecordingUrl": {recURL},
			"RecordingStatus": {"completed"}, "RecordingDuration": {"40"}})
		p.send(t, call("CA1", "completed", "RecordingSid", "RE1", "RecordingUrl", recURL, "TranscriptionSid", "TR1",
			"TranscriptionStatus", "completed", "TranscriptionText", "please call me back"))
		evs = e.conversationEvents(t, conv)
		if len(evs) != 7 {
			t.Fatalf("%d events, want 7: %v", len(evs), evs)
		}
		if n := len(e.listWork(t, "")); n != 4 {
			t.Fatalf("%d work, want 4 (first event, completed, recording, transcription)", n)
		}
		ds := rt.wait(t, 4)
		byKind := map[string]*delivered{}
		for _, d := range ds {
			k, _ := jsonAt(d.Doc, "event", "payload", "event").(string)
			if st, _ := jsonAt(d.Doc, "event", "payload", "call_status").(string); k == "status" && st == "completed" {
				k = "completed"
			}
			byKind[k] = d
			if jsonAt(d.Doc, "work", "conversation_id") != conv || jsonAt(d.Doc, "event", "channel") != "voice" {
				t.Errorf("handoff outside the call's conversation: %s", d.Body)
			}
		}
		if d := byKind["completed"]; d == nil || jsonAt(d.Doc, "event", "payload", "call_duration") != "42" ||
			jsonAt(d.Doc, "event", "follow_up") != true {
			t.Fatalf("completed handoff = %v", d)
		}
		rec := byKind["recording"]
		if rec == nil || jsonAt(rec.Doc, "event", "payload", "recording", "url") != recURL ||
			jsonAt(rec.Doc, "event", "payload", "recording", "duration") != "40" || jsonAt(rec.Doc, "event", "sender") != "" {
			t.Fatalf("recording handoff = %v", rec)
		}
		if atts := jsonAt(rec.Doc, "event", "attachments").([]any); len(atts) != 1 ||
			jsonAt(atts[0].(map[string]any), "url") != recURL || jsonAt(atts[0].(map[string]any), "recording_sid") != "RE1" {
			t.Fatalf("recording attachments = %v", atts)
		}
		if tr := byKind["transcription"]; tr == nil ||
			jsonAt(tr.Doc, "event", "payload", "transcription", "text") != "please call me back" {
			t.Fatalf("transcription handoff = %v", tr)
		}
		// Another call is another conversation.
		p.send(t, call("CA2", "ringing"))
		if n := len(e.conversations(t, "channel=voice")); n != 2 {
			t.Fatalf("%d voice conversations, want 2", n)
		}
		if n := fetched.Load(); n != 0 {
			t.Errorf("the recording was fetched %d times", n)
		}
		expectRefused(t, "no CallSid", e.twilioPost(p.path, p.ingress, authToken, url.Values{"CallStatus": {"ringing"}}),
			http.StatusBadRequest, "missing_field")
		expectRefused(t, "unsigned", e.do(http.MethodPost, p.path, "", call("CA3", "ringing").Encode(), "Content-Type", twilio.ContentType),
			http.StatusForbidden, "invalid_provider_signature")
		if n := len(e.conversations(t, "")); n != 2 {
			t.Fatalf("refused calls recorded: %d conversations", n)
		}
	})
}
