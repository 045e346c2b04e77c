// Command agentowl-bench measures approval request creation and decision
// throughput of a running AgentOwl server over HTTP, with N concurrent
// clients, and prints requests/s and p50/p99 latency. See BENCHMARKS.md.
//
// Subcommands: `deliver` measures decisions turned into acknowledged HTTPS
// deliveries (deliver.go); `soak` runs servers under a mixed load against
// misbehaving receivers, optionally killing and freezing replicas, and
// checks that no message is lost or stuck (soak.go); `stall` reproduces
// issue 25 (a receiver that answers after 200 ms, 800 decided requests,
// another tenant meanwhile) and measures it (stall.go).
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

func main() {
	if len(os.Args) > 1 {
		sub := map[string]func([]string) error{"deliver": runDeliver, "soak": runSoak, "stall": runStall}[os.Args[1]]
		if sub != nil {
			if err := sub(os.Args[2:]); err != nil {
				fmt.Fprintln(os.Stderr, "error:", err)
				os.Exit(1)
			}
			return
		}
	}
	url := flag.String("url", envOr("AGENTOWL_URL", "http://127.0.0.1:8470"), "server URL")
	token := flag.String("token", os.Getenv("AGENTOWL_TOKEN"), "admin operator token")
	tenant := flag.String("tenant", "default", "tenant")
	clients := flag.Int("clients", 32, "concurrent clients")
	total := flag.Int("requests", 20000, "approval requests to create (and then decide)")
	flag.Parse()
	if err := run(*url, *token, *tenant, *clients, *total); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

type client struct {
	http *http.Client
	base string
}

func (c *client) do(method, path, token string, body any, headers map[string]string, out any) (int, error) {
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(context.Background(), method, c.base+path, rd)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode >= 300 {
		return resp.StatusCode, fmt.Errorf("%s %s: %d %s", method, path, resp.StatusCode, data)
	}
	if out != nil {
		return resp.StatusCode, json.Unmarshal(data, out)
	}
	return resp.StatusCode, nil
}

func run(base, token, tenant string, clients, total int) error {
	c := &client{base: base, http: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: clients * 2}, Timeout: time.Minute}}
	var prov struct{ Token string }
	if _, err := c.do("POST", "/api/v1/tenants/"+tenant+"/provisioner-tokens", token, map[string]any{"label": "bench"}, nil, &prov); err != nil {
		return err
	}
	creds := make([]string, clients)
	run := strconv.FormatInt(time.Now().UnixNano(), 36)
	for i := range creds {
		var res struct {
			Credential struct{ Token string }
		}
		if _, err := c.do("POST", "/v1/instances", prov.Token, map[string]any{"instance_name": fmt.Sprintf("bench-%d", i)},
			map[string]string{"Idempotency-Key": run + "-" + strconv.Itoa(i)}, &res); err != nil {
			return err
		}
		creds[i] = res.Credential.Token
	}
	ids := make([]string, total)
	create := phase(clients, total, func(worker, i int) error {
		var r struct{ ID string }
		_, err := c.do("POST", "/v1/requests", creds[worker], map[string]any{
			"tool": "issue_refund", "timeout": "30m",
			"arguments": map[string]any{"payment_id": "payment_" + strconv.Itoa(i), "amount": 4900, "currency": "GBP"},
		}, map[string]string{"Idempotency-Key": run + "-r-" + strconv.Itoa(i)}, &r)
		ids[i] = r.ID
		return err
	})
	create.print("create")
	decide := phase(clients, total, func(worker, i int) error {
		_, err := c.do("POST", "/api/v1/tenants/"+tenant+"/approvals/"+ids[i]+"/decision", token,
			map[string]any{"decision": "approve"}, nil, nil)
		return err
	})
	decide.print("decide")
	return nil
}

type result struct {
	n, errs  int64
	elapsed  time.Duration
	latency  []time.Duration
	firstErr error
}

func (r *result) print(name string) {
	slices.Sort(r.latency)
	pct := func(p float64) time.Duration { return r.latency[int(float64(len(r.latency)-1)*p)] }
	fmt.Printf("%-7s %6d ops in %6.2fs  %8.0f ops/s  p50 %6.2fms  p99 %6.2fms  errors %d\n", name, r.n, r.elapsed.Seconds(),
		float64(r.n)/r.elapsed.Seconds(), ms(pct(0.50)), ms(pct(0.99)), r.errs)
	if r.firstErr != nil {
		fmt.Println("  first error:", r.firstErr)
	}
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// phase runs total operations over workers goroutines and records latency.
func phase(workers, total int, op func(worker, i int) error) *result {
	var next atomic.Int64
	res := &result{n: int64(total)}
	lat := make([][]time.Duration, workers)
	var mu sync.Mutex
	var wg sync.WaitGroup
	start := time.Now()
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= total {
					return
				}
				t0 := time.Now()
				err := op(w, i)
				lat[w] = append(lat[w], time.Since(t0))
				if err != nil {
					mu.Lock()
					res.errs++
					if res.firstErr == nil {
						res.firstErr = err
					}
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	res.elapsed = time.Since(start)
	for _, l := range lat {
		res.latency = append(res.latency, l...)
	}
	return res
}
