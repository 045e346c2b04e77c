package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentowl/agentowl/internal/delivery"
	"github.com/agentowl/agentowl/internal/egress"
	"github.com/agentowl/agentowl/internal/server/servertest"
	"github.com/agentowl/agentowl/internal/store/storetest"
)

// server is an in-process AgentOwl with agent work on, its delivery engine
// running, egress allowed to loopback and trusting caPEM.
type server struct {
	url   string
	token string // admin operator token of tenant default
}

func startAgentOwl(t *testing.T, b storetest.Backend, caPEM []byte) *server {
	t.Helper()
	cfg := servertest.Config(t, b)
	cfg.Egress = egress.Config{ExtraRootsPEM: caPEM, AllowCIDRs: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}
	cfg.Delivery = delivery.Config{RetryMinDelay: 100 * time.Millisecond, RetryMaxDelay: time.Second}
	srv := servertest.Start(t, cfg)
	return &server{url: srv.URL(), token: srv.BootstrapToken()}
}

// call sends an operator API request and decodes the answer.
func (s *server) call(t *testing.T, method, path string, body any, want int) map[string]any {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, s.url+path, rd)
	req.Header.Set("Authorization", "Bearer "+s.token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		t.Fatalf("%s %s: %d, want %d: %s", method, path, resp.StatusCode, want, data)
	}
	var out map[string]any
	_ = json.Unmarshal(data, &out)
	return out
}

type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestRuntimeCompletesWork runs the example runtime against AgentOwl: an
// event sent to a webhook binding is handed to the runtime, which
// acknowledges it and reports it accepted and completed with a result link;
// a replay is new work, completed too.
func TestRuntimeCompletesWork(t *testing.T) {
	t.Parallel()
	for _, b := range storetest.Backends(t) {
		t.Run(b.Name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			if code := run(context.Background(), []string{"cert", "--dir", dir}, io.Discard, io.Discard); code != 0 {
				t.Fatalf("runtime cert exited %d", code)
			}
			caPEM, err := os.ReadFile(filepath.Join(dir, "cert.pem"))
			if err != nil {
				t.Fatal(err)
			}
			ao := startAgentOwl(t, b, caPEM)
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			addr := ln.Addr().String()
			ln.Close()

			ep := ao.call(t, http.MethodPost, "/api/v1/tenants/default/endpoints",
				map[string]any{"name": "example-runtime", "url": "https://" + addr + "/handoff", "config": map[string]any{"agent_work": true}}, http.StatusCreated)
			cred := ao.call(t, http.MethodPost, "/api/v1/tenants/default/endpoints/"+ep["id"].(string)+"/runtime-credentials",
				map[string]any{"days": 30}, http.StatusCreated)
			secretFile, tokenFile := filepath.Join(dir, "endpoint-secret"), filepath.Join(dir, "runtime-token")
			if err := os.WriteFile(secretFile, []byte(ep["signing_secret"].(string)+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(tokenFile, []byte(cred["token"].(string)+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			bnd := ao.call(t, http.MethodPost, "/api/v1/tenants/default/bindings",
				map[string]any{"channel": "webhook", "endpoint_id": ep["id"]}, http.StatusCreated)

			ctx, cancel := context.WithCancel(context.Background())
			var stdout, stderr lockedBuffer
			exited := make(chan int, 1)
			go func() {
				exited <- run(ctx, []string{"serve", "--dir", dir, "--listen", addr, "--secret-file", secretFile, "--token-file", tokenFile},
					&stdout, &stderr)
			}()
			t.Cleanup(func() {
				cancel()
				if code := <-exited; code != 0 {
					t.Errorf("runtime exited %d: %s", code, stderr.String())
				}
				if t.Failed() {
					t.Logf("runtime log:\n%s", stderr.String())
				}
			})
			pool := x509.NewCertPool()
			pool.AppendCertsFromPEM(caPEM)
			tlsClient := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
			waitFor(t, "the runtime to listen", func() bool {
				resp, err := tlsClient.Get("https://" + addr + "/healthz")
				if err == nil {
					resp.Body.Close()
				}
				return err == nil && resp.StatusCode == http.StatusOK
			})

			resp, err := http.Post(bnd["ingress_url"].(string), "application/json", strings.NewReader(`{"text":"Summarise ticket 7"}`))
			if err != nil || resp.StatusCode != http.StatusAccepted {
				t.Fatalf("ingress: %v %v", resp, err)
			}
			resp.Body.Close()

			var wk map[string]any
			// The runtime's callbacks may arrive before the engine records
			// the handoff's acknowledgement: the statuses are independent.
			waitFor(t, "the work to be completed and its handoff delivered", func() bool {
				list := ao.call(t, http.MethodGet, "/api/v1/tenants/default/work", nil, http.StatusOK)["items"].([]any)
				if len(list) != 1 {
					return false
				}
				wk = list[0].(map[string]any)
				return wk["runtime"].(map[string]any)["status"] == "completed" && wk["delivery"].(map[string]any)["state"] == "delivered"
			})
			rtm := wk["runtime"].(map[string]any)
			result := rtm["result"].(map[string]any)
			if wk["delivery"].(map[string]any)["state"] != "delivered" || rtm["sequence"] != float64(2) ||
				rtm["runtime_session_id"] != "session_"+wk["conversation_id"].(string) ||
				result["url"] != "https://127.0.0.1:"+addr[strings.LastIndex(addr, ":")+1:]+"/results/"+wk["id"].(string) {
				t.Fatalf("completed work = %v", wk)
			}
			// The result link is served by the runtime (AgentOwl never fetches it).
			got, err := tlsClient.Get(result["url"].(string))
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(got.Body)
			got.Body.Close()
			if !strings.Contains(string(body), "Handled event") {
				t.Errorf("result page = %s", body)
			}

			rp := ao.call(t, http.MethodPost, "/api/v1/tenants/default/work/"+wk["id"].(string)+"/replay", nil, http.StatusCreated)
			waitFor(t, "the replay to be completed", func() bool {
				w := ao.call(t, http.MethodGet, "/api/v1/tenants/default/work/"+rp["id"].(string), nil, http.StatusOK)
				return w["runtime"].(map[string]any)["status"] == "completed"
			})
			if rp["generation"] != float64(2) {
				t.Errorf("replay generation %v", rp["generation"])
			}
		})
	}
}
