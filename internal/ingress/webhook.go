package ingress

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/agentowl/agentowl"
	"github.com/agentowl/agentowl/webhook"
)

// Header and field names of the webhook channel (docs/agent-work.md).
const (
	// HeaderConversationKey makes an event a follow-up of the open
	// conversation of its binding with that key.
	HeaderConversationKey = "AgentOwl-Conversation-Key"
	// FieldConversationKey is the body field read when the header is absent.
	FieldConversationKey = "conversation_key"
	// HeaderSender names who sent the event.
	HeaderSender = "AgentOwl-Sender"
	// HeaderIdempotencyKey deduplicates an unsigned sender's retries.
	HeaderIdempotencyKey = "Idempotency-Key"
)

// headersDropped are credentials and hop-by-hop headers: an event neither
// records nor forwards them.
var headersDropped = map[string]bool{
	"Authorization": true, "Proxy-Authorization": true, "Cookie": true, "Webhook-Signature": true,
	"Connection": true, "Keep-Alive": true, "Te": true, "Trailer": true, "Transfer-Encoding": true, "Upgrade": true,
}

// KeptHeaders returns what an event records of HTTP headers h: without
// credentials, hop-by-hop headers and those named in drop (canonical
// form), within the header limits.
func KeptHeaders(h http.Header, drop ...string) map[string][]string {
	out := map[string][]string{}
	size := 0
	for k, vs := range h {
		ck := http.CanonicalHeaderKey(k)
		if headersDropped[ck] || len(out) >= maxHeaderEntries || slices.Contains(drop, ck) {
			continue
		}
		for _, v := range vs {
			size += len(ck) + len(v)
			if size > maxHeaderBytes {
				return out
			}
			out[ck] = append(out[ck], v)
		}
	}
	return out
}

func textValue(param, v string, max int) error {
	if len(v) > max || !utf8.ValidString(v) || strings.ContainsFunc(v, func(r rune) bool { return r < ' ' || r == 0x7f }) {
		return agentowl.FieldError(agentowl.ECodeInvalidField, param, "%s must be at most %d bytes of text.", param, max)
	}
	return nil
}

// AcceptWebhook stores one event received at webhook binding b (from
// Admit) and hands it to the binding's endpoint, both committed before it
// returns (Accept). The body must be one JSON object. A binding with a
// signing secret refuses events without a valid Standard Webhooks
// signature (invalid_signature).
func (s *Service) AcceptWebhook(ctx context.Context, b *agentowl.Binding, h http.Header, body []byte) (*Accepted, error) {
	dedupe := h.Get(HeaderIdempotencyKey)
	if b.SigningSecret != nil {
		key, err := webhook.ParseSecret(string(b.SigningSecret))
		if err != nil {
			return nil, err
		}
		id, err := key.Verify(h, body, s.clock.Now(), s.cfg.SignatureTolerance)
		if err != nil {
			return nil, agentowl.Errorf(agentowl.ECodeInvalidSignature, "The event's Standard Webhooks signature is missing or invalid: %s.",
				strings.TrimPrefix(err.Error(), "webhook: "))
		}
		dedupe = id // senders retry with the same webhook-id
	}
	var fields map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&fields); err != nil || fields == nil || len(bytes.TrimSpace(body[dec.InputOffset():])) != 0 {
		return nil, agentowl.Errorf(agentowl.ECodeInvalidJSON, "The event body must be one JSON object.")
	}
	key := h.Get(HeaderConversationKey)
	if key == "" {
		if raw, ok := fields[FieldConversationKey]; ok {
			if err := json.Unmarshal(raw, &key); err != nil {
				return nil, agentowl.FieldError(agentowl.ECodeInvalidField, FieldConversationKey, "conversation_key must be a string.")
			}
		}
	}
	sender := h.Get(HeaderSender)
	for _, c := range []struct {
		param, v string
	}{{HeaderConversationKey, key}, {HeaderSender, sender}, {HeaderIdempotencyKey, dedupe}} {
		if err := textValue(c.param, c.v, maxKeyBytes); err != nil {
			return nil, err
		}
	}
	return s.Accept(ctx, b, Inbound{Sender: sender, Headers: KeptHeaders(h), Payload: json.RawMessage(body),
		DedupeKey: dedupe, Thread: KeyThread(key)})
}
