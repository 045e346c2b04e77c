package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCLIBindingChannels creates a binding of each channel with the
// command lines docs/channels.md shows.
func TestCLIBindingChannels(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, s site) {
		srv := s.start(t, nil)
		admin := s.adminToken(t)
		op := func(args ...string) cliResult { return srv.cli(t, admin, args...) }
		ep := cliJSON(t, runCLI(t, "--json", "endpoints", "create", "--tenant", "default", "--name", "rt", "--url",
			"https://runtime.example.com/events", "--agent-work", "--api-url", srv.url, "--token", admin))
		epID := ep["id"].(string)

		out := op("bindings", "create", "--tenant", "default", "--channel", "smtp", "--endpoint", epID,
			"--address", "Support@Mail.Example.com").ok(t)
		if !strings.Contains(out, "Receiving address: support@mail.example.com") || strings.Contains(out, "Ingress URL") {
			t.Errorf("bindings create --channel smtp printed:\n%s", out)
		}
		// No AGENTOWL_SMTP_DOMAIN on this server: the address is needed.
		op("bindings", "create", "--tenant", "default", "--channel", "smtp", "--endpoint", epID).failed(t, "missing_field")

		out = op("bindings", "create", "--tenant", "default", "--channel", "cloudflare-email", "--endpoint", epID).ok(t)
		if !strings.Contains(out, "Worker secret (shown once") || !strings.Contains(out, "cfe_") ||
			!strings.Contains(out, srv.url+"/in/cloudflare-email/in_") {
			t.Errorf("bindings create --channel cloudflare-email printed:\n%s", out)
		}

		tokenFile := filepath.Join(t.TempDir(), "auth-token")
		if err := os.WriteFile(tokenFile, []byte("0123456789abcdef0123456789abcdef\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		for _, ch := range []string{"sms", "voice"} {
			b := cliJSON(t, op("--json", "bindings", "create", "--tenant", "default", "--channel", ch, "--endpoint", epID,
				"--auth-token-file", tokenFile))
			if !strings.HasPrefix(b["ingress_url"].(string), srv.url+"/in/"+ch+"/in_") || strings.Contains(b["ingress_url"].(string), "0123456789abcdef") {
				t.Errorf("bindings create --channel %s = %v", ch, b)
			}
		}
		op("bindings", "create", "--tenant", "default", "--channel", "sms", "--endpoint", epID).failed(t, "missing_field")

		header, rows := parseTable(t, op("bindings", "list", "--tenant", "default").ok(t))
		expectHeader(t, "bindings list", header, "ID", "CHANNEL", "ENDPOINT", "SIGNED", "ADDRESS", "NAME")
		if len(rows) != 4 {
			t.Errorf("bindings list rows %q", rows)
		}
	})
}
