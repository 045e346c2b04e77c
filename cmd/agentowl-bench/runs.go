package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// What `soak` and `stall` share: the servers they start (their flags and
// the replicas' start), the open-loop pacing of their load, and how a
// run's verdict is printed and ends the command.

// servers is where a run starts its servers.
type servers struct {
	Binary      string
	DatabaseURL string // empty: SQLite in a temporary directory, one process
	Replicas    int    // PostgreSQL only
}

// addFlags defines -binary, -database-url (run names the run in its help)
// and -replicas (replicas and replicasHelp are its default and help).
func (c *servers) addFlags(fs *flag.FlagSet, run string, replicas int, replicasHelp string) {
	fs.StringVar(&c.Binary, "binary", "/tmp/agentowl", "agentowl binary to start")
	fs.StringVar(&c.DatabaseURL, "database-url", "", "postgres:// URL, in which "+run+
		" makes (and drops) its own schema (default: SQLite in a temp dir, one process)")
	fs.IntVar(&c.Replicas, "replicas", replicas, replicasHelp)
}

// startReplicas starts the replicas one at a time (the first bootstraps the
// database and its admin) with env, in site's directory and on its
// database. It returns those it made even on an error, for the caller to
// stop.
func (c *servers) startReplicas(ctx context.Context, st *site, env []string) ([]*replica, error) {
	var out []*replica
	for i := range c.Replicas {
		p, err := newReplica(fmt.Sprintf("replica-%d", i), c.Binary, st.dir, env, st.dbURL)
		if err != nil {
			return out, err
		}
		out = append(out, p)
		if err := p.start(ctx); err != nil {
			return out, err
		}
	}
	return out, nil
}

// verdict is what a run found wrong: what its receivers saw amiss and the
// assertions that failed (none: it passed).
type verdict struct {
	problems []string
	failures []string
}

func (v *verdict) fail(format string, args ...any) {
	v.failures = append(v.failures, fmt.Sprintf(format, args...))
}

// printVerdict ends a report: the first ten receiver problems, then PASS or
// FAIL and every failed assertion.
func (v *verdict) printVerdict(p func(format string, args ...any)) {
	for _, pr := range v.problems[:min(10, len(v.problems))] {
		p("receiver problem: %s", pr)
	}
	if len(v.failures) == 0 {
		p("PASS")
		return
	}
	p("FAIL:")
	for _, f := range v.failures {
		p("  - %s", f)
	}
}

func (v *verdict) result() *verdict { return v }

// report is a run's result: its verdict, and the report it prints.
type report interface {
	result() *verdict
	print(w io.Writer)
}

// finish prints a run's report on out and, when the run failed, the last
// lines of every replica's log; it returns res.
func finish[R report](out io.Writer, res R, replicas []*replica) (R, error) {
	res.print(out)
	if len(res.result().failures) > 0 {
		for _, p := range replicas {
			fmt.Fprintf(out, "--- last lines of %s's log:\n%s\n", p.name, p.logTail(15))
		}
	}
	return res, nil
}

// runInterruptible parses a command's flags (fs) from args, then runs it
// until it ends or the command is interrupted (SIGINT, SIGTERM):
// interrupted, the run still stops its servers and drops its schema. The
// run's failed assertions are the command's error.
func runInterruptible[R report](fs *flag.FlagSet, args []string, run func(ctx context.Context) (R, error)) error {
	_ = fs.Parse(args)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	res, err := run(ctx)
	if err != nil {
		return err
	}
	if f := res.result().failures; len(f) > 0 {
		return fmt.Errorf("%s failed:\n  - %s", fs.Name(), strings.Join(f, "\n  - "))
	}
	return nil
}

// openLoop runs a load's operations at the load's own pace, at most
// maxOpsInFlight at once: an operation due while that many are in flight
// is skipped and counted, never queued, so that a slow server does not
// slow the load down.
type openLoop struct {
	sem     chan struct{}
	wg      sync.WaitGroup
	skipped *atomic.Int64
}

func newOpenLoop(skipped *atomic.Int64) *openLoop {
	return &openLoop{sem: make(chan struct{}, maxOpsInFlight), skipped: skipped}
}

// next is when the operation after one due at due is due, gap later: a
// stall of the load itself (a killed replica, a busy machine) is not made
// up for with a burst.
func (l *openLoop) next(due time.Time, gap time.Duration) time.Time {
	if behind := time.Now().Add(-time.Second); due.Before(behind) {
		due = behind
	}
	return due.Add(gap)
}

// start runs op on a goroutine of its own, unless maxOpsInFlight are in
// flight; it reports whether op runs.
func (l *openLoop) start(op func()) bool {
	select {
	case l.sem <- struct{}{}:
	default:
		l.skipped.Add(1)
		return false
	}
	l.wg.Go(func() {
		defer func() { <-l.sem }()
		op()
	})
	return true
}

// wait waits for the operations in flight.
func (l *openLoop) wait() { l.wg.Wait() }
