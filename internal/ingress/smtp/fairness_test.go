package smtp_test

import (
	"errors"
	"net"
	"net/smtp"
	"net/textproto"
	"strings"
	"testing"
	"time"

	"github.com/agentowl/agentowl/internal/server"
)

// dialFrom opens an SMTP session to addr from the loopback address from
// (127.0.0.2 is another client than 127.0.0.1 to the server).
func dialFrom(t *testing.T, from, addr string) (*smtp.Client, error) {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
	conn, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	host, _, _ := net.SplitHostPort(addr)
	c, err := smtp.NewClient(conn, host)
	if err != nil {
		conn.Close()
		return nil, err
	}
	t.Cleanup(func() { c.Close() })
	return c, nil
}

func refused421(err error) bool {
	var refused *textproto.Error
	return errors.As(err, &refused) && refused.Code == 421 && strings.HasPrefix(refused.Msg, "4.7.0")
}

// One client address holds at most AGENTOWL_SMTP_MAX_CLIENT_CONNECTIONS of
// the connections and opens at most AGENTOWL_SMTP_CLIENT_CONNECTION_RATE a
// minute; past either, that client alone is greeted 421 4.7.0 (issue 27:
// 500 idle connections from one address shut everyone else out).
func TestSMTPClientFairness(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(c *server.Config) {
		c.SMTP.MaxConnections, c.SMTP.MaxClientConnections, c.SMTP.ClientConnectionRate = 10, 2, 4
	}, func(t *testing.T, e *env) {
		addr := e.srv.SMTPAddr()
		var held []*smtp.Client
		for range 2 {
			c, err := dialFrom(t, "127.0.0.1", addr)
			if err != nil {
				t.Fatalf("a client's connection within its share: %v", err)
			}
			held = append(held, c)
		}
		if _, err := dialFrom(t, "127.0.0.1", addr); !refused421(err) {
			t.Fatalf("a third connection from one client: %v, want 421 4.7.0", err)
		}
		other, err := dialFrom(t, "127.0.0.2", addr)
		if err != nil {
			t.Fatalf("another client, while the first holds its share: %v", err)
		}
		if err := other.Noop(); err != nil {
			t.Fatal(err)
		}
		for _, c := range held {
			if err := c.Noop(); err != nil {
				t.Fatalf("a held session after the refusal: %v", err)
			}
		}
		// The rate: 127.0.0.1 opened 2 (and one refused, uncounted) this
		// minute; closing them frees its share, and two more reach its
		// rate of 4 a minute.
		for _, c := range held {
			if err := c.Quit(); err != nil {
				t.Fatal(err)
			}
		}
		opened := 0
		for opened < 2 {
			c, err := dialFrom(t, "127.0.0.1", addr)
			if refused421(err) {
				continue // the server has not seen a QUIT's close yet
			}
			if err != nil {
				t.Fatal(err)
			}
			opened++
			if err := c.Quit(); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := dialFrom(t, "127.0.0.1", addr); !refused421(err) {
			t.Fatalf("a fifth new connection in a minute from one client: %v, want 421 4.7.0", err)
		}
		e.clock.Advance(time.Minute) // the next minute: the client may connect again
		if c, err := dialFrom(t, "127.0.0.1", addr); err != nil {
			t.Fatalf("a new connection the next minute: %v", err)
		} else if err := c.Noop(); err != nil {
			t.Fatal(err)
		}
	})
}
