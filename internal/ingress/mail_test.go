package ingress

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/agentowl/agentowl"
)

// recordingSink is a PartSink that records its calls.
type recordingSink struct {
	calls  []string
	bytes  map[string]string
	cur    string
	failOn string // a Begin of this filename fails
	closed error
}

func (s *recordingSink) Begin(p *MailPart) error {
	s.calls = append(s.calls, "begin "+p.Path)
	if p.Filename != "" && p.Filename == s.failOn {
		return errors.New("sink full")
	}
	s.cur = p.Path
	return nil
}

func (s *recordingSink) Write(b []byte) (int, error) {
	s.bytes[s.cur] += string(b)
	return len(b), nil
}

func (s *recordingSink) End(p *MailPart) error {
	s.calls = append(s.calls, fmt.Sprintf("end %s %d %s", p.Path, p.Size, p.SHA256[:8]))
	return nil
}

func (s *recordingSink) Close(err error) error {
	s.calls = append(s.calls, "close")
	s.closed = err
	return nil
}

func (s *recordingSink) Retention(*agentowl.Binding) Retention { return nil }

func (s *recordingSink) Release(context.Context) {}

func parser(limits MailLimits, sink *recordingSink) *Service {
	s := &Service{cfg: Config{Mail: limits}.withDefaults()}
	if sink != nil {
		s.SetPartSinks(func(context.Context, []*agentowl.Binding) PartSink { return sink })
	}
	return s
}

const twoAttachments = "From: a@example.org\r\nSubject: files\r\nContent-Type: multipart/mixed; boundary=b\r\n\r\n" +
	"--b\r\nContent-Type: text/plain\r\n\r\nbody text\r\n" +
	"--b\r\nContent-Type: text/csv\r\nContent-Disposition: attachment; filename=a.csv\r\n\r\nx,y\r\n" +
	"--b\r\nContent-Type: application/octet-stream; name=b.bin\r\nContent-Transfer-Encoding: base64\r\n\r\nAAEC\r\n--b--\r\n"

// The PartSink sees every part but the body text, in order, with its
// decoded bytes, and is closed with nil when the message parsed.
func TestPartSinkSeesEachAttachment(t *testing.T) {
	sink := &recordingSink{bytes: map[string]string{}}
	m, err := parser(MailLimits{}, sink).ParseMail(t.Context(), strings.NewReader(twoAttachments))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"begin 2", "end 2 3 " + m.Parts[0].SHA256[:8], "begin 3", "end 3 3 " + m.Parts[1].SHA256[:8], "close"}
	if fmt.Sprint(sink.calls) != fmt.Sprint(want) || sink.closed != nil {
		t.Fatalf("calls = %q (closed with %v), want %q", sink.calls, sink.closed, want)
	}
	if sink.bytes["2"] != "x,y" || sink.bytes["3"] != "\x00\x01\x02" || m.Text != "body text" {
		t.Fatalf("bytes = %q, text %q", sink.bytes, m.Text)
	}
	if m.Parts[1].Filename != "b.bin" {
		t.Errorf("the name parameter of Content-Type is the filename: %+v", m.Parts[1])
	}
}

// A message refused after some parts passed closes the sink with the
// refusal, so it drops what it kept; a sink's error refuses the message.
func TestPartSinkClosedWithTheRefusal(t *testing.T) {
	sink := &recordingSink{bytes: map[string]string{}}
	_, err := parser(MailLimits{MaxParts: 2}, sink).ParseMail(t.Context(), strings.NewReader(twoAttachments))
	if agentowl.ErrorCode(err) != agentowl.ECodeTooLarge || sink.closed != err {
		t.Fatalf("err = %v, sink closed with %v", err, sink.closed)
	}
	sink = &recordingSink{bytes: map[string]string{}, failOn: "a.csv"}
	_, err = parser(MailLimits{}, sink).ParseMail(t.Context(), strings.NewReader(twoAttachments))
	if err == nil || err.Error() != "sink full" || agentowl.ErrorCode(err) != agentowl.ECodeInternal {
		t.Fatalf("a sink's error: %v", err)
	}
}

// The text body is kept up to 1 MiB, cut on a character boundary.
func TestMailTextTruncated(t *testing.T) {
	body := strings.Repeat("é", maxMailTextBytes) // two bytes each
	m, err := parser(MailLimits{MaxPartBytes: 4 << 20}, nil).ParseMail(t.Context(),
		strings.NewReader("Content-Type: text/plain; charset=utf-8\r\n\r\n"+body))
	if err != nil {
		t.Fatal(err)
	}
	if !m.TextTruncated || len(m.Text) != maxMailTextBytes || !strings.HasSuffix(m.Text, "é") {
		t.Fatalf("text of %d bytes, truncated %v", len(m.Text), m.TextTruncated)
	}
}

// Text keeps no NUL and no invalid UTF-8: events are JSON text.
func TestMailTextIsValidText(t *testing.T) {
	m, err := parser(MailLimits{}, nil).ParseMail(t.Context(), strings.NewReader("Subject: a\x00b\r\n\r\nx\x00y\xffz"))
	if err != nil {
		t.Fatal(err)
	}
	if m.Text != "x\uFFFDy\uFFFDz" || m.Subject != "ab" {
		t.Fatalf("text %q, subject %q", m.Text, m.Subject)
	}
}

// FuzzParseMail: any input is parsed or refused with a documented code,
// never a panic, and a parsed message's strings are valid text.
func FuzzParseMail(f *testing.F) {
	for _, seed := range []string{twoAttachments, "Subject: x\r\n\r\nbody", "Content-Type: multipart/mixed; boundary=b\r\n\r\n--b\r\n\r\n--b--",
		"From: =?UTF-8?B?w6k=?= <a@b.c>\r\nIn-Reply-To: <a@b> <c@d>\r\n\r\n", "Content-Transfer-Encoding: base64\r\n\r\n!!"} {
		f.Add(seed)
	}
	s := parser(MailLimits{MaxMessageBytes: 64 << 10, MaxParts: 5, MaxPartBytes: 8 << 10}, nil)
	f.Fuzz(func(t *testing.T, raw string) {
		m, err := s.ParseMail(context.Background(), strings.NewReader(raw))
		if err != nil {
			if c := agentowl.ErrorCode(err); c != agentowl.ECodeMalformedMessage && c != agentowl.ECodeTooLarge {
				t.Fatalf("error %v has code %s", err, c)
			}
			return
		}
		for _, v := range append([]string{m.Text, m.HTML, m.Subject, m.MessageID}, m.References...) {
			if strings.ContainsRune(v, 0) || !utf8.ValidString(v) {
				t.Fatalf("kept %q", v)
			}
		}
	})
}
