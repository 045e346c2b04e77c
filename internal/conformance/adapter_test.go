package conformance

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// The test binary doubles as the agentowl-adapter shim (the real
// aap.Adapter, in its own process) when the kit runs it with this
// variable set.
func init() {
	if os.Getenv("AGENTOWL_CONFORMANCE_TEST_SHIM") == "1" {
		os.Exit(RunAdapterShim(context.Background(), os.Getenv("SHIM_STATE"), os.Stdin, os.Stdout))
	}
}

func adapterReport(t *testing.T, cfg AdapterConfig) *Report {
	t.Helper()
	p, err := AdapterPreset(PresetAgentOwl)
	if err != nil {
		t.Fatal(err)
	}
	cfg.ApplyPreset(p)
	rep, err := CheckAdapter(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
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
		Env: []string{"AGENTOWL_CONFORMANCE_TEST_SHIM=1", "SHIM_STATE={state}"}})
	if got := rep.IDs(Pass); len(got) != len(allAdapterChecks()) {
		var b strings.Builder
		WriteText(&b, rep)
		t.Fatalf("passed %v of %v\n%s", got, allAdapterChecks(), b.String())
	}
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
		"":                  "",
		"wrong-args":        ASubmit,
		"no-immediate":      AImmediate,
		"deny-as-allow":     ADenied,
		"expired-as-deny":   AExpired,
		"cancelled-as-deny": ACancelled,
		"ignore-expires-at": AStaleApproval,
		"rerun":             ATwice,
		"new-key-on-retry":  AUnavailable,
		"fail-on-cut":       AConnectionCut,
		"no-cancel":         AAbandonCancels,
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
	for mode, want := range cases {
		t.Run("break="+mode, func(t *testing.T) {
			t.Parallel()
			rep := adapterReport(t, AdapterConfig{Command: []string{bin, "-state", "{state}", "-break", mode}})
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
