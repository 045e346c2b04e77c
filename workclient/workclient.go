// Package workclient is the Go SDK for agent runtimes that take work from
// AgentOwl (protocol agent-work.v1, docs/agent-work.md).
//
// A runtime receives handoffs at its endpoint URL: Verifier checks their
// Standard Webhooks signature with the endpoint's whsec_ signing secret
// and parses the event and its work block. It reports progress and outcome
// to the work's callback_url with Client (or a Reporter, which numbers the
// reports), authenticated with a runtime credential (owl_rt_…).
//
// Client retries correctly: every retry resends the same callback ID,
// sequence, timestamp and body bytes, so AgentOwl recognises it as a
// duplicate; it backs off on 429 (honouring Retry-After), on retryable 5xx
// and on network errors, and never retries other 4xx, which need a fix.
//
// The protocol's documents, canonical JSON and action digests are those of
// the public agentwork package (re-exported here under the same names).
// The package depends on the standard library and the public agentwork
// and webhook packages only.
package workclient

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/agentowl/agentowl/agentwork"
	"github.com/agentowl/agentowl/webhook"
)

// Version is the protocol version of work blocks and callbacks.
const Version = agentwork.Version

// The protocol documents are those of package agentwork; these names keep
// the SDK self-contained for runtimes.
type (
	// Handoff is one delivery to an endpoint: an event and, for agent-work
	// endpoints, its work block. ID equals the webhook-id header and is the
	// same on every retry of the delivery.
	Handoff = agentwork.Handoff
	// Event is an inbound event as endpoints receive it.
	Event = agentwork.Event
	// Work is the work block: the identity to report against.
	Work = agentwork.Work
)

// Errors of Verifier.
var (
	ErrNoSecret    = errors.New("workclient: no signing secret configured")
	ErrBodyTooBig  = errors.New("workclient: handoff body exceeds the limit")
	ErrNotHandoff  = errors.New("workclient: the body is not an agent-work handoff")
	ErrBadVersion  = errors.New("workclient: unsupported work block version")
	ErrIDMismatch  = errors.New("workclient: webhook-id does not match the body id")
	errNoSignature = webhook.ErrNoValidSignature
)

// Verifier checks and parses handoffs.
type Verifier struct {
	// Secrets are the endpoint's whsec_ signing secrets. During a rotation
	// list the new and the old one: a handoff signed with either passes.
	Secrets []string
	// Tolerance bounds the webhook-timestamp skew. Defaults to 5 minutes.
	Tolerance time.Duration
	// Now is the clock. Defaults to time.Now.
	Now func() time.Time
	// MaxBodyBytes bounds what VerifyRequest reads. Defaults to 1 MiB.
	MaxBodyBytes int64
}

// Verify checks a handoff's signature over the exact body bytes and
// parses it. It fails unless one secret verifies the signature within the
// tolerance, the body id matches webhook-id and any work block is
// agent-work.v1.
func (v *Verifier) Verify(h http.Header, body []byte) (*Handoff, error) {
	if len(v.Secrets) == 0 {
		return nil, ErrNoSecret
	}
	now, tolerance := time.Now(), v.Tolerance
	if v.Now != nil {
		now = v.Now()
	}
	if tolerance <= 0 {
		tolerance = webhook.DefaultTolerance
	}
	var id string
	err := errNoSignature
	for _, s := range v.Secrets {
		key, kerr := webhook.ParseSecret(s)
		if kerr != nil {
			return nil, kerr
		}
		if id, err = key.Verify(h, body, now, tolerance); err == nil {
			break
		}
	}
	if err != nil {
		return nil, err
	}
	var ho Handoff
	if err := json.Unmarshal(body, &ho); err != nil || ho.ID == "" || ho.Event.ID == "" {
		return nil, ErrNotHandoff
	}
	if ho.ID != id {
		return nil, ErrIDMismatch
	}
	if ho.Work != nil && ho.Work.Version != Version {
		return nil, fmt.Errorf("%w: %q", ErrBadVersion, ho.Work.Version)
	}
	return &ho, nil
}

// VerifyRequest reads r's body (bounded) and verifies it. Answer 2xx only
// after the handoff is stored durably; AgentOwl retries anything else with
// the same handoff.
func (v *Verifier) VerifyRequest(r *http.Request) (*Handoff, error) {
	limit := v.MaxBodyBytes
	if limit <= 0 {
		limit = 1 << 20
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(body)) > limit {
		return nil, ErrBodyTooBig
	}
	return v.Verify(r.Header, body)
}
