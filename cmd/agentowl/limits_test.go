package main

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/agentowl/agentowl/internal/ratelimit"
	"github.com/agentowl/agentowl/internal/server"
)

// configureWith runs the settings table over env and args.
func configureWith(t *testing.T, env map[string]string, args ...string) (server.Config, error) {
	t.Helper()
	fs := pflag.NewFlagSet("serve", pflag.ContinueOnError)
	serveFlags(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	var cfg server.Config
	err := configure(&cfg, fs, func(k string) string { return env[k] })
	return cfg, err
}

// Every setting reaches its config field; a flag wins over its variable; a
// bad value stops the server with the setting's name.
func TestSettings(t *testing.T) {
	perMin := func(n int) ratelimit.Limit { return ratelimit.Limit{Events: n, Per: time.Minute} }
	cfg, err := configureWith(t, map[string]string{
		"AGENTOWL_DATA_DIR": "/var/lib/owl", "AGENTOWL_LISTEN": "0.0.0.0:1", "AGENTOWL_DATABASE_URL": "postgres://db/owl",
		"AGENTOWL_PUBLIC_URL": "https://owl.example", "AGENTOWL_SECRET_KEY": "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=",
		"AGENTOWL_EGRESS_ALLOW_CIDRS": "10.0.0.0/8", "AGENTOWL_RETRY_MIN_DELAY": "2s", "AGENTOWL_RETRY_MAX_DELAY": "3m",
		"AGENTOWL_CREATE_RATE": "11", "AGENTOWL_REGISTER_RATE": "12", "AGENTOWL_REGISTER_DESTINATION_RATE": "13",
		"AGENTOWL_DELIVERY_TENANT_RATE": "14", "AGENTOWL_DELIVERY_DESTINATION_RATE": "15",
		"AGENTOWL_DELIVERY_DESTINATION_CONCURRENCY": "16", "AGENTOWL_DELIVERY_CONCURRENCY": "17",
		"AGENTOWL_CALLBACK_RATE": "18", "AGENTOWL_MAX_CALLBACKS_PER_WORK": "19", "AGENTOWL_INGRESS_RATE": "20",
		"AGENTOWL_MAX_CONNECTIONS": "21", "AGENTOWL_HTTP_READ_HEADER_TIMEOUT": "1s", "AGENTOWL_HTTP_READ_TIMEOUT": "2s",
		"AGENTOWL_HTTP_WRITE_TIMEOUT": "3s", "AGENTOWL_HTTP_IDLE_TIMEOUT": "4s", "AGENTOWL_DELIVERY": "off",
		"AGENTOWL_ADMISSION_MAX_WAIT": "100ms", "AGENTOWL_ADMISSION_CONCURRENCY": "22",
	}, "--listen", "127.0.0.1:9")
	if err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]struct{ got, want any }{
		"data dir":              {cfg.DataDir, "/var/lib/owl"},
		"listen (flag wins)":    {cfg.Listen, "127.0.0.1:9"},
		"database":              {cfg.DatabaseURL, "postgres://db/owl"},
		"public URL":            {cfg.PublicURL, "https://owl.example"},
		"secret key":            {len(cfg.SecretKey), 32},
		"allow CIDRs":           {len(cfg.Egress.AllowCIDRs), 1},
		"retry min":             {cfg.Delivery.RetryMinDelay, 2 * time.Second},
		"retry max":             {cfg.Delivery.RetryMaxDelay, 3 * time.Minute},
		"create":                {cfg.Approval.CreateLimit, perMin(11)},
		"register":              {cfg.Approval.RegisterLimit, perMin(12)},
		"register destination":  {cfg.RegisterPerDestination, perMin(13)},
		"delivery tenant":       {cfg.Delivery.PerTenantRate, perMin(14)},
		"delivery destination":  {cfg.Delivery.PerHostRate, perMin(15)},
		"destination in flight": {cfg.Delivery.PerHostConcurrency, 16},
		"process in flight":     {cfg.Delivery.Concurrency, 17},
		"callbacks":             {cfg.Work.CallbackLimit, perMin(18)},
		"callbacks per work":    {cfg.Work.MaxCallbacksPerWork, 19},
		"ingress":               {cfg.Ingress.Limit, perMin(20)},
		"connections":           {cfg.HTTP.MaxConnections, 21},
		"read header timeout":   {cfg.HTTP.ReadHeaderTimeout, time.Second},
		"read timeout":          {cfg.HTTP.ReadTimeout, 2 * time.Second},
		"write timeout":         {cfg.HTTP.WriteTimeout, 3 * time.Second},
		"idle timeout":          {cfg.HTTP.IdleTimeout, 4 * time.Second},
		"delivery off":          {cfg.NoDelivery, true},
		"admission wait":        {cfg.HTTP.Admission.MaxWait, 100 * time.Millisecond},
		"admission concurrency": {cfg.HTTP.Admission.Concurrency, 22},
	} {
		if c.got != c.want {
			t.Errorf("%s: %v, want %v", name, c.got, c.want)
		}
	}
	for env, bads := range map[string][]string{
		"AGENTOWL_DELIVERY_DESTINATION_CONCURRENCY": {"0", "-3", "ten", "1.5", "1025"},
		"AGENTOWL_CREATE_RATE":                      {"0", "many"},
		"AGENTOWL_HTTP_READ_TIMEOUT":                {"soon", "-1s", "0s"},
		"AGENTOWL_DATABASE_URL":                     {"mysql://db"},
		"AGENTOWL_SECRET_KEY":                       {"short", "AAECAwQ="},
		"AGENTOWL_EGRESS_ALLOW_CIDRS":               {"10.0.0.0/99"},
		"AGENTOWL_EGRESS_CA_FILE":                   {"/no/such/file.pem"},
		"AGENTOWL_DELIVERY":                         {"maybe", "true"},
		"AGENTOWL_ADMISSION_MAX_WAIT":               {"soon", "0s"},
		"AGENTOWL_ADMISSION_CONCURRENCY":            {"0", "many"},
		// The seed's parser ceilings: lower is allowed, higher refused.
		"AGENTOWL_EMAIL_MAX_PARTS":              {"0", "21"},
		"AGENTOWL_EMAIL_MAX_PART_BYTES":         {"0", "10485761"},
		"AGENTOWL_ATTACHMENT_MAX_DECODED_BYTES": {"0", "26214401"},
	} {
		for _, bad := range bads {
			if _, err := configureWith(t, map[string]string{env: bad}); err == nil || !strings.Contains(err.Error(), env) {
				t.Errorf("%s=%q: %v, want an error naming the setting", env, bad, err)
			}
		}
	}
	// Unset settings keep the components' defaults (zero in the Config).
	if cfg, err := configureWith(t, nil); err != nil || cfg.Listen != "" || cfg.Delivery.Concurrency != 0 {
		t.Fatalf("no settings: %+v, %v", cfg, err)
	}
}

// docs/settings.md is the settings table, and `serve --help` prints it.
func TestSettingsDoc(t *testing.T) {
	const path = "../../docs/settings.md"
	want := settingsMarkdown()
	if os.Getenv("AGENTOWL_WRITE_SETTINGS_DOC") != "" {
		if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(path)
	if err != nil || string(got) != want {
		t.Fatalf("docs/settings.md is out of date (%v): regenerate it with AGENTOWL_WRITE_SETTINGS_DOC=1 go test ./cmd/agentowl -run TestSettingsDoc", err)
	}
	help := runCLI(t, "serve", "--help").ok(t)
	for _, s := range settings {
		if !strings.Contains(help, s.env) {
			t.Errorf("serve --help does not name %s", s.env)
		}
	}
}

// The email parser's ceilings are the seed's (20 parts, 10 MiB a file,
// 25 MiB decoded): lower limits are taken, and a server configured above
// them in code is refused at start with the reason.
func TestParserCeilings(t *testing.T) {
	cfg, err := configureWith(t, map[string]string{"AGENTOWL_EMAIL_MAX_PARTS": "5", "AGENTOWL_EMAIL_MAX_PART_BYTES": "1048576",
		"AGENTOWL_ATTACHMENT_MAX_DECODED_BYTES": "26214400"})
	if err != nil || cfg.Ingress.Mail.MaxParts != 5 || cfg.Ingress.Mail.MaxPartBytes != 1<<20 || cfg.Attachments.MaxDecodedBytes != 25<<20 {
		t.Fatalf("limits at or under the ceilings: %v", err)
	}
	for what, adjust := range map[string]func(*server.Config){
		"parts":         func(c *server.Config) { c.Ingress.Mail.MaxParts = 21 },
		"part size":     func(c *server.Config) { c.Ingress.Mail.MaxPartBytes = 10<<20 + 1 },
		"decoded bytes": func(c *server.Config) { c.Attachments.MaxDecodedBytes = 25<<20 + 1 },
	} {
		c := server.Config{DataDir: t.TempDir(), Listen: "127.0.0.1:0"}
		adjust(&c)
		if srv, err := server.Start(t.Context(), c); err == nil {
			srv.Close()
			t.Errorf("%s over the ceiling: the server started", what)
		} else if !strings.Contains(err.Error(), "ceiling") {
			t.Errorf("%s over the ceiling: %v, want the reason", what, err)
		}
	}
}
