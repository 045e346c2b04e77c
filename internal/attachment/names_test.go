package attachment_test

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/agentowl/agentowl/internal/attachment"
)

func TestSafeName(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("é", 200) + ".pdf" // 404 bytes
	for _, c := range []struct{ in, want string }{
		{"report.pdf", "report.pdf"},
		{"../../etc/passwd", "_.._etc_passwd"},
		{"..\\..\\windows\\system32", "_.._windows_system32"},
		{"/absolute", "_absolute"},
		{"a\x00b.txt", "ab.txt"},
		{"tab\tand\nnewline", "tab and newline"},
		{"evil\u202Efdp.exe", "evilfdp.exe"},
		{"\u2066isolate\u2069.txt", "isolate.txt"},
		{"zero\u200Bwidth\uFEFF.txt", "zerowidth.txt"},
		{"family \U0001F468\u200D\U0001F469.png", "family \U0001F468\u200D\U0001F469.png"},
		{"C:\\boot.ini", "C__boot.ini"},
		{`what?<*>|".txt`, "what______.txt"},
		{"...hidden", "hidden"},
		{"trailing. . ", "trailing"},
		{"\xff\xfe.txt", "\uFFFD.txt"},
		{"", "attachment-3"},
		{"../", "_"},
		{"..", "attachment-3"},
		{"\u202E", "attachment-3"},
	} {
		if got := attachment.SafeName(c.in, 2); got != c.want {
			t.Errorf("SafeName(%q) = %q, want %q", c.in, got, c.want)
		}
	}
	got := attachment.SafeName(long, 0)
	if len(got) > attachment.MaxNameBytes || !utf8.ValidString(got) || !strings.HasSuffix(got, ".pdf") || !strings.HasPrefix(got, "éé") {
		t.Errorf("300-character name: %q (%d bytes)", got, len(got))
	}
	ascii := attachment.SafeName(strings.Repeat("a", 300), 0)
	if len(ascii) != attachment.MaxNameBytes {
		t.Errorf("300 ASCII characters: %d bytes", len(ascii))
	}
}

func FuzzSafeName(f *testing.F) {
	for _, s := range []string{"report.pdf", "../../etc/passwd", "evil\u202Efdp.exe", "a\x00b", strings.Repeat("é", 300), "\xff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		got := attachment.SafeName(in, 0)
		if got == "" || len(got) > attachment.MaxNameBytes || !utf8.ValidString(got) {
			t.Fatalf("SafeName(%q) = %q", in, got)
		}
		if strings.ContainsAny(got, "/\\\x00") || strings.HasPrefix(got, ".") || got != strings.TrimSpace(got) {
			t.Fatalf("SafeName(%q) = %q", in, got)
		}
		for _, r := range got {
			if r < ' ' || r == 0x7f || (r >= 0x80 && r < 0xa0) || (r >= 0x202a && r <= 0x202e) || (r >= 0x2066 && r <= 0x2069) ||
				r == 0x200e || r == 0x200f || r == 0x061c {
				t.Fatalf("SafeName(%q) = %q keeps %U", in, got, r)
			}
		}
	})
}
