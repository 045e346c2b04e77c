// Package twilio is the wire format of Twilio-compatible SMS and voice
// webhooks: the X-Twilio-Signature check and the form fields of incoming
// messages and call events. It knows nothing of bindings, events or
// conversations (internal/ingress decides what a request becomes) and
// stands on the standard library only.
package twilio

import (
	"crypto/hmac"
	"crypto/sha1"
	"encoding/base64"
	"net/url"
	"slices"
	"strings"
)

// HeaderSignature carries the provider's signature of a webhook request.
const HeaderSignature = "X-Twilio-Signature"

// ContentType is the content type of the webhook requests (and the only one
// the SMS and voice routes take).
const ContentType = "application/x-www-form-urlencoded"

// EmptyResponse is the TwiML answer that asks nothing more of the provider:
// no reply message, no call instructions. It is served as TwiMLContentType.
const EmptyResponse = `<?xml version="1.0" encoding="UTF-8"?><Response/>`

// TwiMLContentType is the content type of a TwiML answer.
const TwiMLContentType = "text/xml; charset=utf-8"

// Signature computes the X-Twilio-Signature of a form-encoded POST: the
// base64 HMAC-SHA1, keyed with the account's auth token, of the URL the
// provider requested (exactly as configured, query string included)
// followed by every POST parameter's name and value with no separators,
// in order of name (and, for a name given several times, of value).
func Signature(authToken []byte, fullURL string, form url.Values) string {
	mac := hmac.New(sha1.New, authToken)
	mac.Write([]byte(fullURL))
	names := make([]string, 0, len(form))
	for name := range form {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		values := slices.Clone(form[name])
		slices.Sort(values)
		for _, v := range values {
			mac.Write([]byte(name))
			mac.Write([]byte(v))
		}
	}
	return base64.StdEncoding.EncodeToString(mac.Sum(nil))
}

// Verify reports whether signature is the valid X-Twilio-Signature of a
// POST of form to fullURL under authToken. The comparison takes the same
// time wherever the two differ; an empty signature never verifies.
func Verify(authToken []byte, fullURL string, form url.Values, signature string) bool {
	signature = strings.TrimSpace(signature)
	if signature == "" {
		return false
	}
	want := Signature(authToken, fullURL, form)
	return hmac.Equal([]byte(want), []byte(signature))
}
