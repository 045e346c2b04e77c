package mcpgateway

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentowl/agentowl/aap"
)

// callContext is the AAP request's context: which MCP server and tool, and
// which agent asked. It is part of the saved call, so it holds nothing that
// changes when the agent reconnects.
type callContext struct {
	MCP struct {
		Server string `json:"server"`
		Tool   string `json:"tool"`
		Agent  string `json:"agent"`
	} `json:"mcp"`
}

// approvalTool is the AAP tool name of an upstream tool: "server/tool", so
// that operators see the MCP server in `approvals list` and a policy names
// one server's tool exactly.
func approvalTool(server, tool string) string { return server + "/" + tool }

// gated asks for an approval and forwards the call only through the
// adapter. While the request is pending it long-polls the provider and
// sends a progress notification per poll when the agent asked for progress.
// The agent cancelling or disconnecting abandons the execution and cancels
// the AAP request.
func (g *Gateway) gated(ctx context.Context, req *mcp.CallToolRequest, a *agent, up *upstream, tool string, args json.RawMessage) (*mcp.CallToolResult, error) {
	var cc callContext
	cc.MCP.Server, cc.MCP.Tool, cc.MCP.Agent = up.cfg.Name, tool, a.cfg.Name
	cctx, _ := json.Marshal(cc)
	var buf bytes.Buffer
	if err := json.Compact(&buf, args); err != nil {
		return toolError("the arguments must be a JSON object"), nil
	}
	call := aap.Call{Tool: approvalTool(up.cfg.Name, tool), Arguments: buf.Bytes(), Timeout: g.cfg.Approval.Timeout, Context: cctx}
	key := g.adopt(digest(&call))
	if key == "" {
		key = uuid.NewString()
	} else {
		g.log.Info("mcp gateway: the agent repeated a call that was waiting before the restart", "key", key, "agent", a.cfg.Name, "tool", call.Tool)
	}
	// The adapter's steps run to their end even if the agent leaves meanwhile;
	// the loop below notices and abandons.
	work := context.WithoutCancel(ctx)
	e, err := g.adapter.Submit(work, key, call)
	token := req.Params.GetProgressToken()
	progress := 0.0
	for {
		if err == nil && e.State != aap.ExecSubmitting && e.State != aap.ExecWaiting {
			return g.outcome(e), nil
		}
		if e == nil { // not saved: a bad call or the store failed
			return toolError("the gateway could not record the call: " + err.Error()), nil
		}
		if g.bg.Err() != nil {
			return toolError("unavailable: the gateway is stopping; repeat the same call once it is back to get this request's decision (request " + e.RequestID + ")"), nil
		}
		if ctx.Err() != nil {
			return g.abandon(work, key, "the agent cancelled the call or disconnected"), nil
		}
		if token != nil {
			progress++
			msg := "waiting for an approval in AgentOwl"
			if e.RequestID != "" {
				msg += " (request " + e.RequestID + ")"
			}
			_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: token, Progress: progress, Message: msg})
		}
		if err != nil || e.State == aap.ExecSubmitting {
			if err != nil {
				g.log.Warn("mcp gateway: provider unavailable, retrying", "key", key, "err", err)
			}
			select {
			case <-ctx.Done():
			case <-time.After(retryWait(err, min(g.cfg.Approval.Progress, 2*time.Second))):
			}
			if ctx.Err() == nil {
				e, err = g.adapter.Submit(work, key, call)
			}
			continue
		}
		if g.receiver != nil {
			e, err = g.awaitWakeup(ctx, work, e)
			continue
		}
		r, werr := g.provider.WaitRequest(ctx, e.RequestID, g.cfg.Approval.Progress)
		switch {
		case ctx.Err() != nil:
		case werr != nil:
			err = werr
		case r.Status.Terminal():
			e, err = g.adapter.Resume(work, e.RequestID)
		}
	}
}

// retryWait is how long to wait before calling the provider again after
// err: pause, or the provider's Retry-After when it asks for longer (AAP
// 5_http.md: a retry waits at least that long).
func retryWait(err error, pause time.Duration) time.Duration {
	var ae *aap.APIError
	if errors.As(err, &ae) && ae.RetryAfter > pause {
		return ae.RetryAfter
	}
	return pause
}

// awaitWakeup waits (asynchronous mode) for the receiver's wake-up of a
// waiting execution, or one progress interval, then applies the request's
// current state through the adapter.
func (g *Gateway) awaitWakeup(ctx, work context.Context, e *aap.Execution) (*aap.Execution, error) {
	ch := make(chan struct{}, 1)
	g.waiters.Store(e.RequestID, ch)
	defer g.waiters.CompareAndDelete(e.RequestID, ch)
	t := time.NewTimer(g.cfg.Approval.Progress)
	defer t.Stop()
	select {
	case <-ch:
	case <-t.C:
	case <-ctx.Done():
		return e, nil
	}
	return g.adapter.Resume(work, e.RequestID)
}

// wake hands a verified request.resolved wake-up to the call waiting on
// that request. With no call waiting (its agent left, or the gateway
// restarted) it is acknowledged and dropped: a decision never runs a call
// without its agent; a repeated call reads the decision itself.
func (g *Gateway) wake(_ context.Context, w aap.Wakeup) error {
	if v, ok := g.waiters.Load(w.RequestID); ok {
		select {
		case v.(chan struct{}) <- struct{}{}:
		default:
		}
	}
	return nil
}

// abandon gives up a waiting call for good and cancels its request.
func (g *Gateway) abandon(ctx context.Context, key, reason string) *mcp.CallToolResult {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	e, err := g.adapter.Abandon(ctx, key, reason)
	if err != nil {
		g.log.Warn("mcp gateway: cancelling the approval request failed; it is retried at the next start", "key", key, "err", err)
	}
	if e != nil && e.State != aap.ExecAbandoned {
		return g.outcome(e) // it ended meanwhile
	}
	return toolError("cancelled: " + reason + "; the approval request was withdrawn and the call was not run")
}

// outcome is what the agent sees of a finished or refused execution.
func (g *Gateway) outcome(e *aap.Execution) *mcp.CallToolResult {
	switch e.State {
	case aap.ExecFinished:
		if e.Error != "" {
			return toolError("the approved call failed upstream: " + e.Error)
		}
		var res mcp.CallToolResult
		if err := json.Unmarshal(e.Result, &res); err != nil {
			return toolError("the upstream's result could not be read: " + err.Error())
		}
		return &res
	case aap.ExecNotRun:
		what := "not approved"
		switch {
		case e.AttestationRefused():
			what = "unverified"
		case strings.HasPrefix(e.Reason, "denied"):
			what = "denied"
		case strings.HasPrefix(e.Reason, "expired"):
			what = "expired"
		case strings.HasPrefix(e.Reason, "cancelled"):
			what = "cancelled"
		case strings.HasPrefix(e.Reason, "approval expired"):
			what = "expired"
		}
		return toolError(fmt.Sprintf("%s: the call was not run (AgentOwl request %s: %s)", what, e.RequestID, e.Reason))
	case aap.ExecAbandoned:
		return toolError("cancelled: the call was not run (" + e.Reason + ")")
	case aap.ExecStarted:
		return toolError("the call was started before the gateway restarted and its result is unknown; it is never run again")
	}
	return toolError("the call was not run (state " + string(e.State) + ")")
}

// forward is the adapter's ToolFunc: the one place a gated call reaches its
// upstream, with exactly the saved (approved) arguments and the approval's
// attestation in _meta (AttestationMetaKey).
func (g *Gateway) forward(ctx context.Context, e *aap.Execution) (json.RawMessage, error) {
	var cc callContext
	if err := json.Unmarshal(e.Call.Context, &cc); err != nil {
		return nil, fmt.Errorf("the saved call has no MCP context: %w", err)
	}
	up, ok := g.upstreams[cc.MCP.Server]
	if !ok {
		return nil, fmt.Errorf("upstream %q is no longer configured", cc.MCP.Server)
	}
	ctx, cancel := context.WithTimeout(ctx, g.cfg.Approval.CallTimeout)
	defer cancel()
	params := &mcp.CallToolParams{Name: cc.MCP.Tool, Arguments: e.Call.Arguments}
	if tok := g.attestationFor(ctx, e); tok != "" {
		params.Meta = mcp.Meta{AttestationMetaKey: tok}
	}
	res, err := up.session.CallTool(ctx, params)
	if err != nil {
		return nil, err
	}
	return json.Marshal(res)
}

// digest identifies a call by everything saved about it (tool, arguments,
// agent), to match a repeated call to one left waiting by a restart.
func digest(c *aap.Call) string {
	h := sha256.New()
	for _, p := range [][]byte{[]byte(c.Tool), c.Arguments, c.Context, []byte(c.Timeout)} {
		h.Write(p)
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))
}

// adopt hands a repeated call the key of the execution a previous process
// left waiting for the same call, once.
func (g *Gateway) adopt(d string) string {
	g.mu.Lock()
	defer g.mu.Unlock()
	o, ok := g.orphans[d]
	if !ok {
		return ""
	}
	delete(g.orphans, d)
	return o.key
}

// takeOver looks at the executions a previous process left. A call that
// was waiting (or submitting) had an agent whose connection is gone: it is
// kept for ReattachGrace so the agent can repeat the call and get the
// decision, and is never run without it. Abandoned executions whose
// cancellation was not confirmed are cancelled again.
func (g *Gateway) takeOver(ctx context.Context) error {
	list, err := g.store.ListExecutions(ctx, aap.ExecSubmitting, aap.ExecWaiting, aap.ExecAbandoned, aap.ExecStarted)
	if err != nil {
		return err
	}
	deadline := g.clock.Now().Add(g.cfg.Approval.ReattachGrace)
	var errs []error
	for _, e := range list {
		switch e.State {
		case aap.ExecSubmitting, aap.ExecWaiting:
			g.mu.Lock()
			g.orphans[digest(&e.Call)] = orphan{key: e.Key, deadline: deadline}
			g.mu.Unlock()
		case aap.ExecAbandoned:
			if !e.CancelDone {
				if _, err := g.adapter.Abandon(ctx, e.Key, e.Reason); err != nil {
					errs = append(errs, err)
				}
			}
		case aap.ExecStarted:
			g.log.Warn("mcp gateway: a call was running upstream when the gateway stopped; it is never run again", "key", e.Key, "tool", e.Call.Tool)
			// It stays started: at most once.
		}
	}
	if len(errs) > 0 {
		g.log.Warn("mcp gateway: some cancellations failed; retried later", "err", errors.Join(errs...))
	}
	if n := len(g.orphans); n > 0 {
		g.log.Info("mcp gateway: calls waiting for their agents to repeat them", "count", n, "until", deadline)
	}
	return nil
}

// SweepOrphans abandons (and cancels the requests of) the calls left
// waiting by a previous process whose agents did not repeat them within
// the grace period. It runs every few seconds; tests call it directly.
func (g *Gateway) SweepOrphans(ctx context.Context) {
	now := g.clock.Now()
	var due []string
	g.mu.Lock()
	for d, o := range g.orphans {
		if !now.Before(o.deadline) {
			due = append(due, o.key)
			delete(g.orphans, d)
		}
	}
	g.mu.Unlock()
	for _, key := range due {
		if _, err := g.adapter.Abandon(ctx, key, "the agent did not repeat the call after the gateway restarted"); err != nil {
			g.log.Warn("mcp gateway: cancelling an orphaned request failed; retried at the next start", "key", key, "err", err)
		}
	}
}

func (g *Gateway) sweep() {
	t := time.NewTicker(5 * time.Second)
	defer t.Stop()
	for n := 0; ; n++ {
		select {
		case <-g.bg.Done():
			return
		case <-t.C:
			g.SweepOrphans(g.bg)
			if g.receiver != nil && n%720 == 0 { // hourly: forget event IDs past their retention
				if _, err := g.receiver.Purge(g.bg); err != nil {
					g.log.Warn("mcp gateway: purging old webhook events failed", "err", err)
				}
			}
		}
	}
}

// Adapter is the gateway's execution boundary (tests deliver an approval a
// second time through it).
func (g *Gateway) Adapter() *aap.Adapter { return g.adapter }
