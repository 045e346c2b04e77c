package main

import (
	"bytes"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestEndToEndWithRealProcesses builds agentowl and refund-agent and runs
// the documented flow with real processes: `agentowl serve` (the provider),
// `agentowl receiver serve --exec 'refund-agent resume'`, `agentowl
// receiver provision` and `refund-agent run`, which exits while it waits.
// It kills the receiver with SIGKILL while a decision is being delivered,
// and the provider right after a decision, restarts each, and checks that
// every approved refund was issued exactly once, also after a duplicate
// wake-up and a recovery run, and that a denied one never was.
func TestEndToEndWithRealProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("builds binaries and runs processes")
	}
	t.Parallel()
	bin := t.TempDir()
	agentowl, refund := filepath.Join(bin, "agentowl"), filepath.Join(bin, "refund-agent")
	for out, pkg := range map[string]string{agentowl: "github.com/agentowl/agentowl/cmd/agentowl", refund: "."} {
		if b, err := exec.Command("go", "build", "-o", out, pkg).CombinedOutput(); err != nil {
			t.Fatalf("go build %s: %v\n%s", pkg, err, b)
		}
	}
	root := t.TempDir()
	recvDir, provDir, agentDir := filepath.Join(root, "receiver"), filepath.Join(root, "provider"), filepath.Join(root, "agent")
	recvAddr, provAddr, wakeAddr := freeAddr(t), freeAddr(t), freeAddr(t)
	provURL, hookURL := "http://"+provAddr, "https://"+recvAddr+"/aap/events"
	credFile := filepath.Join(recvDir, "credentials", "refund-agent.json")

	receiverArgs := []string{"receiver", "serve", "--data-dir", recvDir, "--listen", recvAddr, "--wakeup-listen", wakeAddr,
		"--tls-self-signed", "--retry-delay", "1s",
		"--exec", fmt.Sprintf("'%s' --dir '%s' --credential '%s' resume", refund, agentDir, credFile)}
	receiver := start(t, "receiver", agentowl, nil, receiverArgs...)
	waitHealthy(t, receiver, "https://"+recvAddr+"/healthz")
	providerEnv := []string{"AGENTOWL_EGRESS_ALLOW_CIDRS=127.0.0.0/8", "AGENTOWL_EGRESS_CA_FILE=" + filepath.Join(recvDir, "cert.pem"),
		"AGENTOWL_RETRY_MIN_DELAY=1s", "AGENTOWL_RETRY_MAX_DELAY=2s"}
	providerArgs := []string{"serve", "--data-dir", provDir, "--listen", provAddr}
	provider := start(t, "provider", agentowl, providerEnv, providerArgs...)
	waitHealthy(t, provider, provURL+"/healthz")

	admin := strings.TrimSpace(string(must(os.ReadFile(filepath.Join(provDir, "operator-token")))))
	cli := func(args ...string) map[string]any {
		t.Helper()
		out := runCmd(t, agentowl, append(args, "--json", "--url", provURL, "--token", admin)...)
		var m map[string]any
		if err := json.Unmarshal([]byte(out), &m); err != nil {
			t.Fatalf("agentowl %v printed %q", args, out)
		}
		return m
	}
	prov := cli("provisioner-tokens", "create")["token"].(string)
	var provisioned map[string]any
	if err := json.Unmarshal([]byte(runCmd(t, agentowl, "receiver", "provision", "--json", "--provider", provURL, "--provisioner-token", prov,
		"--name", "refund-agent", "--url", hookURL, "--data-dir", recvDir)), &provisioned); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(credFile); err != nil || fi.Mode().Perm() != 0o600 || provisioned["credential_file"] != credFile {
		t.Fatalf("credential file %v (%v), mode %v", provisioned["credential_file"], err, fi)
	}
	agent := func(args ...string) string {
		t.Helper()
		return runCmd(t, refund, append([]string{"--dir", agentDir, "--credential", credFile}, args...)...)
	}
	requestOf := func(out string) string {
		t.Helper()
		_, after, ok := strings.Cut(out, "request=")
		if !ok || !strings.Contains(out, "\twaiting\t") {
			t.Fatalf("refund-agent run did not suspend: %q", out)
		}
		return strings.Fields(after)[0]
	}

	// A: the receiver is killed while the decision is being delivered; the
	// provider retries and the restarted receiver wakes the agent.
	reqA := requestOf(agent("run", "--payment", "pay_A", "--amount", "4900"))
	receiver.kill9(t)
	cli("approvals", "decide", reqA, "--approve")
	receiver = start(t, "receiver", agentowl, nil, receiverArgs...)
	waitHealthy(t, receiver, "https://"+recvAddr+"/healthz")
	waitRefunds(t, agentDir, map[string]int{"pay_A": 1})

	// B: the provider is killed right after the decision; its outbox
	// delivers after the restart.
	reqB := requestOf(agent("run", "--payment", "pay_B", "--amount", "1200"))
	cli("approvals", "decide", reqB, "--approve")
	provider.kill9(t)
	provider = start(t, "provider", agentowl, providerEnv, providerArgs...)
	waitHealthy(t, provider, provURL+"/healthz")
	waitRefunds(t, agentDir, map[string]int{"pay_A": 1, "pay_B": 1})

	// C: denied; the wake-up ends the execution without a refund.
	reqC := requestOf(agent("run", "--payment", "pay_C", "--amount", "99999"))
	cli("approvals", "decide", reqC, "--deny", "--note", "too large")
	deadline := time.Now().Add(time.Minute)
	for !strings.Contains(agent("status"), "refund-pay_C\tnot_run") {
		if time.Now().After(deadline) {
			t.Fatalf("the denial never reached the agent:\n%s", agent("status"))
		}
		time.Sleep(100 * time.Millisecond)
	}

	// Duplicate wake-ups, re-running the agent step and recovery change
	// nothing.
	agent("resume", reqA)
	agent("run", "--payment", "pay_B", "--amount", "1200")
	agent("recover")
	waitRefunds(t, agentDir, map[string]int{"pay_A": 1, "pay_B": 1})
	status := agent("status")
	for _, want := range []string{"refund-pay_A\tfinished", "refund-pay_B\tfinished", "refund-pay_C\tnot_run\trequest=" + reqC + "\tnot run: denied: too large"} {
		if !strings.Contains(status, want) {
			t.Errorf("status lacks %q:\n%s", want, status)
		}
	}
	// Every wake-up was acknowledged by --exec.
	resp, err := http.Get("http://" + wakeAddr + "/wakeups")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var w struct{ Wakeups []map[string]any }
	if err := json.NewDecoder(resp.Body).Decode(&w); err != nil || len(w.Wakeups) != 0 {
		t.Errorf("pending wake-ups after the flow: %v (%v)", w.Wakeups, err)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func freeAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// runCmd runs a command to completion and returns its stdout.
func runCmd(t *testing.T, bin string, args ...string) string {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = cleanEnv()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %v: %v\n%s%s", filepath.Base(bin), args, err, stdout.String(), stderr.String())
	}
	return stdout.String()
}

func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "AGENTOWL_") && !strings.HasPrefix(kv, "AAP_") && !strings.HasPrefix(kv, "REFUND_AGENT_") {
			env = append(env, kv)
		}
	}
	return env
}

type process struct {
	name   string
	cmd    *exec.Cmd
	exited chan struct{}
}

// start starts a long-running process; it is killed at test end.
func start(t *testing.T, name, bin string, env []string, args ...string) *process {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(cleanEnv(), env...)
	p := &process{name: name, cmd: cmd, exited: make(chan struct{})}
	logFile, err := os.CreateTemp(t.TempDir(), name+"-*.log")
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { cmd.Wait(); close(p.exited) }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-p.exited
		if t.Failed() {
			out, _ := os.ReadFile(logFile.Name())
			t.Logf("%s log:\n%s", name, out)
		}
		logFile.Close()
	})
	return p
}

func (p *process) kill9(t *testing.T) {
	t.Helper()
	if err := p.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-p.exited
}

func waitHealthy(t *testing.T, p *process, url string) {
	t.Helper()
	client := &http.Client{Timeout: time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	deadline := time.Now().Add(30 * time.Second)
	for {
		select {
		case <-p.exited:
			t.Fatalf("%s exited early", p.name)
		default:
		}
		if resp, err := client.Get(url); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never answered %s", p.name, url)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitRefunds waits until refunds.jsonl holds exactly want per payment (and
// nothing else), failing at once on a second refund of any payment.
func waitRefunds(t *testing.T, agentDir string, want map[string]int) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		got := map[string]int{}
		data, _ := os.ReadFile(filepath.Join(agentDir, "refunds.jsonl"))
		for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
			var r struct {
				PaymentID string `json:"payment_id"`
			}
			if json.Unmarshal([]byte(line), &r) == nil {
				got[r.PaymentID]++
			}
		}
		done := len(got) == len(want)
		for p, n := range got {
			if n > 1 || want[p] == 0 {
				t.Fatalf("refunds issued: %v, want %v", got, want)
			}
			done = done && n == want[p]
		}
		if done {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("refunds issued: %v, want %v", got, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
