package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// A second `agentowl serve` on a data directory whose SQLite store another
// one serves is refused at start, with the reason: SQLite is for one
// process, and the serve lock is what lets a restarted process take over
// its dead predecessor's leases.
func TestSecondServeOnSQLiteRefused(t *testing.T) {
	t.Parallel()
	bin := buildAgentowl(t)
	dataDir := t.TempDir()
	startServeWith(t, bin, dataDir, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "serve", "--data-dir", dataDir, "--listen", fmt.Sprintf("127.0.0.1:%d", freePort(t)))
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}
	out, err := cmd.CombinedOutput()
	if err == nil || ctx.Err() != nil {
		t.Fatalf("a second serve on the same data directory started (err %v): %s", err, out)
	}
	if !strings.Contains(string(out), "another agentowl serve is using") {
		t.Errorf("the refusal does not say why: %s", out)
	}
}

// A replica stopped with SIGTERM while its attempts are under way and more
// of its claimed messages wait for destination slots exits within the
// attempt timeout + 5 s, and hands back every lease it held (messages and
// slots): the next process delivers what is left at once, not after the
// leases lapse (30 s and more). PostgreSQL: there lease expiry is the only
// bound a new process keeps to, so what the stopped one hands back is what
// makes it prompt.
func TestSIGTERMHandsLeasesBack(t *testing.T) {
	bin, dbURL := replicasOnPostgres(t, 1)
	var slow atomic.Bool
	slow.Store(true)
	var rcv *receiver
	rcv = newReceiver(t, func(ctx context.Context, id string, n int) answer {
		if slow.Load() {
			select { // slow, and still answering while the server stops
			case <-time.After(2 * time.Second):
			case <-ctx.Done():
			case <-rcv.done:
			}
		}
		return answer{status: http.StatusNoContent}
	})
	const limit, total = 2, 12
	env := replicaEnv(rcv.caFile, limit)
	dirA := t.TempDir()
	a := startServeWith(t, bin, dirA, env, "--database-url", dbURL)
	admin := site{dataDir: dirA}.adminToken(t)
	h := provisionWithDelivery(t, a.url, provisionerToken(t, a.url, admin), "sigterm", rcv)
	ids := make([]string, total)
	for i := range ids {
		ids[i] = submitPending(t, h, fmt.Sprintf("sigterm-%d", i))
	}
	for _, id := range ids {
		approve(t, a.url, admin, id)
	}
	eventually(t, 30*time.Second, "attempts under way at the receiver's limit", func() bool {
		rcv.mu.Lock()
		defer rcv.mu.Unlock()
		return rcv.busy == limit
	})

	stopped := time.Now()
	if err := a.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-a.exited:
	case <-time.After(10*time.Second + 5*time.Second):
		t.Fatal("the replica did not exit within the attempt timeout + 5s of SIGTERM")
	}
	t.Logf("exited %s after SIGTERM", time.Since(stopped).Round(time.Millisecond))
	if code := a.cmd.ProcessState.ExitCode(); code != 0 {
		t.Errorf("exit code %d after SIGTERM, want 0", code)
	}
	slow.Store(false)

	b := startServeWith(t, bin, t.TempDir(), env, "--database-url", dbURL)
	ready := time.Now()
	eventually(t, 60*time.Second, "every notification delivered", func() bool {
		for _, id := range ids {
			if onlyDelivery(t, b.url, admin, id)["state"] != "delivered" {
				return false
			}
		}
		return true
	})
	took := time.Since(ready)
	t.Logf("the next replica delivered the rest %s after it answered", took.Round(time.Millisecond))
	if took > 5*time.Second {
		t.Errorf("the next replica took %s to deliver what the stopped one held, want within 5s: its leases were not handed back", took.Round(time.Millisecond))
	}
	byID := rcv.checkEvents(t)
	if len(byID) != total {
		t.Errorf("the receiver got %d distinct events, want %d", len(byID), total)
	}
}
