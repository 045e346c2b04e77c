package httpapi

import (
	"errors"
	"io"
	"net/http"
	"os"

	"github.com/agentowl/agentowl"
	"github.com/agentowl/agentowl/internal/ingress"
	"github.com/agentowl/agentowl/internal/ingress/cloudflare"
)

// wireAccepted answers an inbound event.
type wireAccepted struct {
	EventID        string `json:"event_id"`
	ConversationID string `json:"conversation_id"`
	FollowUp       bool   `json:"follow_up"`
	Duplicate      bool   `json:"duplicate"`
}

// replyAccepted answers an inbound event once a channel has taken it: 202
// for a new event, 200 for a duplicate, the same body either way.
func replyAccepted(acc *ingress.Accepted, err error) (int, any, error) {
	if err != nil {
		return 0, nil, err
	}
	status := http.StatusAccepted
	if acc.Duplicate {
		status = http.StatusOK
	}
	return status, wireAccepted{EventID: acc.EventID, ConversationID: acc.ConversationID, FollowUp: acc.FollowUp,
		Duplicate: acc.Duplicate}, nil
}

// receiveWebhook is the generic webhook channel: POST /in/webhook/{token}.
// The address is checked by its route, before the body is read. The event and its
// handoff are committed before the answer: 202 for a new event, 200 for a
// retry the sender's idempotency key identified.
func (s *Server) receiveWebhook(r *http.Request, b *agentowl.Binding) (int, any, error) {
	data, err := readBody(r, s.ingress.MaxEventBytes())
	if err != nil {
		return 0, nil, err
	}
	acc, err := s.ingress.AcceptWebhook(r.Context(), b, r.Header, data)
	return replyAccepted(acc, err)
}

// receiveCloudflareEmail is the cloudflare-email channel: POST
// /in/cloudflare-email/{token} with the raw message a Worker forwards. The
// body is streamed through the email parser, never read whole first.
func (s *Server) receiveCloudflareEmail(r *http.Request, b *agentowl.Binding) (int, any, error) {
	acc, err := cloudflare.Receive(r.Context(), s.ingress, b, r.Header, r.ContentLength, requestBody{r.Body})
	if errors.Is(err, os.ErrDeadlineExceeded) {
		panic(http.ErrAbortHandler) // the body did not arrive within ReadTimeout, as readBody does
	}
	return replyAccepted(acc, err)
}

// requestBody is a request body streamed to a parser: a failure to read it
// (the client went away, a malformed chunk) is the client's, invalid_request;
// a read past the deadline stays as it is.
type requestBody struct{ r io.Reader }

func (b requestBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if err != nil && err != io.EOF && !errors.Is(err, os.ErrDeadlineExceeded) {
		err = agentowl.Errorf(agentowl.ECodeInvalidRequest, "The request body could not be read.")
	}
	return n, err
}
