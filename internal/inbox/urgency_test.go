package inbox

import (
	"testing"
	"time"

	"github.com/agentowl/agentowl"
)

// deadlineCursor: after an attention cursor, the AAP requests that follow
// in (expiry, attention ID) order, whatever kind of item the cursor names.
func TestDeadlineCursor(t *testing.T) {
	at := time.Date(2026, 10, 6, 12, 0, 0, 0, time.UTC)
	req := "0b9c5a44-0000-4000-8000-000000000000"
	for _, c := range []struct {
		what string
		in   *agentowl.Cursor
		want *agentowl.Cursor
	}{
		{"no cursor", nil, nil},
		{"an AAP item: the requests after it", &agentowl.Cursor{At: at, ID: "att_aap_" + req}, &agentowl.Cursor{At: at, ID: req}},
		{"a work item sorting before the prefix: every request at its time", &agentowl.Cursor{At: at, ID: "att_01ABC"},
			&agentowl.Cursor{At: at.Add(-time.Microsecond), ID: "~"}},
		{"a work item sorting after the prefix: none at its time", &agentowl.Cursor{At: at, ID: "att_zzz"}, &agentowl.Cursor{At: at, ID: "~"}},
	} {
		got := deadlineCursor(c.in)
		if (got == nil) != (c.want == nil) || got != nil && (!got.At.Equal(c.want.At) || got.ID != c.want.ID) {
			t.Errorf("%s: %v, want %v", c.what, got, c.want)
		}
	}
	// "~" sorts after every request ID (hex digits and dashes).
	if !("~" > req) || !("~" > "ffffffff-ffff-ffff-ffff-ffffffffffff") {
		t.Fatal("~ does not sort after request IDs")
	}
}

func TestUrgentCursor(t *testing.T) {
	for _, c := range []UrgentCursor{{Dated: true, Cursor: agentowl.Cursor{At: time.UnixMicro(5).UTC(), ID: "att_1"}},
		{Cursor: agentowl.Cursor{At: time.UnixMicro(7).UTC(), ID: "att_2"}}, {}} {
		got, ok := ParseUrgentCursor(c.String())
		if !ok || *got != c {
			t.Errorf("%q parsed as %v, %v", c.String(), got, ok)
		}
	}
	for _, bad := range []string{"", "x1.a", "d", "dzz", "u1."} {
		if _, ok := ParseUrgentCursor(bad); ok {
			t.Errorf("%q parsed", bad)
		}
	}
}
