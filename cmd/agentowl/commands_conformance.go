package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentowl/agentowl/internal/conformance"
)

// conformanceCommand is `agentowl conformance …`: AAP v1's requirement
// lists as executable checks against any provider, receiver or adapter
// (docs/conformance.md).
func (c *cli) conformanceCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "conformance",
		Short: "Check an AAP v1 provider, receiver or adapter against the specification's requirement lists",
		Long: `Runs AAP v1's requirement lists (8_security.md) as checks over the wire against
any provider, receiver or adapter. Each check prints PASS, FAIL or SKIP with
the requirement it tests; a failure shows what was sent and what came back.
The exit status is 1 when any check fails. --json prints the report as one
JSON document instead of text; --junit FILE also writes JUnit XML.
See docs/conformance.md.`,
	}
	cmd.AddCommand(c.conformanceProviderCommand(), c.conformanceReceiverCommand(), c.conformanceAdapterCommand(),
		c.conformanceAdapterShimCommand(), c.conformanceGatewayShimCommand())
	return cmd
}

// reportFlags are the output flags every subcommand shares.
type reportFlags struct {
	junit, jsonFile string
	verbose         bool
}

func (r *reportFlags) add(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&r.junit, "junit", "", "also write the report as JUnit XML to FILE")
	f.StringVar(&r.jsonFile, "json-file", "", "also write the JSON report to FILE (--json prints it on stdout instead of the text)")
	f.BoolVarP(&r.verbose, "verbose", "v", false, "print each check's line as it finishes, on stderr")
}

func (r *reportFlags) progress(c *cli) func(conformance.Result) {
	if !r.verbose {
		return nil
	}
	return func(res conformance.Result) { fmt.Fprintf(c.stderr, "%-4s %s\n", res.Status, res.ID) }
}

// finish writes the report (text, or JSON with --json) and the files,
// and turns a failed check into exit status 1.
func (c *cli) finishReport(cmd *cobra.Command, r *reportFlags, rep *conformance.Report) error {
	var err error
	if c.json {
		err = conformance.WriteJSON(c.stdout, rep)
	} else {
		err = conformance.WriteText(c.stdout, rep)
	}
	if err != nil {
		return err
	}
	for _, out := range []struct {
		path  string
		write func(io.Writer, *conformance.Report) error
	}{{r.jsonFile, conformance.WriteJSON}, {r.junit, conformance.WriteJUnit}} {
		if out.path == "" {
			continue
		}
		if err := writeFileWith(out.path, rep, out.write); err != nil {
			return err
		}
	}
	if rep.Failed() {
		cmd.SilenceErrors = true // the report said it all
		return exitCode(1)
	}
	return nil
}

func writeFileWith(path string, rep *conformance.Report, write func(io.Writer, *conformance.Report) error) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := write(f, rep); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// clientTLS returns a TLS configuration trusting caFile's roots as well as
// the system's, or nil without a file.
func clientTLS(caFile string) (*tls.Config, error) {
	if caFile == "" {
		return nil, nil
	}
	pemData, err := os.ReadFile(caFile)
	if err != nil {
		return nil, err
	}
	pool, err := x509.SystemCertPool()
	if err != nil {
		pool = x509.NewCertPool()
	}
	if !pool.AppendCertsFromPEM(pemData) {
		return nil, fmt.Errorf("--ca-file %s holds no certificate", caFile)
	}
	return &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}, nil
}

// serverTLS loads a certificate and key for a listener of the kit.
func serverTLS(certFile, keyFile string) (*tls.Config, error) {
	if (certFile == "") != (keyFile == "") {
		return nil, errors.New("--async-tls-cert and --async-tls-key go together")
	}
	if certFile == "" {
		return nil, nil
	}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("TLS: %w", err)
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}, nil
}

func (c *cli) conformanceProviderCommand() *cobra.Command {
	var rf reportFlags
	var cfg conformance.ProviderConfig
	var url, token, decide, openapi, caFile, only string
	var asyncListen, asyncURL, asyncCert, asyncKey string
	var interactive bool
	cmd := &cobra.Command{
		Use:   "provider --url URL --provisioner-token TOKEN [--decide-command 'CMD {id} {decision}' | --interactive]",
		Short: "Check an AAP provider over HTTP: authentication, requests, idempotency, expiry, the contract, instances",
		Long: `Tests any AAP v1 provider over HTTP, with nothing specific to AgentOwl on the
wire. The kit provisions its own instances with the provisioner token (and
deletes them at the end), submits requests and checks them against
8_security.md's provider list and openapi.yaml (--openapi; by default
api/openapi.yaml of the working directory or a parent, or $AAP_OPENAPI).

Decisions need a person: --decide-command runs a shell command per decision,
with {id} replaced by the request ID and {decision} by approve or deny
(AgentOwl: 'agentowl approvals decide {id} --{decision}'); --interactive
prints the request ID and waits for Enter once you have decided it. Without
either, the checks that need a decision are SKIP.

With --async-receiver-listen and --async-public-url the kit also plays the
receiver and checks verification, signed notifications, retries and moves
of queued notifications.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg.URL = url
			cfg.ProvisionerToken = envOr(token, "AGENTOWL_PROVISIONER_TOKEN", "")
			switch {
			case decide != "" && interactive:
				return errors.New("pass either --decide-command or --interactive")
			case decide != "":
				cfg.Decider = &conformance.CommandDecider{Template: decide}
			case interactive:
				cfg.Decider = &conformance.InteractiveDecider{In: cmd.InOrStdin(), Out: c.stderr}
				cfg.Parallel = 1
				if cfg.DecisionTimeout == 0 {
					cfg.DecisionTimeout = 10 * time.Minute
				}
			}
			var err error
			if cfg.TLS, err = clientTLS(caFile); err != nil {
				return err
			}
			if cfg.Contract, err = conformance.FindContract(openapi); err != nil {
				return err
			}
			if cfg.Contract == nil {
				fmt.Fprintln(c.stderr, "note: no OpenAPI document found (--openapi): provider.contract.responses will be SKIP")
			}
			if only != "" {
				cfg.Only = strings.Split(only, ",")
			}
			if (asyncListen == "") != (asyncURL == "") {
				return errors.New("--async-receiver-listen and --async-public-url go together")
			}
			if asyncListen != "" {
				a := &conformance.AsyncConfig{Listen: asyncListen, PublicURL: asyncURL}
				if a.TLS, err = serverTLS(asyncCert, asyncKey); err != nil {
					return err
				}
				cfg.Async = a
			}
			cfg.Progress = rf.progress(c)
			rep, err := conformance.CheckProvider(cmd.Context(), cfg)
			if err != nil {
				return err
			}
			return c.finishReport(cmd, &rf, rep)
		},
	}
	rf.add(cmd)
	f := cmd.Flags()
	f.StringVar(&url, "url", "", "the provider's AAP base URL (the paths /v1/... are appended)")
	f.StringVar(&token, "provisioner-token", "", "a provisioner token of the provider (env AGENTOWL_PROVISIONER_TOKEN)")
	f.StringVar(&decide, "decide-command", "", "shell command that approves or denies a request: {id} and {decision} (approve|deny) are replaced")
	f.BoolVar(&interactive, "interactive", false, "ask a person to decide requests (prints the request ID, waits for Enter)")
	f.StringVar(&openapi, "openapi", "", "the AAP OpenAPI document to validate answers against (env AAP_OPENAPI)")
	f.StringVar(&caFile, "ca-file", "", "extra PEM roots to trust for the provider's TLS")
	f.StringVar(&only, "only", "", "run only the checks whose ID starts with one of these comma-separated prefixes")
	f.DurationVar(&cfg.ExpiryTimeout, "expiry-timeout", time.Second, "the timeout of requests the kit lets expire (whole seconds)")
	f.DurationVar(&cfg.ExpiryGrace, "expiry-grace", 5*time.Second, "how long after a deadline the provider may take to show a request expired")
	f.DurationVar(&cfg.LongPollWait, "long-poll-wait", 2*time.Second, "the ?wait of the long-poll check (whole seconds, at most 30s)")
	f.DurationVar(&cfg.DecisionTimeout, "decision-timeout", 0, "how long to wait for a decision to show (default 60s, 10m with --interactive)")
	f.IntVar(&cfg.Parallel, "parallel", 8, "how many checks run at once")
	f.StringVar(&asyncListen, "async-receiver-listen", "", "local address for the kit's webhook receiver (enables the asynchronous checks)")
	f.StringVar(&asyncURL, "async-public-url", "", "the HTTPS URL at which the provider reaches --async-receiver-listen")
	f.StringVar(&asyncCert, "async-tls-cert", "", "PEM certificate for the receiver to serve HTTPS itself (else plain HTTP behind your TLS proxy)")
	f.StringVar(&asyncKey, "async-tls-key", "", "PEM key for --async-tls-cert")
	cmd.MarkFlagRequired("url")
	return cmd
}

func (c *cli) conformanceReceiverCommand() *cobra.Command {
	var rf reportFlags
	var cfg conformance.ReceiverConfig
	var effectsURL, effectsCmd, caFile string
	cmd := &cobra.Command{
		Use:   "receiver --url URL --secret whsec_… --instance ID [--effects-url URL | --effects-command CMD]",
		Short: "Check an AAP webhook receiver: the kit plays the provider of an instance the receiver expects",
		Long: `Sends signed request.resolved notifications and verification messages to a
receiver, as the provider of --instance (whose registration the receiver has
verified, with the signing secret --secret), and checks which are
acknowledged: a valid one must be; a wrong signature, a timestamp outside
tolerance, a body id other than webhook-id, a replayed webhook-id with another
body, another instance's ID and a verification for an unexpected registration
must be refused.

Whether a duplicate had a second effect is seen through the receiver's
effects: --effects-url URL (GET; {request_id} is replaced) or
--effects-command CMD (a shell command; {request_id} is replaced); the kit
counts the request ID's occurrences in the answer. Without either, those
parts are not checked.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if effectsURL != "" && effectsCmd != "" {
				return errors.New("pass either --effects-url or --effects-command")
			}
			var err error
			if cfg.TLS, err = clientTLS(caFile); err != nil {
				return err
			}
			switch {
			case effectsURL != "":
				cfg.Effects = conformance.URLEffects(effectsURL, &http.Client{Timeout: 30 * time.Second})
			case effectsCmd != "":
				cfg.Effects = conformance.CommandEffects(effectsCmd)
			}
			cfg.Progress = rf.progress(c)
			rep, err := conformance.CheckReceiver(cmd.Context(), cfg)
			if err != nil {
				return err
			}
			return c.finishReport(cmd, &rf, rep)
		},
	}
	rf.add(cmd)
	f := cmd.Flags()
	f.StringVar(&cfg.URL, "url", "", "the receiver's webhook URL")
	f.StringVar(&cfg.Secret, "secret", "", "the instance's whsec_ signing secret, as installed on the receiver")
	f.StringVar(&cfg.InstanceID, "instance", "", "the instance ID the receiver verified")
	f.StringVar(&effectsURL, "effects-url", "", "URL listing the receiver's effects ({request_id} is replaced)")
	f.StringVar(&effectsCmd, "effects-command", "", "shell command printing the receiver's effects ({request_id} is replaced)")
	f.DurationVar(&cfg.EffectsSettle, "effects-settle", 2*time.Second, "how long an effect may take to show")
	f.StringVar(&caFile, "ca-file", "", "extra PEM roots to trust for the receiver's TLS")
	f.IntVar(&cfg.Parallel, "parallel", 8, "how many checks run at once")
	for _, name := range []string{"url", "secret", "instance"} {
		cmd.MarkFlagRequired(name)
	}
	return cmd
}

func (c *cli) conformanceAdapterCommand() *cobra.Command {
	var rf reportFlags
	var cfg conformance.AdapterConfig
	var preset, stdinFile, receiver string
	var expect [4]string
	cmd := &cobra.Command{
		Use:   "adapter [--preset agentowl-adapter|agentowl-mcp-gateway|aap-hook] [--env K={url}…] [--stdin-template FILE] [--expect-allow RE --expect-deny RE …] -- CMD ARGS…",
		Short: "Check an AAP adapter command: the kit plays its provider and scripts each answer",
		Long: `Runs a provider of the kit's own on a loopback port and drives the adapter
command against it, once or twice per check: it hands the adapter the
provider's URL and an instance credential through --env templates, feeds
it a tool call on stdin (--stdin-template), and scripts the answer per
check: approve, deny with a note, expire, cancel, an approval whose
expires_at has passed, the same approval on a rerun, 503 with Retry-After,
a connection cut mid long poll, SIGTERM while the adapter waits.

Templates ({url}, {token}, {state}, {call_id}, {mode}; in the stdin
template also {tool}, {arguments}, {timeout}) are replaced in CMD ARGS,
--env values and the stdin template. {mode} is sync, or async in the
adapter.async checks, which run when --receiver-command gives the
adapter's receiving service: the kit verifies the registration it hands
it and delivers a signed notification for each decision. The adapter's output (stdout and stderr) is classified
by --expect-allow, --expect-expired, --expect-cancelled, --expect-deny
(regular expressions, tried in that order). --preset supplies all of
these for a known adapter: agentowl-adapter (the harness kit's
aap.Adapter; without CMD the kit runs this binary's adapter shim),
agentowl-mcp-gateway (the MCP gateway between the kit's agent and a fake
upstream; without CMD this binary's gateway shim) and aap-hook (the aap CLI's hook contract as described in docs/conformance.md).`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg.Command = args
			if receiver != "" {
				cfg.Receiver = []string{"/bin/sh", "-c", receiver}
			}
			if stdinFile != "" {
				data, err := os.ReadFile(stdinFile)
				if err != nil {
					return err
				}
				cfg.Stdin = string(data)
			}
			for i, dst := range []**regexp.Regexp{&cfg.Expect.Allow, &cfg.Expect.Expired, &cfg.Expect.Cancelled, &cfg.Expect.Deny} {
				if expect[i] == "" {
					continue
				}
				re, err := regexp.Compile(expect[i])
				if err != nil {
					return fmt.Errorf("--expect-*: %w", err)
				}
				*dst = re
			}
			if preset != "" {
				p, err := conformance.AdapterPreset(preset)
				if err != nil {
					return err
				}
				if shim := map[string]string{conformance.PresetAgentOwl: "adapter-shim", conformance.PresetMCPGateway: "mcp-gateway-shim"}[preset]; shim != "" {
					self, err := os.Executable()
					if err != nil {
						return err
					}
					p.Command = []string{self, "conformance", shim, "--state", "{state}", "--mode", "{mode}"}
					if preset == conformance.PresetMCPGateway {
						p.Command = append(p.Command, "--timeout", "{timeout}")
					}
					p.Receiver = []string{self, "conformance", shim, "--state", "{state}", "--receive", "{receiver_addr}"}
				}
				cfg.ApplyPreset(p)
			}
			cfg.Progress = rf.progress(c)
			rep, err := conformance.CheckAdapter(cmd.Context(), cfg)
			if err != nil {
				return err
			}
			return c.finishReport(cmd, &rf, rep)
		},
	}
	rf.add(cmd)
	f := cmd.Flags()
	f.StringVar(&preset, "preset", "", "a known adapter's contract: agentowl-adapter, agentowl-mcp-gateway or aap-hook")
	f.StringArrayVar(&cfg.Env, "env", nil, "K=template added to the adapter's environment (repeatable), such as AAP_BASE_URL={url}")
	f.StringVar(&stdinFile, "stdin-template", "", "FILE: the tool call as the adapter reads it on stdin, with {tool}, {arguments}, {call_id}, {timeout}")
	f.StringVar(&expect[0], "expect-allow", "", "regular expression: the adapter allowed (ran) the call")
	f.StringVar(&expect[1], "expect-expired", "", "regular expression: the adapter reported an expiry")
	f.StringVar(&expect[2], "expect-cancelled", "", "regular expression: the adapter reported a cancellation")
	f.StringVar(&expect[3], "expect-deny", "", "regular expression: the adapter reported a denial")
	f.StringVar(&cfg.Tool, "submitted-tool", "", "template: the tool name the adapter submits for the probe call (default {tool}; an MCP gateway's may be SERVER/{tool})")
	f.BoolVar(&cfg.Stateful, "stateful", false, "the adapter keeps executions across runs ({state} in a template implies it): check a rerun of the same call")
	f.BoolVar(&cfg.SuspendsOnTerm, "sigterm-suspends", false, "SIGTERM suspends the adapter's execution instead of abandoning it (skips adapter.abandon.cancel)")
	f.StringVar(&receiver, "receiver-command", "", "the adapter's receiving service, run with /bin/sh -c per asynchronous check ({receiver_addr}, {registration_id}, {secret}, {instance_id}; exec the service so SIGTERM reaches it); without it the adapter.async checks are SKIP")
	f.StringVar(&cfg.ReceiverPath, "receiver-path", "/", "the path the receiving service takes webhooks on")
	f.DurationVar(&cfg.AsyncWait, "async-wait", 10*time.Second, "how long an asynchronous run may go on after its decision was notified")
	f.DurationVar(&cfg.AsyncSettle, "async-settle", 2*time.Second, "how long the kit watches for an execution that must not happen")
	f.DurationVar(&cfg.RunTimeout, "run-timeout", 90*time.Second, "how long one run of the adapter may take")
	f.IntVar(&cfg.Parallel, "parallel", 8, "how many checks run at once")
	return cmd
}

// conformanceAdapterShimCommand is the agentowl-adapter preset's subject:
// the harness kit's aap.Adapter as an adapter command, and (--receive) its
// receiving service.
func (c *cli) conformanceAdapterShimCommand() *cobra.Command {
	var state, mode, receive string
	cmd := &cobra.Command{
		Use:    "adapter-shim [--state DIR] [--mode sync|async] [--receive ADDR]",
		Short:  "The harness kit's aap.Adapter as an adapter command (the agentowl-adapter preset's subject)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			n := 0
			if receive != "" {
				n = conformance.RunAdapterShimReceiver(cmd.Context(), state, receive, c.stdout)
			} else {
				n = conformance.RunAdapterShim(cmd.Context(), state, mode == "async", cmd.InOrStdin(), c.stdout)
			}
			if n != 0 {
				cmd.SilenceErrors = true
				return exitCode(n)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&state, "state", "", "directory of the saved executions (default: a temporary one)")
	cmd.Flags().StringVar(&mode, "mode", "sync", "sync: long poll; async: suspend, and let the receiving service (--receive) resume")
	cmd.Flags().StringVar(&receive, "receive", "", "ADDR: be the receiving service of the asynchronous shim (AAP_REGISTRATION_ID, AAP_SIGNING_SECRET)")
	return cmd
}

// conformanceGatewayShimCommand is the agentowl-mcp-gateway preset's
// subject: the MCP gateway between the kit's agent (a tools/call on stdin)
// and a fake upstream, and (--receive) its receiving service.
func (c *cli) conformanceGatewayShimCommand() *cobra.Command {
	var o conformance.GatewayShimOptions
	var mode, receive string
	cmd := &cobra.Command{
		Use:    "mcp-gateway-shim --state DIR [--mode sync|async] [--timeout 30m] [--receive ADDR]",
		Short:  "The MCP gateway as an adapter command (the agentowl-mcp-gateway preset's subject)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			n := 0
			if receive != "" {
				n = conformance.RunGatewayShimReceiver(cmd.Context(), o.State, receive, c.stdout)
			} else {
				o.Async = mode == "async"
				n = conformance.RunGatewayShim(cmd.Context(), o, cmd.InOrStdin(), c.stdout)
			}
			if n != 0 {
				cmd.SilenceErrors = true
				return exitCode(n)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&o.State, "state", "", "directory of the gateway's store")
	cmd.Flags().StringVar(&mode, "mode", "sync", "sync: the gateway long polls; async: it waits for the receiving service's wake-ups (--receive)")
	cmd.Flags().StringVar(&o.Timeout, "timeout", "30m", "the gateway's approval.timeout")
	cmd.Flags().StringVar(&receive, "receive", "", "ADDR: be the gateway's receiving service (AAP_REGISTRATION_ID, AAP_SIGNING_SECRET)")
	return cmd
}
