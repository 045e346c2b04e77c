package conformance

import (
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
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/agentowl/agentowl/aap"
	"github.com/agentowl/agentowl/aap/sqlite"
)

// ShimCall is the tool call the adapter shim reads on stdin.
type ShimCall struct {
	// ID is the agent's tool-call ID: the execution's idempotency key.
	ID        string          `json:"id"`
	Tool      string          `json:"tool"`
	Arguments json.RawMessage `json:"arguments"`
	Timeout   string          `json:"timeout"`
}

// ShimOutcome is the one JSON line the adapter shim prints.
type ShimOutcome struct {
	// Outcome is ran (the call ran in this run), already_ran (it ran
	// before: a rerun of the same call), denied, expired (the request, or
	// the approval's expires_at), cancelled, abandoned (SIGTERM while
	// waiting: the request was cancelled), not_run (any other reason) or
	// error (no decision could be obtained).
	Outcome   string `json:"outcome"`
	Reason    string `json:"reason,omitempty"`
	RequestID string `json:"request_id,omitempty"`
}

// shimLongPoll makes the adapter's reads long polls: a synchronous harness
// waiting in the foreground.
type shimLongPoll struct{ *aap.Client }

func (p shimLongPoll) GetRequest(ctx context.Context, id string) (*aap.Request, error) {
	return p.WaitRequest(ctx, id, 30*time.Second)
}

// RunAdapterShim is `agentowl conformance adapter-shim`: the harness kit's
// aap.Adapter as a synchronous adapter command, the subject of the
// agentowl-adapter preset. It reads a ShimCall on stdin, submits it
// through aap.Adapter (AAP_BASE_URL, AAP_INSTANCE_CREDENTIAL; executions
// in stateDir, so a rerun of the same call ID recovers the same
// execution), waits (long polls, retrying transient failures after their
// Retry-After), runs the "tool" (which does nothing) only as the adapter
// allows, and prints a ShimOutcome. SIGTERM or SIGINT while waiting
// abandons the execution (the adapter cancels the request). The exit
// status is 0 when the call ran, 2 when it did not, 1 on an error.
//
// With async (the kit's {mode} = async) it is an asynchronous harness: it
// does not long poll; once the execution is suspended it waits for the
// receiving service (RunAdapterShimReceiver, over the same stateDir) to
// resume it, and prints "resumed" when that service ran the call.
func RunAdapterShim(ctx context.Context, stateDir string, async bool, stdin io.Reader, stdout io.Writer) int {
	out := func(o ShimOutcome) int {
		json.NewEncoder(stdout).Encode(o)
		switch o.Outcome {
		case "ran":
			return 0
		case "error":
			return 1
		}
		return 2
	}
	fail := func(format string, args ...any) int {
		return out(ShimOutcome{Outcome: "error", Reason: fmt.Sprintf(format, args...)})
	}
	var call ShimCall
	if err := json.NewDecoder(stdin).Decode(&call); err != nil {
		return fail("reading the tool call on stdin: %v", err)
	}
	base, token := os.Getenv("AAP_BASE_URL"), os.Getenv("AAP_INSTANCE_CREDENTIAL")
	if base == "" || token == "" {
		return fail("AAP_BASE_URL and AAP_INSTANCE_CREDENTIAL must be set")
	}
	if stateDir == "" {
		d, err := os.MkdirTemp("", "aap-adapter-shim-")
		if err != nil {
			return fail("%v", err)
		}
		defer os.RemoveAll(d)
		stateDir = d
	}
	st, err := sqlite.Open(ctx, filepath.Join(stateDir, "executions.db"))
	if err != nil {
		return fail("opening the execution store: %v", err)
	}
	defer st.Close()
	ran, waited := false, false
	client := &aap.Client{BaseURL: base, Token: token, HTTP: &http.Client{Timeout: 60 * time.Second}}
	var provider aap.Provider = shimLongPoll{client}
	if async {
		provider = client
	}
	ad, err := aap.NewAdapter(aap.AdapterConfig{Provider: provider, Store: st,
		Run: func(context.Context, *aap.Execution) (json.RawMessage, error) {
			ran = true
			return json.RawMessage(`{"ran":true}`), nil
		}})
	if err != nil {
		return fail("%v", err)
	}
	sctx, stop := signal.NotifyContext(ctx, syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	c := aap.Call{Tool: call.Tool, Arguments: call.Arguments, Timeout: call.Timeout}
	e, err := ad.Submit(sctx, call.ID, c)
	for attempt := 0; ; attempt++ {
		if sctx.Err() != nil {
			// Terminated (by the signal here, or by the caller's own
			// signal handling cancelling ctx): the wait is abandoned.
			actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
			e, err := ad.Abandon(actx, call.ID, "the harness was terminated while waiting")
			cancel()
			if err != nil {
				return fail("abandoning: %v", err)
			}
			return out(ShimOutcome{Outcome: "abandoned", Reason: e.Reason, RequestID: e.RequestID})
		}
		if e == nil {
			return fail("%v", err)
		}
		if err == nil && e.State != aap.ExecSubmitting && e.State != aap.ExecWaiting {
			break
		}
		if err == nil && async && e.State == aap.ExecWaiting {
			// Suspended: the receiving service resumes it.
			waited = true
			e, err = awaitResumed(sctx, ad, call.ID)
			continue
		}
		var ae *aap.APIError
		if errors.Is(err, aap.ErrConflict) || (errors.As(err, &ae) && !ae.Temporary()) || attempt >= 30 {
			return fail("no decision could be obtained: %v", err)
		}
		if err != nil {
			// A transient failure: wait as the provider asks (Retry-After),
			// else a second.
			wait := time.Second
			if errors.As(err, &ae) && ae.RetryAfter > wait {
				wait = ae.RetryAfter
			}
			select {
			case <-time.After(wait):
			case <-sctx.Done():
				continue
			}
		}
		if e.State == aap.ExecSubmitting {
			e, err = ad.Submit(sctx, call.ID, c)
		} else {
			e, err = ad.Resume(sctx, e.RequestID)
		}
	}
	o := ShimOutcome{Reason: e.Reason, RequestID: e.RequestID}
	switch {
	case e.State == aap.ExecFinished && ran:
		o.Outcome = "ran"
	case e.State == aap.ExecFinished && waited:
		o.Outcome, o.Reason = "resumed", "the receiving service ran the call"
	case e.State == aap.ExecFinished || e.State == aap.ExecStarted:
		o.Outcome = "already_ran"
	case e.State == aap.ExecAbandoned:
		o.Outcome = "abandoned"
	case strings.HasPrefix(e.Reason, "denied"):
		o.Outcome = "denied"
	case strings.HasPrefix(e.Reason, "cancelled"):
		o.Outcome = "cancelled"
	case strings.HasPrefix(e.Reason, "expired"), strings.Contains(e.Reason, "approval expired at"):
		o.Outcome = "expired"
	default:
		o.Outcome = "not_run"
	}
	return out(o)
}

// awaitResumed waits until the saved execution key is no longer waiting.
func awaitResumed(ctx context.Context, ad *aap.Adapter, key string) (*aap.Execution, error) {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		e, err := ad.Execution(ctx, key)
		if err != nil || e.State != aap.ExecWaiting {
			return e, err
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			return e, nil
		}
	}
}

// RunAdapterShimReceiver is `agentowl conformance adapter-shim --receive
// ADDR`: the receiving service of the asynchronous shim. It expects the
// registration (AAP_REGISTRATION_ID, AAP_SIGNING_SECRET), serves the harness
// kit's aap.Receiver on listen, and resumes the executions saved in
// stateDir through aap.Adapter as their wake-ups come (retried a second
// later when the submission has not saved its request ID yet). Each call it
// runs prints {"outcome":"ran"}. It runs until SIGTERM or SIGINT.
func RunAdapterShimReceiver(ctx context.Context, stateDir, listen string, stdout io.Writer) int {
	fail := func(format string, args ...any) int {
		json.NewEncoder(stdout).Encode(ShimOutcome{Outcome: "error", Reason: fmt.Sprintf(format, args...)})
		return 1
	}
	base, token := os.Getenv("AAP_BASE_URL"), os.Getenv("AAP_INSTANCE_CREDENTIAL")
	if base == "" || token == "" || stateDir == "" {
		return fail("AAP_BASE_URL, AAP_INSTANCE_CREDENTIAL and --state must be set")
	}
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	st, err := sqlite.Open(ctx, filepath.Join(stateDir, "executions.db"))
	if err != nil {
		return fail("opening the store: %v", err)
	}
	defer st.Close()
	var mu sync.Mutex
	client := &aap.Client{BaseURL: base, Token: token, HTTP: &http.Client{Timeout: 60 * time.Second}}
	ad, err := aap.NewAdapter(aap.AdapterConfig{Provider: client, Store: st,
		Run: func(_ context.Context, e *aap.Execution) (json.RawMessage, error) {
			mu.Lock()
			json.NewEncoder(stdout).Encode(ShimOutcome{Outcome: "ran", RequestID: e.RequestID})
			mu.Unlock()
			return json.RawMessage(`{"ran":true}`), nil
		}})
	if err != nil {
		return fail("%v", err)
	}
	err = serveShimReceiver(ctx, st, listen, func(ctx context.Context, rcv *aap.Receiver) error {
		return rcv.Dispatch(ctx, aap.DispatchConfig{Handle: ad.HandleWakeup, Lease: time.Second})
	})
	if err != nil {
		return fail("%v", err)
	}
	return 0
}

// serveShimReceiver serves the harness kit's aap.Receiver over st on
// listen, with the registration from AAP_REGISTRATION_ID and
// AAP_SIGNING_SECRET, while work runs; work ends when ctx does.
func serveShimReceiver(ctx context.Context, st aap.Store, listen string, work func(context.Context, *aap.Receiver) error) error {
	rcv, err := aap.NewReceiver(aap.ReceiverConfig{Store: st})
	if err != nil {
		return err
	}
	if err := rcv.Register(ctx, os.Getenv("AAP_REGISTRATION_ID"), os.Getenv("AAP_SIGNING_SECRET")); err != nil {
		return fmt.Errorf("registering: %w", err)
	}
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: rcv, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	err = work(ctx, rcv)
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	srv.Shutdown(sctx)
	if err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}
