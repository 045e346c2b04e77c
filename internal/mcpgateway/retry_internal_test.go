package mcpgateway

import (
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/agentowl/agentowl/aap"
)

// A provider that asks for a longer wait (Retry-After) than the gateway's
// pause is not called again before it; a shorter one, or none, leaves the
// pause as it is.
func TestRetryWaitHonoursRetryAfter(t *testing.T) {
	busy := func(after time.Duration) error {
		return fmt.Errorf("submit: %w", &aap.APIError{StatusCode: http.StatusServiceUnavailable, RetryAfter: after})
	}
	for _, c := range []struct {
		name string
		err  error
		want time.Duration
	}{
		{"longer Retry-After", busy(30 * time.Second), 30 * time.Second},
		{"shorter Retry-After", busy(time.Second), 2 * time.Second},
		{"no Retry-After", busy(0), 2 * time.Second},
		{"transport error", errors.New("connection reset"), 2 * time.Second},
	} {
		if got := retryWait(c.err, 2*time.Second); got != c.want {
			t.Errorf("%s: waits %v, want %v", c.name, got, c.want)
		}
	}
}
