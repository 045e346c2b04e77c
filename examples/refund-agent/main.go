// Command refund-agent is a small harness in AAP asynchronous mode. Its
// "agent" wants to call the issue_refund tool; the aap.Adapter intercepts
// the call, submits it for approval and, while the request is pending, the
// process exits. When the decision arrives, the receiver (`agentowl receiver
// serve --exec 'refund-agent resume'`) starts it again; it reads the request
// back and runs the approved refund once, or records why it did not run.
//
//	refund-agent run --payment payment_123 --amount 4900 --currency GBP
//	refund-agent resume [REQUEST-ID]   # default $AAP_REQUEST_ID (set by --exec)
//	refund-agent recover               # resume every saved execution (lost wake-ups)
//	refund-agent abandon KEY           # give up a call and cancel its request
//	refund-agent status
//
// State is kept in --dir (executions.db; refunds.jsonl is the refund
// "service" this demo pays from). The instance credential comes from the
// file that `agentowl receiver provision` wrote (--credential).
//
// Exit status: 0 when the step is done (including "still pending" and
// "already handled"), 75 when it should be retried later (for --exec: the
// receiver then keeps the wake-up), 1 on other errors.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/agentowl/agentowl/aap"
	"github.com/agentowl/agentowl/aap/sqlite"
)

const exitRetry = 75 // EX_TEMPFAIL

func main() {
	os.Exit(run(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
}

// harness is the refund agent's state.
type harness struct {
	dir     string
	adapter *aap.Adapter
	store   aap.Store
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	global := flag.NewFlagSet("refund-agent", flag.ContinueOnError)
	global.SetOutput(stderr)
	dir := global.String("dir", envOr("REFUND_AGENT_DIR", "refund-agent-data"), "state directory (env REFUND_AGENT_DIR)")
	credPath := global.String("credential", os.Getenv("REFUND_AGENT_CREDENTIAL"), "instance credential file from `agentowl receiver provision` (env REFUND_AGENT_CREDENTIAL)")
	if err := global.Parse(args); err != nil {
		return 2
	}
	if global.NArg() == 0 {
		fmt.Fprintln(stderr, "usage: refund-agent [--dir DIR] [--credential FILE] run|resume|recover|abandon|status …")
		return 2
	}
	h, err := open(ctx, *dir, *credPath)
	if err != nil {
		fmt.Fprintln(stderr, "error:", err)
		return 1
	}
	defer h.store.Close()
	cmd, rest := global.Arg(0), global.Args()[1:]
	switch cmd {
	case "run":
		return h.runAgent(ctx, rest, stdout, stderr)
	case "resume":
		id := os.Getenv("AAP_REQUEST_ID")
		if len(rest) > 0 {
			id = rest[0]
		}
		if id == "" {
			fmt.Fprintln(stderr, "usage: refund-agent resume REQUEST-ID (or set AAP_REQUEST_ID)")
			return 2
		}
		e, err := h.adapter.Resume(ctx, id)
		return report(stdout, stderr, e, err)
	case "recover":
		list, err := h.adapter.Recover(ctx)
		for _, e := range list {
			report(stdout, stderr, e, nil)
		}
		if err != nil {
			fmt.Fprintln(stderr, "error:", err)
			return exitRetry
		}
		return 0
	case "abandon":
		if len(rest) != 1 {
			fmt.Fprintln(stderr, "usage: refund-agent abandon KEY")
			return 2
		}
		e, err := h.adapter.Abandon(ctx, rest[0], "abandoned by the operator of refund-agent")
		return report(stdout, stderr, e, err)
	case "status":
		list, err := h.store.ListExecutions(ctx, aap.ExecSubmitting, aap.ExecWaiting, aap.ExecStarted, aap.ExecFinished, aap.ExecNotRun, aap.ExecAbandoned)
		if err != nil {
			fmt.Fprintln(stderr, "error:", err)
			return 1
		}
		for _, e := range list {
			report(stdout, stderr, e, nil)
		}
		return 0
	}
	fmt.Fprintf(stderr, "unknown command %q\n", cmd)
	return 2
}

func open(ctx context.Context, dir, credPath string) (*harness, error) {
	if credPath == "" {
		return nil, errors.New("no credential: pass --credential FILE (written by `agentowl receiver provision`)")
	}
	cred, err := aap.LoadCredential(credPath)
	if err != nil {
		return nil, fmt.Errorf("read credential: %w", err)
	}
	st, err := sqlite.Open(ctx, filepath.Join(dir, "executions.db"))
	if err != nil {
		return nil, err
	}
	h := &harness{dir: dir, store: st}
	h.adapter, err = aap.NewAdapter(aap.AdapterConfig{Provider: cred.Client(nil), Store: st, Run: h.issueRefund})
	if err != nil {
		st.Close()
		return nil, err
	}
	return h, nil
}

// runAgent is the "agent": it decides to refund a payment. The tool call it
// makes goes through the adapter, never straight to issueRefund.
func (h *harness) runAgent(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	payment := fs.String("payment", "", "payment to refund")
	amount := fs.Int64("amount", 0, "amount in minor units")
	currency := fs.String("currency", "GBP", "currency")
	timeout := fs.String("timeout", "30m", "how long a person may take to decide")
	key := fs.String("key", "", "idempotency key of this tool call (default refund-PAYMENT: one refund per payment)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *payment == "" || *amount <= 0 {
		fmt.Fprintln(stderr, "run needs --payment and a positive --amount")
		return 2
	}
	if *key == "" {
		*key = "refund-" + *payment
	}
	arguments, _ := json.Marshal(map[string]any{"payment_id": *payment, "amount": *amount, "currency": *currency})
	call := aap.Call{Tool: "issue_refund", Arguments: arguments, Timeout: *timeout,
		AgentReasoning: "The customer was charged twice."}
	e, err := h.adapter.Submit(ctx, *key, call)
	return report(stdout, stderr, e, err)
}

// issueRefund is the protected tool: it appends the refund to
// refunds.jsonl, durably. The adapter calls it at most once per execution.
func (h *harness) issueRefund(_ context.Context, e *aap.Execution) (json.RawMessage, error) {
	var args struct {
		PaymentID string `json:"payment_id"`
		Amount    int64  `json:"amount"`
		Currency  string `json:"currency"`
	}
	if err := json.Unmarshal(e.Call.Arguments, &args); err != nil {
		return nil, err
	}
	line, _ := json.Marshal(map[string]any{"key": e.Key, "request_id": e.RequestID, "payment_id": args.PaymentID,
		"amount": args.Amount, "currency": args.Currency, "at": time.Now().UTC().Format(time.RFC3339Nano)})
	f, err := os.OpenFile(filepath.Join(h.dir, "refunds.jsonl"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if _, err := f.Write(append(line, '\n')); err != nil {
		return nil, err
	}
	if err := f.Sync(); err != nil {
		return nil, err
	}
	return json.Marshal(map[string]string{"refund": "issued", "payment_id": args.PaymentID})
}

// report prints an execution's state and returns the exit status.
func report(stdout, stderr io.Writer, e *aap.Execution, err error) int {
	if e != nil {
		fmt.Fprintf(stdout, "%s\t%s\trequest=%s", e.Key, e.State, e.RequestID)
		switch e.State {
		case aap.ExecWaiting:
			fmt.Fprint(stdout, "\twaiting for approval; exiting until the wake-up")
		case aap.ExecFinished:
			if e.Error != "" {
				fmt.Fprintf(stdout, "\ttool error: %s", e.Error)
			} else {
				fmt.Fprintf(stdout, "\tresult: %s", e.Result)
			}
		case aap.ExecNotRun, aap.ExecAbandoned:
			fmt.Fprintf(stdout, "\tnot run: %s", e.Reason)
		}
		fmt.Fprintln(stdout)
	}
	if err != nil {
		fmt.Fprintln(stderr, "error:", err)
		if errors.Is(err, aap.ErrUnknownRequest) || e != nil {
			return exitRetry // not saved yet, or a transient failure: retry the wake-up later
		}
		return 1
	}
	return 0
}
