package mcpgateway_test

import (
	"strings"
	"testing"

	"github.com/agentowl/agentowl/internal/mcpgateway"
)

func TestConfigErrors(t *testing.T) {
	hash := mcpgateway.HashToken(agentToken)
	up := "upstreams:\n  - {name: b, url: http://x, tools: [{match: \"*\"}]}\n"
	ag := "agents:\n  - {name: a, token_sha256: " + hash + ", tools: [\"b/*\"]}\n"
	for _, c := range []struct{ name, yaml, want string }{
		{"unknown key", up + ag + "surprise: 1\n", "surprise"},
		{"no upstreams", ag, "no upstreams"},
		{"no agents", up, "no agents"},
		{"url and command", "upstreams:\n  - {name: b, url: http://x, command: [x], tools: [{match: \"*\"}]}\n" + ag, "either url or command"},
		{"headers with a command", "upstreams:\n  - {name: b, command: [x], headers: {A: b}, tools: [{match: \"*\"}]}\n" + ag, "headers go with url"},
		{"no tool rules", "upstreams:\n  - {name: b, url: http://x}\n" + ag, "no tools rules"},
		{"bad pattern", "upstreams:\n  - {name: b, url: http://x, tools: [{match: \"[\"}]}\n" + ag, "bad tool pattern"},
		{"duplicate upstream", "upstreams:\n  - {name: b, url: http://x, tools: [{match: \"*\"}]}\n  - {name: b, url: http://y, tools: [{match: \"*\"}]}\n" + ag, "unique"},
		{"no token", up + "agents:\n  - {name: a, tools: [\"b/*\"]}\n", "no token"},
		{"short hash", up + "agents:\n  - {name: a, token_sha256: abc, tools: [\"b/*\"]}\n", "64 hex"},
		{"shared token", up + "agents:\n  - {name: a, token_sha256: " + hash + "}\n  - {name: c, token_sha256: " + hash + "}\n", "another agent's"},
		{"agent pattern without server", up + "agents:\n  - {name: a, token_sha256: " + hash + ", tools: [\"*\"]}\n", "upstream/tool"},
		{"bad timeout", up + ag + "approval: {timeout: 1d}\n", "approval.timeout"},
		{"missing env token", up + "agents:\n  - {name: a, token_env: MCPGW_TEST_UNSET_TOKEN}\n", "MCPGW_TEST_UNSET_TOKEN"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := mcpgateway.ParseConfig([]byte(c.yaml))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("ParseConfig: %v, want an error mentioning %q", err, c.want)
			}
		})
	}
	cfg, err := mcpgateway.ParseConfig([]byte(up + ag))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Listen != "127.0.0.1:8931" || cfg.Path != "/mcp" || cfg.Approval.Timeout != "30m" {
		t.Errorf("defaults: %+v", cfg)
	}
}
