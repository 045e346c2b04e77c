package delivery

import (
	"testing"
	"time"
)

func TestBackoffBounds(t *testing.T) {
	e := &Engine{cfg: Config{RetryMinDelay: time.Second, RetryMaxDelay: 8 * time.Second}.withDefaults()}
	for attempts := 1; attempts <= 10; attempts++ {
		bound := min(time.Second<<(attempts-1), 8*time.Second)
		for range 200 {
			d := e.backoff(attempts)
			if d < 100*time.Millisecond || d > bound {
				t.Fatalf("backoff(%d) = %v, want within [100ms, %v]", attempts, d, bound)
			}
		}
	}
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 9, 16, 12, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		in   string
		want time.Duration
	}{
		{"", 0}, {"5", 5 * time.Second}, {"0", 0}, {"-3", 0}, {"soon", 0},
		{"Wed, 16 Sep 2026 12:01:00 GMT", time.Minute}, {"Wed, 16 Sep 2026 11:00:00 GMT", 0},
		{"99999999999", 7 * 24 * time.Hour},
	} {
		if got := parseRetryAfter(c.in, now); got != c.want {
			t.Errorf("parseRetryAfter(%q) = %v, want %v", c.in, got, c.want)
		}
	}
}

func TestConfigDefaults(t *testing.T) {
	c := Config{}.withDefaults()
	if c.AttemptTimeout != 10*time.Second || c.Lease != 30*time.Second || c.RetryMinDelay != 5*time.Second || c.RetryMaxDelay != time.Hour {
		t.Fatalf("defaults %+v", c)
	}
	if err := c.validate(); err != nil {
		t.Fatalf("the defaults are refused: %v", err)
	}
}

// A lease must outlast the longest attempt with LeaseMargin to spare, and
// no attempt may be longer than AAP allows: other timings are refused, not
// quietly changed.
func TestConfigRefusesAnAttemptThatCouldOutliveItsLease(t *testing.T) {
	for _, c := range []struct {
		cfg Config
		ok  bool
	}{
		{Config{AttemptTimeout: 10 * time.Second, Lease: 16 * time.Second}, true},
		{Config{AttemptTimeout: 10 * time.Second, Lease: 15 * time.Second}, false},
		{Config{AttemptTimeout: 10 * time.Second, Lease: 10 * time.Second}, false},
		{Config{AttemptTimeout: 2 * time.Second, Lease: 8 * time.Second}, true},
		{Config{AttemptTimeout: 26 * time.Second}, false}, // the default lease would outlast it, AAP would not
		{Config{AttemptTimeout: time.Minute, Lease: 2 * time.Minute}, false},
	} {
		err := c.cfg.withDefaults().validate()
		if (err == nil) != c.ok {
			t.Errorf("attempt timeout %s, lease %s: %v, want accepted %v", c.cfg.AttemptTimeout, c.cfg.Lease, err, c.ok)
		}
	}
}
