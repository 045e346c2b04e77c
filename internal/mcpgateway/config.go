package mcpgateway

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Config is the gateway's configuration file (gateway.yaml). It holds the
// upstream services' credentials: keep it readable by the gateway only.
type Config struct {
	// Listen is the address of the agents' Streamable HTTP endpoint
	// (default 127.0.0.1:8931).
	Listen string `yaml:"listen"`
	// Path is the endpoint's path (default /mcp).
	Path string `yaml:"path"`
	// DataDir holds the execution store (gateway.db) and the instance
	// credential (credential.json). Relative paths are relative to the
	// configuration file.
	DataDir string `yaml:"data_dir"`
	// Provider is the AAP provider the gateway asks for approvals.
	Provider ProviderConfig `yaml:"provider"`
	// Approval tunes gated calls.
	Approval ApprovalConfig `yaml:"approval"`
	// Agents are the MCP clients allowed in, each with its own token.
	Agents []AgentConfig `yaml:"agents"`
	// Upstreams are the MCP servers behind the gateway.
	Upstreams []UpstreamConfig `yaml:"upstreams"`
	// Receiver, if present, turns on the asynchronous mode: the gateway is
	// a verified AAP webhook receiver, and waiting calls are woken by the
	// provider's notifications instead of holding long polls.
	Receiver *ReceiverConfig `yaml:"receiver"`
	// Attestations tunes the provider's signed decision attestations
	// (docs/attestations.md): the gateway passes each approved call's
	// attestation to the upstream in the tools/call's _meta, and with
	// Verify checks it before forwarding.
	Attestations AttestationsConfig `yaml:"attestations"`

	dir string // the configuration file's directory
}

// ProviderConfig names the AAP provider.
type ProviderConfig struct {
	// URL is the provider's base URL (`agentowl mcp-gateway provision`
	// creates the instance there).
	URL string `yaml:"url"`
	// InstanceName is the name of the instance provision creates (default
	// mcp-gateway).
	InstanceName string `yaml:"instance_name"`
	// CredentialFile is where provision writes, and serve reads, the
	// instance credential (default <data_dir>/credential.json).
	CredentialFile string `yaml:"credential_file"`
}

// ReceiverConfig is the gateway's AAP webhook receiver.
type ReceiverConfig struct {
	// Listen is its address (default 127.0.0.1:8932).
	Listen string `yaml:"listen"`
	// Path is its path (default /aap/events).
	Path string `yaml:"path"`
	// URL is its public HTTPS URL, as the provider reaches it (required).
	URL string `yaml:"url"`
	// TLSCert and TLSKey serve HTTPS directly; without them it serves plain
	// HTTP for a TLS-terminating proxy in front.
	TLSCert string `yaml:"tls_cert"`
	TLSKey  string `yaml:"tls_key"`
}

// AttestationsConfig is how the gateway treats decision attestations.
type AttestationsConfig struct {
	// Verify makes the gateway verify the attestation of every approval
	// before it forwards the call: signed by a key of the provider's
	// published set, issued by Issuer, about this request, this tool and
	// exactly the arguments about to be forwarded, approved and not
	// expired. A call whose attestation is missing or does not verify is
	// not forwarded (tool error "unverified: …"). Off by default (any AAP
	// provider works); `serve --verify-attestations` turns it on.
	Verify bool `yaml:"verify"`
	// JWKSURL is where the provider publishes its keys (default: the
	// credential's provider URL + /.well-known/agentowl/jwks.json).
	JWKSURL string `yaml:"jwks_url"`
	// Issuer is the provider's public URL as its attestations name it
	// (default: the credential's provider URL).
	Issuer string `yaml:"issuer"`
}

// ApprovalConfig tunes gated calls.
type ApprovalConfig struct {
	// Timeout is the AAP request's timeout: how long an operator has to
	// decide (default 30m).
	Timeout string `yaml:"timeout"`
	// Progress is how often a waiting call sends the agent an MCP progress
	// notification, and the length of each long poll (default 10s, at most
	// 30s).
	Progress time.Duration `yaml:"progress_interval"`
	// ReattachGrace is how long, after a restart, a call that was waiting
	// keeps its approval request for the agent to repeat the call (default
	// 10m). After it the request is cancelled.
	ReattachGrace time.Duration `yaml:"reattach_grace"`
	// CallTimeout bounds one upstream call (default 5m).
	CallTimeout time.Duration `yaml:"call_timeout"`
}

// AgentConfig is one agent: its name (shown to operators as the agent that
// asked), its bearer token and the tools it may see and call.
type AgentConfig struct {
	Name string `yaml:"name"`
	// TokenSHA256 is the hex SHA-256 of the agent's bearer token, so the
	// file does not hold the token itself. Or:
	TokenSHA256 string `yaml:"token_sha256"`
	// TokenEnv names an environment variable holding the token.
	TokenEnv string `yaml:"token_env"`
	// Tools are glob patterns over "upstream/tool" (path.Match syntax, such
	// as billing/* or */get_*). The agent sees and may call the tools that
	// match one of them (and that their upstream exposes).
	Tools []string `yaml:"tools"`

	tokenHash string
}

// UpstreamConfig is one upstream MCP server: either a Streamable HTTP URL
// with headers, or a command run as a stdio subprocess with its
// environment. Header and environment values expand ${VAR} from the
// gateway's environment.
type UpstreamConfig struct {
	Name    string            `yaml:"name"`
	URL     string            `yaml:"url"`
	Headers map[string]string `yaml:"headers"`
	Command []string          `yaml:"command"`
	Env     map[string]string `yaml:"env"`
	// InheritEnv names variables of the gateway's environment that pass to
	// the subprocess as they are. Nothing else of it passes but the
	// basics (baseEnv): the gateway's own environment holds its token,
	// agents' tokens and other upstreams' credentials.
	InheritEnv []string `yaml:"inherit_env"`
	// Prefix is put before the upstream's tool names towards agents (to
	// keep names of several upstreams apart). Patterns and approvals use
	// the upstream's own names.
	Prefix string `yaml:"prefix"`
	// Tools decide, first match wins, whether each tool is exposed and
	// gated. A tool that matches no rule is not exposed.
	Tools []ToolRule `yaml:"tools"`
}

// ToolRule is a glob over an upstream's tool names and what it decides.
type ToolRule struct {
	Match string `yaml:"match"`
	// Gate: every call needs an approval (default true: unknown means gated).
	Gate *bool `yaml:"gate"`
}

var namePattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`)

// envName is an environment variable name as a shell writes it.
var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// LoadConfig reads and checks a configuration file.
func LoadConfig(file string) (*Config, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	c, err := ParseConfig(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	abs, err := filepath.Abs(file)
	if err != nil {
		return nil, err
	}
	c.dir = filepath.Dir(abs)
	return c, nil
}

// ParseConfig parses and checks a configuration (unknown keys are errors).
func ParseConfig(data []byte) (*Config, error) {
	var c Config
	dec := yaml.NewDecoder(strings.NewReader(string(data)))
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	return &c, c.check()
}

func (c *Config) check() error {
	if c.Listen == "" {
		c.Listen = "127.0.0.1:8931"
	}
	if c.Path == "" {
		c.Path = "/mcp"
	}
	if c.DataDir == "" {
		c.DataDir = "mcp-gateway"
	}
	if c.Provider.InstanceName == "" {
		c.Provider.InstanceName = "mcp-gateway"
	}
	a := &c.Approval
	if a.Timeout == "" {
		a.Timeout = "30m"
	}
	if !regexp.MustCompile(`^[1-9][0-9]{0,8}[smh]$`).MatchString(a.Timeout) {
		return fmt.Errorf("approval.timeout %q: use a whole number of seconds, minutes or hours, such as 30m", a.Timeout)
	}
	if a.Progress <= 0 {
		a.Progress = 10 * time.Second
	}
	a.Progress = min(max(a.Progress, time.Second), 30*time.Second)
	if a.ReattachGrace <= 0 {
		a.ReattachGrace = 10 * time.Minute
	}
	if a.CallTimeout <= 0 {
		a.CallTimeout = 5 * time.Minute
	}
	if r := c.Receiver; r != nil {
		if r.Listen == "" {
			r.Listen = "127.0.0.1:8932"
		}
		if r.Path == "" {
			r.Path = "/aap/events"
		}
		if !strings.HasPrefix(r.URL, "https://") && !strings.HasPrefix(r.URL, "http://") {
			return errors.New("receiver.url: the receiver's public URL (https://…) is required")
		}
		if (r.TLSCert == "") != (r.TLSKey == "") {
			return errors.New("receiver: tls_cert and tls_key go together")
		}
	}
	if at := &c.Attestations; at.JWKSURL != "" && !strings.HasPrefix(at.JWKSURL, "https://") && !strings.HasPrefix(at.JWKSURL, "http://") {
		return errors.New("attestations.jwks_url: an http(s) URL is required")
	}
	c.Attestations.Issuer = strings.TrimSuffix(c.Attestations.Issuer, "/")
	if len(c.Upstreams) == 0 {
		return errors.New("config: no upstreams")
	}
	seen := map[string]bool{}
	for i := range c.Upstreams {
		u := &c.Upstreams[i]
		if !namePattern.MatchString(u.Name) || seen[u.Name] {
			return fmt.Errorf("upstreams[%d]: name %q must be unique, letters, digits, _ . - (up to 64)", i, u.Name)
		}
		seen[u.Name] = true
		if (u.URL == "") == (len(u.Command) == 0) {
			return fmt.Errorf("upstream %s: give either url or command", u.Name)
		}
		if u.URL == "" && len(u.Headers) > 0 || u.URL != "" && (len(u.Env) > 0 || len(u.InheritEnv) > 0) {
			return fmt.Errorf("upstream %s: headers go with url, env and inherit_env with command", u.Name)
		}
		for _, name := range u.InheritEnv {
			if !envName.MatchString(name) {
				return fmt.Errorf("upstream %s: inherit_env: %q is not an environment variable name", u.Name, name)
			}
		}
		if len(u.Tools) == 0 {
			return fmt.Errorf("upstream %s: no tools rules (add {match: \"*\", gate: true} to expose every tool gated)", u.Name)
		}
		for _, r := range u.Tools {
			if _, err := path.Match(r.Match, ""); err != nil || r.Match == "" {
				return fmt.Errorf("upstream %s: bad tool pattern %q", u.Name, r.Match)
			}
		}
	}
	if len(c.Agents) == 0 {
		return errors.New("config: no agents")
	}
	names, hashes := map[string]bool{}, map[string]bool{}
	for i := range c.Agents {
		ag := &c.Agents[i]
		if !namePattern.MatchString(ag.Name) || names[ag.Name] {
			return fmt.Errorf("agents[%d]: name %q must be unique, letters, digits, _ . - (up to 64)", i, ag.Name)
		}
		names[ag.Name] = true
		switch {
		case ag.TokenSHA256 != "" && ag.TokenEnv != "":
			return fmt.Errorf("agent %s: give token_sha256 or token_env, not both", ag.Name)
		case ag.TokenSHA256 != "":
			if b, err := hex.DecodeString(ag.TokenSHA256); err != nil || len(b) != sha256.Size {
				return fmt.Errorf("agent %s: token_sha256 must be 64 hex digits", ag.Name)
			}
			ag.tokenHash = strings.ToLower(ag.TokenSHA256)
		case ag.TokenEnv != "":
			tok := os.Getenv(ag.TokenEnv)
			if len(tok) < 16 {
				return fmt.Errorf("agent %s: environment variable %s must hold a token of at least 16 characters", ag.Name, ag.TokenEnv)
			}
			ag.tokenHash = HashToken(tok)
		default:
			return fmt.Errorf("agent %s: no token (token_sha256 or token_env)", ag.Name)
		}
		if hashes[ag.tokenHash] {
			return fmt.Errorf("agent %s: its token is another agent's", ag.Name)
		}
		hashes[ag.tokenHash] = true
		for _, p := range ag.Tools {
			if _, err := path.Match(p, ""); err != nil || !strings.Contains(p, "/") {
				return fmt.Errorf("agent %s: bad tool pattern %q (use upstream/tool globs)", ag.Name, p)
			}
		}
	}
	return nil
}

// HashToken is the hex SHA-256 of a bearer token, as token_sha256 holds it.
func HashToken(token string) string {
	h := sha256.Sum256([]byte(token))
	return hex.EncodeToString(h[:])
}

// DataPath resolves p against the data directory (itself relative to the
// configuration file).
func (c *Config) DataPath(p string) string {
	dir := c.DataDir
	if !filepath.IsAbs(dir) && c.dir != "" {
		dir = filepath.Join(c.dir, dir)
	}
	if p == "" {
		return dir
	}
	if filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(dir, p)
}

// CredentialPath is where the instance credential lives.
func (c *Config) CredentialPath() string {
	if c.Provider.CredentialFile != "" {
		f := c.Provider.CredentialFile
		if !filepath.IsAbs(f) && c.dir != "" {
			f = filepath.Join(c.dir, f)
		}
		return f
	}
	return c.DataPath("credential.json")
}

// rule returns whether an upstream exposes tool and whether it is gated.
func (u *UpstreamConfig) rule(tool string) (exposed, gated bool) {
	for _, r := range u.Tools {
		if ok, _ := path.Match(r.Match, tool); ok {
			return true, r.Gate == nil || *r.Gate
		}
	}
	return false, false
}

// may reports whether the agent may see and call upstream/tool.
func (a *AgentConfig) may(upstream, tool string) bool {
	for _, p := range a.Tools {
		if ok, _ := path.Match(p, upstream+"/"+tool); ok {
			return true
		}
	}
	return false
}
