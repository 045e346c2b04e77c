// Package smtp is the SMTP channel: an inbound mail server (an MX) that
// turns each message to an smtp binding's address into an event at that
// binding, through the email parser and accept path of internal/ingress.
// It answers as a real MTA expects: 250 only once every event is durable,
// 4xx when the sender should retry, 5xx when it should not.
package smtp

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"slices"
	"strings"
	"sync"
	"time"

	gosmtp "github.com/emersion/go-smtp"

	"github.com/agentowl/agentowl"
	"github.com/agentowl/agentowl/internal/ingress"
)

// Config configures the SMTP listener. The message size limit and the
// parser's limits are ingress.MailLimits, shared with cloudflare-email.
type Config struct {
	// Listen is the listen address, e.g. ":25". Empty: no SMTP listener.
	Listen string
	// Hostname is the name the server greets with. Defaults to "localhost".
	Hostname string
	// CertFile and KeyFile, set together, are the PEM certificate chain and
	// key offered with STARTTLS. Defaults to none: no STARTTLS.
	CertFile, KeyFile string
	// MaxRecipients caps accepted recipients per message; more are 452
	// 4.5.3. Defaults to 50.
	MaxRecipients int
	// MaxLineLength caps a line, command or message text, in bytes.
	// Defaults to 2000 (RFC 5321's 1000, doubled for what mailers send).
	MaxLineLength int
	// CommandTimeout is how long the server waits for a client's next
	// command or data. Defaults to 5m.
	CommandTimeout time.Duration
	// SessionTimeout caps a whole connection; the server then closes it.
	// Defaults to 10m.
	SessionTimeout time.Duration
	// MaxConnections caps concurrent connections; one more is answered
	// "421 4.7.0" and closed, so the sender retries later. Defaults to 500.
	MaxConnections int
	// MaxClientConnections caps one client address's concurrent
	// connections, so that one client cannot hold them all. Defaults to a
	// tenth of MaxConnections (at least 1).
	MaxClientConnections int
	// ClientConnectionRate caps one client address's new connections per
	// minute. Defaults to 600.
	ClientConnectionRate int
}

func (c Config) withDefaults() Config {
	if c.Hostname == "" {
		c.Hostname = "localhost"
	}
	if c.MaxRecipients <= 0 {
		c.MaxRecipients = 50
	}
	if c.MaxLineLength <= 0 {
		c.MaxLineLength = 2000
	}
	if c.CommandTimeout <= 0 {
		c.CommandTimeout = 5 * time.Minute
	}
	if c.SessionTimeout <= 0 {
		c.SessionTimeout = 10 * time.Minute
	}
	if c.MaxConnections <= 0 {
		c.MaxConnections = 500
	}
	if c.MaxClientConnections <= 0 {
		c.MaxClientConnections = max(c.MaxConnections/10, 1)
	}
	if c.ClientConnectionRate <= 0 {
		c.ClientConnectionRate = 600
	}
	return c
}

// Server is a running SMTP listener.
type Server struct {
	srv    *gosmtp.Server
	in     *ingress.Service
	clock  agentowl.Clock
	logger *slog.Logger
	cfg    Config
	// done stops the session timers when the server closes.
	done      chan struct{}
	closeOnce sync.Once
	// sessions counts live sessions: Close waits for them to end.
	sessions sync.WaitGroup
}

// New returns an SMTP server that accepts mail for in's smtp bindings. It
// loads the STARTTLS certificate, if configured.
func New(cfg Config, in *ingress.Service, clock agentowl.Clock, logger *slog.Logger) (*Server, error) {
	cfg = cfg.withDefaults()
	s := &Server{in: in, clock: clock, logger: logger, cfg: cfg, done: make(chan struct{})}
	srv := gosmtp.NewServer(s)
	srv.Domain = cfg.Hostname
	// go-smtp refuses a message of exactly its limit (its reader needs a
	// byte past the limit to see the end of the data); one more lets the
	// parser's exact count decide, so a message of the limit is accepted.
	srv.MaxMessageBytes = in.MailLimits().MaxMessageBytes + 1
	srv.MaxRecipients = cfg.MaxRecipients
	srv.MaxLineLength = cfg.MaxLineLength
	srv.ReadTimeout, srv.WriteTimeout = cfg.CommandTimeout, cfg.CommandTimeout
	srv.ErrorLog = errorLog{logger}
	if (cfg.CertFile == "") != (cfg.KeyFile == "") {
		return nil, errors.New("smtp: the STARTTLS certificate and key files are set together")
	}
	if cfg.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(cfg.CertFile, cfg.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("smtp: STARTTLS certificate: %w", err)
		}
		srv.TLSConfig = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	}
	s.srv = srv
	return s, nil
}

// Serve accepts connections on l until Close, at most MaxConnections at
// once.
func (s *Server) Serve(l net.Listener) error {
	err := s.srv.Serve(&capListener{Listener: l, slots: make(chan struct{}, s.cfg.MaxConnections), host: s.cfg.Hostname,
		perClient: s.cfg.MaxClientConnections, rate: s.cfg.ClientConnectionRate, clock: s.clock, clients: map[string]int{}, opened: map[string]int{}})
	if errors.Is(err, gosmtp.ErrServerClosed) {
		return nil
	}
	return err
}

// Close stops listening, closes every connection and waits (up to
// ctx's deadline) for their sessions to end, so that none is still
// storing an event when the store closes. A message whose events were not
// committed is not acknowledged: its sender retries.
func (s *Server) Close(ctx context.Context) error {
	s.closeOnce.Do(func() { close(s.done) })
	err := s.srv.Close()
	if errors.Is(err, gosmtp.ErrServerClosed) {
		err = nil
	}
	ended := make(chan struct{})
	go func() {
		s.sessions.Wait()
		close(ended)
	}()
	select {
	case <-ended:
	case <-ctx.Done():
		err = errors.Join(err, fmt.Errorf("smtp: sessions still running: %w", ctx.Err()))
	}
	return err
}

// errorLog sends go-smtp's connection errors to the server log.
type errorLog struct{ l *slog.Logger }

func (e errorLog) Printf(format string, v ...any) { e.l.Info("smtp: " + fmt.Sprintf(format, v...)) }
func (e errorLog) Println(v ...any)               { e.l.Info("smtp: " + fmt.Sprint(v...)) }

// NewSession implements gosmtp.Backend: one session per connection, closed
// when it outlives the session timeout.
func (s *Server) NewSession(c *gosmtp.Conn) (gosmtp.Session, error) {
	sess := &session{srv: s, ended: make(chan struct{})}
	s.sessions.Add(1)
	go func() {
		select {
		case <-s.clock.After(s.cfg.SessionTimeout):
			c.Close()
		case <-sess.ended:
		case <-s.done:
		}
	}()
	return sess, nil
}

// session is one connection's mail transaction: the envelope sender and
// the bindings its recipients address.
type session struct {
	srv       *Server
	ended     chan struct{}
	endedOnce sync.Once
	from      string
	targets   []*target
}

// target is a binding and the recipients that address it.
type target struct {
	binding *agentowl.Binding
	to      []string
}

// Replies (RFC 3463 enhanced status codes).
var (
	errUnknownRecipient = &gosmtp.SMTPError{Code: 550, EnhancedCode: gosmtp.EnhancedCode{5, 1, 1}, Message: "No such recipient here"}
	errTooLarge         = &gosmtp.SMTPError{Code: 552, EnhancedCode: gosmtp.EnhancedCode{5, 3, 4}, Message: "Message too large"}
	errMalformed        = &gosmtp.SMTPError{Code: 554, EnhancedCode: gosmtp.EnhancedCode{5, 6, 0}, Message: "Malformed message"}
	errUnavailable      = &gosmtp.SMTPError{Code: 451, EnhancedCode: gosmtp.EnhancedCode{4, 3, 0}, Message: "Temporary failure, try again later"}
	errRateLimited      = &gosmtp.SMTPError{Code: 450, EnhancedCode: gosmtp.EnhancedCode{4, 7, 1}, Message: "Too many messages for this recipient, try again later"}
)

// reply is the SMTP answer to an error of the accept path; its message
// keeps the reason (never a secret: the errors of the parser and use-case
// name the rule broken).
func (s *session) reply(err error) error {
	var se *gosmtp.SMTPError
	if errors.As(err, &se) {
		return se // the transport's own (too large while reading DATA)
	}
	if errors.Is(err, gosmtp.ErrTooLongLine) {
		return with(errMalformed, fmt.Sprintf("Line longer than %d bytes", s.srv.cfg.MaxLineLength))
	}
	switch agentowl.ErrorCode(err) {
	case agentowl.ECodeNotFound:
		return errUnknownRecipient
	case agentowl.ECodeTooLarge:
		return with(errTooLarge, agentowl.ErrorMessage(err))
	case agentowl.ECodeMalformedMessage:
		return with(errMalformed, agentowl.ErrorMessage(err))
	case agentowl.ECodeRateLimited:
		return errRateLimited
	}
	s.srv.logger.Error("smtp: message not accepted", "err", err)
	return errUnavailable
}

// with is base with msg as its text: one line of printable ASCII, at most
// 200 bytes (a reply line has 512 in all).
func with(base *gosmtp.SMTPError, msg string) *gosmtp.SMTPError {
	e := *base
	msg = strings.TrimSpace(strings.Map(func(r rune) rune {
		if r < ' ' || r > '~' {
			return ' '
		}
		return r
	}, msg))
	if len(msg) > 200 {
		msg = msg[:200]
	}
	if msg != "" {
		e.Message = msg
	}
	return &e
}

func (s *session) Reset() { s.from, s.targets = "", nil }

func (s *session) Logout() error {
	s.endedOnce.Do(func() {
		close(s.ended)
		s.srv.sessions.Done()
	})
	return nil
}

func (s *session) Mail(from string, _ *gosmtp.MailOptions) error {
	s.from = from
	return nil
}

// Rcpt accepts a recipient that is a live smtp binding's address.
func (s *session) Rcpt(to string, _ *gosmtp.RcptOptions) error {
	b, err := s.srv.in.AdmitAddress(context.Background(), to)
	if err != nil {
		return s.reply(err)
	}
	for _, t := range s.targets {
		if t.binding.ID == b.ID {
			if !slices.Contains(t.to, to) {
				t.to = append(t.to, to)
			}
			return nil
		}
	}
	s.targets = append(s.targets, &target{binding: b, to: []string{to}})
	return nil
}

// Data parses the message as it streams in and stores it as one event per
// binding; it returns (and the client gets 250) only once every event is
// committed. A failure after some bindings took their event answers 451:
// the sender's retry is deduplicated at those (ingress.AcceptMail).
func (s *session) Data(r io.Reader) error {
	ctx := context.Background()
	bindings := make([]*agentowl.Binding, 0, len(s.targets))
	for _, t := range s.targets {
		bindings = append(bindings, t.binding)
	}
	m, err := s.srv.in.ParseMail(ctx, r, bindings...)
	if err != nil {
		return s.reply(err)
	}
	defer m.Release(ctx)
	accepted := 0
	for _, t := range s.targets {
		_, err := s.srv.in.AcceptMail(ctx, t.binding, ingress.Envelope{From: s.from, To: t.to}, m)
		if agentowl.ErrorCode(err) == agentowl.ECodeNotFound {
			continue // deleted since RCPT: like an unknown recipient
		}
		if err != nil {
			return s.reply(err)
		}
		accepted++
	}
	if accepted == 0 {
		return errUnknownRecipient
	}
	return nil
}

// capListener hands out at most cap(slots) connections at once, at most
// perClient of them to one client address, and at most rate new ones per
// minute to one address. One more is refused the way MTAs refuse a busy
// server: a 421 greeting, which senders treat as "try again later", then
// the connection is closed. The refusal is that client's only: the others'
// connections go on.
type capListener struct {
	net.Listener
	slots     chan struct{}
	host      string
	perClient int
	rate      int
	clock     agentowl.Clock // the rate's minutes

	mu      sync.Mutex
	clients map[string]int // open connections by client address
	opened  map[string]int // connections accepted this minute by client address
	minute  time.Time
}

func (l *capListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		client := clientAddr(c)
		if !l.admit(client) {
			go refuseBusy(c, l.host)
			continue
		}
		select {
		case l.slots <- struct{}{}:
			return &slotConn{Conn: c, release: func() { <-l.slots; l.leave(client) }}, nil
		default:
			l.leave(client)
			go refuseBusy(c, l.host)
		}
	}
}

// admit counts a new connection of client, unless the client is at its
// limit of open connections or of new ones this minute.
func (l *capListener) admit(client string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if now := l.clock.Now().Truncate(time.Minute); !now.Equal(l.minute) {
		l.minute, l.opened = now, map[string]int{}
	}
	if l.clients[client] >= l.perClient || l.opened[client] >= l.rate {
		return false
	}
	l.clients[client]++
	l.opened[client]++
	return true
}

// leave forgets one of client's open connections.
func (l *capListener) leave(client string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.clients[client]--; l.clients[client] <= 0 {
		delete(l.clients, client)
	}
}

// clientAddr is the address a connection comes from (its IP, without the
// port).
func clientAddr(c net.Conn) string {
	host, _, err := net.SplitHostPort(c.RemoteAddr().String())
	if err != nil {
		return c.RemoteAddr().String()
	}
	return host
}

// refuseBusy answers a connection over the cap with 421 and closes it,
// without waiting long for a client that does not read.
func refuseBusy(c net.Conn, host string) {
	_ = c.SetWriteDeadline(time.Now().Add(5 * time.Second))
	_, _ = io.WriteString(c, "421 4.7.0 "+host+" Too many connections, try again later\r\n")
	_ = c.Close()
}

// slotConn gives its slot back when it is closed (once, however often
// Close is called: by the session, and by STARTTLS's wrapper).
type slotConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *slotConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}
