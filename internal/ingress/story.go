package ingress

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"html"
	"strings"
	"time"

	"github.com/agentowl/agentowl"
	"github.com/agentowl/agentowl/internal/access"
)

// The whole story of a work for people (docs/console.md): the message that
// started it, read per channel from its event, and the conversation's
// earlier messages. Nothing here is markup: a message's text is plain
// text (an HTML-only email is converted to text, its markup dropped),
// which the faces escape where they show it.

// Message is an event as a person reads it: its channel's fields parsed
// from its payload. A field a channel does not have is empty.
type Message struct {
	EventID, ConversationID, BindingID string
	Channel, Sender                    string
	ReceivedAt                         time.Time
	FollowUp                           bool
	// Subject, Date and the addresses are an email's.
	Subject      string
	Date         string
	From, To, Cc []MailAddress
	// Recipient is the number an SMS or call was made to.
	Recipient string
	// Text is the message as text: an email's plain-text part (or its HTML
	// part converted to text: FromHTML), an SMS body, a call's
	// transcription, a webhook payload's "text" member.
	Text     string
	FromHTML bool
	// Cut is true when Text is not whole: the sender's body was longer
	// than what was kept, or a digest's payload was cut.
	Cut bool
	// CallEvent, CallStatus and CallDuration are a voice event's (status,
	// recording or transcription; the call's status; seconds).
	CallEvent, CallStatus, CallDuration string
	// Links are provider media links (MMS media, call recordings): AgentOwl
	// never fetches them.
	Links []string
	// Parts counts an email's parts other than its body (attachments).
	Parts int
	// Payload is the payload, pretty-printed when it is JSON (a digest's,
	// cut, is as stored).
	Payload string
}

// Line is the message in one line: its subject, else the first line of
// its text, else what a call reported, else its payload, at most 140
// bytes.
func (m *Message) Line() string {
	if s := strings.TrimSpace(m.Subject); s != "" {
		return agentowl.Clip(s, 140)
	}
	for l := range strings.SplitSeq(m.Text, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			return agentowl.Clip(l, 140)
		}
	}
	if m.CallStatus != "" {
		return "Call " + m.CallStatus
	}
	if m.Channel == ChannelWebhook {
		return agentowl.Clip(strings.Join(strings.Fields(m.Payload), " "), 140)
	}
	return ""
}

// storyPayload is every channel's payload members a Message reads.
type storyPayload struct {
	// email
	Subject       string          `json:"subject"`
	Date          string          `json:"date"`
	From          []MailAddress   `json:"from"`
	To            json.RawMessage `json:"to"`
	Cc            []MailAddress   `json:"cc"`
	Text          string          `json:"text"`
	TextTruncated bool            `json:"text_truncated"`
	HTML          string          `json:"html"`
	HTMLTruncated bool            `json:"html_truncated"`
	// sms and voice
	Body          string `json:"body"`
	Event         string `json:"event"`
	CallStatus    string `json:"call_status"`
	CallDuration  string `json:"call_duration"`
	Transcription *struct {
		Text string `json:"text"`
	} `json:"transcription"`
}

// MessageOf reads event ev as a Message. A payload cut short (a digest's)
// is read as far as it goes.
func MessageOf(ev *agentowl.Event) *Message {
	m := &Message{EventID: ev.ID, ConversationID: ev.ConversationID, BindingID: ev.BindingID, Channel: ev.Channel,
		Sender: ev.Sender, ReceivedAt: ev.ReceivedAt, FollowUp: ev.FollowUp}
	whole := json.Valid(ev.Payload)
	m.Cut = !whole && len(ev.Payload) >= agentowl.EventDigestBytes
	members := payloadMembers(ev.Payload)
	var p storyPayload
	if b, err := json.Marshal(members); err == nil {
		_ = json.Unmarshal(b, &p)
	}
	if whole {
		var out bytes.Buffer
		if json.Indent(&out, ev.Payload, "", "  ") == nil {
			m.Payload = out.String()
		} else {
			m.Payload = string(ev.Payload)
		}
	} else {
		m.Payload = strings.ToValidUTF8(string(ev.Payload), "")
		if m.Cut {
			m.Payload += "…"
		}
	}
	switch ev.Channel {
	case ChannelSMTP, ChannelCloudflareEmail:
		m.Subject, m.Date, m.From, m.Cc = p.Subject, p.Date, p.From, p.Cc
		_ = json.Unmarshal(p.To, &m.To)
		m.Text, m.Cut = p.Text, m.Cut || p.TextTruncated
		if strings.TrimSpace(m.Text) == "" && p.HTML != "" {
			m.Text, m.FromHTML, m.Cut = HTMLText(p.HTML), true, m.Cut || p.HTMLTruncated
		}
		var parts []json.RawMessage
		if json.Unmarshal(ev.Attachments, &parts) == nil {
			m.Parts = len(parts)
		}
	case ChannelSMS:
		m.Text = p.Body
		_ = json.Unmarshal(p.To, &m.Recipient)
	case ChannelVoice:
		m.CallEvent, m.CallStatus, m.CallDuration = p.Event, p.CallStatus, p.CallDuration
		_ = json.Unmarshal(p.To, &m.Recipient)
		if p.Transcription != nil {
			m.Text = p.Transcription.Text
		}
	default:
		m.Text = p.Text
	}
	var links []struct {
		Kind string `json:"kind"`
		URL  string `json:"url"`
	}
	if json.Unmarshal(ev.Attachments, &links) == nil {
		for _, l := range links {
			if l.Kind == "link" && l.URL != "" {
				m.Links = append(m.Links, l.URL)
			}
		}
	}
	return m
}

// payloadMembers returns the top-level members of a JSON object. A
// payload cut short gives the members before the cut, and a string member
// cut short its text up to the cut.
func payloadMembers(raw []byte) map[string]json.RawMessage {
	out := map[string]json.RawMessage{}
	if json.Unmarshal(raw, &out) == nil {
		return out
	}
	out = map[string]json.RawMessage{}
	dec := json.NewDecoder(bytes.NewReader(raw))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return out
	}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			break
		}
		key, _ := t.(string)
		off := dec.InputOffset()
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			rest := bytes.TrimLeft(raw[off:], " \t\r\n:")
			if s, ok := cutString(rest); ok {
				out[key] = s
			}
			break
		}
		out[key] = v
	}
	return out
}

// cutString closes a JSON string cut short: what it held up to the cut,
// without a broken escape or character at its end.
func cutString(raw []byte) (json.RawMessage, bool) {
	if len(raw) == 0 || raw[0] != '"' {
		return nil, false
	}
	for drop := 0; drop <= 6 && drop < len(raw); drop++ {
		cand := append(bytes.Clone(raw[:len(raw)-drop]), '"')
		var s string
		if json.Unmarshal(cand, &s) == nil {
			b, _ := json.Marshal(s)
			return b, true
		}
	}
	return nil, false
}

// HTMLText converts an HTML body to plain text for reading: tags are
// dropped (the content of script, style, head and template with them),
// block ends become line breaks, entities are decoded, runs of blank
// lines are folded. The result is text, never markup: it is shown
// escaped like any text a sender wrote.
func HTMLText(s string) string {
	var b strings.Builder
	skip := ""
	for len(s) > 0 {
		i := strings.IndexByte(s, '<')
		if i < 0 {
			if skip == "" {
				b.WriteString(html.UnescapeString(s))
			}
			break
		}
		if skip == "" {
			b.WriteString(html.UnescapeString(s[:i]))
		}
		s = s[i:]
		if strings.HasPrefix(s, "<!--") {
			end := strings.Index(s, "-->")
			if end < 0 {
				break
			}
			s = s[end+3:]
			continue
		}
		end := strings.IndexByte(s, '>')
		if end < 0 {
			break
		}
		tag := strings.ToLower(s[1:end])
		s = s[end+1:]
		closing := strings.HasPrefix(tag, "/")
		name := strings.TrimPrefix(tag, "/")
		if k := strings.IndexAny(name, " \t\r\n/"); k >= 0 {
			name = name[:k]
		}
		switch {
		case skip != "":
			if closing && name == skip {
				skip = ""
			}
			continue
		case !closing && (name == "script" || name == "style" || name == "head" || name == "template" || name == "title"):
			skip = name
			continue
		}
		switch name {
		case "br", "p", "div", "li", "tr", "h1", "h2", "h3", "h4", "h5", "h6", "blockquote", "pre", "table", "ul", "ol", "hr":
			b.WriteByte('\n')
		case "td", "th":
			b.WriteByte(' ')
		}
	}
	var out []string
	blank := 0
	for l := range strings.SplitSeq(strings.ReplaceAll(b.String(), "\u00a0", " "), "\n") {
		l = strings.Join(strings.Fields(l), " ")
		if l == "" {
			blank++
			if blank > 1 || len(out) == 0 {
				continue
			}
		} else {
			blank = 0
		}
		out = append(out, l)
	}
	return strings.TrimSpace(strings.ToValidUTF8(strings.Join(out, "\n"), "\uFFFD"))
}

// Story is what started a work and where: its message, the conversation
// and binding it came through, and the conversation's messages before it.
type Story struct {
	Message      *Message
	Conversation *agentowl.Conversation
	Binding      *agentowl.Binding
	// Earlier are the conversation's messages before Message, newest first,
	// at most the number asked for; Events counts all of its events.
	Earlier []*Message
	Events  int
}

// WorkStory returns the story of work workID of the tenant with up to
// earlier of the conversation's earlier messages. Members may.
func (s *Service) WorkStory(ctx context.Context, p *access.Principal, tenant, workID string, earlier int) (*Story, error) {
	m, err := p.Tenant(tenant, agentowl.RoleMember)
	if err != nil {
		return nil, err
	}
	st := &Story{}
	err = s.store.Read(ctx, func(tx agentowl.Tx) error {
		w, err := tx.WorkGet(ctx, workID)
		if errors.Is(err, agentowl.ErrNotFound) || (err == nil && w.TenantID != m.TenantID) {
			return agentowl.Errorf(agentowl.ECodeNotFound, "No work %q in tenant %q.", workID, m.TenantName)
		}
		if err != nil {
			return err
		}
		ev, err := tx.EventGet(ctx, w.EventID)
		if err != nil {
			return err
		}
		st.Message = MessageOf(ev)
		if st.Conversation, err = tx.ConversationGet(ctx, ev.ConversationID); err != nil {
			return err
		}
		if st.Binding, err = tx.BindingGet(ctx, ev.BindingID); err != nil {
			return err
		}
		if st.Events, err = tx.EventCountByConversation(ctx, ev.ConversationID); err != nil {
			return err
		}
		if earlier <= 0 {
			return nil
		}
		evs, err := tx.EventListEarlier(ctx, ev.ConversationID, agentowl.Cursor{At: ev.ReceivedAt, ID: ev.ID}, earlier)
		for _, e := range evs {
			st.Earlier = append(st.Earlier, MessageOf(e))
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return st, nil
}

// WorkMessages returns, by work ID, a digest of the message each of the
// tenant's works handles (works of other tenants are left out). Members
// may.
func (s *Service) WorkMessages(ctx context.Context, p *access.Principal, tenant string, works []string) (map[string]*Message, error) {
	return tenantDigests(ctx, s, p, tenant, works, agentowl.Tx.EventDigestsByWork,
		func(ev *agentowl.Event) string { return ev.TenantID }, MessageOf)
}

// tenantDigests reads digests by key in one transaction and returns those
// of the tenant, converted by of, for a member of the tenant; tenantOf
// says whose a digest is.
func tenantDigests[D, V any](ctx context.Context, s *Service, p *access.Principal, tenant string, keys []string,
	read func(tx agentowl.Tx, ctx context.Context, keys []string) (map[string]D, error),
	tenantOf func(D) string, of func(D) V) (map[string]V, error) {
	m, err := p.Tenant(tenant, agentowl.RoleMember)
	if err != nil {
		return nil, err
	}
	out := map[string]V{}
	if len(keys) == 0 {
		return out, nil
	}
	var ds map[string]D
	if err := s.store.Read(ctx, func(tx agentowl.Tx) (err error) {
		ds, err = read(tx, ctx, keys)
		return err
	}); err != nil {
		return nil, err
	}
	for k, d := range ds {
		if tenantOf(d) == m.TenantID {
			out[k] = of(d)
		}
	}
	return out, nil
}

// ConversationSummary is what the conversation list shows beyond the
// conversation: its first message (a digest) and its work not ended.
type ConversationSummary struct {
	First    *Message
	OpenWork int
}

// Peer is who the conversation is with: its first message's sender.
func (c *ConversationSummary) Peer() string {
	if c == nil || c.First == nil {
		return ""
	}
	return c.First.Sender
}

// ConversationSummaries returns, by conversation ID, the summaries of the
// tenant's conversations ids. Members may.
func (s *Service) ConversationSummaries(ctx context.Context, p *access.Principal, tenant string, ids []string) (map[string]*ConversationSummary, error) {
	return tenantDigests(ctx, s, p, tenant, ids, agentowl.Tx.ConversationDigests,
		func(d *agentowl.ConversationDigest) string {
			if d.First == nil {
				return "" // no first message to show: left out
			}
			return d.First.TenantID
		},
		func(d *agentowl.ConversationDigest) *ConversationSummary {
			return &ConversationSummary{First: MessageOf(d.First), OpenWork: d.OpenWork}
		})
}
