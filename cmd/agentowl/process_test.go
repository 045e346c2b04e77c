package main

import (
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentowl/agentowl/internal/store/storetest"
)

// The crash tests' harness: they build the binary, run it as a child
// process (`agentowl serve`, `agentowl mcp-gateway serve`), kill it with
// SIGKILL and start it again, with its egress pointed at local HTTPS
// receivers of the test.

// binDir holds what the test process builds once; TestMain removes it.
var binDir string

// processParallel is how many tests run at once unless -parallel says:
// the tests of the built binary mostly wait (for a child process to
// start, a lease to lapse, a receiver to be called), so more of them than
// the default GOMAXPROCS overlap their waits without contending for CPU.
const processParallel = 8

func TestMain(m *testing.M) {
	flag.Parse()
	parallelGiven := false
	flag.Visit(func(f *flag.Flag) { parallelGiven = parallelGiven || f.Name == "test.parallel" })
	if !parallelGiven {
		flag.Set("test.parallel", strconv.Itoa(max(runtime.GOMAXPROCS(0), processParallel)))
	}
	dir, err := os.MkdirTemp("", "agentowl-test-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binDir = dir
	// A whole run starts the build at once, so that it overlaps the tests
	// that need no binary; a run of chosen tests (-run) builds when one
	// first needs it.
	prebuild := flag.Lookup("test.run").Value.String() == ""
	if prebuild {
		go built()
	}
	code := m.Run()
	if prebuild {
		built() // not removed under a build still writing
	}
	os.RemoveAll(dir)
	os.Exit(code)
}

// built is the binary under test, built once per test process: go build
// links anew on every call, which costs seconds a test.
var built = sync.OnceValues(func() (string, error) {
	bin := filepath.Join(binDir, "agentowl")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build: %v\n%s", err, out)
	}
	return bin, nil
})

// buildAgentowl returns the binary under test (built once per process).
func buildAgentowl(t *testing.T) string {
	t.Helper()
	bin, err := built()
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// forEachBackendBuilt is the frame of a test of the built binary on each
// store: in parallel with other tests, it builds the binary once, then runs
// fn as a parallel subtest per backend, each on a fresh site (on
// PostgreSQL, with one process of pgProcesses).
func forEachBackendBuilt(t *testing.T, fn func(t *testing.T, s site, bin string)) {
	t.Parallel()
	bin := buildAgentowl(t)
	eachBackend(t, func(t *testing.T, s site) {
		if s.dbURL != "" {
			pgProcesses.take(t, 1)
		}
		fn(t, s, bin)
	})
}

// replicasOnPostgres is the frame of a test of n replicas sharing one
// database: it skips the test without PostgreSQL, waits for n processes of
// pgProcesses, and returns the built binary and a fresh database. These
// tests, the longest, queue before the parallel tests resume, so that
// they start first.
func replicasOnPostgres(t *testing.T, n int) (bin, dbURL string) {
	t.Helper()
	if storetest.PostgresURL(t) == "" { // with CI set, this fails the test
		t.Skip("AGENTOWL_TEST_DATABASE_URL is not set: replicas sharing a database need PostgreSQL")
	}
	pgProcesses.queue(n)
	t.Parallel()
	pgProcesses.await(t, n)
	return buildAgentowl(t), storetest.FreshPostgresURL(t)
}

// pgProcesses bounds the processes of the built binary that run at once on
// PostgreSQL. Each holds up to 16 connections (postgres.MaxConns), and the
// server's max_connections (100 by default) is shared with this package's
// in-process servers and with the package go test runs alongside (the
// soak's replicas): three, what the largest test runs at once, keep this
// package within about half of it however many tests run in parallel.
var pgProcesses = newBudget(3)

// budget is a count of something tests share, taken by weight.
type budget struct {
	mu      sync.Mutex
	changed *sync.Cond
	free    int
	waiting map[int]int // weight → tests waiting for it
}

func newBudget(n int) *budget {
	b := &budget{free: n, waiting: map[int]int{}}
	b.changed = sync.NewCond(&b.mu)
	return b
}

// take waits until n is free and no test waits for more (the larger tests
// are the longer ones: they go first), then holds n until t ends.
func (b *budget) take(t *testing.T, n int) {
	t.Helper()
	b.queue(n)
	b.await(t, n)
}

// queue counts a test as waiting for n from now on; await is its wait.
func (b *budget) queue(n int) {
	b.mu.Lock()
	b.waiting[n]++
	b.mu.Unlock()
}

func (b *budget) await(t *testing.T, n int) {
	t.Helper()
	b.mu.Lock()
	for b.free < n || b.largerWaits(n) {
		b.changed.Wait()
	}
	b.waiting[n]--
	b.free -= n
	b.mu.Unlock()
	b.changed.Broadcast() // what is left may serve a smaller one
	t.Cleanup(func() {
		b.mu.Lock()
		b.free += n
		b.mu.Unlock()
		b.changed.Broadcast()
	})
}

func (b *budget) largerWaits(n int) bool {
	for w, k := range b.waiting {
		if w > n && k > 0 {
			return true
		}
	}
	return false
}

// freePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// serveProcess is the built binary running as a child process.
type serveProcess struct {
	cmd    *exec.Cmd
	url    string
	stdout string // path of the captured stdout
	exited chan struct{}
}

// startProcess starts cmd (what names it) with its output captured in
// files and waits until url answers /healthz. The process is killed at
// test end, and its output logged if the test failed.
func startProcess(t *testing.T, what string, cmd *exec.Cmd, url string) *serveProcess {
	t.Helper()
	logDir := t.TempDir()
	stdout, err := os.Create(filepath.Join(logDir, "stdout"))
	if err != nil {
		t.Fatal(err)
	}
	stderr, err := os.Create(filepath.Join(logDir, "stderr"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", what, err)
	}
	p := &serveProcess{cmd: cmd, url: url, stdout: stdout.Name(), exited: make(chan struct{})}
	go func() {
		cmd.Wait()
		stdout.Close()
		stderr.Close()
		close(p.exited)
	}()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-p.exited
		if t.Failed() {
			outs, _ := os.ReadFile(stdout.Name())
			errs, _ := os.ReadFile(stderr.Name())
			t.Logf("%s at %s stdout:\n%.5000s\nstderr:\n%.20000s", what, url, outs, errs)
		}
	})
	p.awaitHealthz(t, what, stderr.Name())
	return p
}

// startServeWith runs the built binary on dataDir, with extra environment
// (added after every inherited AGENTOWL_ variable is dropped) and extra
// serve arguments, and waits until /healthz answers.
func startServeWith(t *testing.T, bin, dataDir string, env []string, args ...string) *serveProcess {
	t.Helper()
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	cmd := exec.Command(bin, append([]string{"serve", "--data-dir", dataDir, "--listen", addr}, args...)...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "AGENTOWL_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, env...)
	return startProcess(t, "agentowl serve", cmd, "http://"+addr)
}

// serve is startServeWith on s: its data directory and, on PostgreSQL, its
// database.
func (s site) serve(t *testing.T, bin string, env []string, args ...string) *serveProcess {
	t.Helper()
	if s.dbURL != "" {
		env = append(env[:len(env):len(env)], "AGENTOWL_DATABASE_URL="+s.dbURL)
	}
	return startServeWith(t, bin, s.dataDir, env, args...)
}

// awaitHealthz waits until the process answers GET /healthz, failing the
// test with its stderr (the file at stderrPath) if it exits first.
func (p *serveProcess) awaitHealthz(t *testing.T, what, stderrPath string) {
	t.Helper()
	client := &http.Client{Timeout: time.Second}
	eventually(t, 30*time.Second, what+" to answer /healthz", func() bool {
		select {
		case <-p.exited:
			errs, _ := os.ReadFile(stderrPath)
			t.Fatalf("%s exited early: %v\n%s", what, p.cmd.ProcessState, errs)
		default:
		}
		resp, err := client.Get(p.url + "/healthz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
}

// kill9 kills the process with SIGKILL and waits for it to be gone.
func (p *serveProcess) kill9(t *testing.T) {
	t.Helper()
	if err := p.cmd.Process.Kill(); err != nil {
		t.Fatalf("kill -9: %v", err)
	}
	<-p.exited
}

// within polls cond every 100ms for at most limit and reports whether it
// came true; like eventually it synchronizes, it asserts nothing about speed.
func within(limit time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(100 * time.Millisecond)
	}
	return true
}

// newTLSServer starts an HTTPS test server with handler h, closed at test
// end.
func newTLSServer(t *testing.T, h http.HandlerFunc) *httptest.Server {
	srv := httptest.NewTLSServer(h)
	t.Cleanup(srv.Close)
	return srv
}

// certPEM is the PEM certificate of srv, for a server's egress to trust
// (every httptest server presents the same one).
func certPEM(srv *httptest.Server) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
}

// writeCA writes certPEM(srv) to a file, for AGENTOWL_EGRESS_CA_FILE.
func writeCA(t *testing.T, srv *httptest.Server) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(path, certPEM(srv), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// egressEnv is the environment of a served binary that delivers to local
// HTTPS receivers (whose certificate is in caFile) and retries within a
// second.
func egressEnv(caFile string) []string {
	return []string{"AGENTOWL_EGRESS_ALLOW_CIDRS=127.0.0.0/8", "AGENTOWL_EGRESS_CA_FILE=" + caFile,
		"AGENTOWL_RETRY_MIN_DELAY=200ms", "AGENTOWL_RETRY_MAX_DELAY=1s"}
}

// replicaEnv is egressEnv for replicas of one database: they share the key
// that seals its secrets, and deliver at most destinationLimit attempts
// at once to one destination.
func replicaEnv(caFile string, destinationLimit int) []string {
	return append(egressEnv(caFile), "AGENTOWL_SECRET_KEY="+base64.StdEncoding.EncodeToString(make([]byte, 32)),
		fmt.Sprintf("AGENTOWL_DELIVERY_DESTINATION_CONCURRENCY=%d", destinationLimit))
}

// bindAgentWork creates, in tenant default, an agent-work endpoint from
// endpoint and a binding to it from binding (its channel and settings); it
// returns both as the API answered.
func bindAgentWork(t *testing.T, baseURL, admin string, endpoint, binding map[string]any) (ep, b map[string]any) {
	t.Helper()
	endpoint["config"] = map[string]any{"agent_work": true}
	r := send(t, http.MethodPost, baseURL+"/api/v1/tenants/default/endpoints", admin, endpoint)
	expectStatus(t, "create endpoint", r, http.StatusCreated)
	ep = r.object(t)
	binding["endpoint_id"] = ep["id"]
	r = send(t, http.MethodPost, baseURL+"/api/v1/tenants/default/bindings", admin, binding)
	expectStatus(t, "create binding", r, http.StatusCreated)
	return ep, r.object(t)
}

// workRuntime is an agent runtime at a TLS endpoint: it acknowledges every
// handoff and records its work by a field of the event's payload (the
// subject of a mail, the MessageSid of an SMS).
type workRuntime struct {
	srv  *httptest.Server
	key  string
	mu   sync.Mutex
	work map[string]map[string]bool // payload[key] → work IDs handed off for it
}

func newWorkRuntime(t *testing.T, key string) *workRuntime {
	t.Helper()
	rt := &workRuntime{key: key, work: map[string]map[string]bool{}}
	rt.srv = newTLSServer(t, func(w http.ResponseWriter, r *http.Request) {
		var d struct {
			Event struct {
				Payload map[string]any `json:"payload"`
			} `json:"event"`
			Work struct {
				WorkID string `json:"work_id"`
			} `json:"work"`
		}
		body, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(body, &d); err != nil || d.Work.WorkID == "" {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		k, _ := d.Event.Payload[rt.key].(string)
		rt.mu.Lock()
		if rt.work[k] == nil {
			rt.work[k] = map[string]bool{}
		}
		rt.work[k][d.Work.WorkID] = true
		rt.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	})
	return rt
}

// handedOff returns, for every key the runtime got, how many works.
func (rt *workRuntime) handedOff() map[string]int {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	out := map[string]int{}
	for k, ws := range rt.work {
		out[k] = len(ws)
	}
	return out
}
