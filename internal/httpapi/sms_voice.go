package httpapi

import (
	"net/http"
	"net/url"

	"github.com/agentowl/agentowl"
	"github.com/agentowl/agentowl/internal/ingress"
	"github.com/agentowl/agentowl/internal/ingress/twilio"
)

// receiveProvider is the sms and voice channels: POST /in/sms/{token} and
// /in/voice/{token}, Twilio-compatible form-encoded webhooks. The address
// is checked by its route, the signature by the use-case before anything
// else is read from the form. The event (and its handoff, when it becomes
// work) is committed before the answer: 200 with an empty TwiML response,
// for a new event, a provider's retry or a request that records nothing.
func (s *Server) receiveProvider(r *http.Request, b *agentowl.Binding) (int, any, error) {
	data, err := readBodyOf(r, twilio.ContentType, s.ingress.MaxEventBytes())
	if err != nil {
		return 0, nil, err
	}
	form, err := url.ParseQuery(string(data))
	if err != nil {
		return 0, nil, agentowl.Errorf(agentowl.ECodeInvalidRequest, "The request body is not a valid form encoding.")
	}
	if _, err := s.ingress.AcceptProvider(r.Context(), b, ingress.ProviderRequest{RequestURI: r.URL.RequestURI(),
		Header: r.Header, Form: form}); err != nil {
		return 0, nil, err
	}
	return http.StatusOK, rawBody{contentType: twilio.TwiMLContentType, data: []byte(twilio.EmptyResponse)}, nil
}
