package conformance

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentowl/agentowl/aap"
	"github.com/agentowl/agentowl/aap/sqlite"
	"github.com/agentowl/agentowl/internal/mcpgateway"
)

// The agentowl-mcp-gateway preset's subject: the MCP gateway (package
// mcpgateway) between an agent and a fake upstream MCP server, as one
// adapter command. The gateway's AAP side is the adapter under test; the
// agent and the upstream are the kit's.

// gatewayShimUpstream names the fake upstream in the gateway's
// configuration: the gateway submits its tools as SERVER/TOOL.
const gatewayShimUpstream = "conformance"

// gatewayShimAgent is the one agent of the gateway's configuration.
const gatewayShimAgent = "conformance-agent"

// GatewayShimOptions configure RunGatewayShim.
type GatewayShimOptions struct {
	// State holds the gateway's execution store (gateway.db); a rerun on
	// the same State is the gateway restarted on its store.
	State string
	// Async: the gateway waits for webhook wake-ups (its asynchronous
	// mode) from the receiving service on the same store
	// (RunGatewayShimReceiver) instead of long polling.
	Async bool
	// Timeout is the gateway's approval.timeout (default 30m).
	Timeout string
}

// RunGatewayShim is `agentowl conformance mcp-gateway-shim`: it reads one
// JSON-RPC tools/call message on stdin (the agent's), starts a fake
// upstream MCP server whose one tool, conformance_probe, prints
// {"upstream_call": {"name", "arguments"}} each time it runs, and the
// gateway (AAP_BASE_URL, AAP_INSTANCE_CREDENTIAL; the tool gated) with the
// agent connected over stdio; it then sends the message as the agent and
// prints the JSON-RPC answer the agent gets. A refusal is a tool result
// with isError and a text starting with denied:, expired: or cancelled:.
// SIGTERM or SIGINT makes the agent leave while it waits: it cancels its
// call (notifications/cancelled), which the gateway takes as abandonment
// (it cancels the AAP request); once the gateway has done so the shim
// prints {"agent_left": …} and stops it. Exit 0 when the agent got an
// answer or left, 1 on an error.
func RunGatewayShim(ctx context.Context, o GatewayShimOptions, stdin io.Reader, stdout io.Writer) int {
	out := &syncWriter{w: stdout}
	fail := func(format string, args ...any) int {
		out.line(map[string]string{"shim_error": fmt.Sprintf(format, args...)})
		return 1
	}
	line, err := bufio.NewReader(stdin).ReadBytes('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return fail("reading the tools/call message on stdin: %v", err)
	}
	var call struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
	}
	if err := json.Unmarshal(line, &call); err != nil || call.Method != "tools/call" || len(call.ID) == 0 {
		return fail("stdin must hold one JSON-RPC tools/call request with an id, got %q", bytes.TrimSpace(line))
	}
	base, token := os.Getenv("AAP_BASE_URL"), os.Getenv("AAP_INSTANCE_CREDENTIAL")
	if base == "" || token == "" || o.State == "" {
		return fail("AAP_BASE_URL, AAP_INSTANCE_CREDENTIAL and --state must be set")
	}
	upstreamURL, stopUpstream, err := startShimUpstream(out)
	if err != nil {
		return fail("starting the fake upstream: %v", err)
	}
	defer stopUpstream()
	cfg, err := mcpgateway.ParseConfig([]byte(gatewayShimConfig(upstreamURL, o.Timeout)))
	if err != nil {
		return fail("the gateway's configuration: %v", err)
	}
	st, err := sqlite.Open(ctx, filepath.Join(o.State, "gateway.db"))
	if err != nil {
		return fail("opening the gateway's store: %v", err)
	}
	defer st.Close()
	opts := mcpgateway.Options{Provider: &aap.Client{BaseURL: base, Token: token, HTTP: &http.Client{Timeout: 60 * time.Second}}, Store: st}
	if o.Async {
		// The receiving service (another process) verifies and stores the
		// notifications; this process's dispatch loop leases them from
		// the shared store and wakes the waiting call.
		if opts.Receiver, err = aap.NewReceiver(aap.ReceiverConfig{Store: st}); err != nil {
			return fail("%v", err)
		}
	}
	g, err := mcpgateway.New(ctx, cfg, opts)
	if err != nil {
		return fail("starting the gateway: %v", err)
	}
	defer g.Close()

	// The agent's stdio connection to the gateway.
	toGateway, agentOut := io.Pipe()
	fromGateway, gatewayOut := io.Pipe()
	serve, stopServe := context.WithCancel(context.WithoutCancel(ctx))
	served := make(chan struct{})
	go func() {
		defer close(served)
		g.ServeIO(serve, gatewayShimAgent, toGateway, gatewayOut)
		gatewayOut.Close()
	}()
	defer func() {
		stopServe()
		agentOut.Close()
		<-served
	}()
	answers := make(chan json.RawMessage, 16)
	go func() {
		sc := bufio.NewScanner(fromGateway)
		sc.Buffer(make([]byte, 64<<10), 16<<20)
		for sc.Scan() {
			answers <- append(json.RawMessage(nil), sc.Bytes()...)
		}
		close(answers)
	}()
	send := func(msg string) error {
		_, err := io.WriteString(agentOut, msg+"\n")
		return err
	}
	// The MCP handshake, then the agent's call as given.
	if err := send(`{"jsonrpc":"2.0","id":"conformance-init","method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"aap-conformance-agent","version":"1"}}}`); err != nil {
		return fail("%v", err)
	}
	if _, ok := awaitAnswer(answers, json.RawMessage(`"conformance-init"`), nil); !ok {
		return fail("the gateway did not answer initialize")
	}
	if err := send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`); err != nil {
		return fail("%v", err)
	}
	if err := send(string(bytes.TrimSpace(line))); err != nil {
		return fail("%v", err)
	}
	sctx, stop := signal.NotifyContext(ctx, syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	answer, ok := awaitAnswer(answers, call.ID, sctx.Done())
	if ok {
		out.raw(answer)
		return 0
	}
	if sctx.Err() == nil {
		return fail("the gateway closed the connection without answering the call")
	}
	// The agent leaves: it withdraws its call, and the gateway abandons the
	// execution. Stopping the gateway before that would suspend it instead.
	send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":` + string(call.ID) + `,"reason":"the agent left"}}`)
	// ctx may be what ended (the caller's own signal handling).
	if err := awaitAbandoned(context.WithoutCancel(ctx), st); err != nil {
		return fail("the agent cancelled its call: %v", err)
	}
	out.line(map[string]string{"agent_left": "the agent cancelled its call (SIGTERM); the gateway abandoned the execution"})
	return 0
}

// gatewayShimConfig is the gateway's configuration: the fake upstream's
// tools all gated, one agent allowed them, one-second progress interval
// (the long poll's length, and the re-check of a waiting call in the
// asynchronous mode).
func gatewayShimConfig(upstreamURL, timeout string) string {
	if timeout == "" {
		timeout = "30m"
	}
	return fmt.Sprintf(`data_dir: unused
approval: {timeout: %q, progress_interval: 1s}
upstreams:
  - name: %s
    url: %q
    tools: [{match: "*", gate: true}]
agents:
  - name: %s
    token_sha256: %s
    tools: ["%s/*"]
`, timeout, gatewayShimUpstream, upstreamURL, gatewayShimAgent, mcpgateway.HashToken(newUUID()+newUUID()), gatewayShimUpstream)
}

// awaitAnswer returns the JSON-RPC answer to id, skipping notifications;
// false when the connection ends or stop is closed first.
func awaitAnswer(answers <-chan json.RawMessage, id json.RawMessage, stop <-chan struct{}) (json.RawMessage, bool) {
	for {
		select {
		case msg, ok := <-answers:
			if !ok {
				return nil, false
			}
			var m struct {
				ID json.RawMessage `json:"id"`
			}
			if json.Unmarshal(msg, &m) == nil && sameJSONBytes(m.ID, id) {
				return msg, true
			}
		case <-stop:
			return nil, false
		}
	}
}

// awaitAbandoned waits until the gateway has given up the agent's call:
// an execution exists, none is submitting or waiting, and every abandoned
// one has its cancellation confirmed by the provider.
func awaitAbandoned(ctx context.Context, st aap.ExecutionStore) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		all, err := st.ListExecutions(ctx, aap.ExecSubmitting, aap.ExecWaiting, aap.ExecAbandoned, aap.ExecStarted, aap.ExecFinished, aap.ExecNotRun)
		if err != nil {
			return err
		}
		done := len(all) > 0
		for _, e := range all {
			if e.State == aap.ExecSubmitting || e.State == aap.ExecWaiting || (e.State == aap.ExecAbandoned && !e.CancelDone) {
				done = false
			}
		}
		if done {
			return nil
		}
		if time.Now().After(deadline) {
			return errors.New("the gateway did not give up the execution within 30s")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// startShimUpstream serves the fake upstream MCP server on a loopback
// port. Its tool prints each call it runs on out: the kit counts those.
func startShimUpstream(out *syncWriter) (string, func(), error) {
	s := mcp.NewServer(&mcp.Implementation{Name: "aap-conformance-upstream", Version: "1"}, nil)
	s.AddTool(&mcp.Tool{Name: probeTool, Description: "The conformance kit's probe: records that it ran", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			out.line(map[string]any{"upstream_call": map[string]any{"name": req.Params.Name, "arguments": req.Params.Arguments}})
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "the conformance upstream ran " + req.Params.Name}}}, nil
		})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	srv := &http.Server{Handler: mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil), ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	return "http://" + ln.Addr().String() + "/mcp", func() { srv.Close() }, nil
}

// RunGatewayShimReceiver is `agentowl conformance mcp-gateway-shim
// --receive ADDR`: the gateway's receiving service for the asynchronous
// checks, the harness kit's aap.Receiver (as the gateway serves it) with
// the registration from AAP_REGISTRATION_ID and AAP_SIGNING_SECRET, on the
// gateway's store in stateDir. It stores what it accepts; the gateway's
// own dispatch loop (RunGatewayShim with Async) wakes its calls. It runs
// until SIGTERM or SIGINT.
func RunGatewayShimReceiver(ctx context.Context, stateDir, listen string, stdout io.Writer) int {
	out := &syncWriter{w: stdout}
	fail := func(format string, args ...any) int {
		out.line(map[string]string{"shim_error": fmt.Sprintf(format, args...)})
		return 1
	}
	if stateDir == "" {
		return fail("--state must be set")
	}
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	st, err := sqlite.Open(ctx, filepath.Join(stateDir, "gateway.db"))
	if err != nil {
		return fail("opening the gateway's store: %v", err)
	}
	defer st.Close()
	// Only the gateway dispatches: this process stores what it accepts.
	err = serveShimReceiver(ctx, st, listen, func(ctx context.Context, _ *aap.Receiver) error {
		<-ctx.Done()
		return nil
	})
	if err != nil {
		return fail("%v", err)
	}
	return 0
}

// syncWriter writes whole lines from several goroutines.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) raw(b []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.w.Write(append(bytes.TrimSpace(b), '\n'))
}

func (s *syncWriter) line(v any) {
	b, _ := json.Marshal(v)
	s.raw(b)
}
