// Package cloudflare is the cloudflare-email channel: a Cloudflare Email
// Worker (docs/cloudflare-email-worker.js) forwards each message it
// receives, raw MIME streamed, to its binding's ingress URL with the
// binding's secret as bearer and the envelope in headers. The message goes
// through the same parser, limits and accept path as SMTP mail.
package cloudflare

import (
	"context"
	"crypto/subtle"
	"io"
	"mime"
	"net/http"
	"strings"

	"github.com/agentowl/agentowl"
	"github.com/agentowl/agentowl/internal/ingress"
)

// Headers the Worker sends (docs/channels.md).
const (
	// HeaderEnvelopeFrom is the message's envelope sender (message.from).
	HeaderEnvelopeFrom = "AgentOwl-Envelope-From"
	// HeaderEnvelopeTo is its envelope recipient (message.to).
	HeaderEnvelopeTo = "AgentOwl-Envelope-To"
	// ContentType is the media type of the forwarded message.
	ContentType = "message/rfc822"
)

// maxEnvelopeBytes caps each envelope header.
const maxEnvelopeBytes = 512

// Authenticate checks the request's bearer secret against binding b's, in
// constant time, before anything of the message is read; a missing or
// wrong secret is unauthenticated.
func Authenticate(in *ingress.Service, b *agentowl.Binding, h http.Header) error {
	want, err := in.ProviderSecret(b)
	if err != nil {
		return err
	}
	got, ok := strings.CutPrefix(h.Get("Authorization"), "Bearer ")
	if !ok || subtle.ConstantTimeCompare([]byte(got), want) != 1 {
		return agentowl.Errorf(agentowl.ECodeUnauthenticated, "The Worker's bearer secret is missing or wrong.")
	}
	return nil
}

// Receive authenticates one forwarded message at binding b (from Admit),
// streams body through the email parser and stores it as an event
// (ingress.AcceptMail). Content-Length, when sent, is checked against the
// message limit before the body is read.
func Receive(ctx context.Context, in *ingress.Service, b *agentowl.Binding, h http.Header, contentLength int64, body io.Reader) (*ingress.Accepted, error) {
	if err := Authenticate(in, b, h); err != nil {
		return nil, err
	}
	if mt, _, err := mime.ParseMediaType(h.Get("Content-Type")); err != nil || mt != ContentType {
		return nil, agentowl.Errorf(agentowl.ECodeInvalidContentType, "The request body must be %s.", ContentType)
	}
	if limit := in.MailLimits().MaxMessageBytes; contentLength > limit {
		return nil, agentowl.Errorf(agentowl.ECodeTooLarge, "The message is larger than %d bytes.", limit)
	}
	env := ingress.Envelope{From: h.Get(HeaderEnvelopeFrom)}
	to := h.Get(HeaderEnvelopeTo)
	for param, v := range map[string]string{HeaderEnvelopeFrom: env.From, HeaderEnvelopeTo: to} {
		if len(v) > maxEnvelopeBytes || strings.ContainsFunc(v, func(r rune) bool { return r < ' ' || r > '~' }) {
			return nil, agentowl.FieldError(agentowl.ECodeInvalidField, param, "%s must be at most %d bytes of ASCII text.",
				param, maxEnvelopeBytes)
		}
	}
	if to != "" {
		env.To = []string{to}
	}
	m, err := in.ParseMail(ctx, body, b)
	if err != nil {
		return nil, err
	}
	defer m.Release(ctx)
	return in.AcceptMail(ctx, b, env, m)
}
