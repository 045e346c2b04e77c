package work

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/agentowl/agentowl"
	"github.com/agentowl/agentowl/agentwork"
)

// FuzzHandoffBody checks that the envelope assembled around an event
// encoded before its transaction is byte for byte what json.Marshal writes
// for the same document (the wire format, and the bytes retries sign).
func FuzzHandoffBody(f *testing.F) {
	f.Add("alice@example.org", "Subject", "hi <b>&</b>", `{"text": "a\u00e9 <x>", "n": [1, 2.5e3, null, true]}`, `[]`, false, "cred_1", "")
	f.Add("+15550100", "", "", `{}`, ``, true, "", "sess_1")
	f.Add("\xff\xfe bad utf-8 \u2028", "X-\u2029", "\x00", "\n {\"a\" :\t\"\\u0041\\/\"}\n", `[{"name":"a.txt","size":3}]`, true, "", "")
	f.Add("", "k", "v", `not json`, `[]`, false, "", "")
	f.Add("", "k", "v", `{}`, `[`, false, "", "")
	f.Add("", "", "", ``, `[]`, false, "c", "s")
	f.Add("bob@example.org", "", "", `{"text": "`+strings.Repeat("long line \u00e9 ", 400)+`"}`, `[]`, false, "c", "") // referred to
	f.Fuzz(func(t *testing.T, sender, hk, hv, payload, attachments string, followUp bool, cred, session string) {
		var headers map[string][]string
		if hk != "" {
			headers = map[string][]string{hk: {hv, hv + "2"}, "b": nil}
		}
		ev := &agentowl.Event{ID: "evt_1", Channel: "smtp", BindingID: "bnd_<1>", ConversationID: "conv_&", FollowUp: followUp,
			Sender: sender, ReceivedAt: time.Date(2026, 12, 2, 3, 4, 5, 6, time.UTC), Headers: headers,
			Payload: json.RawMessage(payload), Attachments: json.RawMessage(attachments)}
		if payload == "" {
			ev.Payload = nil
		}
		for _, block := range []*agentwork.Work{nil, {Version: agentwork.Version, WorkID: "work_1", ConversationID: "conv_&", Generation: 2,
			CallbackURL: "https://x.example/runtime/v1/work/work_1/callbacks?a=1&b=<2>", CredentialID: cred, RuntimeSessionID: session}} {
			d := agentwork.Handoff{ID: "d-1", Type: agentwork.EventType, CreatedAt: "2026-12-02T03:04:05Z", Event: ToWireEvent(ev), Work: block}
			want, wantErr := json.Marshal(d)
			check := func(ev *agentowl.Event, marshaled bool) {
				enc, err := EncodeEvent(ev, marshaled)
				var got []byte
				var ref *agentowl.PayloadRef
				if err == nil {
					got, ref, err = handoffBody(&d, enc)
				}
				if (err != nil) != (wantErr != nil) {
					t.Fatalf("marshaled %v: error %v, json.Marshal's %v", marshaled, err, wantErr)
				}
				if err == nil && !bytes.Equal(got, want) {
					t.Fatalf("marshaled %v: body\n%s\nwant (json.Marshal)\n%s", marshaled, got, want)
				}
				// Where the body refers to the stored payload, those bytes
				// are the payload as stored: the store splices it back.
				if ref != nil && (ref.EventID != ev.ID || ref.At+ref.Len > len(got) || !bytes.Equal(got[ref.At:ref.At+ref.Len], ev.Payload)) {
					t.Fatalf("marshaled %v: payload reference %+v does not locate the stored payload %q in\n%s", marshaled, *ref, ev.Payload, got)
				}
				if err == nil && marshaled && len(ev.Payload) >= referAtLeast && ref == nil {
					t.Fatalf("an adapter's payload carried as is must be referred to, not copied")
				}
			}
			check(ev, false)
			// An adapter's own encoding of the payload (a string, as the
			// email text) is carried as is.
			if wantErr == nil {
				text, _ := json.Marshal(map[string]string{"text": payload, "sender": sender})
				marshaled := *ev
				marshaled.Payload = text
				d.Event = ToWireEvent(&marshaled)
				want, wantErr = json.Marshal(d)
				check(&marshaled, true)
			}
		}
	})
}
