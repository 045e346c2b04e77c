package twilio

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"github.com/agentowl/agentowl"
)

// Limits of the fields read from a request (docs/limits.md). The request
// body as a whole is bounded by the ingress route.
const (
	// MaxMedia is the most media links one message carries (Twilio's MMS
	// limit).
	MaxMedia = 10
	// MaxSIDBytes bounds a provider identifier (MessageSid, CallSid, …).
	MaxSIDBytes = 64
	// MaxAddressBytes bounds From and To: a phone number, a client or SIP
	// identity, a channel address such as whatsapp:+1….
	MaxAddressBytes = 256
	// MaxURLBytes bounds a media, recording or transcription link.
	MaxURLBytes = 2048
	// MaxShortBytes bounds short fields: statuses, durations, content types.
	MaxShortBytes = 128
)

// FieldError is a request field that is missing or malformed.
type FieldError struct {
	Field   string
	Missing bool
	Reason  string
}

func (e *FieldError) Error() string { return fmt.Sprintf("twilio: %s %s", e.Field, e.Reason) }

func missing(field string) error {
	return &FieldError{Field: field, Missing: true, Reason: "is required"}
}

// CheckText refuses a form whose names or values are not text
// (agentowl.IsText, the rule of every surface): UTF-8 without NUL. Every
// value is stored and forwarded as JSON text.
func CheckText(form url.Values) error {
	for name, vs := range form {
		if !agentowl.IsText(name) {
			return &FieldError{Field: "form", Reason: "has a parameter name that is not UTF-8 text"}
		}
		for _, v := range vs {
			if !agentowl.IsText(v) {
				return &FieldError{Field: name, Reason: "must be UTF-8 text"}
			}
		}
	}
	return nil
}

// line reads an optional one-line field of at most max bytes.
func line(form url.Values, field string, max int) (string, error) {
	v := strings.TrimSpace(form.Get(field))
	if len(v) > max || strings.ContainsFunc(v, func(r rune) bool { return r < ' ' || r == 0x7f }) {
		return "", &FieldError{Field: field, Reason: fmt.Sprintf("must be one line of at most %d bytes", max)}
	}
	return v, nil
}

// required reads a one-line field that must be present.
func required(form url.Values, field string, max int) (string, error) {
	v, err := line(form, field, max)
	if err == nil && v == "" {
		return "", missing(field)
	}
	return v, err
}

// link reads an optional absolute http(s) URL. Links are recorded, never
// fetched.
func link(form url.Values, field string) (string, error) {
	v, err := line(form, field, MaxURLBytes)
	if err != nil || v == "" {
		return v, err
	}
	u, perr := url.Parse(v)
	if perr != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User != nil {
		return "", &FieldError{Field: field, Reason: "must be an absolute http(s) URL without credentials"}
	}
	return v, nil
}

// Media is one media item of a message, recorded as a link.
type Media struct {
	URL         string `json:"url"`
	ContentType string `json:"content_type,omitempty"`
}

// Message is an SMS or MMS webhook: an incoming message, or a status
// callback of an outbound one (Incoming tells them apart).
type Message struct {
	SID  string // MessageSid (SmsSid on older requests)
	From string
	To   string
	Body string
	// Status is SmsStatus, else MessageStatus: "received" for an incoming
	// message.
	Status string
	Media  []Media
}

// Incoming reports whether the request is an incoming message rather than
// a status callback of a message sent from the account.
func (m *Message) Incoming() bool { return m.Status == "" || m.Status == "received" }

// ParseMessage reads a message webhook's fields: MessageSid and From are
// required; NumMedia (0 to MaxMedia) media links MediaUrlN with their
// MediaContentTypeN.
func ParseMessage(form url.Values) (*Message, error) {
	var m Message
	var err error
	sidField := "MessageSid"
	if form.Get(sidField) == "" && form.Get("SmsSid") != "" {
		sidField = "SmsSid"
	}
	if m.SID, err = required(form, sidField, MaxSIDBytes); err != nil {
		return nil, err
	}
	statusField := "SmsStatus"
	if form.Get(statusField) == "" {
		statusField = "MessageStatus"
	}
	if m.Status, err = line(form, statusField, MaxShortBytes); err != nil {
		return nil, err
	}
	if m.To, err = line(form, "To", MaxAddressBytes); err != nil {
		return nil, err
	}
	m.Body = form.Get("Body")
	if !m.Incoming() {
		m.From, err = line(form, "From", MaxAddressBytes)
		return &m, err
	}
	if m.From, err = required(form, "From", MaxAddressBytes); err != nil {
		return nil, err
	}
	n := 0
	if v := strings.TrimSpace(form.Get("NumMedia")); v != "" {
		n, err = strconv.Atoi(v)
		if err != nil || n < 0 || n > MaxMedia {
			return nil, &FieldError{Field: "NumMedia", Reason: fmt.Sprintf("must be a whole number from 0 to %d", MaxMedia)}
		}
	}
	for i := range n {
		field := "MediaUrl" + strconv.Itoa(i)
		u, err := link(form, field)
		if err != nil {
			return nil, err
		}
		if u == "" {
			return nil, missing(field)
		}
		ct, err := line(form, "MediaContentType"+strconv.Itoa(i), MaxShortBytes)
		if err != nil {
			return nil, err
		}
		m.Media = append(m.Media, Media{URL: u, ContentType: ct})
	}
	return &m, nil
}

// Call event kinds.
const (
	KindStatus        = "status"        // the incoming-call request or a status callback
	KindRecording     = "recording"     // a recording status callback (or a <Record> action)
	KindTranscription = "transcription" // a transcription callback
)

// Recording is a call recording, recorded as a link.
type Recording struct {
	SID      string `json:"sid,omitempty"`
	URL      string `json:"url,omitempty"`
	Status   string `json:"status,omitempty"`
	Duration string `json:"duration,omitempty"`
}

// Transcription is a recording's transcription.
type Transcription struct {
	SID    string `json:"sid,omitempty"`
	Status string `json:"status,omitempty"`
	Text   string `json:"text,omitempty"`
	URL    string `json:"url,omitempty"`
}

// Call is one voice webhook: a lifecycle event of the call CallSid.
type Call struct {
	SID       string
	Status    string // CallStatus: queued, ringing, in-progress, completed, busy, failed, no-answer, canceled
	From      string
	To        string
	Direction string
	Duration  string // CallDuration, seconds, on a finished call
	// Recording is set on recording and transcription callbacks.
	Recording *Recording
	// Transcription is set on transcription callbacks.
	Transcription *Transcription
}

// Kind is what the event reports: KindTranscription when it carries a
// TranscriptionSid, KindRecording when it carries a recording, KindStatus
// otherwise.
func (c *Call) Kind() string {
	switch {
	case c.Transcription != nil:
		return KindTranscription
	case c.Recording != nil:
		return KindRecording
	}
	return KindStatus
}

// Ended reports whether the event's CallStatus ends the call.
func (c *Call) Ended() bool {
	switch c.Status {
	case "completed", "busy", "failed", "no-answer", "canceled":
		return true
	}
	return false
}

// DedupeKey identifies one lifecycle event of the call whatever the number
// of times the provider sends it: a status by CallSid and CallStatus, a
// recording by its RecordingSid and status, a transcription by its
// TranscriptionSid and status.
func (c *Call) DedupeKey() string {
	switch c.Kind() {
	case KindTranscription:
		return c.SID + ":transcription:" + c.Transcription.SID + ":" + c.Transcription.Status
	case KindRecording:
		return c.SID + ":recording:" + c.Recording.SID + ":" + c.Recording.Status
	}
	return c.SID + ":status:" + c.Status
}

// ParseCall reads a voice webhook's fields; CallSid is required.
func ParseCall(form url.Values) (*Call, error) {
	var c Call
	var err error
	if c.SID, err = required(form, "CallSid", MaxSIDBytes); err != nil {
		return nil, err
	}
	for field, dst := range map[string]*string{"CallStatus": &c.Status, "Direction": &c.Direction, "CallDuration": &c.Duration} {
		if *dst, err = line(form, field, MaxShortBytes); err != nil {
			return nil, err
		}
	}
	for field, dst := range map[string]*string{"From": &c.From, "To": &c.To} {
		if *dst, err = line(form, field, MaxAddressBytes); err != nil {
			return nil, err
		}
	}
	var r Recording
	if r.SID, err = line(form, "RecordingSid", MaxSIDBytes); err != nil {
		return nil, err
	}
	if r.URL, err = link(form, "RecordingUrl"); err != nil {
		return nil, err
	}
	for field, dst := range map[string]*string{"RecordingStatus": &r.Status, "RecordingDuration": &r.Duration} {
		if *dst, err = line(form, field, MaxShortBytes); err != nil {
			return nil, err
		}
	}
	if r != (Recording{}) {
		c.Recording = &r
	}
	var tr Transcription
	if tr.SID, err = line(form, "TranscriptionSid", MaxSIDBytes); err != nil {
		return nil, err
	}
	if tr.SID != "" {
		if tr.Status, err = line(form, "TranscriptionStatus", MaxShortBytes); err != nil {
			return nil, err
		}
		if tr.URL, err = link(form, "TranscriptionUrl"); err != nil {
			return nil, err
		}
		tr.Text = form.Get("TranscriptionText")
		c.Transcription = &tr
	}
	return &c, nil
}
