package conformance

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"time"
)

// AdapterConfig says how to run and read an adapter command: the kit plays
// its provider (in-process, on a loopback port) and drives the command once
// or twice per check.
//
// Command, Env values and the stdin template are templates: {url} is the
// kit's provider base URL, {token} the instance credential, {state} a
// directory kept across the runs of one check (and only that check),
// {call_id} the tool call's ID. The stdin template also has {tool},
// {arguments} (a JSON object) and {timeout}.
type AdapterConfig struct {
	// Command is the adapter command and its arguments. Required.
	Command []string
	// Env holds K=template entries added to the kit's own environment.
	Env []string
	// Stdin is the template of what the command reads on stdin: the tool
	// call as the adapter expects it.
	Stdin string
	// Expect classifies the command's output (stdout, then stderr).
	Expect Expectations
	// Stateful says the adapter keeps executions in {state}: running it
	// again for the same call ID is a recovery of the same execution
	// (adapter.approval.twice); false skips that check.
	Stateful bool
	// RunIsNewCall says every run is a new call, whatever {state} holds: the
	// adapter has no call ID to recover an execution by (an MCP tools/call
	// carries none), so adapter.approval.twice is SKIP.
	RunIsNewCall bool
	// Tool is the template of the tool name the adapter must submit for
	// the probe call (default {tool}): an adapter may name tools its own
	// way, such as the MCP gateway's SERVER/TOOL.
	Tool string
	// SuspendsOnTerm says SIGTERM suspends the execution rather than
	// abandoning it (an asynchronous adapter that resumes later): the
	// abandonment check is then SKIP.
	SuspendsOnTerm bool
	// RunTimeout bounds one run of the command (default 90s): a command
	// still running then is killed and the check fails.
	RunTimeout time.Duration
	// Receiver is the adapter's receiving service, a command the kit
	// starts for each asynchronous check and stops at its end (SIGTERM).
	// Its templates add {receiver_addr} (the loopback host:port it must
	// listen on), {registration_id} and {secret} (the registration the kit
	// then verifies, as a provisioner would have set it up) and
	// {instance_id}. Empty: the asynchronous checks are SKIP.
	Receiver []string
	// ReceiverPath is the path the receiving service serves webhooks on
	// (default /).
	ReceiverPath string
	// AsyncWait bounds how long an asynchronous run may go on after its
	// decision was notified before the kit sends SIGTERM (default 10s).
	AsyncWait time.Duration
	// AsyncSettle is how long the kit watches for an execution that must
	// not happen (default 2s).
	AsyncSettle time.Duration
	// Parallel bounds concurrent checks (default 8).
	Parallel int
	// Progress, if set, sees each result as it finishes.
	Progress func(Result)
}

// Expectations are the patterns that tell the adapter's outcomes apart in
// its output. A run is classified by the first that matches, in the order
// allow, expired, cancelled, deny; none is "other" (a failure to obtain a
// decision, or an outcome the patterns do not name). Allow and Deny are
// required; without Expired (Cancelled) the expiry (cancellation) checks
// require an output that is neither allow nor deny.
type Expectations struct {
	Allow, Deny, Expired, Cancelled *regexp.Regexp
}

// The outcome classes.
const (
	outAllow     = "allow"
	outDeny      = "deny"
	outExpired   = "expired"
	outCancelled = "cancelled"
	outOther     = "other"
)

// Preset is the known contract of an adapter: the parts of an
// AdapterConfig it sets (Command empty: the CLI supplies AgentOwl's own for
// its presets).
type Preset struct {
	Name string
	AdapterConfig
}

// The presets.
const (
	PresetAgentOwl   = "agentowl-adapter"
	PresetMCPGateway = "agentowl-mcp-gateway"
	PresetAAPHook    = "aap-hook"
)

// AdapterPreset returns the preset name, or an error.
//
// agentowl-adapter is the harness kit's aap.Adapter through `agentowl
// conformance adapter-shim` (RunAdapterShim): a JSON tool call
// {"id","tool","arguments","timeout"} on stdin, one JSON outcome
// {"outcome": ran|already_ran|denied|expired|cancelled|abandoned|not_run|error, "reason", "request_id"}
// on stdout; AAP_BASE_URL and AAP_INSTANCE_CREDENTIAL in the environment;
// executions kept in --state.
//
// agentowl-mcp-gateway is AgentOwl's MCP gateway (package mcpgateway)
// through `agentowl conformance mcp-gateway-shim` (RunGatewayShim): a
// JSON-RPC tools/call on stdin as an agent sends it, the gateway's AAP
// side the adapter under test, submitting the tool as conformance/TOOL; the
// fake upstream's line {"upstream_call": …} is the call running, a tool
// error whose text starts with denied:, expired: or cancelled: a refusal.
// An agent's repeated tools/call is a new call (RunIsNewCall).
//
// aap-hook is the public `aap` CLI's `hook` contract as far as the AAP
// documentation describes it (a JSON tool call in, a JSON decision out).
// The documentation gives no field names, so the preset assumes the
// PreToolUse hook shape agent harnesses use: {"tool_name","tool_input",
// "tool_use_id"} in; {"decision": "allow"|"deny", "reason"} (or
// "permissionDecision"/"permissionDecisionReason") out, with an expiry or
// cancellation named in the reason; AAP_BASE_URL and AAP_API_KEY in the
// environment. Each part can be overridden (--env, --stdin-template,
// --expect-*).
func AdapterPreset(name string) (*Preset, error) {
	// AgentOwl's shims read the provider and, for their receiving
	// services, the registration from these.
	kitEnv := []string{"AAP_BASE_URL={url}", "AAP_INSTANCE_CREDENTIAL={token}",
		"AAP_REGISTRATION_ID={registration_id}", "AAP_SIGNING_SECRET={secret}"}
	switch name {
	case PresetAgentOwl:
		return &Preset{Name: name, AdapterConfig: AdapterConfig{
			Env:   kitEnv,
			Stdin: `{"id":"{call_id}","tool":"{tool}","arguments":{arguments},"timeout":"{timeout}"}` + "\n",
			Expect: Expectations{
				Allow:     regexp.MustCompile(`"outcome"\s*:\s*"ran"`),
				Deny:      regexp.MustCompile(`"outcome"\s*:\s*"denied"`),
				Expired:   regexp.MustCompile(`"outcome"\s*:\s*"expired"`),
				Cancelled: regexp.MustCompile(`"outcome"\s*:\s*"cancelled"`),
			},
			Stateful: true,
		}}, nil
	case PresetMCPGateway:
		refusal := `"text"\s*:\s*"`
		return &Preset{Name: name, AdapterConfig: AdapterConfig{
			Env:   kitEnv,
			Stdin: `{"jsonrpc":"2.0","id":"{call_id}","method":"tools/call","params":{"name":"{tool}","arguments":{arguments}}}` + "\n",
			Tool:  gatewayShimUpstream + "/{tool}",
			Expect: Expectations{
				Allow:     regexp.MustCompile(`"upstream_call"`),
				Deny:      regexp.MustCompile(refusal + `denied:`),
				Expired:   regexp.MustCompile(refusal + `expired:`),
				Cancelled: regexp.MustCompile(refusal + `cancelled:`),
			},
			RunIsNewCall: true,
		}}, nil
	case PresetAAPHook:
		reason := `"(?:reason|permissionDecisionReason)"\s*:\s*"[^"]*`
		return &Preset{Name: name, AdapterConfig: AdapterConfig{
			Env:   []string{"AAP_BASE_URL={url}", "AAP_API_KEY={token}"},
			Stdin: `{"hook_event_name":"PreToolUse","tool_name":"{tool}","tool_input":{arguments},"tool_use_id":"{call_id}"}` + "\n",
			Expect: Expectations{
				Allow:     regexp.MustCompile(`"(?:decision|permissionDecision)"\s*:\s*"(?:allow|approve)"`),
				Deny:      regexp.MustCompile(`"(?:decision|permissionDecision)"\s*:\s*"(?:deny|block)"`),
				Expired:   regexp.MustCompile(`(?i)` + reason + `expir`),
				Cancelled: regexp.MustCompile(`(?i)` + reason + `cancel`),
			},
		}}, nil
	}
	return nil, fmt.Errorf("unknown preset %q (known: %s, %s, %s)", name, PresetAgentOwl, PresetMCPGateway, PresetAAPHook)
}

// ApplyPreset fills what cfg leaves empty from p.
func (cfg *AdapterConfig) ApplyPreset(p *Preset) {
	if len(cfg.Command) == 0 {
		cfg.Command = p.Command
	}
	if len(cfg.Receiver) == 0 {
		cfg.Receiver = p.Receiver
	}
	// Preset entries first: the caller's --env of the same name wins.
	cfg.Env = append(append([]string(nil), p.Env...), cfg.Env...)
	if cfg.Stdin == "" {
		cfg.Stdin = p.Stdin
	}
	e := &cfg.Expect
	for _, f := range []struct{ dst, src **regexp.Regexp }{{&e.Allow, &p.Expect.Allow}, {&e.Deny, &p.Expect.Deny},
		{&e.Expired, &p.Expect.Expired}, {&e.Cancelled, &p.Expect.Cancelled}} {
		if *f.dst == nil {
			*f.dst = *f.src
		}
	}
	if cfg.Tool == "" {
		cfg.Tool = p.Tool
	}
	cfg.Stateful = cfg.Stateful || p.Stateful
	cfg.RunIsNewCall = cfg.RunIsNewCall || p.RunIsNewCall
}

// The adapter checks' IDs.
const (
	ASubmit         = "adapter.submit.accurate"
	AImmediate      = "adapter.decision.immediate"
	ADenied         = "adapter.outcome.denied"
	AExpired        = "adapter.outcome.expired"
	ACancelled      = "adapter.outcome.cancelled"
	AStaleApproval  = "adapter.approval.expired"
	ATwice          = "adapter.approval.twice"
	AUnavailable    = "adapter.retry.unavailable"
	AConnectionCut  = "adapter.retry.connection-cut"
	AAbandonCancels = "adapter.abandon.cancel"
)

// The probe call the kit feeds the adapter.
const (
	probeTool      = "conformance_probe"
	probeArguments = `{"target":"conformance","amount":4900,"nested":{"list":[1,"two",true],"ü":"ß"}}`
	probeTimeout   = "30m"
	denyNote       = "conformance: denied by the kit's scripted provider"
)

type adapterRun struct {
	cfg AdapterConfig
	// givesTimeout: a template hands the adapter the call's timeout, so
	// the submission must carry it.
	givesTimeout bool
}

// CheckAdapter runs every adapter check against cfg.Command.
func CheckAdapter(ctx context.Context, cfg AdapterConfig) (*Report, error) {
	if len(cfg.Command) == 0 {
		return nil, errors.New("no adapter command (pass it after --, or a --preset that has one)")
	}
	if cfg.Expect.Allow == nil || cfg.Expect.Deny == nil {
		return nil, errors.New("the adapter's output needs --expect-allow and --expect-deny patterns (or a --preset)")
	}
	if cfg.Stdin == "" {
		return nil, errors.New("no --stdin-template (or --preset): the kit cannot feed the adapter a tool call")
	}
	for _, kv := range cfg.Env {
		if k, _, ok := strings.Cut(kv, "="); !ok || k == "" {
			return nil, fmt.Errorf("--env %q is not K=template", kv)
		}
	}
	if cfg.RunTimeout <= 0 {
		cfg.RunTimeout = 90 * time.Second
	}
	if cfg.ReceiverPath == "" {
		cfg.ReceiverPath = "/"
	}
	if !strings.HasPrefix(cfg.ReceiverPath, "/") {
		return nil, fmt.Errorf("--receiver-path %q does not start with /", cfg.ReceiverPath)
	}
	if cfg.AsyncWait <= 0 {
		cfg.AsyncWait = 10 * time.Second
	}
	if cfg.AsyncSettle <= 0 {
		cfg.AsyncSettle = 2 * time.Second
	}
	templates := strings.Join(append(append([]string{cfg.Stdin}, cfg.Command...), cfg.Env...), "\n")
	if !cfg.Stateful {
		cfg.Stateful = strings.Contains(templates, "{state}")
	}
	if cfg.Tool == "" {
		cfg.Tool = "{tool}"
	}
	a := &adapterRun{cfg: cfg, givesTimeout: strings.Contains(templates, "{timeout}")}
	run := &Run{Parallel: cfg.Parallel, Progress: cfg.Progress}
	return run.Execute(ctx, "adapter", strings.Join(cfg.Command, " "), a.checks()), nil
}

func (a *adapterRun) checks() []Check {
	return append([]Check{
		{ID: ASubmit, Requirement: "8_security.md Adapter 1", Title: "the submitted call is the one given, with the instance credential; an approval found by polling is allowed", Run: a.checkSubmit},
		{ID: AImmediate, Requirement: "8_security.md Adapter 3", Title: "an approval in the creation answer is applied", Run: a.checkImmediate},
		{ID: ADenied, Requirement: "8_security.md Adapter 6", Title: "a denial is reported as a denial, and the call does not run", Run: a.outcomeCheck("denied", outDeny)},
		{ID: AExpired, Requirement: "8_security.md Adapter 6", Title: "an expired request is told apart from a denial, and the call does not run", Run: a.outcomeCheck("expired", outExpired)},
		{ID: ACancelled, Requirement: "8_security.md Adapter 6", Title: "a cancelled request is told apart from a denial, and the call does not run", Run: a.outcomeCheck("cancelled", outCancelled)},
		{ID: AStaleApproval, Requirement: "8_security.md Adapter 4", Title: "an approval whose expires_at has passed is not allowed, and is not reported as a denial", Run: a.checkStaleApproval},
		{ID: ATwice, Requirement: "8_security.md Adapter 7", Title: "the same approval retrieved again (a rerun of the same call) does not run the call again", Run: a.checkTwice},
		{ID: AUnavailable, Requirement: "8_security.md Adapter 2", Title: "after 503 with Retry-After the submission is retried with the same idempotency key, not sooner", Run: a.checkUnavailable},
		{ID: AConnectionCut, Requirement: "8_security.md Adapter 2", Title: "a long poll cut mid-way is recovered: the same request, the same key, then the approval", Run: a.checkConnectionCut},
		{ID: AAbandonCancels, Requirement: "8_security.md Adapter 8", Title: "SIGTERM while waiting abandons the wait with DELETE /v1/requests/{id}", Run: a.checkAbandon},
	}, a.asyncChecks()...)
}

// invocation is one run of the adapter command.
type invocation struct {
	stdout, stderr string
	receiver       string // what the receiving service printed since the run started
	recvFrom       int
	exit           int
	err            error // the command could not run, or did not finish
	class          string
}

func (v *invocation) describe() string {
	out := strings.TrimSpace(v.stdout)
	if out == "" {
		out = "(nothing on stdout)"
	}
	s := fmt.Sprintf("classified %s, exit %d, stdout: %s", v.class, v.exit, out)
	if r := strings.TrimSpace(v.receiver); r != "" {
		s += "; the receiving service printed: " + r
	}
	if v.err != nil {
		s += "; " + v.err.Error()
	}
	return s
}

// session is one check's provider and state directory.
type session struct {
	a      *adapterRun
	p      *scriptedProvider
	url    string
	token  string
	state  string
	callID string
	stop   func()
	recv   *receiving // nil: a synchronous check
}

func (a *adapterRun) session(ctx context.Context, t *T, s script) *session {
	token := "aapk_conformance_" + strings.ReplaceAll(newUUID(), "-", "")
	t.Secret(token, "instance-credential")
	p := newScriptedProvider(token, s)
	url, stop, err := p.start(ctx)
	if err != nil {
		t.Fatalf("starting the kit's provider: %v", err)
	}
	state, err := os.MkdirTemp("", "aap-conformance-adapter-")
	if err != nil {
		stop()
		t.Fatalf("state directory: %v", err)
	}
	return &session{a: a, p: p, url: url, token: token, state: state, callID: newUUID(),
		stop: func() { stop(); os.RemoveAll(state) }}
}

func (s *session) expand(tmpl string) string {
	mode, rc := "sync", s.recv
	if rc == nil {
		rc = &receiving{}
	} else {
		mode = "async"
	}
	return strings.NewReplacer("{url}", s.url, "{token}", s.token, "{state}", s.state, "{call_id}", s.callID,
		"{tool}", probeTool, "{arguments}", probeArguments, "{timeout}", probeTimeout, "{mode}", mode,
		"{receiver_addr}", rc.addr, "{registration_id}", rc.regID, "{secret}", rc.secret, "{instance_id}", rc.instance).Replace(tmpl)
}

// invoke runs the adapter once; term, if not nil, sends it SIGTERM when
// closed.
func (s *session) invoke(ctx context.Context, t *T, term <-chan struct{}) *invocation {
	cfg := s.a.cfg
	cmd := s.command(cfg.Command)
	cmd.Stdin = strings.NewReader(s.expand(cfg.Stdin))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	v := &invocation{exit: -1}
	if s.recv != nil {
		v.recvFrom = s.recv.out.Len()
	}
	if err := cmd.Start(); err != nil {
		v.err, v.class = fmt.Errorf("starting %s: %w", cmd.Path, err), outOther
		t.Notef("run: %s", v.describe())
		return v
	}
	finished := make(chan struct{})
	defer close(finished)
	if term == nil && s.recv != nil {
		term = s.autoTerm(t, finished)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	limit := time.NewTimer(cfg.RunTimeout)
	defer limit.Stop()
	var err error
wait:
	for {
		select {
		case err = <-done:
			break wait
		case <-term:
			term = nil
			t.Notef("the adapter is waiting (its first read of the pending request arrived): sending SIGTERM to pid %d", cmd.Process.Pid)
			cmd.Process.Signal(syscall.SIGTERM)
		case <-limit.C:
			cmd.Process.Kill()
			err = <-done
			v.err = fmt.Errorf("the adapter was still running after %s and was killed", cfg.RunTimeout)
			break wait
		case <-ctx.Done():
			cmd.Process.Kill()
			err = <-done
			v.err = fmt.Errorf("the check ended before the adapter did: %v", ctx.Err())
			break wait
		}
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		v.exit = ee.ExitCode()
	} else if err == nil {
		v.exit = 0
	}
	v.stdout, v.stderr = stdout.String(), stderr.String()
	if s.recv != nil {
		// The receiving service may be the one that resumed the call and
		// said how it ended.
		v.receiver = s.recv.out.String()[v.recvFrom:]
	}
	v.class = s.a.classify(v.stdout + "\n" + v.stderr + "\n" + v.receiver)
	note := "run: " + v.describe()
	if e := strings.TrimSpace(v.stderr); e != "" {
		if len(e) > maxEvidenceBody {
			e = e[len(e)-maxEvidenceBody:]
		}
		note += "\nstderr: " + e
	}
	t.Notef("%s", note)
	return v
}

func (a *adapterRun) classify(out string) string {
	e := a.cfg.Expect
	for _, c := range []struct {
		re    *regexp.Regexp
		class string
	}{{e.Allow, outAllow}, {e.Expired, outExpired}, {e.Cancelled, outCancelled}, {e.Deny, outDeny}} {
		if c.re != nil && c.re.MatchString(out) {
			return c.class
		}
	}
	return outOther
}

// evidence records what the provider received.
func (s *session) evidence(t *T) {
	for _, x := range s.p.log() {
		if x.sent {
			e := Evidence{Note: "the kit sent to the receiving service at " + x.at.UTC().Format("15:04:05.000"),
				Request: &Message{Method: x.method, URL: x.url, Headers: map[string]string{"webhook-id": x.key}, Body: truncate(x.body)}}
			if x.status == 0 {
				e.Error = "no answer"
			} else {
				e.Response = &Message{Status: x.status}
			}
			t.add(e)
			continue
		}
		req := &Message{Method: x.method, URL: s.url + x.path, Headers: map[string]string{}}
		if x.key != "" {
			req.Headers["Idempotency-Key"] = x.key
		}
		if x.auth != "Bearer "+s.token {
			req.Headers["Authorization"] = x.auth
		}
		if len(x.body) > 0 {
			req.Body = truncate(x.body)
		}
		e := Evidence{Note: "received at " + x.at.UTC().Format("15:04:05.000"), Request: req}
		if x.status == 0 {
			e.Error = "the kit cut the connection (or the adapter went away) before answering"
		} else {
			e.Response = &Message{Status: x.status}
		}
		t.add(e)
	}
}

func truncate(b []byte) string {
	if len(b) > maxEvidenceBody {
		return string(b[:maxEvidenceBody]) + "…"
	}
	return string(b)
}

// scenario runs the adapter once against s and returns the run.
func (a *adapterRun) scenario(ctx context.Context, t *T, sc script) (*session, *invocation) {
	s := a.session(ctx, t, sc)
	defer s.stop()
	v := s.invoke(ctx, t, nil)
	s.evidence(t)
	return s, v
}

// keysReused fails unless every creation carried the first one's key.
func keysReused(t *T, s *session, what string) {
	posts := s.p.creations()
	for i, x := range posts {
		if x.key != posts[0].key {
			t.Failf("%s: submission %d carried Idempotency-Key %q, the first carried %q (the same request must keep its key)", what, i+1, x.key, posts[0].key)
		}
	}
}

func (a *adapterRun) checkSubmit(ctx context.Context, t *T) {
	s, v := a.scenario(ctx, t, script{decide: "approved"})
	posts := s.p.creations()
	if len(posts) == 0 {
		t.Fatalf("the adapter submitted nothing (no POST /v1/requests); %s", v.describe())
	}
	for i, x := range posts {
		n := fmt.Sprintf("submission %d", i+1)
		if x.auth != "Bearer "+s.token {
			t.Failf("%s did not authenticate with the instance credential (Authorization: %q)", n, x.auth)
		}
		if x.key == "" {
			t.Failf("%s carried no Idempotency-Key", n)
		}
		var call map[string]json.RawMessage
		if err := json.Unmarshal(x.body, &call); err != nil {
			t.Failf("%s: the body is not a JSON object: %v", n, err)
			continue
		}
		var tool, timeout string
		_ = json.Unmarshal(call["tool"], &tool)
		_ = json.Unmarshal(call["timeout"], &timeout)
		if want := s.expand(a.cfg.Tool); tool != want {
			t.Failf("%s: tool %q, the call given was %q (submitted as %q)", n, tool, probeTool, want)
		}
		if !sameJSONBytes(call["arguments"], []byte(probeArguments)) {
			t.Failf("%s: arguments %s, the call given had %s", n, call["arguments"], probeArguments)
		}
		if a.givesTimeout && timeout != probeTimeout {
			t.Failf("%s: timeout %q, the call given had %q", n, timeout, probeTimeout)
		}
	}
	if v.class != outAllow {
		t.Failf("approved on the first long poll, but the adapter did not allow the call: %s", v.describe())
	}
}

func (a *adapterRun) checkImmediate(ctx context.Context, t *T) {
	_, v := a.scenario(ctx, t, script{immediate: "approved"})
	if v.class != outAllow {
		t.Failf("the creation answer was already approved (expires_at 10 minutes ahead), but the adapter did not allow the call: %s", v.describe())
	}
}

// outcomeCheck: the provider records outcome on the first poll; the run
// must be classified want (or, without a pattern for want, neither allow
// nor deny).
func (a *adapterRun) outcomeCheck(outcome, want string) func(context.Context, *T) {
	return func(ctx context.Context, t *T) {
		sc := script{decide: outcome}
		if outcome == "denied" || outcome == "cancelled" {
			sc.note = denyNote
		}
		_, v := a.scenario(ctx, t, sc)
		a.expectClass(t, v, want, "the request was "+outcome)
	}
}

func (a *adapterRun) expectClass(t *T, v *invocation, want, what string) {
	switch {
	case v.class == outAllow:
		t.Failf("%s, but the adapter allowed the call: %s", what, v.describe())
	case a.hasPattern(want) && v.class != want:
		t.Failf("%s: the adapter must report %s, it reported %s", what, want, v.describe())
	case !a.hasPattern(want) && v.class == outDeny:
		t.Failf("%s: the adapter reported a denial (with no --expect-%s pattern, anything but allow and deny is accepted): %s", what, want, v.describe())
	}
}

func (a *adapterRun) hasPattern(class string) bool {
	e := a.cfg.Expect
	switch class {
	case outExpired:
		return e.Expired != nil
	case outCancelled:
		return e.Cancelled != nil
	}
	return true
}

func (a *adapterRun) checkStaleApproval(ctx context.Context, t *T) {
	_, v := a.scenario(ctx, t, script{decide: "approved", staleApproval: true})
	a.expectClass(t, v, outExpired, "the approval read back had expires_at a minute in the past")
}

func (a *adapterRun) checkTwice(ctx context.Context, t *T) {
	if !a.cfg.Stateful {
		t.Skipf("the adapter keeps no state the kit can hand it ({state}): a rerun of the same call is a new call to it")
	}
	if a.cfg.RunIsNewCall {
		t.Skipf("every run of the adapter is a new call: it has no call ID to recover an execution by, so a rerun asks again (the same approval retrieved twice within one call is adapter.async.duplicate)")
	}
	s := a.session(ctx, t, script{decide: "approved"})
	defer s.stop()
	first := s.invoke(ctx, t, nil)
	second := s.invoke(ctx, t, nil)
	s.evidence(t)
	if first.class != outAllow {
		t.Fatalf("the first run of the approved call was not allowed (see %s): %s", ASubmit, first.describe())
	}
	if second.class == outAllow {
		t.Failf("the same call (call ID and state kept) ran again on the same approval: %s", second.describe())
	}
	keysReused(t, s, "the rerun")
	if n := len(s.p.created()); n > 1 {
		t.Failf("the rerun created %d requests for one call", n)
	}
}

func (a *adapterRun) checkUnavailable(ctx context.Context, t *T) {
	const retryAfter = 1
	s, v := a.scenario(ctx, t, script{unavailable: 1, retryAfter: retryAfter, decide: "approved"})
	posts := s.p.creations()
	if len(posts) < 2 {
		t.Fatalf("the first submission was answered 503 (Retry-After: %d); the adapter did not submit again: %s", retryAfter, v.describe())
	}
	keysReused(t, s, "after 503")
	if gap := posts[1].at.Sub(posts[0].at); gap < retryAfter*time.Second {
		t.Failf("the retry came %s after a 503 with Retry-After: %d (5_http.md: wait at least that long)", gap.Round(time.Millisecond), retryAfter)
	}
	if v.class != outAllow {
		t.Failf("the retried submission was approved, but the adapter did not allow the call: %s", v.describe())
	}
}

func (a *adapterRun) checkConnectionCut(ctx context.Context, t *T) {
	s, v := a.scenario(ctx, t, script{cutPolls: 1, decide: "approved"})
	cut := false
	for _, x := range s.p.log() {
		cut = cut || (x.method == http.MethodGet && x.status == 0)
	}
	if !cut {
		t.Fatalf("the adapter never read the pending request, so no long poll could be cut: %s", v.describe())
	}
	keysReused(t, s, "after the cut")
	if n := len(s.p.created()); n > 1 {
		t.Failf("after the cut the adapter created %d requests for one call", n)
	}
	if v.class != outAllow {
		t.Failf("after the cut long poll the request was approved, but the adapter did not allow the call: %s", v.describe())
	}
}

func (a *adapterRun) checkAbandon(ctx context.Context, t *T) {
	if a.cfg.SuspendsOnTerm {
		t.Skipf("the adapter suspends on SIGTERM (--sigterm-suspends): a suspended execution is not abandoned and must not cancel")
	}
	s := a.session(ctx, t, script{})
	defer s.stop()
	term := make(chan struct{})
	s.p.mu.Lock()
	s.p.onPoll = func() { close(term) }
	s.p.mu.Unlock()
	v := s.invoke(ctx, t, term)
	s.evidence(t)
	reqs := s.p.created()
	if len(reqs) == 0 {
		t.Fatalf("the adapter submitted nothing: %s", v.describe())
	}
	select {
	case <-term:
	default:
		t.Fatalf("the adapter never waited on the pending request (no read of it arrived), so it was not signalled: %s", v.describe())
	}
	if v.class == outAllow {
		t.Failf("the request was never decided, yet the adapter allowed the call: %s", v.describe())
	}
	for _, r := range reqs {
		deleted := false
		for _, x := range s.p.log() {
			deleted = deleted || (x.method == http.MethodDelete && x.path == "/v1/requests/"+r.id)
		}
		if !deleted {
			t.Failf("SIGTERM ended the wait (exit %d) without DELETE /v1/requests/%s: the pending request was left for a person to decide", v.exit, r.id)
		}
	}
}
