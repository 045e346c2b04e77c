package conformance

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// startPyProvider runs testdata/pyprovider/provider.py (a provider written
// from the specification in Python) and returns its URL.
func startPyProvider(t *testing.T, token string, args ...string) string {
	t.Helper()
	py, err := exec.LookPath("python3")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("CI is set but python3 is missing")
		}
		t.Skip("python3 is not installed")
	}
	cmd := exec.Command(py, append([]string{filepath.Join("testdata", "pyprovider", "provider.py"), "--port", "0", "--provisioner-token", token}, args...)...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "listening on ") {
		t.Fatalf("provider.py did not start: %q %v", line, err)
	}
	return strings.TrimSpace(strings.TrimPrefix(line, "listening on "))
}

// TestPythonProvider: a provider written in another language from the
// specification passes the synchronous checks; the same provider with two
// seeded violations fails exactly the two checks of those violations, and
// the report says what was sent and what came back.
func TestPythonProvider(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name  string
		args  []string
		fails []string
	}{
		{"correct", nil, nil},
		{"two seeded violations", []string{"--seed-violations"}, []string{PIdemConflict, PDecisionApproved}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			token := "py-prov-" + randHex(8)
			url := startPyProvider(t, token, c.args...)
			decide := "python3 " + filepath.Join("testdata", "pyprovider", "decide.py") + " " + url + " " + token + " {id} {decision}"
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			rep, err := CheckProvider(ctx, ProviderConfig{URL: url, ProvisionerToken: token, Decider: &CommandDecider{Template: decide},
				Contract: testContract(t), Only: syncChecks})
			if err != nil {
				t.Fatal(err)
			}
			requireOutcome(t, rep, c.fails, nil)
			var b strings.Builder
			WriteText(&b, rep)
			for _, id := range c.fails {
				r := rep.Result(id)
				if r == nil || len(r.Evidence) == 0 || r.Reason == "" {
					t.Errorf("%s: no reason or evidence", id)
				}
			}
			if c.fails != nil {
				for _, want := range []string{"reuse the key for another body: expected HTTP [409]", "a fixed expires_at must be preserved"} {
					if !strings.Contains(b.String(), want) {
						t.Errorf("the report does not say %q:\n%s", want, b.String())
					}
				}
				t.Logf("the report a developer of this provider gets:\n%s", b.String())
			}
		})
	}
}
