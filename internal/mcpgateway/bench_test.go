package mcpgateway_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// benchEnv is newEnv for benchmarks, on the real clock.
func benchEnv(b *testing.B) (*provider, *upstream, *gatewaySite) {
	b.Helper()
	p := newProvider(b, nil)
	up := newUpstream(b)
	g := startGateway(b, gatewayYAML(up.srv.URL), p.provision("mcp-gateway"), nil, tempDB(b))
	return p, up, g
}

// latencies runs call b.N times in a row and reports the median and the
// 99th percentile.
func latencies(b *testing.B, call func() error) {
	b.Helper()
	d := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for b.Loop() {
		start := time.Now()
		if err := call(); err != nil {
			b.Fatal(err)
		}
		d = append(d, time.Since(start))
	}
	b.StopTimer()
	slices.Sort(d)
	b.ReportMetric(float64(d[len(d)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(d[len(d)*99/100].Microseconds()), "p99-µs")
}

// An ungated call through the gateway, and the same call made directly to
// the upstream: the difference is what the gateway adds.
func BenchmarkUngatedCall(b *testing.B) {
	_, up, g := benchEnv(b)
	args := json.RawMessage(`{"order":"A-1"}`)
	for _, c := range []struct {
		name, url, token string
	}{{"direct", up.srv.URL, ""}, {"through-gateway", g.srv.URL, agentToken}} {
		b.Run(c.name, func(b *testing.B) {
			var rt http.RoundTripper = http.DefaultTransport
			if c.token != "" {
				rt = bearer{c.token}
			} else {
				rt = headerRT{upstreamSecret}
			}
			cl := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, nil)
			cs, err := cl.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: c.url, HTTPClient: &http.Client{Transport: rt}}, nil)
			must(b, err)
			defer cs.Close()
			latencies(b, func() error {
				res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "lookup_order", Arguments: args})
				if err == nil && res.IsError {
					err = fmt.Errorf("tool error: %s", text(res))
				}
				return err
			})
		})
	}
}

type headerRT struct{ auth string }

func (h headerRT) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", h.auth)
	return http.DefaultTransport.RoundTrip(r)
}

// concurrently runs call from 64 goroutines per GOMAXPROCS spread over 64
// agent sessions, and reports calls per second.
func concurrently(b *testing.B, g *gatewaySite, call func(cs *mcp.ClientSession, i int) error) {
	const agents = 64
	sessions := make([]*mcp.ClientSession, agents)
	for i := range sessions {
		sessions[i] = agentSession(b, g.srv.URL, agentToken, nil)
	}
	var mu sync.Mutex
	next := 0
	b.SetParallelism(64) // goroutines per GOMAXPROCS
	start := time.Now()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		mu.Lock()
		cs := sessions[next%agents]
		next++
		mu.Unlock()
		for i := 0; pb.Next(); i++ {
			if err := call(cs, i); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.StopTimer()
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "calls/s")
}

// Gated calls decided by an auto-approve policy, end to end: the agent's
// call, the AAP request, the policy's decision, the durable execution
// record, the upstream call and the answer, from concurrent agents.
func BenchmarkGatedAutoApproved(b *testing.B) {
	p, up, g := benchEnv(b)
	p.op.Call(http.MethodPost, "/policies", map[string]any{"tool": "billing/issue_refund", "effect": "approve", "note": "bench"}, nil)
	concurrently(b, g, func(cs *mcp.ClientSession, i int) error {
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "issue_refund",
			Arguments: map[string]any{"order": fmt.Sprintf("B-%p-%d", cs, i), "amount_cents": 100}})
		if err == nil && res.IsError {
			err = fmt.Errorf("gated call: %s", text(res))
		}
		return err
	})
	if n := up.refundCount(); n != b.N {
		b.Errorf("%d calls, %d refunds", b.N, n)
	}
}

// Ungated calls from concurrent agents: the gateway's passthrough capacity.
func BenchmarkUngatedParallel(b *testing.B) {
	_, _, g := benchEnv(b)
	concurrently(b, g, func(cs *mcp.ClientSession, _ int) error {
		_, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "lookup_order", Arguments: map[string]any{"order": "A"}})
		return err
	})
}
