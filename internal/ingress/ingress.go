// Package ingress turns what channels receive into events: bindings (a
// receiving address of a channel, routed to one endpoint), the accept path
// every channel shares, conversations and routing. Each accepted event is
// stored durably, with its handoff (internal/work), before the channel is
// answered. It holds business rules only: no SQL, no HTTP or SMTP serving;
// the channels' wire formats live in its sub-packages and in
// internal/httpapi.
package ingress

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"time"

	"github.com/agentowl/agentowl"
	"github.com/agentowl/agentowl/internal/ratelimit"
	"github.com/agentowl/agentowl/internal/work"
	"github.com/agentowl/agentowl/webhook"
)

// Config bounds what the channels accept. Every field has a default.
type Config struct {
	// MaxEventBytes caps an inbound webhook event body; larger ones are
	// 413. Defaults to 256 KiB.
	MaxEventBytes int64
	// Limit bounds accepted events per binding, across processes. Defaults
	// to 6,000 per minute.
	Limit ratelimit.Limit
	// SignatureTolerance is how far a signed event's webhook-timestamp may
	// be from now. Defaults to 5m.
	SignatureTolerance time.Duration
	// SMTPDomain is the mail domain of generated smtp binding addresses
	// (the MX of the SMTP listener). Defaults to none: an smtp binding then
	// needs an explicit address.
	SMTPDomain string
	// Mail bounds the email channels' messages.
	Mail MailLimits
}

// Validate reports a setting out of its bounds.
func (c Config) Validate() error {
	if c.SMTPDomain != "" && !hostName(c.SMTPDomain) {
		return fmt.Errorf("ingress: SMTP domain %q is not a host name", c.SMTPDomain)
	}
	if c.Mail.MaxMessageBytes > MaxMailBytes {
		return fmt.Errorf("ingress: email message limit %d is over %d bytes", c.Mail.MaxMessageBytes, MaxMailBytes)
	}
	if c.Mail.MaxParts > MaxMailParts {
		return fmt.Errorf("ingress: email part limit %d is over the ceiling of %d parts", c.Mail.MaxParts, MaxMailParts)
	}
	if c.Mail.MaxPartBytes > MaxMailPartBytes {
		return fmt.Errorf("ingress: email part size limit %d is over the ceiling of %d bytes", c.Mail.MaxPartBytes, MaxMailPartBytes)
	}
	return nil
}

func (c Config) withDefaults() Config {
	if c.MaxEventBytes <= 0 {
		c.MaxEventBytes = 256 << 10
	}
	if c.Limit.Per <= 0 {
		c.Limit = ratelimit.Limit{Events: 6000, Per: time.Minute}
	}
	if c.SignatureTolerance <= 0 {
		c.SignatureTolerance = webhook.DefaultTolerance
	}
	c.Mail = c.Mail.withDefaults()
	return c
}

// Input limits (docs/limits.md).
const (
	maxKeyBytes      = 256
	maxNameBytes     = 256
	maxHeaderEntries = 64
	maxHeaderBytes   = 16 << 10
)

// Channels. Every channel but smtp receives at an unguessable URL,
// /in/<channel>/<token>; smtp at its binding's email address.
const (
	// ChannelWebhook is the generic HTTP webhook channel.
	ChannelWebhook = "webhook"
	// ChannelSMTP is email received by the SMTP listener.
	ChannelSMTP = "smtp"
	// ChannelCloudflareEmail is email a Cloudflare Email Worker forwards.
	ChannelCloudflareEmail = "cloudflare-email"
	// ChannelSMS is Twilio-compatible SMS/MMS webhooks.
	ChannelSMS = "sms"
	// ChannelVoice is Twilio-compatible voice call webhooks.
	ChannelVoice = "voice"
)

// Channels lists every channel a binding may have.
var Channels = []string{ChannelWebhook, ChannelSMTP, ChannelCloudflareEmail, ChannelSMS, ChannelVoice}

// Service implements bindings and the accept path of every channel.
type Service struct {
	store   agentowl.Store
	clock   agentowl.Clock
	work    *work.Service
	cfg     Config
	limiter *ratelimit.Limiter
	// partSinks receives email parts' bytes (SetPartSinks); nil: none.
	partSinks PartSinks
}

// New returns a Service that hands events over through w.
func New(st agentowl.Store, clock agentowl.Clock, w *work.Service, cfg Config) *Service {
	cfg = cfg.withDefaults()
	return &Service{store: st, clock: clock, work: w, cfg: cfg,
		limiter: ratelimit.New("ingress-binding", cfg.Limit, st, clock)}
}

// MaxEventBytes is the largest webhook event body accepted.
func (s *Service) MaxEventBytes() int64 { return s.cfg.MaxEventBytes }

// Clock is the service's clock, for channel adapters that stamp what they
// receive.
func (s *Service) Clock() agentowl.Clock { return s.clock }

func hashToken(token string) []byte { return agentowl.HashToken(token) }

// random returns n random bytes.
func random(n int) []byte {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand does not fail on supported platforms
	}
	return b
}

// newToken returns an unguessable binding token: 32 random bytes.
func newToken() string {
	return "in_" + base64.RawURLEncoding.EncodeToString(random(32))
}

// IngressURL is where a binding of channel with token receives events.
func (s *Service) IngressURL(channel, token string) string {
	return s.work.Config().PublicURL + "/in/" + channel + "/" + token
}

// ProviderSecret is a binding's provider secret (the Worker's shared
// secret, the Twilio auth token), for the channel adapter that checks a
// request's authentication; an error for a binding without one.
func (s *Service) ProviderSecret(b *agentowl.Binding) ([]byte, error) {
	if b.ProviderSecret == nil {
		return nil, fmt.Errorf("ingress: binding %s has no provider secret", b.ID)
	}
	return b.ProviderSecret, nil
}
