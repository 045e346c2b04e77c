package smtp_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net/smtp"
	"net/textproto"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentowl/agentowl/internal/server"
)

// With the database unable to store the event, DATA answers 451 4.3.0 and
// nothing is half-written; the sender's retry, once the store is back,
// takes the message once.
func TestSMTPStoreUnavailable(t *testing.T) {
	t.Parallel()
	forEachBackend(t, nil, func(t *testing.T, e *env) {
		_, addr := e.binding("")
		msg := crlf("From: frank@example.org\nSubject: retry me\nMessage-ID: <retry@example.org>\n\nHello.\n")
		conversations := e.count("conversations")
		e.exec("ALTER TABLE events RENAME TO events_away")
		err := e.send("frank@example.org", []string{addr}, msg)
		e.exec("ALTER TABLE events_away RENAME TO events")
		wantReply(t, "store unavailable", err, 451, "4.3.0")
		if n := e.count("conversations"); n != conversations {
			t.Fatalf("a refused message left %d conversations", n-conversations)
		}
		if err := e.send("frank@example.org", []string{addr}, msg); err != nil {
			t.Fatalf("retry: %v", err)
		}
		if n := len(e.events()); n != 1 {
			t.Fatalf("%d events after the retry, want 1", n)
		}
	})
}

// The server closes a connection that outlives the session timeout.
func TestSMTPSessionTimeout(t *testing.T) {
	t.Parallel()
	const timeout = 17 * time.Minute
	forEachBackend(t, func(c *server.Config) { c.SMTP.SessionTimeout = timeout }, func(t *testing.T, e *env) {
		c := e.dial()
		for !e.clock.PendingAt(timeout) { // the session's timer is set
			time.Sleep(time.Millisecond)
		}
		if err := c.Noop(); err != nil {
			t.Fatalf("before the timeout: %v", err)
		}
		e.clock.Advance(timeout)
		deadline := time.Now().Add(10 * time.Second)
		for c.Noop() == nil {
			if time.Now().After(deadline) {
				t.Fatal("the session is still open after its timeout")
			}
			time.Sleep(time.Millisecond)
		}
	})
}

// STARTTLS is offered with a configured certificate, and a message sent
// over it is accepted.
func TestSMTPStartTLS(t *testing.T) {
	t.Parallel()
	certFile, keyFile, pool := selfSigned(t, "mx.example.com")
	forEachBackend(t, func(c *server.Config) { c.SMTP.CertFile, c.SMTP.KeyFile = certFile, keyFile }, func(t *testing.T, e *env) {
		_, addr := e.binding("")
		c := e.dial()
		if ok, _ := c.Extension("STARTTLS"); !ok {
			t.Fatal("STARTTLS is not offered")
		}
		if err := c.StartTLS(&tls.Config{ServerName: "mx.example.com", RootCAs: pool}); err != nil {
			t.Fatal(err)
		}
		if _, ok := c.TLSConnectionState(); !ok {
			t.Fatal("no TLS after STARTTLS")
		}
		if err := sendOn(c, "gina@example.org", []string{addr}, crlf("From: gina@example.org\nSubject: over TLS\n\nHi.\n")); err != nil {
			t.Fatal(err)
		}
		bySubject(t, e.events(), "over TLS")
	})
}

// Without a certificate, STARTTLS is not offered.
func TestSMTPNoStartTLSWithoutCertificate(t *testing.T) {
	t.Parallel()
	forEachBackend(t, nil, func(t *testing.T, e *env) {
		if ok, _ := e.dial().Extension("STARTTLS"); ok {
			t.Fatal("STARTTLS is offered without a certificate")
		}
	})
}

// selfSigned writes a self-signed certificate for host and its key to PEM
// files and returns them with a pool that trusts the certificate.
func selfSigned(t *testing.T, host string) (certFile, keyFile string, pool *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: host}, DNSNames: []string{host},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	pool = x509.NewCertPool()
	pool.AddCert(cert)
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile, pool
}

// A connection over AGENTOWL_SMTP_MAX_CONNECTIONS is greeted 421 4.7.0 (a
// sender retries later) and closed, leaving the sessions in progress alone;
// the slot is free again once a session ends.
func TestSMTPMaxConnections(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(c *server.Config) { c.SMTP.MaxConnections = 1 }, func(t *testing.T, e *env) {
		first := e.dial()
		_, err := smtp.Dial(e.srv.SMTPAddr())
		var refused *textproto.Error
		if !errors.As(err, &refused) || refused.Code != 421 || !strings.HasPrefix(refused.Msg, "4.7.0") {
			t.Fatalf("a second connection: %v", err)
		}
		if err := first.Noop(); err != nil {
			t.Fatalf("the first session after the refusal: %v", err)
		}
		if err := first.Quit(); err != nil {
			t.Fatal(err)
		}
		// The server closes its end after QUIT; the slot is free then.
		for deadline := time.Now().Add(time.Minute); ; time.Sleep(time.Millisecond) {
			c, err := smtp.Dial(e.srv.SMTPAddr())
			if err == nil {
				defer c.Close()
				if err := c.Noop(); err != nil {
					t.Fatal(err)
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the slot never came back: %v", err)
			}
		}
	})
}
