package conformance

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// The test binary doubles as the agentowl-adapter shim (the real
// aap.Adapter, in its own process) when the kit runs it with this
// variable set.
func init() {
	switch os.Getenv("AGENTOWL_CONFORMANCE_TEST_SHIM") {
	case "1":
		os.Exit(RunAdapterShim(context.Background(), os.Getenv("SHIM_STATE"), os.Getenv("SHIM_MODE") == "async", os.Stdin, os.Stdout))
	case "receive":
		os.Exit(RunAdapterShimReceiver(context.Background(), os.Getenv("SHIM_STATE"), os.Getenv("SHIM_LISTEN"), os.Stdout))
	case "gateway":
		os.Exit(RunGatewayShim(context.Background(), GatewayShimOptions{State: os.Getenv("SHIM_STATE"), Async: os.Getenv("SHIM_MODE") == "async",
			Timeout: os.Getenv("SHIM_TIMEOUT")}, os.Stdin, os.Stdout))
	case "gateway-receive":
		os.Exit(RunGatewayShimReceiver(context.Background(), os.Getenv("SHIM_STATE"), os.Getenv("SHIM_LISTEN"), os.Stdout))
	}
}

// adapterReport runs the adapter checks with the agentowl-adapter preset's
// contract; nil (and t marked failed) when they cannot run. Safe in any
// goroutine.
func adapterReport(t *testing.T, cfg AdapterConfig) *Report {
	t.Helper()
	return presetReport(t, PresetAgentOwl, cfg)
}

// presetReport runs the adapter checks with preset's contract.
func presetReport(t *testing.T, preset string, cfg AdapterConfig) *Report {
	t.Helper()
	p, err := AdapterPreset(preset)
	if err != nil {
		t.Error(err)
		return nil
	}
	cfg.ApplyPreset(p)
	rep, err := CheckAdapter(context.Background(), cfg)
	if err != nil {
		t.Error(err)
	}
	return rep
}

func allAdapterChecks() []string {
	var ids []string
	for _, c := range (&adapterRun{}).checks() {
		ids = append(ids, c.ID)
	}
	return ids
}

// TestAdapterAgentOwlPreset: the harness kit's aap.Adapter, through the
// shim in its own process, passes every adapter check.
func TestAdapterAgentOwlPreset(t *testing.T) {
	t.Parallel()
	rep := adapterReport(t, AdapterConfig{Command: []string{os.Args[0]},
		Env:      []string{"AGENTOWL_CONFORMANCE_TEST_SHIM=1", "SHIM_STATE={state}", "SHIM_MODE={mode}"},
		Receiver: []string{"/usr/bin/env", "AGENTOWL_CONFORMANCE_TEST_SHIM=receive", "SHIM_LISTEN={receiver_addr}", os.Args[0]}})
	if rep == nil {
		t.FailNow()
	}
	if got := rep.IDs(Pass); len(got) != len(allAdapterChecks()) {
		var b strings.Builder
		WriteText(&b, rep)
		t.Fatalf("passed %v of %v\n%s", got, allAdapterChecks(), b.String())
	}
}

// TestAdapterMCPGateway: the MCP gateway's upstream side, an AAP adapter
// (the shim runs it between the kit's agent and a fake upstream, in its
// own process), passes every adapter check that applies to it;
// adapter.approval.twice does not (an agent's repeated tools/call is a new
// call) and is SKIP.
func TestAdapterMCPGateway(t *testing.T) {
	t.Parallel()
	rep := presetReport(t, PresetMCPGateway, AdapterConfig{Command: []string{os.Args[0]},
		Env:      []string{"AGENTOWL_CONFORMANCE_TEST_SHIM=gateway", "SHIM_STATE={state}", "SHIM_MODE={mode}", "SHIM_TIMEOUT={timeout}"},
		Receiver: []string{"/usr/bin/env", "AGENTOWL_CONFORMANCE_TEST_SHIM=gateway-receive", "SHIM_LISTEN={receiver_addr}", os.Args[0]}})
	if rep == nil {
		t.FailNow()
	}
	requireOutcome(t, rep, nil, []string{ATwice})
}

var brokenAdapter = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "broken-adapter-")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "broken")
	out, err := exec.Command("go", "build", "-o", bin, "./testdata/adapters/broken").CombinedOutput()
	if err != nil {
		return "", &exec.ExitError{Stderr: out}
	}
	return bin, nil
})

// TestAdapterBroken: a small adapter written from the specification passes
// every check; each of its -break modes violates one requirement and fails
// exactly that requirement's check.
func TestAdapterBroken(t *testing.T) {
	t.Parallel()
	bin, err := brokenAdapter()
	if err != nil {
		t.Fatalf("building testdata/adapters/broken: %v", err)
	}
	cases := map[string]string{
		"":                   "",
		"drop-early":         AAsyncEarly,
		"trust-notification": AAsyncReadFirst,
		"forget-abandoned":   AAsyncAbandoned,
		"rerun-duplicate":    AAsyncDuplicate,
		"wrong-args":         ASubmit,
		"no-immediate":       AImmediate,
		"deny-as-allow":      ADenied,
		"expired-as-deny":    AExpired,
		"cancelled-as-deny":  ACancelled,
		"ignore-expires-at":  AStaleApproval,
		"rerun":              ATwice,
		"new-key-on-retry":   AUnavailable,
		"fail-on-cut":        AConnectionCut,
		"no-cancel":          AAbandonCancels,
	}
	covered := map[string]bool{}
	for _, id := range cases {
		covered[id] = true
	}
	for _, id := range allAdapterChecks() {
		if !covered[id] {
			t.Errorf("check %s has no broken adapter that fails it", id)
		}
	}
	// The runs mostly wait (suspensions, settle windows): all of them run
	// at once, whatever go test's -parallel, then each is judged.
	reports := map[string]*Report{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for mode := range cases {
		wg.Go(func() {
			cfg := AdapterConfig{Command: []string{bin, "-state", "{state}", "-mode", "{mode}", "-break", mode},
				Receiver: []string{bin, "-state", "{state}", "-receive", "{receiver_addr}", "-break", mode}}
			if mode == "drop-early" {
				// Its run never resumes and ends only when the kit gives
				// up on it: a shorter wait than the kit's default still
				// leaves a resumed call seconds to run.
				cfg.AsyncWait = 5 * time.Second
			}
			rep := adapterReport(t, cfg)
			mu.Lock()
			reports[mode] = rep
			mu.Unlock()
		})
	}
	wg.Wait()
	for mode, want := range cases {
		t.Run("break="+mode, func(t *testing.T) {
			rep := reports[mode]
			if rep == nil {
				t.Fatal("no report")
			}
			var wantFail []string
			if want != "" {
				wantFail = []string{want}
			}
			if got := rep.IDs(Fail); strings.Join(got, ",") != strings.Join(wantFail, ",") || len(rep.IDs(Skip)) != 0 {
				var b strings.Builder
				WriteText(&b, rep)
				t.Fatalf("failed %v, want %v\n%s", got, wantFail, b.String())
			}
			if want != "" {
				if r := rep.Result(want); len(r.Evidence) == 0 || r.Reason == "" {
					t.Errorf("%s failed without reason or evidence: %+v", want, r)
				}
			}
		})
	}
}
