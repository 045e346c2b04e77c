// Command runtime is a tiny agent runtime for AgentOwl's agent-work
// protocol (reference: docs/agent-work.md; set-up: docs/connect-agent-runtime.md,
// whose example TestConnectGuide runs). It receives handoffs over HTTPS, verifies
// them with the endpoint's signing secret, records each work once
// (transport retries carry the same work_id), answers 202, and then
// reports it accepted and completed, with a result link it serves itself.
//
//	runtime cert --dir DIR             # writes DIR/cert.pem and DIR/key.pem (self-signed, 127.0.0.1 and localhost)
//	runtime serve --dir DIR --listen 127.0.0.1:8480 \
//	    --secret-file DIR/endpoint-secret --token-file DIR/runtime-token
//
// The "agent" here only summarises the event it was given; a real runtime
// does its work between the two reports. Received work is appended to
// DIR/work.jsonl (fsynced before the 2xx) and reloaded at start, so a
// restart neither loses nor repeats work.
package main

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/agentowl/agentowl/workclient"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, "usage: runtime cert --dir DIR | runtime serve --dir DIR --secret-file F --token-file F [--listen ADDR]")
		return 2
	}
	fs := flag.NewFlagSet("runtime "+args[0], flag.ContinueOnError)
	fs.SetOutput(stderr)
	dir := fs.String("dir", "runtime-data", "directory for the certificate, key and work log")
	listen := fs.String("listen", "127.0.0.1:8480", "HTTPS listen address")
	secretFile := fs.String("secret-file", "", "file holding the endpoint's whsec_ signing secret (endpoints create prints it)")
	tokenFile := fs.String("token-file", "", "file holding the runtime credential (runtime-credentials create prints it)")
	resultBase := fs.String("result-base", "", "public HTTPS base of result links (default https://<listen>/results/)")
	if err := fs.Parse(args[1:]); err != nil {
		return 2
	}
	var err error
	switch args[0] {
	case "cert":
		err = writeSelfSigned(*dir)
		if err == nil {
			fmt.Fprintf(stdout, "wrote %s and %s\n", filepath.Join(*dir, "cert.pem"), filepath.Join(*dir, "key.pem"))
		}
	case "serve":
		err = serve(ctx, *dir, *listen, *secretFile, *tokenFile, *resultBase, stdout, stderr)
	default:
		err = fmt.Errorf("unknown command %q", args[0])
	}
	if err != nil {
		fmt.Fprintln(stderr, "error:", err)
		return 1
	}
	return 0
}

func readTrimmed(path, what string) (string, error) {
	if path == "" {
		return "", fmt.Errorf("--%s is required", what)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(b)), nil
}

func serve(ctx context.Context, dir, listen, secretFile, tokenFile, resultBase string, stdout, stderr io.Writer) error {
	secret, err := readTrimmed(secretFile, "secret-file")
	if err != nil {
		return err
	}
	token, err := readTrimmed(tokenFile, "token-file")
	if err != nil {
		return err
	}
	if _, err := os.Stat(filepath.Join(dir, "cert.pem")); errors.Is(err, os.ErrNotExist) {
		if err := writeSelfSigned(dir); err != nil {
			return err
		}
	}
	cert, err := tls.LoadX509KeyPair(filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem"))
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return err
	}
	if resultBase == "" {
		resultBase = "https://" + ln.Addr().String() + "/results/"
	}
	rt, err := newRuntime(dir, secret, token, resultBase, log.New(stderr, "runtime: ", log.LstdFlags))
	if err != nil {
		ln.Close()
		return err
	}
	srv := &http.Server{Handler: rt, ReadHeaderTimeout: 10 * time.Second,
		TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}}
	fmt.Fprintf(stdout, "runtime listening on https://%s (handoffs at /handoff)\n", ln.Addr())
	errs := make(chan error, 1)
	go func() { errs <- srv.ServeTLS(ln, "", "") }()
	rt.resume(ctx)
	select {
	case <-ctx.Done():
	case err := <-errs:
		return err
	}
	shut, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err = srv.Shutdown(shut)
	rt.wg.Wait()
	return err
}

// record is one received work in the log: the handoff, then "done" once
// its outcome was reported.
type record struct {
	Handoff *workclient.Handoff `json:"handoff,omitempty"`
	Done    string              `json:"done,omitempty"`
}

// runtime is the receiving service.
type runtime struct {
	verifier   *workclient.Verifier
	client     *workclient.Client
	resultBase string
	log        *log.Logger
	wg         sync.WaitGroup

	mu      sync.Mutex
	file    *os.File
	work    map[string]*workclient.Handoff // work_id -> handoff
	done    map[string]bool
	results map[string]string // work_id -> summary
	ctx     context.Context
}

func newRuntime(dir, secret, token, resultBase string, logger *log.Logger) (*runtime, error) {
	rt := &runtime{
		verifier:   &workclient.Verifier{Secrets: []string{secret}},
		client:     &workclient.Client{Token: token},
		resultBase: resultBase, log: logger,
		work: map[string]*workclient.Handoff{}, done: map[string]bool{}, results: map[string]string{},
		ctx: context.Background(),
	}
	path := filepath.Join(dir, "work.jsonl")
	if f, err := os.Open(path); err == nil {
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 2<<20)
		for sc.Scan() {
			var r record
			if json.Unmarshal(sc.Bytes(), &r) != nil {
				continue // a torn last line from a crash
			}
			if r.Handoff != nil {
				rt.work[r.Handoff.Work.WorkID] = r.Handoff
			}
			if r.Done != "" {
				rt.done[r.Done] = true
			}
		}
		f.Close()
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return nil, err
	}
	rt.file = f
	return rt, nil
}

// appendRecord writes one log line and syncs it.
func (rt *runtime) appendRecord(r record) error {
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	if _, err := rt.file.Write(append(b, '\n')); err != nil {
		return err
	}
	return rt.file.Sync()
}

// resume processes work received before a restart but not yet reported.
func (rt *runtime) resume(ctx context.Context) {
	rt.mu.Lock()
	rt.ctx = ctx
	var pending []*workclient.Handoff
	for id, ho := range rt.work {
		if !rt.done[id] {
			pending = append(pending, ho)
		}
	}
	rt.mu.Unlock()
	for _, ho := range pending {
		rt.start(ho)
	}
}

func (rt *runtime) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.Method == http.MethodPost && r.URL.Path == "/handoff":
		rt.handoff(w, r)
	case r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/results/"):
		rt.mu.Lock()
		summary, ok := rt.results[strings.TrimPrefix(r.URL.Path, "/results/")]
		rt.mu.Unlock()
		if !ok {
			http.NotFound(w, r)
			return
		}
		fmt.Fprintln(w, summary)
	case r.URL.Path == "/healthz":
		fmt.Fprintln(w, "ok")
	default:
		http.NotFound(w, r)
	}
}

// handoff verifies, records durably, answers 202, then works.
func (rt *runtime) handoff(w http.ResponseWriter, r *http.Request) {
	ho, err := rt.verifier.VerifyRequest(r)
	if err != nil {
		rt.log.Printf("refused a delivery: %v", err)
		http.Error(w, "invalid handoff", http.StatusUnauthorized)
		return
	}
	if ho.Work == nil {
		// An event without a work block: this endpoint has no agent work.
		w.WriteHeader(http.StatusNoContent)
		return
	}
	rt.mu.Lock()
	_, seen := rt.work[ho.Work.WorkID]
	if !seen {
		if err := rt.appendRecord(record{Handoff: ho}); err != nil {
			rt.mu.Unlock()
			rt.log.Printf("cannot record work %s: %v", ho.Work.WorkID, err)
			http.Error(w, "try again", http.StatusServiceUnavailable)
			return
		}
		rt.work[ho.Work.WorkID] = ho
	}
	rt.mu.Unlock()
	w.WriteHeader(http.StatusAccepted)
	if !seen { // a transport retry of known work is acknowledged, not redone
		rt.start(ho)
	}
}

func (rt *runtime) start(ho *workclient.Handoff) {
	rt.wg.Add(1)
	go func() {
		defer rt.wg.Done()
		rt.mu.Lock()
		ctx := rt.ctx
		rt.mu.Unlock()
		if err := rt.process(ctx, ho); err != nil {
			rt.log.Printf("work %s: %v", ho.Work.WorkID, err)
		}
	}()
}

// process reports accepted, does the "work", and reports completed.
func (rt *runtime) process(ctx context.Context, ho *workclient.Handoff) error {
	wk := ho.Work
	session := wk.RuntimeSessionID
	if session == "" {
		session = "session_" + wk.ConversationID
	}
	// Sequence numbers are per work. A work resumed after a restart starts
	// again at 1 with new timestamps, so a report that did reach AgentOwl
	// before the crash comes back as callback_conflict (or, once the work is
	// completed, already_terminal): both mean "already recorded" here.
	rep := rt.client.Reporter(wk, 0)
	report := func(st workclient.Status, edit func(*workclient.Callback)) error {
		rc, err := rep.Report(ctx, st, edit)
		var ae *workclient.Error
		if errors.As(err, &ae) && (ae.Code == "callback_conflict" || ae.Code == "already_terminal") {
			return nil
		}
		if err == nil {
			rt.log.Printf("work %s: reported %s, recorded %s", wk.WorkID, st, rc.WorkStatus)
		}
		return err
	}
	if err := report(workclient.Accepted, func(cb *workclient.Callback) { cb.RuntimeSessionID = session }); err != nil {
		return err
	}
	summary := fmt.Sprintf("Handled event %s (%d bytes of payload, generation %d).", ho.Event.ID, len(ho.Event.Payload), wk.Generation)
	rt.mu.Lock()
	rt.results[wk.WorkID] = summary
	rt.mu.Unlock()
	err := report(workclient.Completed, func(cb *workclient.Callback) {
		cb.Result = &workclient.Result{Summary: summary, URL: rt.resultBase + wk.WorkID}
	})
	if err != nil {
		return err
	}
	rt.mu.Lock()
	rt.done[wk.WorkID] = true
	err = rt.appendRecord(record{Done: wk.WorkID})
	rt.mu.Unlock()
	return err
}

// writeSelfSigned writes a self-signed certificate for 127.0.0.1, ::1 and
// localhost to dir/cert.pem with its key in dir/key.pem. AgentOwl trusts it
// through AGENTOWL_EGRESS_CA_FILE.
func writeSelfSigned(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{
		SerialNumber: serial, Subject: pkix.Name{CommonName: "agentowl example runtime"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(365 * 24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true, IsCA: true,
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}, DNSNames: []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return err
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "key.pem"), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "cert.pem"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644)
}
