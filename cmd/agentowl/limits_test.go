package main

import (
	"strings"
	"testing"
	"time"

	"github.com/agentowl/agentowl/internal/ratelimit"
)

// Every documented limit setting reaches its config field; explicit config
// wins over the environment; a bad value stops the server with the
// setting's name.
func TestLimitsFromEnv(t *testing.T) {
	perMin := func(n int) ratelimit.Limit { return ratelimit.Limit{Events: n, Per: time.Minute} }
	for env, val := range map[string]string{
		"AGENTOWL_CREATE_RATE": "11", "AGENTOWL_REGISTER_RATE": "12", "AGENTOWL_REGISTER_DESTINATION_RATE": "13",
		"AGENTOWL_DELIVERY_TENANT_RATE": "14", "AGENTOWL_DELIVERY_DESTINATION_RATE": "15",
		"AGENTOWL_DELIVERY_DESTINATION_CONCURRENCY": "16", "AGENTOWL_DELIVERY_CONCURRENCY": "17",
		"AGENTOWL_CALLBACK_RATE": "18", "AGENTOWL_MAX_CALLBACKS_PER_WORK": "19", "AGENTOWL_INGRESS_RATE": "20",
		"AGENTOWL_MAX_CONNECTIONS": "21",
	} {
		t.Setenv(env, val)
	}
	var cfg Config
	cfg.Delivery.Concurrency = 99 // set in code: kept
	if err := limitsFromEnv(&cfg); err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]struct{ got, want any }{
		"create":                {cfg.Approval.CreateLimit, perMin(11)},
		"register":              {cfg.Approval.RegisterLimit, perMin(12)},
		"register destination":  {cfg.RegisterPerDestination, perMin(13)},
		"delivery tenant":       {cfg.Delivery.PerTenantRate, perMin(14)},
		"delivery destination":  {cfg.Delivery.PerHostRate, perMin(15)},
		"destination in flight": {cfg.Delivery.PerHostConcurrency, 16},
		"process in flight":     {cfg.Delivery.Concurrency, 99},
		"callbacks":             {cfg.Work.CallbackLimit, perMin(18)},
		"callbacks per work":    {cfg.Work.MaxCallbacksPerWork, 19},
		"ingress":               {cfg.Ingress.Limit, perMin(20)},
		"connections":           {cfg.HTTP.MaxConnections, 21},
	} {
		if c.got != c.want {
			t.Errorf("%s: %v, want %v", name, c.got, c.want)
		}
	}
	for _, bad := range []string{"0", "-3", "ten", "1.5", "1025"} {
		t.Setenv("AGENTOWL_DELIVERY_DESTINATION_CONCURRENCY", bad)
		err := limitsFromEnv(&Config{})
		if err == nil || !strings.Contains(err.Error(), "AGENTOWL_DELIVERY_DESTINATION_CONCURRENCY") {
			t.Errorf("value %q: %v, want an error naming the setting", bad, err)
		}
	}
}

// The HTTP timeouts are durations from the environment, like the retry
// delays.
func TestHTTPTimeoutsFromEnv(t *testing.T) {
	for env, val := range map[string]string{
		"AGENTOWL_HTTP_READ_HEADER_TIMEOUT": "1s", "AGENTOWL_HTTP_READ_TIMEOUT": "2s",
		"AGENTOWL_HTTP_WRITE_TIMEOUT": "3s", "AGENTOWL_HTTP_IDLE_TIMEOUT": "4s",
	} {
		t.Setenv(env, val)
	}
	var cfg Config
	if err := egressFromEnv(&cfg); err != nil {
		t.Fatal(err)
	}
	h := cfg.HTTP
	if h.ReadHeaderTimeout != time.Second || h.ReadTimeout != 2*time.Second || h.WriteTimeout != 3*time.Second || h.IdleTimeout != 4*time.Second {
		t.Fatalf("HTTP timeouts %+v", h)
	}
	t.Setenv("AGENTOWL_HTTP_READ_TIMEOUT", "soon")
	if err := egressFromEnv(&Config{}); err == nil || !strings.Contains(err.Error(), "AGENTOWL_HTTP_READ_TIMEOUT") {
		t.Fatalf("a bad duration: %v, want an error naming the setting", err)
	}
}
