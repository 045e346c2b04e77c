package mcpgateway_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentowl/agentowl/internal/clocktest"
	"github.com/agentowl/agentowl/internal/mcpgateway"
)

// envUpstreamArg makes the test binary a stdio MCP server whose one tool,
// print_env, answers with its environment (TestMain).
const envUpstreamArg = "serve-env-upstream"

func TestMain(m *testing.M) {
	if len(os.Args) == 2 && os.Args[1] == envUpstreamArg {
		s := mcp.NewServer(&mcp.Implementation{Name: "env-upstream", Version: "1"}, nil)
		s.AddTool(&mcp.Tool{Name: "print_env", Description: "Print the environment", InputSchema: map[string]any{"type": "object"}},
			func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: strings.Join(os.Environ(), "\n")}}}, nil
			})
		if err := s.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		return
	}
	os.Exit(m.Run())
}

// A stdio upstream gets the basics of the gateway's environment, what it
// inherits by name and its own env, and nothing else: not the operator's
// AGENTOWL_TOKEN, not an agent's token_env token, not another upstream's
// credential (issue 27: an agent with an environment-printing tool read
// them all).
func TestStdioUpstreamEnvironment(t *testing.T) {
	secrets := map[string]string{
		"AGENTOWL_TOKEN":        "operator-secret-6d1f0a",
		"READER_TOKEN":          "agent-token-reader-secret-0123456789",
		"BILLING_MCP_TOKEN":     "other-upstream-secret-9c2e",
		"AWS_SECRET_ACCESS_KEY": "aws-secret-41b7",
	}
	for k, v := range secrets {
		t.Setenv(k, v)
	}
	t.Setenv("LC_ALL", "C.UTF-8")
	t.Setenv("ENV_UPSTREAM_KEEP", "inherited-by-name")
	t.Setenv("ENV_UPSTREAM_SOURCE", "expanded-from-the-gateway")
	p := newProvider(t, clocktest.New(t0))
	yaml := fmt.Sprintf(`
data_dir: data
approval: {timeout: 30m, progress_interval: 10s}
upstreams:
  - name: envdump
    command: [%q, %s]
    inherit_env: [ENV_UPSTREAM_KEEP]
    env:
      OWN_SETTING: "${ENV_UPSTREAM_SOURCE}"
    tools:
      - match: "*"
        gate: false
agents:
  - name: reader
    token_env: READER_TOKEN
    tools: ["envdump/*"]
`, os.Args[0], envUpstreamArg)
	gw := startGateway(t, yaml, p.provision("env-gateway"), clocktest.New(t0), tempDB(t))
	agent := agentSession(t, gw.srv.URL, secrets["READER_TOKEN"], nil)
	res, err := agent.CallTool(context.Background(), &mcp.CallToolParams{Name: "print_env", Arguments: map[string]any{}})
	must(t, err)
	env := text(res)
	if res.IsError || !strings.Contains(env, "PATH=") {
		t.Fatalf("print_env: error %v, %q", res.IsError, env)
	}
	for _, want := range []string{"LC_ALL=C.UTF-8", "ENV_UPSTREAM_KEEP=inherited-by-name", "OWN_SETTING=expanded-from-the-gateway"} {
		if !strings.Contains(env, want) {
			t.Errorf("the upstream's environment lacks %s", want)
		}
	}
	for name, secret := range secrets {
		if strings.Contains(env, secret) || strings.Contains(env, name+"=") {
			t.Errorf("the upstream's environment holds %s", name)
		}
	}
	if strings.Contains(env, "ENV_UPSTREAM_SOURCE=") {
		t.Error("a variable used only to expand the upstream's env passed whole")
	}
}

// inherit_env names variables, and goes with a command only.
func TestInheritEnvConfig(t *testing.T) {
	base := `
data_dir: data
upstreams:
  - name: u
    %s
    inherit_env: [%s]
    tools: [{match: "*"}]
agents:
  - {name: a, token_sha256: %s, tools: ["u/*"]}
`
	hash := mcpgateway.HashToken(agentToken)
	for _, c := range []struct {
		what, upstream, names, err string
	}{
		{"a command", "command: [cat]", "HOME_DIR, _X1", ""},
		{"a bad name", "command: [cat]", `"A-B"`, "not an environment variable name"},
		{"a URL upstream", "url: https://up.example/mcp", "X", "env and inherit_env with command"},
	} {
		_, err := mcpgateway.ParseConfig([]byte(fmt.Sprintf(base, c.upstream, c.names, hash)))
		if (err == nil) != (c.err == "") || err != nil && !strings.Contains(err.Error(), c.err) {
			t.Errorf("%s: %v, want %q", c.what, err, c.err)
		}
	}
}
