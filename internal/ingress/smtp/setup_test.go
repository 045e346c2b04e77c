package smtp_test

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/smtp"
	"net/textproto"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentowl/agentowl"
	"github.com/agentowl/agentowl/internal/clocktest"
	"github.com/agentowl/agentowl/internal/server"
	"github.com/agentowl/agentowl/internal/server/servertest"
	"github.com/agentowl/agentowl/internal/store/storetest"
)

// env is a running server with an SMTP listener, an agent-work endpoint
// and the operator token of tenant default.
type env struct {
	t   testing.TB
	srv *server.Server
	// database is the SQLite file or the PostgreSQL URL.
	database string
	clock    *clocktest.Fake
	token    string
	endpoint string
}

// forEachBackend runs fn as a parallel subtest per store backend, on a
// server whose configuration adjust may change first.
func forEachBackend(t *testing.T, adjust func(c *server.Config), fn func(t *testing.T, e *env)) {
	for _, b := range storetest.Backends(t) {
		t.Run(b.Name, func(t *testing.T) {
			t.Parallel()
			fn(t, start(t, b, adjust))
		})
	}
}

func start(t testing.TB, b storetest.Backend, adjust func(c *server.Config)) *env {
	t.Helper()
	sc := servertest.Config(t, b)
	clock := clocktest.New(time.Date(2026, 10, 6, 12, 0, 0, 0, time.UTC))
	sc.Clock, sc.NoDelivery = clock, true
	sc.SMTP.Listen, sc.SMTP.Hostname = "127.0.0.1:0", "mx.example.com"
	sc.Ingress.SMTPDomain = "mail.example.com"
	if adjust != nil {
		adjust(&sc)
	}
	srv := servertest.Start(t, sc)
	e := &env{t: t, srv: srv, clock: clock, token: srv.BootstrapToken(), database: sc.DatabaseURL}
	if e.database == "" {
		// The server's own writers (the scheduler's jobs) may hold the
		// write lock for a moment: wait for it, as the store does.
		e.database = "file:" + filepath.Join(sc.DataDir, "agentowl.db") + "?_pragma=busy_timeout(10000)"
	}
	e.endpoint = e.api(http.MethodPost, "/endpoints", map[string]any{"name": "runtime", "url": "https://runtime.example.com/events",
		"config": map[string]any{"agent_work": true}}, http.StatusCreated)["id"].(string)
	// Tenant default's named addresses are at mail.example.com, which a
	// system admin (default's own) assigns to it (docs/channels.md, "Mail domains").
	e.call(http.MethodPost, "/api/v1/mail-domains", map[string]any{"domain": "mail.example.com", "tenant": "default"}, http.StatusCreated)
	return e
}

// api calls the operator API of tenant default and wants status.
func (e *env) api(method, path string, body any, status int) map[string]any {
	e.t.Helper()
	return e.call(method, "/api/v1/tenants/default"+path, body, status)
}

// call calls the operator API at path as default's admin and wants status.
func (e *env) call(method, path string, body any, status int) map[string]any {
	e.t.Helper()
	data, _ := json.Marshal(body)
	req, _ := http.NewRequest(method, e.srv.URL()+path, bytes.NewReader(data))
	req.Header.Set("Authorization", "Bearer "+e.token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != status {
		e.t.Fatalf("%s %s: %d, want %d: %s", method, path, resp.StatusCode, status, out)
	}
	var doc map[string]any
	_ = json.Unmarshal(out, &doc)
	return doc
}

// binding creates an smtp binding with address (generated when "") and
// returns its ID and address.
func (e *env) binding(address string) (id, addr string) {
	e.t.Helper()
	body := map[string]any{"channel": "smtp", "endpoint_id": e.endpoint}
	if address != "" {
		body["address"] = address
	}
	b := e.api(http.MethodPost, "/bindings", body, http.StatusCreated)
	return b["id"].(string), b["address"].(string)
}

// dial opens an SMTP client session to the server's listener.
func (e *env) dial() *smtp.Client {
	e.t.Helper()
	c, err := smtp.Dial(e.srv.SMTPAddr())
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { c.Close() })
	if err := c.Hello("client.example.org"); err != nil {
		e.t.Fatal(err)
	}
	return c
}

// send sends msg from from to each of to in one session and returns the
// first refusal (a *textproto.Error), or nil once the server said 250.
func (e *env) send(from string, to []string, msg string) error {
	e.t.Helper()
	return sendOn(e.dial(), from, to, msg)
}

func sendOn(c *smtp.Client, from string, to []string, msg string) error {
	if err := c.Mail(from); err != nil {
		return err
	}
	for _, rcpt := range to {
		if err := c.Rcpt(rcpt); err != nil {
			return err
		}
	}
	w, err := c.Data()
	if err != nil {
		return err
	}
	if _, err := io.WriteString(w, msg); err != nil {
		return err
	}
	return w.Close()
}

// wantReply fails the test unless err is the SMTP reply code with the
// enhanced status code first in its text.
func wantReply(t *testing.T, what string, err error, code int, enhanced string) {
	t.Helper()
	var te *textproto.Error
	if !errors.As(err, &te) || te.Code != code || !strings.HasPrefix(te.Msg, enhanced+" ") {
		t.Fatalf("%s: got %v, want %d %s", what, err, code, enhanced)
	}
}

// events returns the events handed to the endpoint as work, in no
// particular order.
func (e *env) events() []*agentowl.Event {
	e.t.Helper()
	ctx := context.Background()
	var out []*agentowl.Event
	err := e.srv.Store().Read(ctx, func(tx agentowl.Tx) error {
		tn, err := tx.TenantGetByName(ctx, "default")
		if err != nil {
			return err
		}
		ws, err := tx.WorkList(ctx, agentowl.WorkListParams{TenantID: tn.ID, Limit: 1000})
		if err != nil {
			return err
		}
		out = nil
		for _, w := range ws {
			ev, err := tx.EventGet(ctx, w.EventID)
			if err != nil {
				return err
			}
			out = append(out, ev)
		}
		return nil
	})
	if err != nil {
		e.t.Fatal(err)
	}
	return out
}

// bySubject returns the one event whose payload has subject.
func bySubject(t *testing.T, evs []*agentowl.Event, subject string) *agentowl.Event {
	t.Helper()
	var found *agentowl.Event
	for _, ev := range evs {
		if payload(t, ev)["subject"] == subject {
			if found != nil {
				t.Fatalf("two events with subject %q", subject)
			}
			found = ev
		}
	}
	if found == nil {
		t.Fatalf("no event with subject %q", subject)
	}
	return found
}

// payload decodes an event's payload.
func payload(t *testing.T, ev *agentowl.Event) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(ev.Payload, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// withDB opens the server's database past the store for use, and fails
// the test on use's error.
func (e *env) withDB(use func(db *sql.DB) error) {
	e.t.Helper()
	driver := "sqlite"
	if server.IsPostgresURL(e.database) {
		driver = "pgx"
	}
	db, err := sql.Open(driver, e.database)
	if err != nil {
		e.t.Fatal(err)
	}
	defer db.Close()
	if err := use(db); err != nil {
		e.t.Fatal(err)
	}
}

// exec runs statements on the server's database past the store.
func (e *env) exec(queries ...string) {
	e.t.Helper()
	e.withDB(func(db *sql.DB) error {
		for _, q := range queries {
			if _, err := db.Exec(q); err != nil {
				return fmt.Errorf("%s: %v", q, err)
			}
		}
		return nil
	})
}

// count counts the rows of a table past the store.
func (e *env) count(table string) (n int) {
	e.t.Helper()
	e.withDB(func(db *sql.DB) error { return db.QueryRow("SELECT count(*) FROM " + table).Scan(&n) })
	return n
}

// crlf turns a message written with \n line ends into the wire form.
func crlf(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "\r\n", "\n"), "\n", "\r\n")
}

// rawClient speaks SMTP over one connection as MTAs do: commands
// pipelined (PIPELINING), the body written in one piece, with DATA or with
// BDAT (CHUNKING).
type rawClient struct {
	conn net.Conn
	w    *bufio.Writer
	r    *textproto.Reader
}

// dialRaw connects, reads the greeting and says EHLO; it returns the
// extensions the server announced.
func dialRaw(addr string) (*rawClient, []string, error) {
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		return nil, nil, err
	}
	c := &rawClient{conn: conn, w: bufio.NewWriterSize(conn, 128<<10), r: textproto.NewReader(bufio.NewReader(conn))}
	if _, err := c.expect(220); err != nil {
		conn.Close()
		return nil, nil, err
	}
	fmt.Fprintf(c.w, "EHLO client.example.org\r\n")
	msg, err := c.flushExpect(250)
	if err != nil {
		conn.Close()
		return nil, nil, err
	}
	return c, strings.Split(msg, "\n"), nil
}

func (c *rawClient) expect(code int) (string, error) {
	_, msg, err := c.r.ReadResponse(code)
	return msg, err
}

func (c *rawClient) flushExpect(codes ...int) (string, error) {
	if err := c.w.Flush(); err != nil {
		return "", err
	}
	var last string
	for _, code := range codes {
		msg, err := c.expect(code)
		if err != nil {
			return msg, err
		}
		last = msg
	}
	return last, nil
}

// sendData sends msg (CRLF lines, none beginning with a dot) with DATA.
func (c *rawClient) sendData(from, to, msg string) error {
	fmt.Fprintf(c.w, "MAIL FROM:<%s>\r\nRCPT TO:<%s>\r\nDATA\r\n", from, to)
	if _, err := c.flushExpect(250, 250, 354); err != nil {
		return err
	}
	c.w.WriteString(msg)
	if !strings.HasSuffix(msg, "\r\n") {
		c.w.WriteString("\r\n")
	}
	c.w.WriteString(".\r\n")
	_, err := c.flushExpect(250)
	return err
}

// sendBDAT sends msg as is in n BDAT chunks, the last one LAST.
func (c *rawClient) sendBDAT(from, to, msg string, n int) error {
	fmt.Fprintf(c.w, "MAIL FROM:<%s>\r\nRCPT TO:<%s>\r\n", from, to)
	if _, err := c.flushExpect(250, 250); err != nil {
		return err
	}
	size := (len(msg) + n - 1) / n
	for off := 0; off < len(msg) || off == 0; off += size {
		chunk, last := msg[off:min(off+size, len(msg))], off+size >= len(msg)
		if last {
			fmt.Fprintf(c.w, "BDAT %d LAST\r\n", len(chunk))
		} else {
			fmt.Fprintf(c.w, "BDAT %d\r\n", len(chunk))
		}
		c.w.WriteString(chunk)
		if _, err := c.flushExpect(250); err != nil {
			return err
		}
		if last {
			break
		}
	}
	return nil
}

func (c *rawClient) close() {
	fmt.Fprintf(c.w, "QUIT\r\n")
	_ = c.w.Flush()
	c.conn.Close()
}
