package twilio_test

import (
	"errors"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/agentowl/agentowl/internal/ingress/twilio"
)

// Twilio's documented example of request validation ("Secure your webhooks"
// and its helper libraries' docs): auth token 12345, the voice request to
// https://mycompany.com/myapp.php?foo=1&bar=2 with these parameters.
var docForm = url.Values{
	"CallSid": {"CA1234567890ABCDE"},
	"Caller":  {"+12349013030"},
	"Digits":  {"1234"},
	"From":    {"+12349013030"},
	"To":      {"+18005551212"},
}

const (
	docToken     = "12345"
	docURL       = "https://mycompany.com/myapp.php?foo=1&bar=2"
	docSignature = "0/KCTR6DLpKmkAf8muzZqo1nDgQ="
)

func TestSignatureDocumentedExamples(t *testing.T) {
	t.Parallel()
	if got := twilio.Signature([]byte(docToken), docURL, docForm); got != docSignature {
		t.Errorf("signature of the documented example = %s, want %s", got, docSignature)
	}
	// The older edition of the same example, with other phone numbers.
	older := url.Values{"CallSid": {"CA1234567890ABCDE"}, "Caller": {"+14158675309"}, "Digits": {"1234"},
		"From": {"+14158675309"}, "To": {"+18005551212"}}
	if got := twilio.Signature([]byte(docToken), docURL, older); got != "RSOYDt4T1cUTdK1PDd93/VVr8B8=" {
		t.Errorf("signature of the older documented example = %s", got)
	}
	if !twilio.Verify([]byte(docToken), docURL, docForm, docSignature) {
		t.Error("the documented example does not verify")
	}
	// Surrounding whitespace of a header value is not part of it.
	if !twilio.Verify([]byte(docToken), docURL, docForm, " "+docSignature+" ") {
		t.Error("a signature with surrounding spaces does not verify")
	}
}

// Anything that changes what was signed, or the key, fails.
func TestVerifyRefuses(t *testing.T) {
	t.Parallel()
	changed := func(f func(v url.Values)) url.Values {
		v := url.Values{}
		for k, vs := range docForm {
			v[k] = append([]string(nil), vs...)
		}
		f(v)
		return v
	}
	for name, c := range map[string]struct {
		token, url, sig string
		form            url.Values
	}{
		"no signature":        {docToken, docURL, "", docForm},
		"another token":       {"54321", docURL, docSignature, docForm},
		"another URL":         {docToken, "https://mycompany.com/myapp.php?foo=1&bar=3", docSignature, docForm},
		"http for https":      {docToken, "http://mycompany.com/myapp.php?foo=1&bar=2", docSignature, docForm},
		"no query string":     {docToken, "https://mycompany.com/myapp.php", docSignature, docForm},
		"a changed value":     {docToken, docURL, docSignature, changed(func(v url.Values) { v.Set("Digits", "1235") })},
		"an added parameter":  {docToken, docURL, docSignature, changed(func(v url.Values) { v.Set("Body", "hi") })},
		"a removed parameter": {docToken, docURL, docSignature, changed(func(v url.Values) { v.Del("Caller") })},
		"a value moved to another name": {docToken, docURL, docSignature, changed(func(v url.Values) {
			v.Set("Caller", "+123490130301234")
			v.Del("Digits")
		})},
		"a truncated signature": {docToken, docURL, docSignature[:len(docSignature)-2], docForm},
		"a hex signature":       {docToken, docURL, "d3f28249...", docForm},
	} {
		if twilio.Verify([]byte(c.token), c.url, c.form, c.sig) {
			t.Errorf("%s: verified", name)
		}
	}
}

// Parameters are signed in order of name whatever their order in the body;
// a name given twice contributes each value, in order of value.
func TestSignatureOrder(t *testing.T) {
	t.Parallel()
	a, _ := url.ParseQuery("To=%2B1&From=%2B2&Body=hi")
	b, _ := url.ParseQuery("Body=hi&From=%2B2&To=%2B1")
	if twilio.Signature([]byte("k"), "https://x.example/in", a) != twilio.Signature([]byte("k"), "https://x.example/in", b) {
		t.Error("the body's parameter order changes the signature")
	}
	m1, _ := url.ParseQuery("A=2&A=1")
	m2, _ := url.ParseQuery("A=1&A=2")
	if twilio.Signature([]byte("k"), "u", m1) != twilio.Signature([]byte("k"), "u", m2) {
		t.Error("the order of a repeated name's values changes the signature")
	}
	if twilio.Signature([]byte("k"), "u", m1) == twilio.Signature([]byte("k"), "u", url.Values{"A": {"1"}}) {
		t.Error("a repeated value is not signed")
	}
}

func fieldOf(t *testing.T, err error) *twilio.FieldError {
	t.Helper()
	var fe *twilio.FieldError
	if !errors.As(err, &fe) {
		t.Fatalf("error %v is not a field error", err)
	}
	return fe
}

func TestParseMessage(t *testing.T) {
	t.Parallel()
	form := url.Values{"MessageSid": {"SM1"}, "From": {"+15551230001"}, "To": {"+15559870002"}, "Body": {"hi\nthere"},
		"SmsStatus": {"received"}, "NumMedia": {"2"}, "MediaUrl0": {"https://api.twilio.com/m/0"}, "MediaContentType0": {"image/jpeg"},
		"MediaUrl1": {"https://api.twilio.com/m/1"}}
	m, err := twilio.ParseMessage(form)
	if err != nil {
		t.Fatal(err)
	}
	if m.SID != "SM1" || m.From != "+15551230001" || m.To != "+15559870002" || m.Body != "hi\nthere" || !m.Incoming() ||
		len(m.Media) != 2 || m.Media[0] != (twilio.Media{URL: "https://api.twilio.com/m/0", ContentType: "image/jpeg"}) ||
		m.Media[1].URL != "https://api.twilio.com/m/1" {
		t.Fatalf("message = %+v", m)
	}
	// Older requests name the message SmsSid.
	if m, err := twilio.ParseMessage(url.Values{"SmsSid": {"SM2"}, "From": {"+1"}}); err != nil || m.SID != "SM2" {
		t.Fatalf("SmsSid: %+v, %v", m, err)
	}
	// A status callback of an outbound message is told apart.
	if m, err := twilio.ParseMessage(url.Values{"MessageSid": {"SM3"}, "MessageStatus": {"delivered"}}); err != nil || m.Incoming() {
		t.Fatalf("status callback: %+v, %v", m, err)
	}

	for name, c := range map[string]struct {
		form    string
		field   string
		missing bool
	}{
		"no MessageSid":               {"From=%2B1", "MessageSid", true},
		"no From":                     {"MessageSid=SM1", "From", true},
		"NumMedia not a number":       {"MessageSid=SM1&From=%2B1&NumMedia=two", "NumMedia", false},
		"NumMedia negative":           {"MessageSid=SM1&From=%2B1&NumMedia=-1", "NumMedia", false},
		"NumMedia over the limit":     {"MessageSid=SM1&From=%2B1&NumMedia=" + strconv.Itoa(twilio.MaxMedia+1), "NumMedia", false},
		"a media link missing":        {"MessageSid=SM1&From=%2B1&NumMedia=1", "MediaUrl0", true},
		"a media link not http(s)":    {"MessageSid=SM1&From=%2B1&NumMedia=1&MediaUrl0=file%3A%2F%2F%2Fetc%2Fpasswd", "MediaUrl0", false},
		"a media link with a user":    {"MessageSid=SM1&From=%2B1&NumMedia=1&MediaUrl0=https%3A%2F%2Fu%3Ap%40x.example%2F", "MediaUrl0", false},
		"a relative media link":       {"MessageSid=SM1&From=%2B1&NumMedia=1&MediaUrl0=%2Fm%2F0", "MediaUrl0", false},
		"an overlong MessageSid":      {"From=%2B1&MessageSid=" + strings.Repeat("S", twilio.MaxSIDBytes+1), "MessageSid", false},
		"a From of two lines":         {"MessageSid=SM1&From=%2B1%0A%2B2", "From", false},
		"an overlong From":            {"MessageSid=SM1&From=" + strings.Repeat("1", twilio.MaxAddressBytes+1), "From", false},
		"an overlong media link":      {"MessageSid=SM1&From=%2B1&NumMedia=1&MediaUrl0=https%3A%2F%2Fx.example%2F" + strings.Repeat("a", twilio.MaxURLBytes), "MediaUrl0", false},
		"a media type of two lines":   {"MessageSid=SM1&From=%2B1&NumMedia=1&MediaUrl0=https%3A%2F%2Fx.example%2F&MediaContentType0=a%0Db", "MediaContentType0", false},
		"a status callback's bad SID": {"MessageStatus=sent&MessageSid=" + strings.Repeat("S", 65), "MessageSid", false},
	} {
		form, err := url.ParseQuery(c.form)
		if err != nil {
			t.Fatal(err)
		}
		_, err = twilio.ParseMessage(form)
		if fe := fieldOf(t, err); fe.Field != c.field || fe.Missing != c.missing {
			t.Errorf("%s: %+v, want field %s (missing %v)", name, fe, c.field, c.missing)
		}
	}
}

func TestCheckText(t *testing.T) {
	t.Parallel()
	if err := twilio.CheckText(url.Values{"Body": {"ok ✓\n"}}); err != nil {
		t.Fatal(err)
	}
	if fe := fieldOf(t, twilio.CheckText(url.Values{"Body": {"a\x00b"}})); fe.Field != "Body" {
		t.Errorf("NUL: %+v", fe)
	}
	if fe := fieldOf(t, twilio.CheckText(url.Values{"Body": {"\xff"}})); fe.Field != "Body" {
		t.Errorf("not UTF-8: %+v", fe)
	}
	if fe := fieldOf(t, twilio.CheckText(url.Values{"\xff": {"x"}})); fe.Field != "form" {
		t.Errorf("a name not UTF-8: %+v", fe)
	}
}

func TestParseCall(t *testing.T) {
	t.Parallel()
	parse := func(q string) *twilio.Call {
		t.Helper()
		form, err := url.ParseQuery(q)
		if err != nil {
			t.Fatal(err)
		}
		c, err := twilio.ParseCall(form)
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		return c
	}
	ringing := parse("CallSid=CA1&CallStatus=ringing&From=%2B1&To=%2B2&Direction=inbound")
	if ringing.Kind() != twilio.KindStatus || ringing.Ended() || ringing.DedupeKey() != "CA1:status:ringing" ||
		ringing.From != "+1" || ringing.To != "+2" || ringing.Direction != "inbound" {
		t.Fatalf("ringing = %+v", ringing)
	}
	for _, st := range []string{"completed", "busy", "failed", "no-answer", "canceled"} {
		if c := parse("CallSid=CA1&CallStatus=" + st); !c.Ended() || c.DedupeKey() != "CA1:status:"+st {
			t.Errorf("%s: ended %v, key %s", st, c.Ended(), c.DedupeKey())
		}
	}
	for _, st := range []string{"queued", "initiated", "ringing", "in-progress", "answered", ""} {
		if parse("CallSid=CA1&CallStatus=" + st).Ended() {
			t.Errorf("%q ends the call", st)
		}
	}
	rec := parse("CallSid=CA1&RecordingSid=RE1&RecordingUrl=https%3A%2F%2Fapi.twilio.com%2Fr%2FRE1&RecordingStatus=completed&RecordingDuration=12")
	if rec.Kind() != twilio.KindRecording || rec.DedupeKey() != "CA1:recording:RE1:completed" ||
		*rec.Recording != (twilio.Recording{SID: "RE1", URL: "https://api.twilio.com/r/RE1", Status: "completed", Duration: "12"}) {
		t.Fatalf("recording = %+v %+v", rec, rec.Recording)
	}
	tr := parse("CallSid=CA1&CallStatus=completed&RecordingSid=RE1&RecordingUrl=https%3A%2F%2Fapi.twilio.com%2Fr%2FRE1" +
		"&TranscriptionSid=TR1&TranscriptionStatus=completed&TranscriptionText=call+me+back&TranscriptionUrl=https%3A%2F%2Fapi.twilio.com%2Ft%2FTR1")
	if tr.Kind() != twilio.KindTranscription || tr.DedupeKey() != "CA1:transcription:TR1:completed" ||
		*tr.Transcription != (twilio.Transcription{SID: "TR1", Status: "completed", Text: "call me back", URL: "https://api.twilio.com/t/TR1"}) {
		t.Fatalf("transcription = %+v %+v", tr, tr.Transcription)
	}
	for name, c := range map[string]struct{ form, field string }{
		"no CallSid":                    {"CallStatus=ringing", "CallSid"},
		"a status of two lines":         {"CallSid=CA1&CallStatus=a%0Ab", "CallStatus"},
		"a recording link not http":     {"CallSid=CA1&RecordingUrl=ftp%3A%2F%2Fx.example%2Fr", "RecordingUrl"},
		"a transcription link not http": {"CallSid=CA1&TranscriptionSid=TR1&TranscriptionUrl=x", "TranscriptionUrl"},
		"an overlong To":                {"CallSid=CA1&To=" + strings.Repeat("1", twilio.MaxAddressBytes+1), "To"},
	} {
		form, _ := url.ParseQuery(c.form)
		_, err := twilio.ParseCall(form)
		if fe := fieldOf(t, err); fe.Field != c.field {
			t.Errorf("%s: %+v, want field %s", name, fe, c.field)
		}
	}
}

// FuzzParse feeds arbitrary form bodies to the parsers: they never panic,
// and what they accept keeps its documented bounds.
func FuzzParse(f *testing.F) {
	f.Add("MessageSid=SM1&From=%2B1&To=%2B2&Body=hi&NumMedia=1&MediaUrl0=https%3A%2F%2Fx.example%2Fm")
	f.Add("CallSid=CA1&CallStatus=completed&RecordingSid=RE1&RecordingUrl=https%3A%2F%2Fx.example%2Fr&TranscriptionSid=TR1")
	f.Add("NumMedia=99999999999999999999&MessageSid=S&From=F")
	f.Add("%zz=1&&=&a")
	f.Fuzz(func(t *testing.T, body string) {
		form, err := url.ParseQuery(body)
		if err != nil {
			return
		}
		_ = twilio.CheckText(form)
		if m, err := twilio.ParseMessage(form); err == nil {
			if m.SID == "" || len(m.SID) > twilio.MaxSIDBytes || len(m.Media) > twilio.MaxMedia || (m.Incoming() && m.From == "") {
				t.Fatalf("accepted message out of bounds: %+v", m)
			}
		}
		if c, err := twilio.ParseCall(form); err == nil {
			if c.SID == "" || !strings.HasPrefix(c.DedupeKey(), c.SID+":") {
				t.Fatalf("accepted call out of bounds: %+v", c)
			}
		}
		_ = twilio.Signature([]byte("k"), "https://x.example/in", form)
	})
}
