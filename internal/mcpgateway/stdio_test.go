package mcpgateway_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/agentowl/agentowl/aap"
	"github.com/agentowl/agentowl/internal/mcpgateway"
	"github.com/agentowl/agentowl/internal/server/servertest"
)

// stdioAgent is an agent speaking newline-delimited JSON-RPC to the
// gateway's ServeIO, line by line, as a harness does on --stdio.
type stdioAgent struct {
	t     *testing.T
	in    *io.PipeWriter // the gateway's stdin
	out   *bufio.Reader  // the gateway's stdout
	done  chan error     // ServeIO's return
	cance context.CancelFunc
}

func startStdio(t *testing.T, e *env) *stdioAgent {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	a := &stdioAgent{t: t, in: inW, out: bufio.NewReaderSize(outR, 1<<20), done: make(chan error, 1), cance: cancel}
	go func() { a.done <- e.gw.gw.ServeIO(ctx, "refund-bot", inR, outW); outW.Close() }()
	t.Cleanup(func() { cancel(); inW.Close() })
	a.send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	if r := a.recv(); r["id"] != 1.0 || r["result"] == nil {
		t.Fatalf("initialize: %v", r)
	}
	a.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	return a
}

func (a *stdioAgent) send(line string) {
	a.t.Helper()
	if _, err := io.WriteString(a.in, line+"\n"); err != nil {
		a.t.Fatalf("write: %v", err)
	}
}

// recv reads the next message the gateway wrote, skipping notifications.
func (a *stdioAgent) recv() map[string]any {
	a.t.Helper()
	type line struct {
		b   []byte
		err error
	}
	for {
		ch := make(chan line, 1)
		go func() { b, err := a.out.ReadBytes('\n'); ch <- line{b, err} }()
		var l line
		select {
		case l = <-ch:
		case <-time.After(servertest.SyncLimit):
			a.t.Fatal("no answer from the gateway")
		}
		if l.err != nil {
			a.t.Fatalf("read: %v", l.err)
		}
		var m map[string]any
		if err := json.Unmarshal(l.b, &m); err != nil {
			a.t.Fatalf("the gateway wrote %q: %v", l.b, err)
		}
		if _, note := m["method"]; note && m["id"] == nil {
			continue
		}
		return m
	}
}

// parseError checks a JSON-RPC parse error with id null.
func parseError(t *testing.T, m map[string]any, what string) {
	t.Helper()
	id, hasID := m["id"]
	e, _ := m["error"].(map[string]any)
	if !hasID || id != nil || e == nil || e["code"] != -32700.0 {
		t.Fatalf("%s: got %v, want a -32700 error with id null", what, m)
	}
}

// TestStdioSurvivesBadLines: a malformed line, a cut-off line and a line
// over the size limit each get a JSON-RPC parse error (id null), and the
// gateway keeps serving the agent: the next message is answered whole.
func TestStdioSurvivesBadLines(t *testing.T) {
	e := newEnv(t, nil)
	a := startStdio(t, e)
	list := func(id int) {
		t.Helper()
		a.send(`{"jsonrpc":"2.0","id":` + string(rune('0'+id)) + `,"method":"tools/list"}`)
		r := a.recv()
		if r["id"] != float64(id) || r["result"] == nil {
			t.Fatalf("tools/list after the bad line: %v", r)
		}
	}
	a.send(`this is not json`)
	parseError(t, a.recv(), "a malformed line")
	list(2)
	a.send(`{"jsonrpc":"2.0","id":3,"method":"tools/li`) // cut off
	parseError(t, a.recv(), "a cut-off line")
	list(4)
	a.send(`{"jsonrpc":"2.0","id":5,"method":"tools/list","params":{"pad":"` + strings.Repeat("x", mcpgateway.MaxStdioLine) + `"}}`)
	r := a.recv()
	parseError(t, r, "a line over the limit")
	if msg, _ := r["error"].(map[string]any)["message"].(string); !strings.Contains(msg, "longer than") {
		t.Errorf("the over-long line's error says %q", msg)
	}
	list(6)
	select {
	case err := <-a.done:
		t.Fatalf("the gateway stopped serving: %v", err)
	default:
	}
}

// TestStdioStopAnswersWaitingCall: the gateway stopped (SIGTERM) while a
// call waits for a decision answers it with the documented "unavailable:"
// result before it closes, and the execution stays waiting for the next
// start.
func TestStdioStopAnswersWaitingCall(t *testing.T) {
	e := newEnv(t, nil)
	a := startStdio(t, e)
	a.send(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"issue_refund","arguments":` + refundArgs + `}}`)
	id := waiting(t, e.gw.store)
	a.cance() // what SIGTERM does to the command's context
	r := a.recv()
	res, _ := r["result"].(map[string]any)
	content, _ := res["content"].([]any)
	first, _ := content[0].(map[string]any)
	if r["id"] != 7.0 || res["isError"] != true || !strings.HasPrefix(first["text"].(string), "unavailable:") {
		t.Fatalf("the waiting call got %v, want the unavailable: tool result", r)
	}
	select {
	case err := <-a.done:
		if err != nil {
			t.Fatalf("ServeIO after a stop: %v", err)
		}
	case <-time.After(servertest.SyncLimit):
		t.Fatal("ServeIO did not return after the stop")
	}
	x, err := e.gw.store.ExecutionByRequest(context.Background(), id)
	must(t, err)
	if x.State != aap.ExecWaiting {
		t.Fatalf("execution %s after the stop, want waiting", x.State)
	}
}
