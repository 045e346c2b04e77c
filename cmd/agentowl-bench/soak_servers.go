package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver for the soak's schema
)

// replica is one `agentowl serve` child process; a restart keeps its data
// directory and address.
type replica struct {
	name    string
	bin     string
	dataDir string
	url     string
	args    []string
	env     []string
	logPath string

	cmd    *exec.Cmd
	exited chan struct{}
	// up reports whether the replica takes the load's calls: started, and
	// neither killed nor frozen.
	up atomic.Bool
}

// newReplica prepares replica name on a free port of 127.0.0.1.
func newReplica(name, bin, dir string, env []string, dbURL string) (*replica, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := ln.Addr().String()
	ln.Close()
	p := &replica{name: name, bin: bin, dataDir: filepath.Join(dir, name), url: "http://" + addr,
		env: env, logPath: filepath.Join(dir, name+".log")}
	p.args = []string{"serve", "--data-dir", p.dataDir, "--listen", addr}
	if dbURL != "" {
		p.args = append(p.args, "--database-url", dbURL)
	}
	return p, nil
}

// start starts the process and waits (at most 60 s) until it is ready.
func (p *replica) start(ctx context.Context) error {
	logf, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	cmd := exec.Command(p.bin, p.args...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "AGENTOWL_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, p.env...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("start %s: %w", p.bin, err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		logf.Close()
		close(exited)
	}()
	p.cmd, p.exited = cmd, exited
	client := &http.Client{Timeout: time.Second}
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	for {
		select {
		case <-exited:
			return fmt.Errorf("%s exited at start: %v\n%s", p.name, cmd.ProcessState, p.logTail(20))
		default:
		}
		if resp, err := client.Get(p.url + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				p.up.Store(true)
				return nil
			}
		}
		if !sleepCtx(ctx, 100*time.Millisecond) {
			p.stop()
			return fmt.Errorf("%s not ready within 60s\n%s", p.name, p.logTail(20))
		}
	}
}

// running reports whether the process has been started and not exited.
func (p *replica) running() bool {
	if p.cmd == nil {
		return false
	}
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// kill sends SIGKILL and waits for the process to be gone.
func (p *replica) kill() {
	p.up.Store(false)
	if p.running() {
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
}

// stop kills a process that is still running, frozen or not (clean-up).
func (p *replica) stop() {
	if p.running() {
		_ = p.cmd.Process.Signal(syscall.SIGCONT)
	}
	p.kill()
}

// signal sends sig to a running process.
func (p *replica) signal(sig syscall.Signal) error {
	if !p.running() {
		return fmt.Errorf("%s is not running", p.name)
	}
	return p.cmd.Process.Signal(sig)
}

// terminate sends SIGTERM and returns how long the process took to exit;
// one still running after limit is killed.
func (p *replica) terminate(limit time.Duration) (time.Duration, error) {
	p.up.Store(false)
	if !p.running() {
		return 0, fmt.Errorf("%s was not running", p.name)
	}
	start := time.Now()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return 0, err
	}
	t := time.NewTimer(limit)
	defer t.Stop()
	select {
	case <-p.exited:
		return time.Since(start), nil
	case <-t.C:
		p.kill()
		return time.Since(start), fmt.Errorf("%s still running %s after SIGTERM: killed", p.name, limit)
	}
}

// logTail returns the last n lines the process wrote.
func (p *replica) logTail(n int) string {
	data, _ := os.ReadFile(p.logPath)
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return "  " + strings.Join(lines, "\n  ")
}

// metrics reads the samples of the named metrics from the replica's
// /metrics, summed over their labels; a name it does not expose is absent.
func (p *replica) metrics(ctx context.Context, client *http.Client, names ...string) (map[string]float64, error) {
	samples, err := p.samples(ctx, client, names...)
	out := map[string]float64{}
	for _, s := range samples {
		out[s.name] += s.value
	}
	return out, err
}

// sample is one line of a /metrics exposition: a metric, its labels and
// its value.
type sample struct {
	name   string
	labels map[string]string
	value  float64
}

// samples reads every sample of the named metrics from the replica's
// /metrics.
func (p *replica) samples(ctx context.Context, client *http.Client, names ...string) ([]sample, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.url+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s /metrics: %s", p.name, resp.Status)
	}
	out, err := parseSamples(resp.Body, names...)
	if err != nil {
		return out, fmt.Errorf("%s /metrics: %w", p.name, err)
	}
	return out, nil
}

// parseSamples reads the samples of the named metrics from a Prometheus
// text exposition.
func parseSamples(r io.Reader, names ...string) ([]sample, error) {
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	var out []sample
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		name, rest, _ := strings.Cut(line, " ")
		var labels map[string]string
		if i := strings.IndexByte(name, '{'); i >= 0 {
			name = line[:i]
			j := strings.LastIndexByte(line, '}')
			if j < i {
				return out, fmt.Errorf("%q: unterminated labels", line)
			}
			labels = parseLabels(line[i+1 : j])
			_, rest, _ = strings.Cut(line[j:], " ")
		}
		if !want[name] {
			continue
		}
		fields := strings.Fields(rest)
		if len(fields) == 0 {
			continue
		}
		v, err := strconv.ParseFloat(fields[0], 64)
		if err != nil {
			return out, fmt.Errorf("%q: %w", line, err)
		}
		out = append(out, sample{name: name, labels: labels, value: v})
	}
	return out, sc.Err()
}

// parseLabels parses `a="x",b="y\"z"` (the inside of a sample's braces).
func parseLabels(s string) map[string]string {
	out := map[string]string{}
	for s != "" {
		k, rest, ok := strings.Cut(s, "=")
		if !ok || !strings.HasPrefix(rest, `"`) {
			return out
		}
		var v strings.Builder
		i := 1
		for ; i < len(rest) && rest[i] != '"'; i++ {
			if rest[i] == '\\' && i+1 < len(rest) {
				i++
				switch rest[i] {
				case 'n':
					v.WriteByte('\n')
				default:
					v.WriteByte(rest[i])
				}
				continue
			}
			v.WriteByte(rest[i])
		}
		out[strings.TrimSpace(k)] = v.String()
		s = strings.TrimLeft(rest[min(i+1, len(rest)):], ", ")
	}
	return out
}

// fleet is the replicas the load is sent to, in turn.
type fleet struct {
	replicas []*replica
	http     *http.Client
	next     atomic.Uint64
	// refused counts writes refused with 503 (overloaded, or a database
	// that could not answer) and sent again; lost counts calls whose
	// connection failed or that got another 5xx, sent again elsewhere.
	refused, lost atomic.Int64
}

// pick returns the next replica that is up, or nil.
func (f *fleet) pick() *replica {
	for range len(f.replicas) {
		p := f.replicas[f.next.Add(1)%uint64(len(f.replicas))]
		if p.up.Load() {
			return p
		}
	}
	return nil
}

// apiError is a refusal by the server.
type apiError struct {
	status int
	code   string
	body   string
}

func (e *apiError) Error() string { return fmt.Sprintf("%d %s", e.status, e.body) }

// call sends one API call to a live replica, and again (to the next live
// one) while the answer is a 5xx or the connection fails, until ctx ends.
// A 2xx body is decoded into out. uncertain reports whether an earlier
// try may have been carried out without its answer reaching us (a lost
// connection, a 500); a refusal (503) never was.
func (f *fleet) call(ctx context.Context, method, path, token string, body any, headers map[string]string, out any) (status int, uncertain bool, err error) {
	var data []byte
	if body != nil {
		if data, err = json.Marshal(body); err != nil {
			return 0, false, err
		}
	}
	var last error
	for {
		wait := 200 * time.Millisecond
		if p := f.pick(); p != nil {
			req, err := http.NewRequestWithContext(ctx, method, p.url+path, bytes.NewReader(data))
			if err != nil {
				return 0, uncertain, err
			}
			if token != "" {
				req.Header.Set("Authorization", "Bearer "+token)
			}
			if body != nil {
				req.Header.Set("Content-Type", "application/json")
			}
			for k, v := range headers {
				req.Header.Set(k, v)
			}
			resp, err := f.http.Do(req)
			switch {
			case err != nil:
				f.lost.Add(1)
				uncertain, last = true, err
			default:
				reply, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
				resp.Body.Close()
				if resp.StatusCode < 500 {
					if resp.StatusCode >= 300 {
						var e struct {
							Error struct {
								Code string `json:"code"`
							} `json:"error"`
						}
						_ = json.Unmarshal(reply, &e)
						return resp.StatusCode, uncertain, &apiError{status: resp.StatusCode, code: e.Error.Code, body: string(reply)}
					}
					if out != nil {
						if err := json.Unmarshal(reply, out); err != nil {
							return resp.StatusCode, uncertain, fmt.Errorf("%s %s: %w: %s", method, path, err, reply)
						}
					}
					return resp.StatusCode, uncertain, nil
				}
				last = &apiError{status: resp.StatusCode, body: string(reply)}
				if resp.StatusCode == http.StatusServiceUnavailable {
					f.refused.Add(1)
					if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && s > 0 {
						wait = time.Duration(min(s, 5)) * time.Second
					}
				} else {
					f.lost.Add(1)
					uncertain = true
				}
			}
		}
		if !sleepCtx(ctx, wait) {
			if last == nil {
				last = errors.New("no replica was up")
			}
			return 0, uncertain, fmt.Errorf("%s %s: gave up: %w", method, path, last)
		}
	}
}

// sleepCtx waits d, or less if ctx ends first; it reports whether d passed.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// freshSchema creates an empty schema in the database at base and returns
// the URL whose search_path is that schema, and a function that drops it.
func freshSchema(ctx context.Context, base string) (string, func(), error) {
	var b [6]byte
	_, _ = rand.Read(b[:])
	schema := "soak_" + hex.EncodeToString(b[:])
	db, err := sql.Open("pgx", base)
	if err != nil {
		return "", nil, err
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, "CREATE SCHEMA "+schema); err != nil {
		return "", nil, fmt.Errorf("create schema: %w", err)
	}
	drop := func() {
		db, err := sql.Open("pgx", base)
		if err != nil {
			return
		}
		defer db.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, _ = db.ExecContext(ctx, "DROP SCHEMA "+schema+" CASCADE")
	}
	u, err := url.Parse(base)
	if err != nil {
		drop()
		return "", nil, err
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String(), drop, nil
}

// serverEnv is the environment of every replica: egress to the receivers,
// short retries, the destination limit, one secret key, and no rate limit
// the load would meet before the engine does.
func serverEnv(caFile string) []string {
	var key [32]byte
	_, _ = rand.Read(key[:])
	return []string{
		"AGENTOWL_EGRESS_ALLOW_CIDRS=127.0.0.0/8",
		"AGENTOWL_EGRESS_CA_FILE=" + caFile,
		"AGENTOWL_RETRY_MIN_DELAY=1s",
		"AGENTOWL_RETRY_MAX_DELAY=5s",
		"AGENTOWL_DELIVERY_DESTINATION_CONCURRENCY=4",
		"AGENTOWL_SECRET_KEY=" + base64.StdEncoding.EncodeToString(key[:]),
		"AGENTOWL_CALLBACK_RATE=1000000",
		"AGENTOWL_INGRESS_RATE=1000000",
		"AGENTOWL_REGISTER_RATE=10000",
		"AGENTOWL_REGISTER_DESTINATION_RATE=10000",
	}
}

// site is what a soak or stall run stands on: a temporary directory, the
// loopback HTTPS receivers, the CA file servers trust them with, and the
// database (a fresh PostgreSQL schema, or "" for SQLite).
type site struct {
	dir, caFile, dbURL string
	rs                 *receiverSet
	drop               func()
}

// openSite makes a site for rec's receivers in a directory named after
// prefix, on a fresh schema of databaseURL when it is set.
func openSite(ctx context.Context, prefix string, rec *recorder, databaseURL string) (_ *site, err error) {
	st := &site{drop: func() {}}
	defer func() {
		if err != nil {
			st.close()
		}
	}()
	if st.dir, err = os.MkdirTemp("", prefix); err != nil {
		return nil, err
	}
	caPEM, cert, err := newLoopbackPKI()
	if err != nil {
		return nil, err
	}
	st.caFile = filepath.Join(st.dir, "receivers-ca.pem")
	if err := os.WriteFile(st.caFile, caPEM, 0o600); err != nil {
		return nil, err
	}
	if st.rs, err = startReceivers(rec, cert); err != nil {
		return nil, err
	}
	if databaseURL != "" {
		if st.dbURL, st.drop, err = freshSchema(ctx, databaseURL); err != nil {
			return nil, err
		}
	}
	return st, nil
}

// close drops the schema, stops the receivers and removes the directory.
func (st *site) close() {
	st.drop()
	if st.rs != nil {
		st.rs.close()
	}
	if st.dir != "" {
		os.RemoveAll(st.dir)
	}
}
