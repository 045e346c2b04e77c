package workclient

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/agentowl/agentowl/agentwork"
)

// Status is a reported state of work.
type Status = agentwork.Status

// Reported statuses. Completed, Failed and Cancelled are terminal: AgentOwl
// refuses any later report for the work (409 already_terminal).
const (
	Accepted   = agentwork.Accepted
	Running    = agentwork.Running
	NeedsInput = agentwork.NeedsInput
	Completed  = agentwork.Completed
	Failed     = agentwork.Failed
	Cancelled  = agentwork.Cancelled
)

type (
	// Result is what completed work produced. URL must be HTTPS without
	// userinfo; AgentOwl shows it and never fetches it.
	Result = agentwork.Result
	// Callback is one report about work.
	Callback = agentwork.Callback
	// Request is one question or approval request of a needs_input
	// callback; marshal a []Request into Callback.Requests.
	Request = agentwork.Request
	// Action is the concrete action an approval request proposes.
	Action = agentwork.Action
)

// NewCallback returns a report about w with the conventional callback ID
// "<work_id>:<sequence>", timestamped at.
func NewCallback(w *Work, sequence int64, status Status, at time.Time) *Callback {
	return &Callback{Version: Version, CallbackID: w.WorkID + ":" + strconv.FormatInt(sequence, 10), WorkID: w.WorkID,
		Sequence: sequence, Status: status, OccurredAt: at.UTC().Format("2006-01-02T15:04:05.000Z")}
}

// Receipt is AgentOwl's answer to a recorded callback.
type Receipt struct {
	CallbackID string `json:"callback_id"`
	WorkID     string `json:"work_id"`
	Sequence   int64  `json:"sequence"`
	Status     Status `json:"status"`
	// WorkStatus is the work's recorded state after the callback.
	WorkStatus string `json:"work_status"`
	// Stale is true when a higher sequence was already applied: the report
	// was kept but changed nothing.
	Stale bool `json:"stale"`
	// Duplicate is true when this was a retry of a recorded report; the
	// receipt is the original one.
	Duplicate  bool   `json:"duplicate"`
	RecordedAt string `json:"recorded_at"`
}

// Error is a refused callback: AgentOwl's error body and status.
type Error struct {
	StatusCode int
	Code       string
	Message    string
	Param      string
	RequestID  string
	// RetryAfter is the Retry-After of a 429 or 503.
	RetryAfter time.Duration
}

func (e *Error) Error() string {
	if e.Code == "" {
		return fmt.Sprintf("workclient: HTTP %d", e.StatusCode)
	}
	return fmt.Sprintf("workclient: %d %s: %s", e.StatusCode, e.Code, e.Message)
}

// Retryable reports whether the same callback may be sent again: rate
// limiting and temporary server failures. Anything else (400, 401, 403,
// 404, 409, 413) needs a fix, not a retry.
func (e *Error) Retryable() bool {
	switch e.StatusCode {
	case http.StatusTooManyRequests, http.StatusRequestTimeout, http.StatusInternalServerError, http.StatusBadGateway,
		http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return true
	}
	return false
}

// Client posts callbacks with a runtime credential.
type Client struct {
	// Token is the runtime credential (owl_rt_…).
	Token string
	// HTTPClient sends requests. Defaults to a client with a 30s timeout.
	HTTPClient *http.Client
	// MaxAttempts bounds the attempts of one callback. Defaults to 8.
	MaxAttempts int
	// MinBackoff and MaxBackoff bound the exponential backoff with full
	// jitter between retries. Default to 500ms and 30s. A Retry-After
	// longer than the backoff wins.
	MinBackoff, MaxBackoff time.Duration
	// Sleep waits between attempts. Defaults to a timer that ends early
	// with ctx; tests replace it.
	Sleep func(ctx context.Context, d time.Duration) error
}

func (c *Client) httpClient() *http.Client {
	if c.HTTPClient != nil {
		return c.HTTPClient
	}
	return defaultHTTP
}

var defaultHTTP = &http.Client{Timeout: 30 * time.Second}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// backoff is exponential with full jitter, never below a tenth of min.
func (c *Client) backoff(attempt int) time.Duration {
	lo, hi := c.MinBackoff, c.MaxBackoff
	if lo <= 0 {
		lo = 500 * time.Millisecond
	}
	if hi < lo {
		hi = max(30*time.Second, lo)
	}
	bound := lo
	for i := 1; i < attempt && bound < hi; i++ {
		bound *= 2
	}
	bound = min(bound, hi)
	return max(time.Duration(rand.Int64N(int64(bound)+1)), lo/10)
}

// Post sends cb to callbackURL (the work block's callback_url) and returns
// the receipt. The body is serialized once and every retry sends the same
// bytes. Network errors, 429 and retryable 5xx are retried with backoff
// (honouring Retry-After) up to MaxAttempts; any other refusal is returned
// at once as *Error.
func (c *Client) Post(ctx context.Context, callbackURL string, cb *Callback) (*Receipt, error) {
	body, err := json.Marshal(cb)
	if err != nil {
		return nil, err
	}
	return c.PostRaw(ctx, callbackURL, body)
}

// PostRaw is Post for a callback already serialized, such as one a runtime
// stored before a restart and must resend unchanged.
func (c *Client) PostRaw(ctx context.Context, callbackURL string, body []byte) (*Receipt, error) {
	attempts := c.MaxAttempts
	if attempts <= 0 {
		attempts = 8
	}
	wait := c.Sleep
	if wait == nil {
		wait = sleep
	}
	var last error
	for attempt := 1; ; attempt++ {
		rc, retryAfter, err := c.once(ctx, callbackURL, body)
		if err == nil {
			return rc, nil
		}
		last = err
		var ae *Error
		if errors.As(err, &ae) && !ae.Retryable() {
			return nil, err
		}
		if ctx.Err() != nil {
			return nil, err
		}
		if attempt >= attempts {
			return nil, fmt.Errorf("workclient: gave up after %d attempts: %w", attempts, last)
		}
		if err := wait(ctx, max(c.backoff(attempt), retryAfter)); err != nil {
			return nil, err
		}
	}
}

// once makes one attempt. A returned *Error is a refusal; other errors are
// transport failures.
func (c *Client) once(ctx context.Context, callbackURL string, body []byte) (*Receipt, time.Duration, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, callbackURL, bytes.NewReader(body))
	if err != nil {
		return nil, 0, &Error{Code: "invalid_url", Message: err.Error()}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+c.Token)
	req.Header.Set("User-Agent", "agentowl-workclient/1")
	resp, err := c.httpClient().Do(req)
	if err != nil {
		return nil, 0, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, 0, err
	}
	if resp.StatusCode == http.StatusOK {
		var rc Receipt
		if err := json.Unmarshal(data, &rc); err != nil {
			return nil, 0, fmt.Errorf("workclient: unreadable receipt: %w", err)
		}
		return &rc, 0, nil
	}
	e := &Error{StatusCode: resp.StatusCode, RequestID: resp.Header.Get("X-Request-ID")}
	var eb struct {
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
			Param   string `json:"param"`
		} `json:"error"`
	}
	if json.Unmarshal(data, &eb) == nil {
		e.Code, e.Message, e.Param = eb.Error.Code, eb.Error.Message, eb.Error.Param
	}
	if v := resp.Header.Get("Retry-After"); v != "" {
		if s, err := strconv.Atoi(v); err == nil && s >= 0 {
			e.RetryAfter = time.Duration(s) * time.Second
		} else if t, err := http.ParseTime(v); err == nil {
			e.RetryAfter = max(time.Until(t), 0)
		}
	}
	return nil, e.RetryAfter, e
}

// Reporter numbers the reports of one work: sequence 1, 2, 3, … with
// callback IDs "<work_id>:<n>". A runtime that restarts mid-work must
// resume from its last sequence (Reporter.Sequence) or AgentOwl records the
// reused numbers as conflicts.
type Reporter struct {
	client *Client
	work   *Work
	mu     sync.Mutex
	seq    int64
	// Now timestamps reports. Defaults to time.Now.
	Now func() time.Time
}

// Reporter returns a Reporter for w starting after sequence last (0 for
// fresh work).
func (c *Client) Reporter(w *Work, last int64) *Reporter {
	return &Reporter{client: c, work: w, seq: last}
}

// Sequence is the last sequence number used.
func (r *Reporter) Sequence() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.seq
}

// Report sends the next report with status; edit, when set, adds fields
// (result, requests, error, session). The report is built once, so its
// retries are exact duplicates.
func (r *Reporter) Report(ctx context.Context, status Status, edit func(*Callback)) (*Receipt, error) {
	r.mu.Lock()
	r.seq++
	now := time.Now
	if r.Now != nil {
		now = r.Now
	}
	cb := NewCallback(r.work, r.seq, status, now())
	r.mu.Unlock()
	if edit != nil {
		edit(cb)
	}
	return r.client.Post(ctx, r.work.CallbackURL, cb)
}
