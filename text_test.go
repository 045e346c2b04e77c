package agentowl_test

import (
	"testing"

	"github.com/agentowl/agentowl"
)

func TestClip(t *testing.T) {
	for _, c := range []struct {
		in   string
		n    int
		want string
	}{
		{"short", 10, "short"},
		{"exactly10!", 10, "exactly10!"},
		{"abcdefghijkl", 10, "abcdefg…"},
		{"ééééé", 8, "éé…"}, // never half a character
	} {
		if got := agentowl.Clip(c.in, c.n); got != c.want || len(got) > max(c.n, len(c.in)) {
			t.Errorf("Clip(%q, %d) = %q, want %q", c.in, c.n, got, c.want)
		}
	}
}
