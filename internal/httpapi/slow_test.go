package httpapi_test

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"testing"
	"time"

	"github.com/agentowl/agentowl/internal/httpapi"
	"github.com/agentowl/agentowl/internal/server/servertest"
)

// serveReal starts a second replica of e's server (same database, same
// clock) with the HTTP settings of cfg, as agentowl serve runs it, and
// returns its address.
func serveReal(t *testing.T, e *workEnv, cfg httpapi.Config) string {
	t.Helper()
	sc := e.server.Config()
	sc.Listen, sc.HTTP, sc.Stdout = "127.0.0.1:0", cfg, nil
	return servertest.Start(t, sc).Addr()
}

// slowBody opens a connection and sends a POST's headers announcing a
// JSON body (smaller than what net/http would give up on reading after an
// answer), then trickles the body a byte at a time until the
// server stops reading. The connection gives up after syncLimit, so that a
// server that waits for the body fails the test instead of hanging it.
func slowBody(t *testing.T, addr, path, token string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(syncLimit))
	// Idempotency-Key: the provider API checks it, too, before the body.
	auth := "Idempotency-Key: k1\r\n"
	if token != "" {
		auth += "Authorization: Bearer " + token + "\r\n"
	}
	if _, err := fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: agentowl\r\n%sContent-Type: application/json\r\nContent-Length: %d\r\n\r\n{",
		path, auth, 100_000); err != nil {
		t.Fatal(err)
	}
	go func() {
		for {
			time.Sleep(5 * time.Millisecond)
			if _, err := c.Write([]byte(" ")); err != nil {
				return
			}
		}
	}()
	return c
}

// answerOf reads the server's answer on c and checks that the server then
// closes the connection; it returns nil when the server closed it without
// answering.
func answerOf(t *testing.T, c net.Conn) *http.Response {
	t.Helper()
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("no answer and the connection still open after %s: the server waits for the body", syncLimit)
	}
	if err != nil {
		return nil // closed (or reset) without an answer
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if _, err := br.ReadByte(); errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("answered %d but kept the connection open for the rest of the body", resp.StatusCode)
	}
	return resp
}

// The slow-body test: a body that trickles in is cut off once ReadTimeout
// has passed since its headers, on every surface; unauthenticated callers
// and unknown ingress addresses are answered, and their connections
// closed, before any of the body is read (here ReadTimeout is an hour).
func TestSlowBodies(t *testing.T) {
	parallelWork(t, func(t *testing.T, e *workEnv) {
		h := e.handOff(t)
		oh := newOpHarness(t, e.env)
		_, cred := oh.instance()

		short := serveReal(t, e, httpapi.Config{ReadTimeout: 50 * time.Millisecond})
		for _, c := range []struct{ what, path, token string }{
			{"operator API", "/api/v1/tenants", e.operatorToken},
			{"provider API", "/v1/requests", cred},
			{"runtime API", "/runtime/v1/work/" + h.workID + "/callbacks", h.token},
			{"ingress", h.ingress, ""},
		} {
			t.Run(c.what, func(t *testing.T) {
				t.Parallel()
				if resp := answerOf(t, slowBody(t, short, c.path, c.token)); resp != nil {
					t.Errorf("a body trickling past ReadTimeout was answered %d, want the connection dropped", resp.StatusCode)
				}
			})
		}

		long := serveReal(t, e, httpapi.Config{ReadTimeout: time.Hour})
		for _, c := range []struct {
			what, path, token string
			status            int
		}{
			{"no credential, operator API", "/api/v1/tenants", "", http.StatusUnauthorized},
			{"unknown credential, provider API", "/v1/requests", "owl_inst_unknown", http.StatusUnauthorized},
			{"unknown credential, runtime API", "/runtime/v1/work/" + h.workID + "/callbacks", "owl_rt_unknown", http.StatusUnauthorized},
			{"unknown ingress address", "/in/webhook/in_unknown", "", http.StatusNotFound},
			{"no such route", "/nowhere", "", http.StatusNotFound},
		} {
			t.Run(c.what, func(t *testing.T) {
				t.Parallel()
				resp := answerOf(t, slowBody(t, long, c.path, c.token))
				if resp == nil || resp.StatusCode != c.status || !resp.Close {
					t.Errorf("answer %+v, want %d with Connection: close before the body is read", resp, c.status)
				}
			})
		}
	})
}

// Long polls wait by design: GET /v1/requests/{id}?wait= extends the write
// deadline by its wait. Here WriteTimeout is a nanosecond, so any other
// answer is lost.
func TestLongPollOutlivesWriteTimeout(t *testing.T) {
	parallelWork(t, func(t *testing.T, e *workEnv) {
		oh := newOpHarness(t, e.env)
		_, cred := oh.instance()
		req := oh.submit(cred, "deploy", map[string]any{}, "1h")
		addr := serveReal(t, e, httpapi.Config{WriteTimeout: time.Nanosecond})
		get := func(query string) (*http.Response, error) {
			r, err := http.NewRequest("GET", "http://"+addr+"/v1/requests/"+req["id"].(string)+query, nil)
			if err != nil {
				t.Fatal(err)
			}
			r.Header.Set("Authorization", "Bearer "+cred)
			resp, err := (&http.Client{Timeout: syncLimit}).Do(r)
			if err == nil {
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
			return resp, err
		}
		if resp, err := get(""); err == nil {
			t.Fatalf("a plain read past WriteTimeout was answered %d; the write deadline is not set", resp.StatusCode)
		}
		oh.ok(oh.decide(e.operatorToken, "default", req["id"].(string), map[string]any{"decision": "deny"}), http.StatusOK)
		resp, err := get("?wait=30s")
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("long poll past WriteTimeout: %v %v, want 200", resp, err)
		}
	})
}

// At most MaxConnections connections are served at once; the next is
// accepted when one closes.
func TestMaxConnections(t *testing.T) {
	t.Parallel()
	// The listener alone is under test: no services behind it.
	api := httpapi.New(httpapi.Services{}, httpapi.Config{MaxConnections: 1})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	lim := api.LimitListener(ln)
	defer lim.Close()
	for range 2 {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
	}
	first, err := lim.Accept()
	if err != nil {
		t.Fatal(err)
	}
	second := make(chan net.Conn, 1)
	go func() {
		c, err := lim.Accept()
		if err == nil {
			second <- c
		}
	}()
	// A limiter that let it through would hand it over at once: both
	// connections wait in the backlog. Give its goroutine every chance.
	for range 1000 {
		runtime.Gosched()
	}
	select {
	case <-second:
		t.Fatal("a second connection was accepted while the first is open")
	default:
	}
	first.Close()
	(<-second).Close()
}
