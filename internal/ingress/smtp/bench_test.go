package smtp_test

import (
	"encoding/base64"
	"fmt"
	"io"
	"net/smtp"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentowl/agentowl/internal/store/storetest"
)

// BenchmarkSMTPThroughput sends messages with a 100 KiB body over 16
// concurrent SMTP sessions; each is parsed, stored and handed to an
// agent-work endpoint (its work and handoff committed) before its 250.
// Reports messages/s (BENCHMARKS.md). The client shares the two cores with
// the server: "net-smtp" is Go's net/smtp (one command, one reply, the
// body dot-stuffed a byte at a time); "pipelined" sends as MTAs do with
// PIPELINING (MAIL, RCPT and DATA in one write) and the body already
// dot-stuffed in one write, so that less of the machine goes to the client
// (the server does the same work: DATA, dot-unstuffing, parsing); "bdat"
// sends the body with CHUNKING (RFC 3030) as senders that support it do,
// which spares the server the dot-unstuffing.
func BenchmarkSMTPThroughput(b *testing.B) {
	for _, backend := range storetest.Backends(b) {
		for _, client := range []string{"net-smtp", "pipelined", "bdat"} {
			b.Run(backend.Name+"/"+client, func(b *testing.B) {
				e := start(b, backend, nil)
				_, addr := e.binding("")
				body := strings.Repeat(strings.Repeat("x", 76)+"\r\n", 100<<10/78)
				const sessions = 16
				var next atomic.Int64
				b.ResetTimer()
				began := time.Now()
				var wg sync.WaitGroup
				for range sessions {
					wg.Go(func() {
						send, closeSession, err := dialBench(client, e.srv.SMTPAddr())
						if err != nil {
							b.Error(err)
							return
						}
						defer closeSession()
						for {
							i := next.Add(1)
							if i > int64(b.N) {
								return
							}
							msg := fmt.Sprintf("From: bench@example.org\r\nSubject: bench %d\r\nMessage-ID: <bench-%d-%d@example.org>\r\n\r\n%s",
								i, i, began.UnixNano(), body)
							if err := send("bench@example.org", addr, msg); err != nil {
								b.Error(err)
								return
							}
						}
					})
				}
				wg.Wait()
				b.ReportMetric(float64(b.N)/time.Since(began).Seconds(), "msgs/s")
			})
		}
	}
}

// dialBench opens one SMTP session with the named client and returns the
// function that sends one message on it.
func dialBench(client, addr string) (send func(from, to, msg string) error, closeSession func(), err error) {
	if client == "net-smtp" {
		c, err := smtp.Dial(addr)
		if err != nil {
			return nil, nil, err
		}
		return func(from, to, msg string) error { return sendOn(c, from, []string{to}, msg) }, func() { c.Close() }, nil
	}
	c, _, err := dialRaw(addr)
	if err != nil {
		return nil, nil, err
	}
	if client == "bdat" {
		return func(from, to, msg string) error { return c.sendBDAT(from, to, msg, 1) }, c.close, nil
	}
	return c.sendData, c.close, nil
}

// attachmentStream writes a message of three 6 MiB attachments (24 MiB
// as base64) line by line, never holding it whole.
type attachmentStream struct {
	w io.Writer
}

func (s attachmentStream) write() error {
	if _, err := io.WriteString(s.w, "From: big@example.org\r\nSubject: large\r\nContent-Type: multipart/mixed; boundary=b\r\n\r\n"); err != nil {
		return err
	}
	line := []byte(base64.StdEncoding.EncodeToString(make([]byte, 57)) + "\r\n")
	for p := range 3 {
		fmt.Fprintf(s.w, "--b\r\nContent-Type: application/octet-stream\r\nContent-Disposition: attachment; filename=part%d.bin\r\n"+
			"Content-Transfer-Encoding: base64\r\n\r\n", p)
		for range 6 << 20 / 57 {
			if _, err := s.w.Write(line); err != nil {
				return err
			}
		}
	}
	_, err := io.WriteString(s.w, "--b--\r\n")
	return err
}

// BenchmarkSMTPLargeMessageHeap receives a 24 MiB message (three 6 MiB
// attachments) and reports the server process's peak heap growth over its
// heap before the message: the parser streams, so it stays far below the
// message's size (BENCHMARKS.md).
func BenchmarkSMTPLargeMessageHeap(b *testing.B) {
	for _, backend := range storetest.Backends(b) {
		b.Run(backend.Name, func(b *testing.B) {
			e := start(b, backend, nil)
			_, addr := e.binding("")
			var peak float64
			for range b.N {
				runtime.GC()
				var ms runtime.MemStats
				runtime.ReadMemStats(&ms)
				base := ms.HeapInuse
				var most atomic.Uint64
				stop := make(chan struct{})
				sampled := make(chan struct{})
				go func() {
					defer close(sampled)
					for {
						var ms runtime.MemStats
						runtime.ReadMemStats(&ms)
						if ms.HeapInuse > most.Load() {
							most.Store(ms.HeapInuse)
						}
						select {
						case <-stop:
							return
						case <-time.After(2 * time.Millisecond):
						}
					}
				}()
				c, err := smtp.Dial(e.srv.SMTPAddr())
				if err != nil {
					b.Fatal(err)
				}
				if err := c.Mail("big@example.org"); err != nil {
					b.Fatal(err)
				}
				if err := c.Rcpt(addr); err != nil {
					b.Fatal(err)
				}
				w, err := c.Data()
				if err != nil {
					b.Fatal(err)
				}
				if err := (attachmentStream{w}).write(); err != nil {
					b.Fatal(err)
				}
				if err := w.Close(); err != nil {
					b.Fatal(err)
				}
				c.Close()
				close(stop)
				<-sampled
				if most.Load() > base {
					peak = max(peak, float64(most.Load()-base)/(1<<20))
				}
			}
			b.ReportMetric(peak, "heap-growth-MiB")
		})
	}
}
