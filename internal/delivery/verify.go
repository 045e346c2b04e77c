package delivery

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/agentowl/agentowl"
	"github.com/agentowl/agentowl/internal/ratelimit"
	"github.com/agentowl/agentowl/webhook"
)

// VerificationTimeout is how long a receiver has to answer a verification:
// ten seconds, as AAP requires.
const VerificationTimeout = 10 * time.Second

// Verifier sends the one signed webhook.verification message that must
// succeed before a receiver is configured.
type Verifier struct {
	client  Doer
	clock   agentowl.Clock
	classes func(error) string
	limit   *ratelimit.Limiter
	dests   *destinations
}

// DefaultRegisterLimit bounds verifications per destination (host:port and
// each resolved address) across tenants: 30 per minute.
var DefaultRegisterLimit = ratelimit.Limit{Events: 30, Per: time.Minute}

// LimitDestinations makes Verify count every verification against its
// destination's host:port and each address it resolves to (with r, or the
// system resolver when nil), refusing with rate_limited past l.
func (v *Verifier) LimitDestinations(l *ratelimit.Limiter, r AddrResolver) *Verifier {
	if r == nil {
		r = net.DefaultResolver
	}
	v.limit, v.dests = l, &destinations{resolver: r, cache: map[string]cachedAddrs{}}
	return v
}

// NewVerifier returns a Verifier. describe turns a transport error into a
// reason for the caller (for example "address 10.0.0.1 is private"); nil
// uses the error text.
func NewVerifier(client Doer, clock agentowl.Clock, describe func(error) string) *Verifier {
	return &Verifier{client: client, clock: clock, classes: describe}
}

type verification struct {
	ID             string `json:"id"`
	Type           string `json:"type"`
	RegistrationID string `json:"registration_id"`
	InstanceID     string `json:"instance_id"`
	CreatedAt      string `json:"created_at"`
	Challenge      string `json:"challenge"`
}

// Verify sends one verification to d.URL, signed with d's secret, and
// succeeds only on 200 with a JSON body whose challenge is exactly the sent
// one, within VerificationTimeout. Every failure is
// webhook_verification_failed with a message saying what went wrong.
func (v *Verifier) Verify(ctx context.Context, d *agentowl.Receiver, instanceID string) error {
	fail := func(format string, args ...any) error {
		return &agentowl.Error{Code: agentowl.ECodeWebhookVerificationFailed, Param: "delivery",
			Message: "The webhook receiver could not be verified: " + fmt.Sprintf(format, args...)}
	}
	key, err := webhook.ParseSecret(d.SigningSecret)
	if err != nil {
		return fail("the signing secret is invalid.")
	}
	now := v.clock.Now().UTC()
	if v.limit != nil {
		for _, k := range v.dests.keys(ctx, d.URL, now) {
			if ok, wait := v.limit.Allow(ctx, k); !ok {
				return ratelimit.Error("receiver registrations for this destination", wait)
			}
		}
	}
	msg := verification{
		ID: agentowl.NewID(""), Type: "webhook.verification", RegistrationID: d.RegistrationID, InstanceID: instanceID,
		CreatedAt: now.Truncate(time.Second).Format(time.RFC3339), Challenge: agentowl.NewID(""),
	}
	body, err := json.Marshal(msg)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, VerificationTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, d.URL, bytes.NewReader(body))
	if err != nil {
		return fail("the URL is invalid.")
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "AgentOwl-Webhooks/1")
	key.SetHeaders(req.Header, msg.ID, now, body)
	resp, err := v.client.Do(req)
	if err != nil {
		switch {
		case ctx.Err() != nil:
			return fail("no answer within %s.", VerificationTimeout)
		case isTLSError(err):
			return fail("TLS failed (%s).", v.describe(err))
		}
		return fail("%s.", v.describe(err))
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	switch {
	case resp.StatusCode >= 300 && resp.StatusCode < 400:
		return fail("the receiver answered with a redirect (%d), which is not followed.", resp.StatusCode)
	case resp.StatusCode != http.StatusOK:
		return fail("the receiver answered %d; only 200 with the challenge verifies.", resp.StatusCode)
	case err != nil:
		return fail("the response body could not be read in time.")
	}
	var answer struct {
		Challenge *string `json:"challenge"`
	}
	if json.Unmarshal(data, &answer) != nil || answer.Challenge == nil {
		return fail("the 200 response did not carry the challenge.")
	}
	if *answer.Challenge != msg.Challenge {
		return fail("the receiver answered with a different challenge.")
	}
	return nil
}

func (v *Verifier) describe(err error) string {
	if v.classes != nil {
		return v.classes(err)
	}
	return err.Error()
}

func isTLSError(err error) bool {
	var unknown x509.UnknownAuthorityError
	var hostname x509.HostnameError
	var invalid x509.CertificateInvalidError
	var verify *tls.CertificateVerificationError
	var record tls.RecordHeaderError
	return errors.As(err, &unknown) || errors.As(err, &hostname) || errors.As(err, &invalid) ||
		errors.As(err, &verify) || errors.As(err, &record)
}
