package ingress

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/agentowl/agentowl"
)

func TestMessageOf(t *testing.T) {
	email := &agentowl.Event{ID: "evt_1", Channel: ChannelSMTP, Sender: "ann@example.com",
		Payload: json.RawMessage(`{"subject":"Refund <b>now</b>","from":[{"name":"Ann","address":"ann@example.com"}],
			"to":[{"address":"support@example.com"}],"text":"","html":"<html><head><title>x</title><style>p{}</style></head><body><p>Hello &amp; <b>thanks</b></p><script>alert(1)</script><p>Order A-1</p></body></html>"}`),
		Attachments: json.RawMessage(`[{"part":"2"}]`)}
	m := MessageOf(email)
	if m.Subject != "Refund <b>now</b>" || m.Text != "Hello & thanks\n\nOrder A-1" || !m.FromHTML || m.Parts != 1 ||
		len(m.To) != 1 || m.To[0].Address != "support@example.com" || m.Line() != "Refund <b>now</b>" || m.Cut {
		t.Fatalf("email %+v", m)
	}
	sms := MessageOf(&agentowl.Event{Channel: ChannelSMS, Sender: "+15550001", Payload: json.RawMessage(`{"from":"+15550001","to":"+15550002","body":"\n Where is my order?\nthx"}`),
		Attachments: json.RawMessage(`[{"kind":"link","url":"https://api.twilio.com/m/1"}]`)})
	if sms.Recipient != "+15550002" || sms.Line() != "Where is my order?" || len(sms.Links) != 1 {
		t.Fatalf("sms %+v", sms)
	}
	call := MessageOf(&agentowl.Event{Channel: ChannelVoice, Payload: json.RawMessage(`{"event":"transcription","call_status":"completed","transcription":{"text":"Call me back"}}`)})
	if call.Text != "Call me back" || call.CallStatus != "completed" || call.Line() != "Call me back" {
		t.Fatalf("voice %+v", call)
	}
	hook := MessageOf(&agentowl.Event{Channel: ChannelWebhook, Payload: json.RawMessage(`{"n":1,"deep":{"a":[1,2]}}`)})
	if !strings.Contains(hook.Payload, "\n  \"deep\": {") || hook.Line() != `{ "n": 1, "deep": { "a": [ 1, 2 ] } }` {
		t.Fatalf("webhook %+v %q", hook, hook.Line())
	}
	// A digest's payload, cut inside the text (and inside an escape).
	cut := `{"subject":"Long","text":"first line\nsecond ` + strings.Repeat("é", agentowl.EventDigestBytes/2) + `\u00e`
	m = MessageOf(&agentowl.Event{Channel: ChannelCloudflareEmail, Payload: json.RawMessage(cut)})
	if m.Subject != "Long" || !strings.HasPrefix(m.Text, "first line\nsecond éé") || !m.Cut {
		t.Fatalf("cut %+v", m)
	}
	if m := MessageOf(&agentowl.Event{Channel: ChannelWebhook, Payload: json.RawMessage(`not json`)}); m.Payload != "not json" || m.Line() != "not json" {
		t.Fatalf("not JSON %+v", m)
	}
}

func TestHTMLText(t *testing.T) {
	for in, want := range map[string]string{
		`<p>a</p><p>b</p>`:                             "a\n\nb",
		`x<br>y<br/>z`:                                 "x\ny\nz",
		`<!-- c --><div>&lt;script&gt;</div>`:          "<script>",
		`<SCRIPT>bad()</SCRIPT>ok`:                     "ok",
		`<img src=x onerror=alert(1)>text`:             "text",
		`<table><tr><td>a</td><td>b</td></tr></table>`: "a b",
		`unclosed <b`:                                  "unclosed",
	} {
		if got := HTMLText(in); got != want {
			t.Errorf("HTMLText(%q) = %q, want %q", in, got, want)
		}
	}
}
