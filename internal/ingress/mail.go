package ingress

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"mime"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/emersion/go-message"
	_ "github.com/emersion/go-message/charset" // text parts and encoded words in every charset Go knows, decoded to UTF-8
	gomail "github.com/emersion/go-message/mail"

	"github.com/agentowl/agentowl"
)

// The email channels (smtp, cloudflare-email) share one streaming MIME
// parser with the limits below, and one event format (docs/channels.md).
// A message is read once, part by part, never held whole in memory: the
// text body is kept up to a cap for the event, every other part is counted
// and hashed as it passes and handed to the PartSink, if any.

// MailLimits bound what the email channels accept (docs/limits.md).
type MailLimits struct {
	// MaxMessageBytes caps a message as received (MIME encoding included);
	// larger ones are refused (SMTP 552 5.3.4, HTTP 413). Defaults to, and
	// is at most, 25 MiB.
	MaxMessageBytes int64
	// MaxParts caps a message's leaf parts (body text included). Defaults
	// to 20.
	MaxParts int
	// MaxPartBytes caps one part's decoded bytes. Defaults to 10 MiB.
	MaxPartBytes int64
}

// Fixed bounds of the email parser (docs/limits.md).
const (
	// MaxMailBytes is the largest MaxMessageBytes allowed.
	MaxMailBytes = 25 << 20
	// MaxMailParts and MaxMailPartBytes are the seed's ceilings of the
	// parts of one email and of one part's decoded bytes: lower limits are
	// allowed, higher ones refused.
	MaxMailParts     = 20
	MaxMailPartBytes = 10 << 20
	// maxMailTextBytes caps the text (and HTML) body kept in an event; the
	// rest is counted, and the event says it was truncated.
	maxMailTextBytes = 1 << 20
	// maxMailDepth caps multipart nesting.
	maxMailDepth = 8
	// maxMailHeaderBytes caps the message's header block.
	maxMailHeaderBytes = 256 << 10
	// maxMailIDs caps the identifiers kept of References.
	maxMailIDs = 100
	// maxFilenameBytes caps a part's file name as parsed: room for a long
	// name, which retention shortens keeping its extension.
	maxFilenameBytes = 1024
)

func (l MailLimits) withDefaults() MailLimits {
	if l.MaxMessageBytes <= 0 || l.MaxMessageBytes > MaxMailBytes {
		l.MaxMessageBytes = MaxMailBytes
	}
	if l.MaxParts <= 0 {
		l.MaxParts = MaxMailParts
	}
	if l.MaxPartBytes <= 0 {
		l.MaxPartBytes = MaxMailPartBytes
	}
	return l
}

// MailLimits returns the email channels' limits, defaults applied.
func (s *Service) MailLimits() MailLimits { return s.cfg.Mail }

// MailAddress is one address of a message header.
type MailAddress struct {
	Name    string `json:"name,omitempty"`
	Address string `json:"address"`
}

// MailPart describes one part of a message other than its text and HTML
// body: an attachment or an inline part. The parser fills in everything;
// Size and SHA256 once the part's bytes have passed.
type MailPart struct {
	// Path numbers the part as IMAP does: "2", "1.2" inside a multipart.
	Path        string `json:"part"`
	ContentType string `json:"content_type"`
	Filename    string `json:"filename,omitempty"`
	Disposition string `json:"disposition,omitempty"`
	ContentID   string `json:"content_id,omitempty"`
	// Size is the decoded size in bytes.
	Size int64 `json:"size"`
	// SHA256 is the hex SHA-256 of the decoded bytes.
	SHA256 string `json:"sha256"`
}

// PartSink is the hook where a part's decoded bytes pass while a message
// streams through the parser: attachment retention keeps them here. For
// each part other than the body text the parser calls Begin, then Write
// with the bytes in order, then End (with Size and SHA256 set); then Close
// once, with nil when the whole message parsed and was within its limits,
// or the error that refused it (the sink then drops what it kept). A sink
// error refuses the message (as the store being unavailable does). A part
// given to a sink is not held to MaxPartBytes by the parser: the sink
// applies its own ceiling (retention records a larger file blocked). One
// sink serves one message, on one goroutine.
//
// What a sink kept is committed with each binding's event: AcceptMail asks
// Retention for the binding's share, and Accept runs it in the event's
// transaction. Release, called once after every AcceptMail of the message
// (Mail.Release), drops what no committed event took.
type PartSink interface {
	Begin(p *MailPart) error
	Write(b []byte) (int, error)
	End(p *MailPart) error
	Close(err error) error
	// Retention is what the sink kept for binding b's event; nil for none.
	Retention(b *agentowl.Binding) Retention
	// Release drops what no committed event took.
	Release(ctx context.Context)
}

// Retention is a message's kept parts for one event: Accept runs PrepareTx
// before the event is created and RecordTx after, in the event's
// transaction (PrepareTx sets the event's attachments and may run again if
// the transaction is retried), then Finish with whether the event
// committed (a duplicate did not).
type Retention interface {
	PrepareTx(ctx context.Context, tx agentowl.Tx, ev *agentowl.Event) error
	RecordTx(ctx context.Context, tx agentowl.Tx) error
	Finish(ctx context.Context, committed bool)
}

// PartSinks returns the sink of one message about to be parsed for
// bindings; nil: the bytes are counted, hashed and discarded.
type PartSinks func(ctx context.Context, bindings []*agentowl.Binding) PartSink

// SetPartSinks installs where part bytes go (attachment retention). Call
// it while wiring, before any message is received.
func (s *Service) SetPartSinks(f PartSinks) { s.partSinks = f }

// Mail is a parsed message, ready to become an event at each binding it
// was addressed to.
type Mail struct {
	// Header is what events record of the top-level header (header limits
	// as for webhook events).
	Header     map[string][]string
	MessageID  string // without angle brackets; empty when absent or malformed
	InReplyTo  []string
	References []string
	Subject    string
	Date       *time.Time
	From       []MailAddress
	To         []MailAddress
	Cc         []MailAddress
	ReplyTo    []MailAddress
	Text       string
	// TextTruncated is true when the text body was longer than 1 MiB.
	TextTruncated bool
	HTML          string
	HTMLTruncated bool
	// Parts are the parts other than the text and HTML body.
	Parts []*MailPart
	// Size and SHA256 are those of the message as received.
	Size   int64
	SHA256 [sha256.Size]byte
	// sink holds what was kept of the parts for the bindings (nil: none).
	sink PartSink
}

// Release drops what the part sink kept and no committed event took: call
// it once every AcceptMail of the message has returned.
func (m *Mail) Release(ctx context.Context) {
	if m.sink != nil {
		m.sink.Release(ctx)
	}
}

// mailMalformed and mailTooLarge refuse the message itself.
func mailMalformed(format string, args ...any) error {
	return agentowl.Errorf(agentowl.ECodeMalformedMessage, "The message is malformed: "+format+".", args...)
}

func mailTooLarge(format string, args ...any) error {
	return agentowl.Errorf(agentowl.ECodeTooLarge, format, args...)
}

// rawReader counts and hashes the message as received, refuses more than
// max bytes and remembers the first error of the stream below, which the
// MIME parser's own errors would otherwise hide.
type rawReader struct {
	r   io.Reader
	max int64
	n   int64
	h   hash.Hash
	err error
}

func (r *rawReader) Read(p []byte) (int, error) {
	if r.err != nil {
		return 0, r.err
	}
	if left := r.max + 1 - r.n; int64(len(p)) > left {
		p = p[:left]
	}
	n, err := r.r.Read(p)
	r.n += int64(n)
	r.h.Write(p[:n])
	if r.n > r.max {
		r.err = mailTooLarge("The message is larger than %d bytes.", r.max)
		return n, r.err
	}
	if err != nil {
		r.err = err
	}
	return n, err
}

// ParseMail reads one message for bindings from r to its end, within the
// limits, and returns it parsed. A message over a limit is
// request_too_large, one that is not MIME malformed_message; an error of r
// itself is returned as is. The part sink keeps attachments for bindings;
// call Release on the message once it was accepted at each.
func (s *Service) ParseMail(ctx context.Context, r io.Reader, bindings ...*agentowl.Binding) (m *Mail, err error) {
	lim := s.cfg.Mail
	var sink PartSink
	if s.partSinks != nil {
		sink = s.partSinks(ctx, bindings)
	}
	raw := &rawReader{r: r, max: lim.MaxMessageBytes, h: sha256.New()}
	p := &mailParser{lim: lim, sink: sink}
	defer func() {
		if err != nil && raw.err != nil && raw.err != io.EOF {
			err = raw.err // the stream failed: whatever the parser made of it
		}
		if sink != nil {
			if cerr := sink.Close(err); err == nil {
				err = cerr
			}
		}
		if err != nil {
			m = nil
		}
	}()
	e, err := message.ReadWithOptions(raw, &message.ReadOptions{MaxHeaderBytes: maxMailHeaderBytes})
	if err != nil && !message.IsUnknownCharset(err) && !message.IsUnknownEncoding(err) {
		return nil, mailMalformed("%v", err)
	}
	m = &Mail{Header: mailHeaders(e.Header)}
	m.readHeader(gomail.Header{Header: e.Header})
	if err := p.entity(m, e, "", 0); err != nil {
		return nil, err
	}
	// The epilogue, if any, belongs to the message as received.
	if _, err := io.Copy(io.Discard, raw); err != nil {
		return nil, err
	}
	m.Size, m.sink = raw.n, sink
	copy(m.SHA256[:], raw.h.Sum(nil))
	return m, nil
}

type mailParser struct {
	lim   MailLimits
	sink  PartSink
	parts int
}

// entity walks one entity numbered path at depth.
func (p *mailParser) entity(m *Mail, e *message.Entity, path string, depth int) error {
	if mr := e.MultipartReader(); mr != nil {
		if depth >= maxMailDepth {
			return mailMalformed("multiparts nested deeper than %d", maxMailDepth)
		}
		for i := 1; ; i++ {
			part, err := mr.NextPart()
			if err == io.EOF {
				return nil
			}
			if err != nil && !message.IsUnknownCharset(err) && !message.IsUnknownEncoding(err) {
				return mailMalformed("%v", err)
			}
			sub := fmt.Sprint(i)
			if path != "" {
				sub = path + "." + sub
			}
			if err := p.entity(m, part, sub, depth+1); err != nil {
				return err
			}
		}
	}
	if path == "" {
		path = "1"
	}
	p.parts++
	if p.parts > p.lim.MaxParts {
		return mailTooLarge("The message has more than %d parts.", p.lim.MaxParts)
	}
	ctype, _, err := e.Header.ContentType()
	if err != nil || ctype == "" {
		ctype = "text/plain" // RFC 2045's default
	}
	disp, dparams, _ := e.Header.ContentDisposition()
	_, cparams, _ := e.Header.ContentType()
	filename := dparams["filename"]
	if filename == "" {
		filename = cparams["name"]
	}
	body := (ctype == "text/plain" || ctype == "text/html") && !strings.EqualFold(disp, "attachment") && filename == ""
	if body && ctype == "text/plain" && m.Text == "" && !m.TextTruncated {
		text, truncated, err := p.readText(e.Body)
		m.Text, m.TextTruncated = text, truncated
		return err
	}
	if body && ctype == "text/html" && m.HTML == "" && !m.HTMLTruncated {
		text, truncated, err := p.readText(e.Body)
		m.HTML, m.HTMLTruncated = text, truncated
		return err
	}
	part := &MailPart{Path: path, ContentType: ctype, Filename: clean(filename, maxFilenameBytes),
		Disposition: strings.ToLower(clean(disp, 32)), ContentID: clean(strings.Trim(e.Header.Get("Content-Id"), "<> "), maxKeyBytes)}
	if err := p.readPart(part, e.Body); err != nil {
		return err
	}
	m.Parts = append(m.Parts, part)
	return nil
}

// limited bounds one part's decoded bytes.
func (p *mailParser) limited(r io.Reader) io.Reader {
	return &partLimit{r: r, n: p.lim.MaxPartBytes}
}

type partLimit struct {
	r io.Reader
	n int64
}

func (l *partLimit) Read(b []byte) (int, error) {
	if int64(len(b)) > l.n+1 {
		b = b[:l.n+1]
	}
	n, err := l.r.Read(b)
	l.n -= int64(n)
	if l.n < 0 {
		return n, errPartTooLarge
	}
	return n, err
}

var errPartTooLarge = errors.New("part too large")

// decodeErr interprets an error reading a part's decoded body.
func (p *mailParser) decodeErr(err error) error {
	if errors.Is(err, errPartTooLarge) {
		return mailTooLarge("A part of the message is larger than %d bytes.", p.lim.MaxPartBytes)
	}
	return mailMalformed("a part cannot be decoded: %v", err)
}

// readText keeps the first maxMailTextBytes of a body text, valid UTF-8.
func (p *mailParser) readText(r io.Reader) (string, bool, error) {
	var buf bytes.Buffer
	n, err := io.Copy(&buf, io.LimitReader(p.limited(r), maxMailTextBytes))
	if err != nil {
		return "", false, p.decodeErr(err)
	}
	rest, err := io.Copy(io.Discard, p.limited(r))
	if err != nil {
		return "", false, p.decodeErr(err)
	}
	text := buf.Bytes()
	if rest > 0 && n == maxMailTextBytes {
		for len(text) > 0 && !utf8.Valid(text) { // cut inside a character
			text = text[:len(text)-1]
		}
	}
	return textOf(text), rest > 0, nil
}

// readPart counts, hashes and hands a part's bytes to the sink, which
// applies its own size ceiling.
func (p *mailParser) readPart(part *MailPart, r io.Reader) error {
	h := sha256.New()
	var w io.Writer = h
	if p.sink != nil {
		if err := p.sink.Begin(part); err != nil {
			return err
		}
		w = io.MultiWriter(h, sinkWriter{p.sink})
	} else {
		r = p.limited(r)
	}
	n, err := io.Copy(w, r)
	if err != nil {
		var pe partErr
		if errors.As(err, &pe) {
			return pe.err
		}
		return p.decodeErr(err)
	}
	part.Size, part.SHA256 = n, hex.EncodeToString(h.Sum(nil))
	if p.sink != nil {
		return p.sink.End(part)
	}
	return nil
}

// partErr carries a sink's error through io.Copy, apart from the errors of
// decoding the part.
type partErr struct{ err error }

func (e partErr) Error() string { return e.err.Error() }

type sinkWriter struct{ sink PartSink }

func (w sinkWriter) Write(b []byte) (int, error) {
	n, err := w.sink.Write(b)
	if err != nil {
		return n, partErr{err}
	}
	return n, nil
}

// textOf is text as events keep it: valid UTF-8 without NUL (stored and
// forwarded as JSON text).
func textOf(b []byte) string {
	return strings.ReplaceAll(strings.ToValidUTF8(string(b), "\uFFFD"), "\x00", "\uFFFD")
}

// clean is a header value as events keep it: text without control
// characters, at most max bytes.
func clean(s string, max int) string {
	s = strings.Map(func(r rune) rune {
		if r < ' ' || r == 0x7f {
			return -1
		}
		return r
	}, strings.ToValidUTF8(s, "\uFFFD"))
	for len(s) > max {
		_, size := utf8.DecodeLastRuneInString(s)
		s = s[:len(s)-size]
	}
	return s
}

func (m *Mail) readHeader(h gomail.Header) {
	if id, err := h.MessageID(); err == nil {
		m.MessageID = clean(id, maxKeyBytes)
	}
	m.InReplyTo = msgIDs(h, "In-Reply-To")
	m.References = msgIDs(h, "References")
	if s, err := h.Subject(); err == nil || s != "" {
		m.Subject = clean(s, 998)
	}
	if d, err := h.Date(); err == nil && !d.IsZero() {
		d = d.UTC()
		m.Date = &d
	}
	m.From, m.To, m.Cc, m.ReplyTo = addresses(h, "From"), addresses(h, "To"), addresses(h, "Cc"), addresses(h, "Reply-To")
}

// msgIDs parses a list of message identifiers, keeping the last
// maxMailIDs (References grows at its end) and dropping malformed ones.
func msgIDs(h gomail.Header, key string) []string {
	ids, _ := h.MsgIDList(key)
	if len(ids) > maxMailIDs {
		ids = ids[len(ids)-maxMailIDs:]
	}
	out := make([]string, 0, len(ids))
	for _, id := range ids {
		if id = clean(id, maxKeyBytes); id != "" {
			out = append(out, id)
		}
	}
	return out
}

func addresses(h gomail.Header, key string) []MailAddress {
	list, err := h.AddressList(key)
	if err != nil {
		return nil
	}
	out := []MailAddress{}
	for _, a := range list {
		if len(out) == maxHeaderEntries {
			break
		}
		out = append(out, MailAddress{Name: clean(a.Name, maxNameBytes), Address: strings.ToLower(clean(a.Address, maxAddressBytes))})
	}
	return out
}

// mailHeaders is what an event keeps of a message header: its fields in
// order per name, decoded where they are encoded words, within the header
// limits.
func mailHeaders(h message.Header) map[string][]string {
	out := map[string][]string{}
	size := 0
	dec := mime.WordDecoder{CharsetReader: message.CharsetReader}
	for f := h.Fields(); f.Next(); {
		k := f.Key()
		if _, seen := out[k]; !seen && len(out) >= maxHeaderEntries {
			continue
		}
		v, err := dec.DecodeHeader(f.Value())
		if err != nil {
			v = f.Value()
		}
		v = clean(v, maxHeaderBytes)
		if size += len(k) + len(v); size > maxHeaderBytes {
			break
		}
		out[k] = append(out[k], v)
	}
	return out
}

// Envelope is who a message came from and was delivered to, as the
// transport says (SMTP's MAIL FROM and RCPT TO, the Worker's from and to).
type Envelope struct {
	From string
	// To are the recipients that address this binding.
	To []string
}

// mailPayload is an email event's payload (docs/channels.md).
type mailPayload struct {
	Envelope      wireEnvelope  `json:"envelope"`
	MessageID     string        `json:"message_id,omitempty"`
	InReplyTo     []string      `json:"in_reply_to"`
	References    []string      `json:"references"`
	Subject       string        `json:"subject"`
	Date          string        `json:"date,omitempty"`
	From          []MailAddress `json:"from"`
	To            []MailAddress `json:"to"`
	Cc            []MailAddress `json:"cc"`
	ReplyTo       []MailAddress `json:"reply_to"`
	Text          string        `json:"text"`
	TextTruncated bool          `json:"text_truncated"`
	HTML          string        `json:"html,omitempty"`
	HTMLTruncated bool          `json:"html_truncated,omitempty"`
	Size          int64         `json:"size"`
	SHA256        string        `json:"sha256"`
}

type wireEnvelope struct {
	From string   `json:"from"`
	To   []string `json:"to"`
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// sender is who an email event is from: the From header's first address,
// else the envelope sender.
func (m *Mail) sender(env Envelope) string {
	if len(m.From) > 0 && m.From[0].Address != "" {
		return m.From[0].Address
	}
	return strings.ToLower(clean(env.From, maxAddressBytes))
}

// AcceptMail stores a parsed message as one event at binding b (from
// AdmitAddress or Admit) and hands it over (Accept). Retries of one message
// are one event: its Message-ID, or without one the digest of the message
// as received, deduplicates it per binding.
func (s *Service) AcceptMail(ctx context.Context, b *agentowl.Binding, env Envelope, m *Mail) (*Accepted, error) {
	pl := mailPayload{
		Envelope:  wireEnvelope{From: clean(env.From, maxAddressBytes), To: nonNil(env.To)},
		MessageID: m.MessageID, InReplyTo: nonNil(m.InReplyTo), References: nonNil(m.References), Subject: m.Subject,
		From: nonNil(m.From), To: nonNil(m.To), Cc: nonNil(m.Cc), ReplyTo: nonNil(m.ReplyTo),
		Text: m.Text, TextTruncated: m.TextTruncated, HTML: m.HTML, HTMLTruncated: m.HTMLTruncated,
		Size: m.Size, SHA256: hex.EncodeToString(m.SHA256[:]),
	}
	if m.Date != nil {
		pl.Date = m.Date.Format(time.RFC3339)
	}
	payload, err := json.Marshal(pl)
	if err != nil {
		return nil, err
	}
	attachments, err := json.Marshal(nonNil(m.Parts))
	if err != nil {
		return nil, err
	}
	dedupe := "sha256:" + pl.SHA256
	if m.MessageID != "" {
		dedupe = "message-id:" + m.MessageID
	}
	in := Inbound{Sender: m.sender(env), Headers: m.Header, Payload: payload, PayloadMarshaled: true, Attachments: attachments,
		DedupeKey: clean(dedupe, maxKeyBytes), Thread: s.mailThread(m, m.sender(env), env.To)}
	if m.sink != nil {
		in.Retention = m.sink.Retention(b)
	}
	return s.Accept(ctx, b, in)
}
