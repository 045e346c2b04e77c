package httpapi

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
)

// HTTPServer returns the http.Server for Handler with the configured
// timeouts. A slow client holds a connection only as long as they allow:
// ReadHeaderTimeout for the headers, ReadTimeout for the body (a deadline
// the middleware sets per request, so that it ends with the body and never
// cancels a handler that runs longer), WriteTimeout for the answer (long
// polls extend it for themselves) and IdleTimeout between requests.
func (s *Server) HTTPServer() *http.Server {
	return &http.Server{
		Handler:           s.Handler(),
		ReadHeaderTimeout: s.cfg.ReadHeaderTimeout,
		WriteTimeout:      s.cfg.WriteTimeout,
		IdleTimeout:       s.cfg.IdleTimeout,
	}
}

// LimitListener returns ln accepting at most MaxConnections connections at
// once; further clients wait in the kernel's backlog until one closes.
func (s *Server) LimitListener(ln net.Listener) net.Listener {
	return &limitListener{Listener: ln, slots: make(chan struct{}, s.cfg.MaxConnections), done: make(chan struct{})}
}

type limitListener struct {
	net.Listener
	slots     chan struct{}
	done      chan struct{}
	closeOnce sync.Once
}

func (l *limitListener) Accept() (net.Conn, error) {
	select {
	case l.slots <- struct{}{}:
	case <-l.done:
		return nil, net.ErrClosed
	}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.slots
		return nil, err
	}
	return &limitConn{Conn: c, release: func() { <-l.slots }}, nil
}

func (l *limitListener) Close() error {
	l.closeOnce.Do(func() { close(l.done) })
	return l.Listener.Close()
}

// limitConn gives its slot back once, however often it is closed.
type limitConn struct {
	net.Conn
	release func()
	once    sync.Once
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}

// bodyReader reads a request body under the read deadline the middleware
// set, and lifts the deadline at the body's end: past it, net/http's check
// for a closed connection would otherwise cancel a handler still at work.
type bodyReader struct {
	io.ReadCloser
	rc  *http.ResponseController
	eof bool
}

func (b *bodyReader) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF && !b.eof {
		b.eof = true
		_ = b.rc.SetReadDeadline(time.Time{})
	}
	return n, err
}

// unreadBodyGrace is how long net/http may go on draining a body the
// handler left unread, as its own rstAvoidanceDelay: enough for a client
// that sent its whole body to have it read, so that closing the connection
// does not reset it before the client reads the answer.
const unreadBodyGrace = 500 * time.Millisecond

// abandon bounds what is left of reading a body the handler left unread:
// net/http drains up to 256 KiB of it after the answer, hoping to reuse the
// connection (which closes instead, see statusRecorder), and would wait for
// a trickling body until ReadTimeout.
func (b *bodyReader) abandon() {
	if b != nil && !b.eof {
		_ = b.rc.SetReadDeadline(time.Now().Add(unreadBodyGrace))
	}
}

// limitBody puts the body of r under ReadTimeout and its size limit (see
// bodyLimit); it returns the tracked body (nil for a request without one).
func (s *Server) limitBody(w http.ResponseWriter, r *http.Request) *bodyReader {
	var body *bodyReader
	if r.ContentLength != 0 {
		rc := http.NewResponseController(w)
		_ = rc.SetReadDeadline(time.Now().Add(s.cfg.ReadTimeout))
		body = &bodyReader{ReadCloser: r.Body, rc: rc}
		r.Body = body
	}
	r.Body = http.MaxBytesReader(w, r.Body, s.bodyLimit(r))
	return body
}

// bodyLimit is the size limit of r's body: MaxBodyBytes, but for the route
// of forwarded email, whose limit is the email channels' message limit
// (the parser enforces it exactly, while streaming).
func (s *Server) bodyLimit(r *http.Request) int64 {
	if s.work != nil && strings.HasPrefix(r.URL.Path, "/in/cloudflare-email/") {
		return max(s.cfg.MaxBodyBytes, s.ingress.MailLimits().MaxMessageBytes+1)
	}
	return s.cfg.MaxBodyBytes
}

// extendWriteDeadline gives the answer to r d more than WriteTimeout from
// now: long polls wait by design.
func (s *Server) extendWriteDeadline(r *http.Request, d time.Duration) {
	if rc, ok := r.Context().Value(responseControllerCtx).(*http.ResponseController); ok {
		_ = rc.SetWriteDeadline(time.Now().Add(d + s.cfg.WriteTimeout))
	}
}

func withResponseController(ctx context.Context, w http.ResponseWriter) context.Context {
	return context.WithValue(ctx, responseControllerCtx, http.NewResponseController(w))
}
