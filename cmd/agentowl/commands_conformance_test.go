package main

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/agentowl/agentowl/webhook"
)

// TestConformanceProvider: `agentowl conformance provider` against
// AgentOwl on each store, deciding through the CLI's own `approvals
// decide`, passes every synchronous check; --json is the report document
// and --junit writes JUnit XML.
func TestConformanceProvider(t *testing.T) {
	forEachBackend(t, func(t *testing.T, s site) {
		bin := buildAgentowl(t)
		srv := s.start(t, nil)
		admin, op := s.operator(t, srv)
		var tok struct{ Token string }
		if err := json.Unmarshal([]byte(op("--json", "provisioner-tokens", "create", "--days", "1").ok(t)), &tok); err != nil || tok.Token == "" {
			t.Fatalf("provisioner token: %v", err)
		}
		junit := filepath.Join(t.TempDir(), "report.xml")
		// The operator token stays in a script, out of the command line
		// the report shows.
		script := filepath.Join(t.TempDir(), "decide.sh")
		if err := os.WriteFile(script, fmt.Appendf(nil, "#!/bin/sh\nexec %s approvals decide \"$1\" --\"$2\" --url %s --token %s\n", bin, srv.url, admin), 0o700); err != nil {
			t.Fatal(err)
		}
		decide := "/bin/sh " + script + " {id} {decision}"
		res := runCLI(t, "--json", "conformance", "provider", "--url", srv.url, "--provisioner-token", tok.Token,
			"--decide-command", decide, "--openapi", filepath.Join("..", "..", "api", "openapi.yaml"), "--junit", junit)
		var rep struct {
			FormatVersion int `json:"format_version"`
			Summary       struct{ Pass, Fail, Skip int }
			Checks        []struct{ ID, Status, Reason, Requirement string }
		}
		if err := json.Unmarshal([]byte(res.stdout), &rep); err != nil {
			t.Fatalf("--json output is not the report: %v\n%s\nstderr: %s", err, res.stdout, res.stderr)
		}
		if res.err != nil || rep.Summary.Fail != 0 {
			for _, c := range rep.Checks {
				if c.Status != "PASS" {
					t.Errorf("%s: %s %s", c.ID, c.Status, c.Reason)
				}
			}
			t.Fatalf("exit %v", res.err)
		}
		for _, c := range rep.Checks {
			async := strings.HasPrefix(c.ID, "provider.async.")
			if (c.Status == "SKIP") != async {
				t.Errorf("%s: %s (%s)", c.ID, c.Status, c.Reason)
			}
			if !strings.Contains(c.Requirement, ".md") {
				t.Errorf("%s names no requirement: %q", c.ID, c.Requirement)
			}
		}
		if rep.FormatVersion != 1 || strings.Contains(res.stdout, tok.Token) || strings.Contains(res.stdout, admin) {
			t.Errorf("format_version %d, or the report shows a token", rep.FormatVersion)
		}
		data, err := os.ReadFile(junit)
		if err != nil {
			t.Fatal(err)
		}
		var suites struct {
			Tests    int `xml:"tests,attr"`
			Failures int `xml:"failures,attr"`
			Skipped  int `xml:"skipped,attr"`
		}
		if err := xml.Unmarshal(data, &suites); err != nil || suites.Tests != len(rep.Checks) || suites.Failures != 0 || suites.Skipped != rep.Summary.Skip {
			t.Errorf("JUnit: %+v %v\n%s", suites, err, data)
		}
	})
}

// TestConformanceFailureExitsNonZero: a failing check (here against a
// server that is not an AAP provider) prints the text report with the
// evidence and exits non-zero.
func TestConformanceFailureExitsNonZero(t *testing.T) {
	t.Parallel()
	fake := http.NewServeMux()
	fake.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusTeapot) })
	hs := httptest.NewServer(fake)
	t.Cleanup(hs.Close)
	srv := hs.URL
	res := runCLI(t, "conformance", "provider", "--url", srv, "--provisioner-token", "tok", "--only", "provider.auth.credential")
	if res.err == nil {
		t.Fatalf("no error for a failing run:\n%s", res.stdout)
	}
	for _, want := range []string{"FAIL  provider.auth.credential-required", "8_security.md Provider 1", "< 418", "> POST " + srv + "/v1/requests", "1 failed"} {
		if !strings.Contains(res.stdout, want) {
			t.Errorf("the report lacks %q:\n%s", want, res.stdout)
		}
	}
	if strings.Contains(res.stderr, "error:") {
		t.Errorf("the report said it all; stderr: %s", res.stderr)
	}
}

// TestConformanceBadInput: bad flags and unreachable URLs are clear
// errors, never a panic or a run.
func TestConformanceBadInput(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"provider"}, `required flag(s) "url"`},
		{[]string{"provider", "--url", "ftp://x", "--provisioner-token", "t"}, "not an http(s) URL"},
		{[]string{"provider", "--url", "http://127.0.0.1:1", "--provisioner-token", "t"}, "cannot reach the provider"},
		{[]string{"provider", "--url", "http://127.0.0.1:1"}, "provisioner token is required"},
		{[]string{"provider", "--url", "http://127.0.0.1:1", "--provisioner-token", "t", "--decide-command", "x", "--interactive"}, "either --decide-command or --interactive"},
		{[]string{"provider", "--url", "http://127.0.0.1:1", "--provisioner-token", "t", "--expiry-timeout", "1500ms"}, "whole number of seconds"},
		{[]string{"provider", "--url", "http://127.0.0.1:1", "--provisioner-token", "t", "--async-receiver-listen", "127.0.0.1:0"}, "go together"},
		{[]string{"provider", "--url", "http://127.0.0.1:1", "--provisioner-token", "t", "--openapi", "/nonexistent.yaml"}, "OpenAPI document"},
		{[]string{"receiver", "--url", "http://127.0.0.1:1/x", "--secret", "nope", "--instance", uuid.NewString()}, "--secret"},
		{[]string{"receiver", "--url", "http://127.0.0.1:1/x", "--secret", webhook.NewSecret(), "--instance", "i"}, "not an instance ID"},
	} {
		res := runCLI(t, append([]string{"conformance"}, c.args...)...)
		if res.err == nil || !strings.Contains(res.stderr+res.err.Error(), c.want) {
			t.Errorf("agentowl conformance %s: err %v, stderr %q; want %q", strings.Join(c.args, " "), res.err, res.stderr, c.want)
		}
	}
}

// TestConformanceReceiver: `agentowl conformance receiver` against
// `agentowl receiver serve` (in-process), whose --exec command records
// each wake-up as an effect that --effects-command reads, passes every
// receiver check.
func TestConformanceReceiver(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	effects := filepath.Join(dir, "effects.log")
	rs := &receiverServer{cfg: receiverConfig{DataDir: dir, Listen: "127.0.0.1:0", Path: "/aap/events",
		Exec: "echo \"$AAP_REQUEST_ID\" >> " + effects, ExecWorkers: 1, ExecTimeout: 10 * time.Second, RetryDelay: time.Second,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Stdout: io.Discard, Stderr: io.Discard}}
	if err := rs.run(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rs.close() })
	url := "http://" + rs.addr + "/aap/events"
	// The registration `receiver provision` would store, and the
	// provider's verification that binds it to the instance.
	secret, reg, inst := webhook.NewSecret(), uuid.NewString(), uuid.NewString()
	if err := rs.receiver.Register(context.Background(), reg, secret); err != nil {
		t.Fatal(err)
	}
	id := uuid.NewString()
	body, _ := json.Marshal(map[string]string{"id": id, "type": "webhook.verification", "registration_id": reg,
		"instance_id": inst, "created_at": time.Now().UTC().Format(time.RFC3339), "challenge": uuid.NewString()})
	req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	key, _ := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	ts := fmt.Sprint(time.Now().Unix())
	m := hmac.New(sha256.New, key)
	m.Write([]byte(id + "." + ts + "."))
	m.Write(body)
	req.Header.Set("webhook-id", id)
	req.Header.Set("webhook-timestamp", ts)
	req.Header.Set("webhook-signature", "v1,"+base64.StdEncoding.EncodeToString(m.Sum(nil)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("verification: %v %v", err, resp)
	}
	resp.Body.Close()
	res := runCLI(t, "conformance", "receiver", "--url", url, "--secret", secret, "--instance", inst,
		"--effects-command", "cat "+effects+" 2>/dev/null || true", "--effects-settle", "1500ms")
	if res.err != nil || !strings.Contains(res.stdout, "8 checks: 8 passed") {
		t.Fatalf("err %v\n%s\n%s", res.err, res.stdout, res.stderr)
	}
	if strings.Contains(res.stdout, secret) {
		t.Error("the report shows the signing secret")
	}
}

// TestConformanceAdapterPreset: the built binary's `conformance adapter
// --preset agentowl-adapter` (no command: it runs its own adapter shim,
// the harness kit's aap.Adapter, as a separate process) passes every
// adapter check, with --json and --junit; `--preset agentowl-mcp-gateway`
// (its gateway shim: the MCP gateway between the kit's agent and a fake
// upstream) passes every check that applies to the gateway, the rerun
// check SKIP.
func TestConformanceAdapterPreset(t *testing.T) {
	t.Parallel()
	bin := buildAgentowl(t)
	for _, c := range []struct {
		preset string
		skip   []string
	}{
		{"agentowl-adapter", nil},
		{"agentowl-mcp-gateway", []string{"adapter.approval.twice"}},
	} {
		t.Run(c.preset, func(t *testing.T) {
			t.Parallel()
			junit := filepath.Join(t.TempDir(), "adapter.xml")
			cmd := exec.Command(bin, "--json", "conformance", "adapter", "--preset", c.preset, "--junit", junit)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			var rep struct {
				Subject string
				Summary struct{ Pass, Fail, Skip int }
				Checks  []struct{ ID, Status, Reason, Requirement string }
			}
			if jerr := json.Unmarshal(out, &rep); jerr != nil {
				t.Fatalf("--json output is not the report: %v\n%s\nstderr: %s", jerr, out, stderr.String())
			}
			if err != nil || rep.Subject != "adapter" || rep.Summary.Fail != 0 || rep.Summary.Skip != len(c.skip) ||
				rep.Summary.Pass != len(rep.Checks)-len(c.skip) || len(rep.Checks) < 10 {
				t.Fatalf("exit %v, summary %+v\n%s\nstderr: %s", err, rep.Summary, out, stderr.String())
			}
			for _, ch := range rep.Checks {
				if !strings.HasPrefix(ch.Requirement, "8_security.md Adapter ") && !strings.HasPrefix(ch.Requirement, "8_security.md Async adapter ") {
					t.Errorf("%s names no adapter requirement: %q", ch.ID, ch.Requirement)
				}
				if want := slices.Contains(c.skip, ch.ID); want != (ch.Status == "SKIP") {
					t.Errorf("%s: %s (%s)", ch.ID, ch.Status, ch.Reason)
				}
			}
			data, err := os.ReadFile(junit)
			var suites struct {
				Tests    int `xml:"tests,attr"`
				Failures int `xml:"failures,attr"`
			}
			if err != nil || xml.Unmarshal(data, &suites) != nil || suites.Tests != len(rep.Checks) || suites.Failures != 0 {
				t.Errorf("JUnit: %+v %v\n%s", suites, err, data)
			}
		})
	}
}

// TestConformanceAdapterPatterns: an adapter with its own stdin and output
// formats, described by --env, --stdin-template and --expect-*: the shim
// behind a shell script that speaks plain text. Correct, it passes every
// check but the abandonment one (SKIP: --sigterm-suspends, as the script
// does not pass SIGTERM on); reporting a denial as allowed fails exactly
// adapter.outcome.denied, with the script's output as evidence.
func TestConformanceAdapterPatterns(t *testing.T) {
	t.Parallel()
	bin := buildAgentowl(t)
	dir := t.TempDir()
	stdin := filepath.Join(dir, "call.json")
	if err := os.WriteFile(stdin, []byte(`{"id":"{call_id}","tool":"{tool}","arguments":{arguments},"timeout":"{timeout}"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	script := func(name, sed string) string {
		p := filepath.Join(dir, name)
		body := fmt.Sprintf("#!/bin/sh\nAAP_BASE_URL=\"$PROVIDER\" AAP_INSTANCE_CREDENTIAL=\"$CREDENTIAL\" %s conformance adapter-shim --state \"$1\" |\n"+
			"  sed -e 's/.*\"outcome\":\"\\([a-z_]*\\)\".*/\\1/' %s -e 's/^ran$/ALLOWED/' -e 's/^denied$/DENIED/' -e 's/^expired$/TIMED OUT/' -e 's/^cancelled$/WITHDRAWN/'\n", bin, sed)
		if err := os.WriteFile(p, []byte(body), 0o700); err != nil {
			t.Fatal(err)
		}
		return p
	}
	run := func(adapter string) (cliResult, map[string]string) {
		res := runCLI(t, "--json", "conformance", "adapter", "--env", "PROVIDER={url}", "--env", "CREDENTIAL={token}",
			"--stdin-template", stdin, "--expect-allow", "^ALLOWED", "--expect-deny", "^DENIED", "--expect-expired", "TIMED OUT",
			"--expect-cancelled", "WITHDRAWN", "--sigterm-suspends", "--", "/bin/sh", adapter, "{state}")
		var rep struct {
			Checks []struct{ ID, Status, Reason string }
		}
		if err := json.Unmarshal([]byte(res.stdout), &rep); err != nil {
			t.Fatalf("--json: %v\n%s\n%s", err, res.stdout, res.stderr)
		}
		got := map[string]string{}
		for _, c := range rep.Checks {
			got[c.ID] = c.Status + " " + c.Reason
		}
		return res, got
	}
	res, got := run(script("good.sh", ""))
	for id, st := range got {
		want := "PASS"
		if id == "adapter.abandon.cancel" || strings.HasPrefix(id, "adapter.async.") {
			// --sigterm-suspends; no --receiver-command.
			want = "SKIP"
		}
		if !strings.HasPrefix(st, want) {
			t.Errorf("good adapter: %s: %s, want %s", id, st, want)
		}
	}
	if res.err != nil {
		t.Errorf("good adapter: exit %v", res.err)
	}
	res, got = run(script("deny-as-allow.sh", "-e 's/^denied$/ran/'"))
	for id, st := range got {
		failed := strings.HasPrefix(st, "FAIL")
		if failed != (id == "adapter.outcome.denied") {
			t.Errorf("deny-as-allow adapter: %s: %s", id, st)
		}
	}
	if res.err == nil || !strings.Contains(got["adapter.outcome.denied"], "allowed the call") {
		t.Errorf("deny-as-allow adapter: exit %v, %s", res.err, got["adapter.outcome.denied"])
	}
}

// TestConformanceAdapterBadInput: an adapter run without a command,
// patterns or a known preset is a clear error before any check.
func TestConformanceAdapterBadInput(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"adapter"}, "no adapter command"},
		{[]string{"adapter", "--preset", "nope", "--", "true"}, "unknown preset"},
		{[]string{"adapter", "--", "true"}, "--expect-allow and --expect-deny"},
		{[]string{"adapter", "--expect-allow", "(", "--", "true"}, "--expect-*"},
		{[]string{"adapter", "--preset", "aap-hook", "--env", "=x", "--", "true"}, "not K=template"},
	} {
		res := runCLI(t, append([]string{"conformance"}, c.args...)...)
		if res.err == nil || !strings.Contains(res.stderr+res.err.Error(), c.want) {
			t.Errorf("agentowl conformance %s: err %v, stderr %q; want %q", strings.Join(c.args, " "), res.err, res.stderr, c.want)
		}
	}
}
