// Package conformance turns the requirement lists of AAP v1
// (8_security.md: "Adapter Requirements", "Provider Requirements",
// "Asynchronous Requirements" and the asynchronous adapter list) into
// executable checks against any provider, receiver or adapter, over the
// wire only. `agentowl conformance` is its command.
//
// A Check has a stable ID, the requirement it tests (such as
// "8_security.md Provider 4") and a run function. Run executes checks
// (concurrently where they are independent) and returns a Report: one
// Result per check, PASS, FAIL or SKIP, each with its evidence (what was
// sent and what came back). The report is written as text, as a stable
// JSON document (FormatVersion) or as JUnit XML.
package conformance

import (
	"context"
	"fmt"
	"runtime/debug"
	"sort"
	"strings"
	"sync"
	"time"
)

// Status is the outcome of one check.
type Status string

// The three outcomes. SKIP means the check could not be run with what it
// was given (no way to decide a request, no receiver address, no effects
// source); it says nothing about conformance.
const (
	Pass Status = "PASS"
	Fail Status = "FAIL"
	Skip Status = "SKIP"
)

// Check is one executable requirement.
type Check struct {
	// ID is stable across releases: reports and CI filters key on it.
	ID string
	// Requirement is where the specification states it, such as
	// "8_security.md Provider 4" or "7_async.md Signing".
	Requirement string
	// Title says in a few words what is checked.
	Title string
	// Final checks run after every other check has finished (they look at
	// what the others recorded, such as every answer for the contract).
	Final bool
	// Run performs the check. It reports through t; returning without a
	// failure or a skip is a PASS.
	Run func(ctx context.Context, t *T)
}

// Message is one HTTP request or response as evidence.
type Message struct {
	Method  string            `json:"method,omitempty"`
	URL     string            `json:"url,omitempty"`
	Status  int               `json:"status,omitempty"`
	Headers map[string]string `json:"headers,omitempty"`
	Body    string            `json:"body,omitempty"`
}

// Evidence is one thing a check saw: an exchange (what was sent and what
// came back), or a note.
type Evidence struct {
	Note     string   `json:"note,omitempty"`
	Request  *Message `json:"request,omitempty"`
	Response *Message `json:"response,omitempty"`
	// Error is a transport failure (no response).
	Error string `json:"error,omitempty"`
	// ElapsedMS is how long the exchange took.
	ElapsedMS int64 `json:"elapsed_ms,omitempty"`
}

// Result is the outcome of one check.
type Result struct {
	ID          string     `json:"id"`
	Requirement string     `json:"requirement"`
	Title       string     `json:"title"`
	Status      Status     `json:"status"`
	Reason      string     `json:"reason,omitempty"`
	DurationMS  int64      `json:"duration_ms"`
	Evidence    []Evidence `json:"evidence"`
}

// FormatVersion is the version of the JSON report document. Fields are
// only ever added within a version.
const FormatVersion = 1

// Summary counts results by status.
type Summary struct {
	Pass int `json:"pass"`
	Fail int `json:"fail"`
	Skip int `json:"skip"`
}

// Report is the outcome of one run.
type Report struct {
	FormatVersion int       `json:"format_version"`
	Tool          string    `json:"tool"`
	Subject       string    `json:"subject"` // provider, receiver or adapter
	Target        string    `json:"target"`
	StartedAt     time.Time `json:"started_at"`
	FinishedAt    time.Time `json:"finished_at"`
	Summary       Summary   `json:"summary"`
	Checks        []Result  `json:"checks"`
}

// Failed reports whether any check failed.
func (r *Report) Failed() bool { return r.Summary.Fail > 0 }

// Result returns the result of check id, or nil.
func (r *Report) Result(id string) *Result {
	for i := range r.Checks {
		if r.Checks[i].ID == id {
			return &r.Checks[i]
		}
	}
	return nil
}

// IDs returns the IDs of the checks with status s, sorted.
func (r *Report) IDs(s Status) []string {
	var out []string
	for _, c := range r.Checks {
		if c.Status == s {
			out = append(out, c.ID)
		}
	}
	sort.Strings(out)
	return out
}

// T is a check's handle: it records evidence and the outcome. Fail marks
// the check failed and lets it continue; Fatal and Skip end it.
type T struct {
	mu       sync.Mutex
	status   Status
	reasons  []string
	evidence []Evidence
	run      *Run
}

type stop struct{}

// Failf marks the check failed with a reason and continues.
func (t *T) Failf(format string, args ...any) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.status = Fail
	t.reasons = append(t.reasons, fmt.Sprintf(format, args...))
}

// Fatalf marks the check failed and ends it.
func (t *T) Fatalf(format string, args ...any) {
	t.Failf(format, args...)
	panic(stop{})
}

// Skipf marks the check skipped, with the reason, and ends it. A check
// that already failed stays failed.
func (t *T) Skipf(format string, args ...any) {
	t.mu.Lock()
	if t.status != Fail {
		t.status = Skip
		t.reasons = append(t.reasons, fmt.Sprintf(format, args...))
	}
	t.mu.Unlock()
	panic(stop{})
}

// Notef records a note as evidence.
func (t *T) Notef(format string, args ...any) {
	t.add(Evidence{Note: fmt.Sprintf(format, args...)})
}

// Failed reports whether the check has failed so far.
func (t *T) Failed() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.status == Fail
}

func (t *T) add(e Evidence) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.evidence = append(t.evidence, e)
}

// Secret registers a value that must never appear in a report (a token, a
// credential, a signing secret): it is replaced by label.
func (t *T) Secret(value, label string) { t.run.Secret(value, label) }

// Run is one execution of a set of checks.
type Run struct {
	// Parallel bounds how many checks run at once (default 8).
	Parallel int
	// Progress, if set, is called once per finished check.
	Progress func(Result)
	// CheckTimeout bounds one check (default 5 minutes): its context
	// ends then, so a hung implementation fails the check, not the run.
	CheckTimeout time.Duration

	mu      sync.Mutex
	secrets map[string]string
	cleanup []func(context.Context)
}

// Secret registers a value to redact from the report.
func (r *Run) Secret(value, label string) {
	if len(value) < 6 {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.secrets == nil {
		r.secrets = map[string]string{}
	}
	r.secrets[value] = "<" + label + ">"
}

// Cleanup registers fn to run once every check has finished.
func (r *Run) Cleanup(fn func(context.Context)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.cleanup = append(r.cleanup, fn)
}

func (r *Run) redact(s string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	for v, label := range r.secrets {
		s = strings.ReplaceAll(s, v, label)
	}
	return s
}

// Execute runs checks and returns the report. Non-final checks run
// concurrently (at most Parallel at once), then the final ones, then the
// cleanups. A check that panics fails with the panic as its reason; Execute
// itself never panics on a check's behalf.
func (r *Run) Execute(ctx context.Context, subject, target string, checks []Check) *Report {
	rep := &Report{FormatVersion: FormatVersion, Tool: "agentowl conformance", Subject: subject, Target: target,
		StartedAt: time.Now().UTC()}
	results := make([]Result, len(checks))
	par := r.Parallel
	if par <= 0 {
		par = 8
	}
	sem := make(chan struct{}, par)
	var wg sync.WaitGroup
	for _, final := range []bool{false, true} {
		for i, c := range checks {
			if c.Final != final {
				continue
			}
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer wg.Done()
				defer func() { <-sem }()
				results[i] = r.runOne(ctx, c)
				if r.Progress != nil {
					r.Progress(results[i])
				}
			}()
		}
		wg.Wait()
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	for _, fn := range r.cleanup {
		func() {
			defer func() { _ = recover() }()
			fn(cctx)
		}()
	}
	cancel()
	rep.FinishedAt = time.Now().UTC()
	rep.Checks = results
	for _, res := range results {
		switch res.Status {
		case Pass:
			rep.Summary.Pass++
		case Fail:
			rep.Summary.Fail++
		case Skip:
			rep.Summary.Skip++
		}
	}
	return rep
}

func (r *Run) runOne(ctx context.Context, c Check) Result {
	t := &T{status: Pass, run: r}
	start := time.Now()
	func() {
		defer func() {
			if p := recover(); p != nil {
				if _, ok := p.(stop); !ok {
					t.mu.Lock()
					t.status = Fail
					t.reasons = append(t.reasons, fmt.Sprintf("the check itself failed (a bug in the kit): %v\n%s", p, debug.Stack()))
					t.mu.Unlock()
				}
			}
		}()
		if ctx.Err() != nil {
			t.Skipf("not run: %v", ctx.Err())
		}
		limit := r.CheckTimeout
		if limit <= 0 {
			limit = 5 * time.Minute
		}
		cctx, cancel := context.WithTimeout(ctx, limit)
		defer cancel()
		c.Run(cctx, t)
	}()
	t.mu.Lock()
	defer t.mu.Unlock()
	res := Result{ID: c.ID, Requirement: c.Requirement, Title: c.Title, Status: t.status,
		DurationMS: time.Since(start).Milliseconds(), Evidence: []Evidence{}}
	res.Reason = r.redact(strings.Join(t.reasons, "; "))
	for _, e := range t.evidence {
		res.Evidence = append(res.Evidence, r.redactEvidence(e))
	}
	return res
}

func (r *Run) redactEvidence(e Evidence) Evidence {
	e.Note = r.redact(e.Note)
	e.Error = r.redact(e.Error)
	for _, m := range []*Message{e.Request, e.Response} {
		if m == nil {
			continue
		}
		m.URL = r.redact(m.URL)
		m.Body = r.redact(m.Body)
		for k, v := range m.Headers {
			m.Headers[k] = r.redact(v)
		}
	}
	return e
}
