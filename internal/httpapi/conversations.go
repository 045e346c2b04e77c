package httpapi

import (
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/agentowl/agentowl"
	"github.com/agentowl/agentowl/internal/access"
	"github.com/agentowl/agentowl/internal/ingress"
)

// Conversations for operators: list (keyset pages), inspect, events, link
// and reset (docs/channels.md).

// encodeCursor renders a keyset position as an opaque after parameter.
func encodeCursor(c *agentowl.Cursor) string {
	if c == nil {
		return ""
	}
	return c.String()
}

// pageParams reads the limit and after parameters of a keyset page; an
// absent limit is 0 (the use-case's default).
func pageParams(r *http.Request) (limit int, after *agentowl.Cursor, err error) {
	if v := r.URL.Query().Get("limit"); v != "" {
		if limit, err = strconv.Atoi(v); err != nil || limit < 1 {
			return 0, nil, agentowl.FieldError(agentowl.ECodeInvalidField, "limit", "limit must be a positive whole number.")
		}
	}
	after, err = cursorParam(r)
	return limit, after, err
}

type wireConversation struct {
	ID               string  `json:"id"`
	BindingID        string  `json:"binding_id"`
	Channel          string  `json:"channel"`
	Key              string  `json:"key,omitempty"`
	Status           string  `json:"status"`
	RuntimeSessionID string  `json:"runtime_session_id,omitempty"`
	CreatedAt        string  `json:"created_at"`
	LastEventAt      string  `json:"last_event_at"`
	EndedAt          *string `json:"ended_at,omitempty"`
	// Inspection and reset only.
	Events   *int `json:"events,omitempty"`
	OpenWork *int `json:"open_work,omitempty"`
}

func toWireConversation(c *agentowl.Conversation) wireConversation {
	return wireConversation{ID: c.ID, BindingID: c.BindingID, Channel: c.Channel, Key: c.Key, Status: c.Status,
		RuntimeSessionID: c.RuntimeSessionID, CreatedAt: timestamp(c.CreatedAt), LastEventAt: timestamp(c.LastEventAt),
		EndedAt: timestampPtr(c.EndedAt)}
}

func toWireConversationDetail(d *ingress.ConversationDetail) wireConversation {
	w := toWireConversation(d.Conversation)
	w.Events, w.OpenWork = &d.Events, &d.OpenWork
	return w
}

type wireEventWork struct {
	ID         string `json:"id"`
	Generation int    `json:"generation"`
	Status     string `json:"status"`
}

type wireConversationEvent struct {
	ID             string              `json:"id"`
	BindingID      string              `json:"binding_id"`
	ConversationID string              `json:"conversation_id"`
	Channel        string              `json:"channel"`
	Sender         string              `json:"sender"`
	ReceivedAt     string              `json:"received_at"`
	FollowUp       bool                `json:"follow_up"`
	Handoff        string              `json:"handoff"`
	Work           []wireEventWork     `json:"work"`
	Headers        map[string][]string `json:"headers"`
	Payload        json.RawMessage     `json:"payload"`
	Attachments    json.RawMessage     `json:"attachments"`
}

func toWireConversationEvent(v *ingress.EventView) wireConversationEvent {
	ws := make([]wireEventWork, 0, len(v.Work))
	for _, w := range v.Work {
		ws = append(ws, wireEventWork{ID: w.ID, Generation: w.Generation, Status: string(w.Status)})
	}
	headers, attachments := v.Headers, v.Attachments
	if headers == nil {
		headers = map[string][]string{}
	}
	if len(attachments) == 0 {
		attachments = json.RawMessage(`[]`)
	}
	return wireConversationEvent{ID: v.ID, BindingID: v.BindingID, ConversationID: v.ConversationID, Channel: v.Channel,
		Sender: v.Sender, ReceivedAt: timestamp(v.ReceivedAt), FollowUp: v.FollowUp, Handoff: v.Handoff, Work: ws,
		Headers: headers, Payload: v.Payload, Attachments: attachments}
}

func (s *Server) listConversations(r *http.Request, p *access.Principal) (int, any, error) {
	q := r.URL.Query()
	limit, after, err := pageParams(r)
	if err != nil {
		return 0, nil, err
	}
	pg, err := s.ingress.ListConversations(r.Context(), p, r.PathValue("tenant"), ingress.ConversationFilter{
		Channel: q.Get("channel"), BindingID: q.Get("binding"), Status: q.Get("status"), After: after, Limit: limit})
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, page[wireConversation]{Items: listOf(pg.Items, toWireConversation).Items, Next: encodeCursor(pg.Next)}, nil
}

func (s *Server) inspectConversation(r *http.Request, p *access.Principal) (int, any, error) {
	d, err := s.ingress.InspectConversation(r.Context(), p, r.PathValue("tenant"), r.PathValue("id"))
	return reply(http.StatusOK, d, err, toWireConversationDetail)
}

func (s *Server) conversationEvents(r *http.Request, p *access.Principal) (int, any, error) {
	limit, after, err := pageParams(r)
	if err != nil {
		return 0, nil, err
	}
	pg, err := s.ingress.ConversationEvents(r.Context(), p, r.PathValue("tenant"), r.PathValue("id"), after, limit)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, page[wireConversationEvent]{Items: listOf(pg.Items, toWireConversationEvent).Items,
		Next: encodeCursor(pg.Next)}, nil
}

type wireLinked struct {
	EventID string           `json:"event_id"`
	From    wireConversation `json:"from"`
	To      wireConversation `json:"to"`
}

func (s *Server) linkConversationEvent(r *http.Request, p *access.Principal) (int, any, error) {
	fields, err := readObject(r, "event_id")
	if err != nil {
		return 0, nil, err
	}
	var eventID string
	if err := requiredField(fields, "event_id", &eventID); err != nil {
		return 0, nil, err
	}
	l, err := s.ingress.LinkEvent(r.Context(), p, r.PathValue("tenant"), eventID, r.PathValue("id"))
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, wireLinked{EventID: l.Event.ID, From: toWireConversation(l.From), To: toWireConversation(l.To)}, nil
}

func (s *Server) resetConversation(r *http.Request, p *access.Principal) (int, any, error) {
	var force bool
	if r.ContentLength != 0 { // the body is optional: no body is force false
		fields, err := readObject(r, "force")
		if err != nil {
			return 0, nil, err
		}
		if _, err := field(fields, "force", &force); err != nil {
			return 0, nil, err
		}
	}
	d, err := s.ingress.ResetConversation(r.Context(), p, r.PathValue("tenant"), r.PathValue("id"), force)
	return reply(http.StatusOK, d, err, toWireConversationDetail)
}
