package httpapi_test

import (
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/agentowl/agentowl/internal/approval"
	"github.com/agentowl/agentowl/internal/ratelimit"
	"github.com/agentowl/agentowl/internal/store/storetest"
)

func TestLimitApprovalCreationPerTenant(t *testing.T) {
	for _, b := range storetest.Backends(t) {
		t.Run(b.Name, func(t *testing.T) {
			t.Parallel()
			e := setupWith(t, b, approval.Config{CreateLimit: ratelimit.Limit{Events: 3, Per: time.Minute}})
			inst := newInstance(t, e)
			for range 3 {
				submit(t, e, inst.Credential, refundBody())
			}
			r := e.do("POST", "/v1/requests", inst.Credential, refundBody(), "Idempotency-Key", newKey())
			wantError(t, r, http.StatusTooManyRequests, "rate_limited", "")
			secs, err := strconv.Atoi(r.Header.Get("Retry-After"))
			if err != nil || secs < 1 || secs > 61 {
				t.Fatalf("Retry-After = %q, want the seconds until the window ends", r.Header.Get("Retry-After"))
			}
			// Another instance of the same tenant shares the tenant's limit.
			other := newInstance(t, e)
			r = e.do("POST", "/v1/requests", other.Credential, refundBody(), "Idempotency-Key", newKey())
			wantError(t, r, http.StatusTooManyRequests, "rate_limited", "")
			e.clock.Advance(time.Minute)
			submit(t, e, inst.Credential, refundBody())
		})
	}
}

func TestLimitReceiverRegistrations(t *testing.T) {
	forEachAsyncBackend(t, func(t *testing.T, e *asyncEnv) {
		rc := newReceiver(t, e)
		prov, _ := provisionerToken(t, e.env, "default")
		// 30 verification attempts per minute per tenant; failed ones count too.
		for i := range 30 {
			rc.onVerify(actBare200)
			regID, secret := rc.register()
			r := e.do("POST", "/v1/instances", prov, map[string]any{"delivery": rc.input(regID, secret)}, "Idempotency-Key", newKey())
			wantError(t, r, http.StatusUnprocessableEntity, "webhook_verification_failed", "delivery")
			if got := len(rc.verifications()); got != i+1 {
				t.Fatalf("%d verifications after %d attempts", got, i+1)
			}
		}
		regID, secret := rc.register()
		r := e.do("POST", "/v1/instances", prov, map[string]any{"delivery": rc.input(regID, secret)}, "Idempotency-Key", newKey())
		wantError(t, r, http.StatusTooManyRequests, "rate_limited", "")
		if r.Header.Get("Retry-After") == "" {
			t.Fatal("429 without Retry-After")
		}
		if got := len(rc.verifications()); got != 30 {
			t.Fatalf("the refused registration still sent a verification (%d)", got)
		}
		e.clock.Advance(time.Minute)
		regID, secret = rc.register()
		r = e.do("POST", "/v1/instances", prov, map[string]any{"delivery": rc.input(regID, secret)}, "Idempotency-Key", newKey())
		wantStatus(t, r, http.StatusCreated)
	})
}
