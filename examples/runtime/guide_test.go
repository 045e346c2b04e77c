package main

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// guidePath is the setup guide whose local example this test runs.
const guidePath = "../../docs/connect-agent-runtime.md"

// shellBlocks returns the bodies of the ```sh blocks of a markdown page.
func shellBlocks(t *testing.T, path string) []string {
	t.Helper()
	page, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var blocks []string
	for _, m := range regexp.MustCompile("(?ms)^```sh\n(.*?)^```$").FindAllStringSubmatch(string(page), -1) {
		blocks = append(blocks, m[1])
	}
	return blocks
}

// freeAddr returns a loopback address no one listens on now.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// TestConnectGuide runs the local example of docs/connect-agent-runtime.md
// as written: the guide's first block builds the binaries and names the
// addresses, the second is the example. The test builds the same binaries,
// gives the same variables free ports, and runs the second block with bash
// (-e, pipefail) in an empty directory; every check in it (jq -e, grep -q)
// fails the test when the guide and the code drift apart.
func TestConnectGuide(t *testing.T) {
	t.Parallel()
	for _, tool := range []string{"bash", "curl", "jq"} {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("CI") != "" {
				t.Fatalf("the guide needs %s (CI must have it): %v", tool, err)
			}
			t.Skipf("the guide needs %s: %v", tool, err)
		}
	}
	blocks := shellBlocks(t, guidePath)
	if len(blocks) != 2 {
		t.Fatalf("%s has %d sh blocks, want 2 (build and settings; the example)", guidePath, len(blocks))
	}
	setup, example := blocks[0], blocks[1]

	// The first block: the builds this test repeats, and the variables it sets.
	const builds = "go build -o agentowl ./cmd/agentowl && go build -o runtime ./examples/runtime\n"
	if !strings.HasPrefix(setup, builds) {
		t.Fatalf("the guide's first block does not start with %q:\n%s", builds, setup)
	}
	var names []string
	for _, m := range regexp.MustCompile(`(\w+)=\S+`).FindAllStringSubmatch(strings.TrimPrefix(setup, builds), -1) {
		names = append(names, m[1])
	}
	vars := []string{"AGENTOWL_LISTEN", "AGENTOWL_URL", "RUNTIME_LISTEN"}
	if !slices.Equal(slices.Sorted(slices.Values(names)), vars) {
		t.Fatalf("the guide's first block sets %v; this test sets %v", names, vars)
	}

	bin := t.TempDir()
	for name, pkg := range map[string]string{"agentowl": "../../cmd/agentowl", "runtime": "."} {
		if out, err := exec.Command("go", "build", "-o", filepath.Join(bin, name), pkg).CombinedOutput(); err != nil {
			t.Fatalf("go build %s: %v\n%s", pkg, err, out)
		}
	}
	// The free ports are picked just before the run; should another process
	// take one meanwhile (a bind error in a log), the example runs again on
	// new ones: that race is the test's, not the guide's.
	for attempt := 1; ; attempt++ {
		out, logs, err := runExample(t, example, bin)
		if err != nil && strings.Contains(logs, "address already in use") && attempt < 3 {
			t.Logf("a picked port was taken meanwhile; running the example again:\n%s", logs)
			continue
		}
		if err != nil {
			t.Fatalf("the guide's example failed: %v\n%s\n%s", err, logs, out)
		}
		for _, want := range []string{"delivery.state:        delivered", "runtime.status:              completed", "Revoked runtime credential"} {
			if !strings.Contains(out, want) {
				t.Errorf("the example's output lacks %q:\n%s", want, out)
			}
		}
		return
	}
}

// runExample runs the guide's example block with bash in a new directory
// holding the binaries of bin, on free ports; it returns the example's
// output and, when it failed, the server's and runtime's logs.
func runExample(t *testing.T, example, bin string) (output, logs string, err error) {
	dir := t.TempDir()
	for _, name := range []string{"agentowl", "runtime"} {
		if err := os.Link(filepath.Join(bin, name), filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	listen, runtimeListen := freeAddr(t), freeAddr(t)
	vars := map[string]string{"AGENTOWL_LISTEN": listen, "AGENTOWL_URL": "http://" + listen, "RUNTIME_LISTEN": runtimeListen}

	// A bound on a hung example only; the example itself waits by polling.
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-e", "-u", "-o", "pipefail", "-c", example)
	cmd.Dir = dir
	// Only what the guide sets, on top of the caller's environment minus
	// any AgentOwl setting it may hold.
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "AGENTOWL_") && !strings.HasPrefix(kv, "RUNTIME_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	for k, v := range vars {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	// Its own process group, so the server and runtime it starts in the
	// background are stopped with it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM) }()
	if err := cmd.Wait(); err != nil {
		var l strings.Builder
		for _, log := range []string{"server.log", "runtime.log"} {
			b, _ := os.ReadFile(filepath.Join(dir, log))
			fmt.Fprintf(&l, "%s:\n%s\n", log, b)
		}
		return out.String(), l.String(), err
	}
	return out.String(), "", nil
}
