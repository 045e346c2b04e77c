package ingress

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"time"

	"github.com/agentowl/agentowl"
	"github.com/agentowl/agentowl/internal/ingress/twilio"
)

// The sms and voice channels: Twilio-compatible webhooks
// (docs/channels.md). Each request is checked with its X-Twilio-Signature
// before anything is read from it; media and recordings are recorded as
// links, never fetched.

// SMSWindow is the inactivity window of an SMS conversation: a message
// joins the open conversation of its binding and sender while the last
// message of it is less than SMSWindow old, and starts a new one after.
const SMSWindow = 24 * time.Hour

// ProviderRequest is an SMS or voice webhook as its route received it.
type ProviderRequest struct {
	// RequestURI is the path and query the request was sent to: the signed
	// URL is the public URL (AGENTOWL_PUBLIC_URL) followed by it, which is
	// the binding's ingress URL as the provider was configured with it.
	RequestURI string
	// Header is the request's header; it carries the signature.
	Header http.Header
	// Form is the request's form-encoded body.
	Form url.Values
}

// AcceptProvider stores one SMS or voice webhook received at binding b (from
// Admit) and, when it becomes work, hands it to the binding's endpoint, all
// committed before it returns. A request without a valid X-Twilio-Signature
// for the binding's auth token is invalid_provider_signature and stores
// nothing. A status callback of a message sent from the account stores
// nothing either: the answer is nil, without error.
func (s *Service) AcceptProvider(ctx context.Context, b *agentowl.Binding, req ProviderRequest) (*Accepted, error) {
	token, err := s.ProviderSecret(b)
	if err != nil {
		return nil, err
	}
	signed := s.work.Config().PublicURL + req.RequestURI
	if !twilio.Verify(token, signed, req.Form, req.Header.Get(twilio.HeaderSignature)) {
		return nil, agentowl.Errorf(agentowl.ECodeInvalidProviderSignature,
			"The request's X-Twilio-Signature is missing or does not match this binding's auth token and ingress URL.")
	}
	if err := twilio.CheckText(req.Form); err != nil {
		return nil, fieldError(err)
	}
	switch b.Channel {
	case ChannelSMS:
		return s.acceptSMS(ctx, b, req)
	case ChannelVoice:
		return s.acceptCall(ctx, b, req)
	}
	return nil, noSuchAddress()
}

// fieldError turns a request field's error into the caller's answer.
func fieldError(err error) error {
	var fe *twilio.FieldError
	if !errors.As(err, &fe) {
		return err
	}
	code := agentowl.ECodeInvalidField
	if fe.Missing {
		code = agentowl.ECodeMissingField
	}
	return agentowl.FieldError(code, fe.Field, "%s %s.", fe.Field, fe.Reason)
}

// params is what an event records of a provider's form: every parameter
// with its first value.
func params(form url.Values) map[string]string {
	out := make(map[string]string, len(form))
	for k, vs := range form {
		if len(vs) > 0 {
			out[k] = vs[0]
		}
	}
	return out
}

// linkAttachment is an attachment recorded as a link: AgentOwl never
// fetches or archives its content.
type linkAttachment struct {
	Kind         string `json:"kind"` // "link"
	URL          string `json:"url"`
	ContentType  string `json:"content_type,omitempty"`
	RecordingSID string `json:"recording_sid,omitempty"`
}

type smsPayload struct {
	Provider   string            `json:"provider"`
	MessageSID string            `json:"message_sid"`
	From       string            `json:"from"`
	To         string            `json:"to"`
	Body       string            `json:"body"`
	NumMedia   int               `json:"num_media"`
	Params     map[string]string `json:"params"`
}

func (s *Service) acceptSMS(ctx context.Context, b *agentowl.Binding, req ProviderRequest) (*Accepted, error) {
	m, err := twilio.ParseMessage(req.Form)
	if err != nil {
		return nil, fieldError(err)
	}
	if !m.Incoming() {
		return nil, nil
	}
	attachments := make([]linkAttachment, 0, len(m.Media))
	for _, md := range m.Media {
		attachments = append(attachments, linkAttachment{Kind: "link", URL: md.URL, ContentType: md.ContentType})
	}
	return s.acceptTwilio(ctx, b, req, smsPayload{Provider: "twilio", MessageSID: m.SID, From: m.From, To: m.To, Body: m.Body,
		NumMedia: len(m.Media), Params: params(req.Form)}, attachments,
		Inbound{Sender: m.From, DedupeKey: m.SID, Thread: WindowThread{Key: m.From, Window: SMSWindow}})
}

// acceptTwilio accepts in, an event of a Twilio webhook req, with payload
// and attachments as its JSON and the headers it keeps.
func (s *Service) acceptTwilio(ctx context.Context, b *agentowl.Binding, req ProviderRequest, payload any, attachments []linkAttachment, in Inbound) (*Accepted, error) {
	var err error
	if in.Payload, err = json.Marshal(payload); err != nil {
		return nil, err
	}
	if in.Attachments, err = json.Marshal(attachments); err != nil {
		return nil, err
	}
	in.Headers, in.PayloadMarshaled = KeptHeaders(req.Header, twilio.HeaderSignature), true
	return s.Accept(ctx, b, in)
}

type callPayload struct {
	Provider      string                `json:"provider"`
	Event         string                `json:"event"` // status, recording or transcription
	CallSID       string                `json:"call_sid"`
	CallStatus    string                `json:"call_status,omitempty"`
	From          string                `json:"from,omitempty"`
	To            string                `json:"to,omitempty"`
	Direction     string                `json:"direction,omitempty"`
	CallDuration  string                `json:"call_duration,omitempty"`
	Recording     *twilio.Recording     `json:"recording,omitempty"`
	Transcription *twilio.Transcription `json:"transcription,omitempty"`
	Params        map[string]string     `json:"params"`
}

// callWork reports whether a call's lifecycle event becomes work even when
// it joins the call's conversation: the call ended, a recording is ready,
// or a transcription arrived. Every other follow-up (queued, ringing,
// in-progress, a recording still in progress) is recorded only, so that a
// storm of status callbacks never hands off one work per event.
func callWork(c *twilio.Call) bool {
	switch c.Kind() {
	case twilio.KindTranscription:
		return true
	case twilio.KindRecording:
		return c.Recording.URL != "" && (c.Recording.Status == "" || c.Recording.Status == "completed")
	}
	return c.Ended()
}

func (s *Service) acceptCall(ctx context.Context, b *agentowl.Binding, req ProviderRequest) (*Accepted, error) {
	c, err := twilio.ParseCall(req.Form)
	if err != nil {
		return nil, fieldError(err)
	}
	attachments := []linkAttachment{}
	if c.Recording != nil && c.Recording.URL != "" {
		attachments = append(attachments, linkAttachment{Kind: "link", URL: c.Recording.URL, RecordingSID: c.Recording.SID})
	}
	return s.acceptTwilio(ctx, b, req, callPayload{Provider: "twilio", Event: c.Kind(), CallSID: c.SID, CallStatus: c.Status,
		From: c.From, To: c.To, Direction: c.Direction, CallDuration: c.Duration, Recording: c.Recording,
		Transcription: c.Transcription, Params: params(req.Form)}, attachments,
		Inbound{Sender: c.From, DedupeKey: c.DedupeKey(), Thread: KeyThread(c.SID), QuietFollowUp: !callWork(c)})
}

// WindowThread is the threading rule of a conversation per binding and key
// with a sliding inactivity window (SMS: the sender's number and
// SMSWindow): an event joins the open conversation with its key while that
// conversation's last event is less than Window old; otherwise that
// conversation ends, as of the moment its window closed, and the event
// starts a new one.
type WindowThread struct {
	Key    string
	Window time.Duration
}

// Continue implements Thread.
func (w WindowThread) Continue(ctx context.Context, tx agentowl.Tx, _ *agentowl.Binding, c *agentowl.Conversation, now time.Time) (*agentowl.Conversation, error) {
	if c == nil {
		return nil, nil
	}
	if now.Sub(c.LastEventAt) < w.Window {
		return c, nil
	}
	// A concurrent event may have ended it first: ErrConflict makes Accept
	// run again, and find the conversation that event started.
	return nil, tx.ConversationEnd(ctx, c.ID, c.LastEventAt.Add(w.Window))
}

// OpenKey implements Thread.
func (w WindowThread) OpenKey() string { return w.Key }

// Start implements Thread.
func (w WindowThread) Start(c *agentowl.Conversation) { c.Key = w.Key }

// Joined implements Thread.
func (WindowThread) Joined(context.Context, agentowl.Tx, *agentowl.Event, *agentowl.Conversation) error {
	return nil
}

// endIdleBatch bounds the conversations one EndIdleConversations
// transaction ends.
const endIdleBatch = 1000

// EndIdleConversations ends the SMS conversations whose window has passed
// (SMSWindow after their last message), each as of the moment it closed,
// so that lists and inspect show them ended rather than open until the
// sender writes again (a new message starts a new conversation either
// way). The maintenance scheduler runs it; it returns how many it ended.
func (s *Service) EndIdleConversations(ctx context.Context) (int, error) {
	total := 0
	for {
		var n int
		err := s.store.Write(ctx, func(tx agentowl.Tx) (err error) {
			n, err = tx.ConversationEndIdle(ctx, ChannelSMS, s.clock.Now(), SMSWindow, endIdleBatch)
			return err
		})
		total += n
		if err != nil || n < endIdleBatch {
			return total, err
		}
	}
}
