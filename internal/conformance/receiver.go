package conformance

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os/exec"
	"strings"
	"time"
)

// ReceiverConfig says how to test a webhook receiver: the kit plays the
// provider of an instance the receiver already expects.
type ReceiverConfig struct {
	// URL is the receiver's webhook URL.
	URL string
	// Secret is the instance's whsec_ signing secret.
	Secret string
	// InstanceID is the instance whose registration the receiver
	// verified.
	InstanceID string
	// Effects counts the receiver's effects (resumed executions, queued
	// wake-ups) for a request ID; nil skips the checks that need it.
	Effects func(ctx context.Context, requestID string) (int, error)
	// EffectsSettle is how long the kit lets an effect happen before
	// counting (default 2s).
	EffectsSettle time.Duration
	// TLS configures the client (extra roots for a test receiver).
	TLS *tls.Config
	// Parallel bounds concurrent checks (default 8).
	Parallel int
	// Progress, if set, sees each result as it finishes.
	Progress func(Result)
}

// The receiver checks' IDs.
const (
	RAcceptsValid    = "receiver.accepts-valid"
	RDuplicate       = "receiver.duplicate"
	RBadSignature    = "receiver.rejects-bad-signature"
	RStaleTimestamp  = "receiver.rejects-stale-timestamp"
	RIDMismatch      = "receiver.rejects-id-mismatch"
	RReplayedID      = "receiver.rejects-replayed-id"
	ROtherInstance   = "receiver.rejects-other-instance"
	RUnexpectedRegis = "receiver.rejects-unexpected-registration"
)

type receiverRun struct {
	cfg  ReceiverConfig
	key  []byte
	http *http.Client
}

// CommandEffects counts effects by running a shell command ({request_id}
// replaced) and counting the request ID's occurrences in its output.
func CommandEffects(template string) func(ctx context.Context, requestID string) (int, error) {
	return func(ctx context.Context, requestID string) (int, error) {
		if !uuidLike(requestID) {
			return 0, errors.New("not a UUID")
		}
		line := strings.ReplaceAll(template, "{request_id}", requestID)
		out, err := exec.CommandContext(ctx, "/bin/sh", "-c", line).Output()
		if err != nil {
			return 0, fmt.Errorf("effects command %q: %w", line, err)
		}
		return strings.Count(string(out), requestID), nil
	}
}

// URLEffects counts effects by fetching a URL ({request_id} replaced) and
// counting the request ID's occurrences in the answer.
func URLEffects(template string, client *http.Client) func(ctx context.Context, requestID string) (int, error) {
	return func(ctx context.Context, requestID string) (int, error) {
		u := strings.ReplaceAll(template, "{request_id}", url.QueryEscape(requestID))
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		if err != nil {
			return 0, err
		}
		resp, err := client.Do(req)
		if err != nil {
			return 0, err
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(io.LimitReader(resp.Body, maxBody))
		if resp.StatusCode >= 300 {
			return 0, fmt.Errorf("effects URL answered %s", resp.Status)
		}
		return strings.Count(string(body), requestID), nil
	}
}

// CheckReceiver runs every receiver check against cfg.URL.
func CheckReceiver(ctx context.Context, cfg ReceiverConfig) (*Report, error) {
	u, err := url.Parse(cfg.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("--url %q is not an http(s) URL", cfg.URL)
	}
	key, err := secretKey(cfg.Secret)
	if err != nil {
		return nil, fmt.Errorf("--secret: %w", err)
	}
	if !uuidLike(cfg.InstanceID) {
		return nil, fmt.Errorf("--instance %q is not an instance ID (a UUID)", cfg.InstanceID)
	}
	if cfg.EffectsSettle <= 0 {
		cfg.EffectsSettle = 2 * time.Second
	}
	r := &receiverRun{cfg: cfg, key: key, http: newHTTPClient(30*time.Second, cfg.TLS)}
	run := &Run{Parallel: cfg.Parallel, Progress: cfg.Progress}
	run.Secret(cfg.Secret, "signing-secret")
	return run.Execute(ctx, "receiver", cfg.URL, r.checks()), nil
}

func (r *receiverRun) checks() []Check {
	return []Check{
		{ID: RAcceptsValid, Requirement: "8_security.md Async adapter 4", Title: "a valid signed request.resolved is acknowledged with 2xx", Run: r.checkAcceptsValid},
		{ID: RDuplicate, Requirement: "8_security.md Async adapter 4", Title: "a duplicate is acknowledged without a second effect", Run: r.checkDuplicate},
		{ID: RBadSignature, Requirement: "8_security.md Async adapter 2", Title: "a wrong or missing signature is refused", Run: r.checkBadSignature},
		{ID: RStaleTimestamp, Requirement: "8_security.md Async adapter 2", Title: "a timestamp more than five minutes off is refused", Run: r.checkStale},
		{ID: RIDMismatch, Requirement: "7_async.md Signing", Title: "a body id other than webhook-id is refused", Run: r.checkIDMismatch},
		{ID: RReplayedID, Requirement: "8_security.md Async adapter 2", Title: "a replayed webhook-id with another body is refused (or provably has no effect)", Run: r.checkReplayedID},
		{ID: ROtherInstance, Requirement: "8_security.md Async adapter 2", Title: "a notification for another instance is refused", Run: r.checkOtherInstance},
		{ID: RUnexpectedRegis, Requirement: "8_security.md Async adapter 3", Title: "a verification challenge for an unexpected registration is not answered", Run: r.checkUnexpectedRegistration},
	}
}

// event is a request.resolved body for a fresh request ID.
func (r *receiverRun) event(instanceID string) (id, requestID string, body []byte) {
	id, requestID = newUUID(), newUUID()
	body, _ = json.Marshal(map[string]string{"id": id, "type": "request.resolved", "instance_id": instanceID,
		"request_id": requestID, "created_at": time.Now().UTC().Format(time.RFC3339)})
	return id, requestID, body
}

// send posts body signed with key (nil: unsigned) as webhook-id id at ts.
func (r *receiverRun) send(ctx context.Context, t *T, what string, key []byte, id string, ts time.Time, body []byte) *Exchange {
	x := &Exchange{Method: http.MethodPost, URL: r.cfg.URL, Path: what, ReqBody: body}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.cfg.URL, bytes.NewReader(body))
	if err != nil {
		x.Err = err
		t.add(x.evidence())
		return x
	}
	req.Header.Set("Content-Type", "application/json")
	if key != nil {
		swHeaders(req.Header, key, id, ts, body)
	}
	x.ReqHeader = req.Header.Clone()
	start := time.Now()
	resp, err := r.http.Do(req)
	x.Elapsed = time.Since(start)
	if err != nil {
		x.Err = err
	} else {
		x.RespBody, _ = io.ReadAll(io.LimitReader(resp.Body, maxBody))
		resp.Body.Close()
		x.Status, x.RespHeader = resp.StatusCode, resp.Header
	}
	e := x.evidence()
	e.Note = what
	t.add(e)
	return x
}

func accepted(x *Exchange) bool { return x.Err == nil && x.Status >= 200 && x.Status < 300 }

// valid sends a valid notification and ends the check unless it is
// acknowledged.
func (r *receiverRun) valid(ctx context.Context, t *T) (id, requestID string, body []byte) {
	id, requestID, body = r.event(r.cfg.InstanceID)
	if x := r.send(ctx, t, "a valid signed notification", r.key, id, time.Now(), body); !accepted(x) {
		t.Skipf("the receiver did not acknowledge a valid notification (%s), see %s", x.Describe(), RAcceptsValid)
	}
	return id, requestID, body
}

// effects counts request ID's effects after the settle time, or -1
// without an effects source.
func (r *receiverRun) effects(ctx context.Context, t *T, requestID string) int {
	if r.cfg.Effects == nil {
		return -1
	}
	sleep(ctx, t, r.cfg.EffectsSettle)
	n, err := r.cfg.Effects(ctx, requestID)
	if err != nil {
		t.Fatalf("counting effects: %v", err)
	}
	t.Notef("effects for request %s: %d", requestID, n)
	return n
}

// refused fails the check if x was acknowledged, and checks it had no
// effect when effects can be counted.
func (r *receiverRun) refused(ctx context.Context, t *T, what string, x *Exchange, requestID string) {
	if x.Err != nil {
		t.Failf("%s: %v", what, x.Err)
		return
	}
	if accepted(x) {
		t.Failf("%s was accepted with %d (it must be refused)", what, x.Status)
	}
	if requestID != "" && r.cfg.Effects != nil {
		if n := r.effects(ctx, t, requestID); n > 0 {
			t.Failf("%s had %d effects", what, n)
		}
	}
}

func (r *receiverRun) checkAcceptsValid(ctx context.Context, t *T) {
	id, requestID, body := r.event(r.cfg.InstanceID)
	x := r.send(ctx, t, "a valid signed notification", r.key, id, time.Now(), body)
	if !accepted(x) {
		t.Fatalf("a valid notification was not acknowledged: %s", x.Describe())
	}
	if r.cfg.Effects == nil {
		return
	}
	// An effect may take a while (a dispatcher, a process to start).
	limit := time.Now().Add(5 * r.cfg.EffectsSettle)
	for {
		n, err := r.cfg.Effects(ctx, requestID)
		if err != nil {
			t.Fatalf("counting effects: %v", err)
		}
		if n > 0 {
			t.Notef("effects for request %s: %d", requestID, n)
			return
		}
		if time.Now().After(limit) {
			t.Fatalf("the acknowledged notification had no effect within %s (no wake-up for request %s)", 5*r.cfg.EffectsSettle, requestID)
		}
		sleep(ctx, t, 100*time.Millisecond)
	}
}

func (r *receiverRun) checkDuplicate(ctx context.Context, t *T) {
	id, requestID, body := r.valid(ctx, t)
	x := r.send(ctx, t, "the same notification again (a provider retry: fresh timestamp and signature)", r.key, id, time.Now(), body)
	if !accepted(x) {
		t.Failf("a duplicate of an acknowledged notification must be acknowledged too: %s", x.Describe())
	}
	n := r.effects(ctx, t, requestID)
	switch {
	case n < 0:
		t.Notef("no effects source (--effects-url or --effects-command): whether the duplicate had a second effect was not checked")
	case n > 1:
		t.Failf("the duplicate had a second effect: %d effects for one notification", n)
	}
}

func (r *receiverRun) checkBadSignature(ctx context.Context, t *T) {
	other, _ := secretKey(newWebhookSecret())
	id, requestID, body := r.event(r.cfg.InstanceID)
	r.refused(ctx, t, "a notification signed with another secret", r.send(ctx, t, "signed with another secret", other, id, time.Now(), body), requestID)
	id, requestID, body = r.event(r.cfg.InstanceID)
	r.refused(ctx, t, "an unsigned notification", r.send(ctx, t, "no webhook-* headers", nil, id, time.Now(), body), requestID)
}

func (r *receiverRun) checkStale(ctx context.Context, t *T) {
	id, requestID, body := r.event(r.cfg.InstanceID)
	r.refused(ctx, t, "a notification timestamped 10 minutes ago", r.send(ctx, t, "webhook-timestamp 10 minutes ago", r.key, id, time.Now().Add(-10*time.Minute), body), requestID)
	id, requestID, body = r.event(r.cfg.InstanceID)
	r.refused(ctx, t, "a notification timestamped 10 minutes ahead", r.send(ctx, t, "webhook-timestamp 10 minutes ahead", r.key, id, time.Now().Add(10*time.Minute), body), requestID)
}

func (r *receiverRun) checkIDMismatch(ctx context.Context, t *T) {
	_, requestID, body := r.event(r.cfg.InstanceID)
	r.refused(ctx, t, "a notification whose webhook-id is not its body id", r.send(ctx, t, "webhook-id differs from the body id", r.key, newUUID(), time.Now(), body), requestID)
}

func (r *receiverRun) checkReplayedID(ctx context.Context, t *T) {
	id, _, _ := r.valid(ctx, t)
	_, other, body := r.event(r.cfg.InstanceID)
	var m map[string]string
	_ = json.Unmarshal(body, &m)
	m["id"] = id
	body, _ = json.Marshal(m)
	x := r.send(ctx, t, "an acknowledged webhook-id with another body (another request_id)", r.key, id, time.Now(), body)
	if x.Err != nil {
		t.Fatalf("%v", x.Err)
	}
	if !accepted(x) {
		return
	}
	switch n := r.effects(ctx, t, other); {
	case n < 0:
		t.Failf("a replayed webhook-id with another body was acknowledged (%d); without an effects source the kit cannot tell that it had no effect", x.Status)
	case n > 0:
		t.Failf("a replayed webhook-id with another body was acknowledged and had %d effects for request %s", n, other)
	default:
		t.Notef("acknowledged as a duplicate of the first message, without effect for request %s", other)
	}
}

func (r *receiverRun) checkOtherInstance(ctx context.Context, t *T) {
	id, requestID, body := r.event(newUUID())
	r.refused(ctx, t, "a notification for an instance this receiver does not expect", r.send(ctx, t, "instance_id of another instance, signed with the secret", r.key, id, time.Now(), body), requestID)
}

func (r *receiverRun) checkUnexpectedRegistration(ctx context.Context, t *T) {
	id, challenge := newUUID(), newUUID()
	body, _ := json.Marshal(map[string]string{"id": id, "type": "webhook.verification", "registration_id": newUUID(),
		"instance_id": newUUID(), "created_at": time.Now().UTC().Format(time.RFC3339), "challenge": challenge})
	x := r.send(ctx, t, "a verification for a registration nobody installed, signed with the secret", r.key, id, time.Now(), body)
	if x.Err != nil {
		t.Fatalf("%v", x.Err)
	}
	if accepted(x) || bytes.Contains(x.RespBody, []byte(challenge)) {
		t.Failf("the receiver accepted a verification for an unexpected registration (%d %s)", x.Status, strings.TrimSpace(string(x.RespBody)))
	}
}
