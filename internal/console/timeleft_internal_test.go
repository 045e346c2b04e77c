package console

import (
	"testing"
	"time"
)

func TestTimeLeft(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		d    time.Duration
		want string
	}{
		{-time.Second, "in 0 s"},
		{40 * time.Second, "in 40 s"},
		{time.Minute, "in 1 min"},
		{12*time.Minute + 59*time.Second, "in 12 min"},
		{time.Hour, "in 1 h"},
		{3*time.Hour + 5*time.Minute, "in 3 h 5 min"},
		{47*time.Hour + 59*time.Minute, "in 47 h 59 min"},
		{48 * time.Hour, "in 2 days"},
		{7*24*time.Hour + time.Hour, "in 7 days"},
	} {
		if got := timeLeft(c.d); got != c.want {
			t.Errorf("timeLeft(%v) = %q, want %q", c.d, got, c.want)
		}
	}
}

func TestAgoAndRelative(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		d        time.Duration
		ago, rel string
	}{
		{40 * time.Second, "40 s ago", "just now"},
		{time.Minute, "1 min ago", "1 min ago"},
		{3*time.Hour + 5*time.Minute, "3 h ago", "3 h ago"},
		{48 * time.Hour, "2 days ago", "2 days ago"},
	} {
		if got := ago(c.d); got != c.ago {
			t.Errorf("ago(%v) = %q, want %q", c.d, got, c.ago)
		}
		if got := relative(-c.d); got != c.rel {
			t.Errorf("relative(%v) = %q, want %q", -c.d, got, c.rel)
		}
	}
	if got := relative(2 * time.Minute); got != "in 2 min" {
		t.Errorf("relative(2m) = %q", got)
	}
}
