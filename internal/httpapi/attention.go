package httpapi

import (
	"encoding/json"
	"net/http"
	"net/url"

	"github.com/agentowl/agentowl"
	"github.com/agentowl/agentowl/internal/access"
	"github.com/agentowl/agentowl/internal/inbox"
	"github.com/agentowl/agentowl/internal/maintenance"
	"github.com/agentowl/agentowl/internal/work"
)

// maxDecisionBytes bounds a decision file (docs/limits.md).
const maxDecisionBytes = 64 << 10

type wireAction struct {
	Description string `json:"description"`
	Digest      string `json:"digest"`
}

type wireAttentionRequest struct {
	ID               string      `json:"id"`
	Revision         int64       `json:"revision"`
	Prompt           string      `json:"prompt"`
	AllowedDecisions []string    `json:"allowed_decisions"`
	Action           *wireAction `json:"action,omitempty"`
	ExpiresAt        string      `json:"expires_at"`
	Expired          bool        `json:"expired"`
}

type wireReceiptState struct {
	Status     string  `json:"status"` // pending or received
	ReceivedAt *string `json:"received_at,omitempty"`
	Via        string  `json:"via,omitempty"`
}

type wireWorkDecisionRecord struct {
	DecisionID           string           `json:"decision_id"`
	WorkID               string           `json:"work_id"`
	RequestID            string           `json:"request_id"`
	RequestRevision      int64            `json:"request_revision"`
	Decision             string           `json:"decision"`
	Answer               string           `json:"answer,omitempty"`
	ExpectedActionDigest string           `json:"expected_action_digest,omitempty"`
	DecidedAt            string           `json:"decided_at"`
	DecidedBy            string           `json:"decided_by,omitempty"`
	Receipt              wireReceiptState `json:"receipt"`
	Body                 json.RawMessage  `json:"body"`
}

func toWireDecision(d *agentowl.WorkDecision, withActor bool) wireWorkDecisionRecord {
	out := wireWorkDecisionRecord{DecisionID: d.ID, WorkID: d.WorkID, RequestID: d.RequestID, RequestRevision: d.Revision,
		Decision: d.Decision, Answer: d.Answer, ExpectedActionDigest: d.ExpectedActionDigest,
		DecidedAt: timestamp(d.DecidedAt), Receipt: wireReceiptState{Status: "pending"}, Body: d.Body}
	if withActor {
		out.DecidedBy = d.DecidedBy
	}
	if d.ReceiptAt != nil {
		out.Receipt = wireReceiptState{Status: "received", ReceivedAt: timestampPtr(d.ReceiptAt), Via: d.ReceiptVia}
	}
	return out
}

type wireAttention struct {
	ID             string                `json:"id"`
	Kind           string                `json:"kind"`
	Status         string                `json:"status"`
	Resolution     string                `json:"resolution,omitempty"`
	WorkID         string                `json:"work_id,omitempty"`
	EndpointID     string                `json:"endpoint_id,omitempty"`
	Request        *wireAttentionRequest `json:"request,omitempty"`
	Summary        string                `json:"summary,omitempty"`
	MessageID      string                `json:"message_id,omitempty"`
	Cause          string                `json:"cause,omitempty"`
	Rule           string                `json:"rule,omitempty"`
	Assignee       string                `json:"assignee,omitempty"`
	AcknowledgedAt *string               `json:"acknowledged_at,omitempty"`
	ResolvedAt     *string               `json:"resolved_at,omitempty"`
	CreatedAt      string                `json:"created_at"`
	UpdatedAt      string                `json:"updated_at"`
	// The three separate statuses: the work's runtime outcome, the
	// decision push delivery and the decision receipt.
	WorkStatus string                  `json:"work_status,omitempty"`
	Decision   *wireWorkDecisionRecord `json:"decision,omitempty"`
	Push       *wireWorkDelivery       `json:"push,omitempty"`
	// ApprovalRequest is the AAP approval request of an att_aap_ item
	// (internal/inbox); such items have no work.
	ApprovalRequest *wireApproval `json:"approval_request,omitempty"`
	// EventID and Files are the work's event and its retained files, on an
	// item's own page (inspect), where this server keeps attachments.
	EventID string           `json:"event_id,omitempty"`
	Files   []wireAttachment `json:"files,omitempty"`
}

func toWireAttention(v *work.AttentionView) wireAttention {
	it := v.Item
	out := wireAttention{ID: it.ID, Kind: it.Kind, Status: string(it.Status), Resolution: it.Resolution, WorkID: it.WorkID,
		EndpointID: it.EndpointID, Summary: it.Summary, MessageID: it.MessageID, Assignee: it.Assignee, AcknowledgedAt: timestampPtr(it.AcknowledgedAt),
		ResolvedAt: timestampPtr(it.ResolvedAt), CreatedAt: timestamp(it.CreatedAt), UpdatedAt: timestamp(it.UpdatedAt),
		WorkStatus: string(v.WorkStatus)}
	if it.OverdueRule != "" {
		out.Cause, out.Rule = maintenance.CauseOverdue, it.OverdueRule
	}
	if it.RequestID != "" {
		rq := &wireAttentionRequest{ID: it.RequestID, Revision: it.Revision, Prompt: it.Prompt,
			AllowedDecisions: it.AllowedDecisions, Expired: v.Expired}
		if it.ExpiresAt != nil {
			rq.ExpiresAt = it.ExpiresAt.UTC().Format("2006-01-02T15:04:05.999999999Z07:00")
		}
		if it.ActionDigest != "" {
			rq.Action = &wireAction{Description: it.ActionDescription, Digest: it.ActionDigest}
		}
		out.Request = rq
	}
	if v.Decision != nil {
		d := toWireDecision(v.Decision, true)
		out.Decision = &d
	}
	if v.Push != nil {
		out.Push = toWireWorkDelivery(v.Push)
	}
	return out
}

// toWireAAPItem is the wire form of an AAP approval request's item.
func toWireAAPItem(it *inbox.ApprovalItem) wireAttention {
	a := toWireApproval(it.Request)
	return wireAttention{ID: it.ID, Kind: work.KindApproval, Status: string(it.Status), Resolution: it.Resolution,
		Assignee: it.Assignee, AcknowledgedAt: timestampPtr(it.AcknowledgedAt), ResolvedAt: timestampPtr(it.ResolvedAt),
		CreatedAt: timestamp(it.CreatedAt), UpdatedAt: timestamp(it.UpdatedAt),
		Request: &wireAttentionRequest{ID: it.Request.ID, Revision: 1, Prompt: it.Prompt, AllowedDecisions: it.AllowedDecisions,
			Action:    &wireAction{Description: it.ActionDescription, Digest: it.ActionDigest},
			ExpiresAt: timestamp(it.ExpiresAt), Expired: it.Expired},
		ApprovalRequest: &a}
}

// toWireItem is the wire form of an inbox item of either kind.
func toWireItem(it *inbox.Item) wireAttention {
	if it.Approval != nil {
		return toWireAAPItem(it.Approval)
	}
	return toWireAttention(it.Work)
}

func (s *Server) listAttention(r *http.Request, p *access.Principal) (int, any, error) {
	limit, err := limitParam(r)
	if err != nil {
		return 0, nil, err
	}
	st, err := work.ParseAttentionStatus(r.URL.Query().Get("status"))
	if err != nil {
		return 0, nil, err
	}
	after, err := cursorParam(r)
	if err != nil {
		return 0, nil, err
	}
	items, err := s.inbox.List(r.Context(), p, r.PathValue("tenant"),
		inbox.ListParams{Status: st, WorkID: r.URL.Query().Get("work"), After: after, Limit: limit})
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, pageOf(listOf(items, toWireItem), len(items) == limit, func() agentowl.Cursor {
		return items[len(items)-1].Cursor()
	}), nil
}

func (s *Server) inspectAttention(r *http.Request, p *access.Principal) (int, any, error) {
	tenant := r.PathValue("tenant")
	it, err := s.inbox.Inspect(r.Context(), p, tenant, r.PathValue("id"))
	if err != nil {
		return 0, nil, err
	}
	out := toWireItem(it)
	if svc := s.attachments; svc != nil && out.WorkID != "" {
		m, err := svc.WorkFiles(r.Context(), p, tenant, out.WorkID)
		if err != nil {
			return 0, nil, err
		}
		out.EventID = m.EventID
		out.Files = manifestOf(m, s.work.Config().PublicURL+"/api/v1/tenants/"+url.PathEscape(tenant)+"/events/"+
			url.PathEscape(m.EventID)+"/attachments").Items
	}
	return http.StatusOK, out, nil
}

func (s *Server) ackAttention(r *http.Request, p *access.Principal) (int, any, error) {
	var assignee string
	if r.ContentLength != 0 || r.Header.Get("Content-Type") != "" {
		fields, err := readObject(r, "assignee")
		if err != nil {
			return 0, nil, err
		}
		if _, err := field(fields, "assignee", &assignee); err != nil {
			return 0, nil, err
		}
	}
	it, err := s.inbox.Ack(r.Context(), p, r.PathValue("tenant"), r.PathValue("id"), assignee)
	return reply(http.StatusOK, it, err, toWireItem)
}

func (s *Server) resolveAttention(r *http.Request, p *access.Principal) (int, any, error) {
	it, err := s.inbox.Resolve(r.Context(), p, r.PathValue("tenant"), r.PathValue("id"))
	return reply(http.StatusOK, it, err, toWireItem)
}

type wireDecideResult struct {
	Attention wireAttention `json:"attention"`
	Preview   bool          `json:"preview"`
	Replay    bool          `json:"replay"`
	// Body is the pushed decision document of agent-work items.
	Body json.RawMessage `json:"body,omitempty"`
	// ApprovalRequest is the AAP request of an att_aap_ item after the
	// decision, exactly as GET /v1/requests/{id} returns it.
	ApprovalRequest *WireRequest `json:"approval_request,omitempty"`
}

// decideAttention submits a decision file, or with ?preview=true checks it
// and shows what would be pushed without changing anything.
func (s *Server) decideAttention(r *http.Request, p *access.Principal) (int, any, error) {
	data, err := readBody(r, maxDecisionBytes)
	if err != nil {
		return 0, nil, err
	}
	in, err := inbox.ParseDecision(data)
	if err != nil {
		return 0, nil, err
	}
	preview := r.URL.Query().Get("preview")
	if preview != "" && preview != "true" && preview != "false" {
		return 0, nil, agentowl.FieldError(agentowl.ECodeInvalidField, "preview", "preview must be true or false.")
	}
	decide := s.inbox.Decide
	if preview == "true" {
		decide = s.inbox.Preview
	}
	res, err := decide(r.Context(), p, r.PathValue("tenant"), r.PathValue("id"), in)
	if err != nil {
		return 0, nil, err
	}
	status := http.StatusCreated
	if res.Preview || res.Replay {
		status = http.StatusOK
	}
	out := wireDecideResult{Attention: toWireItem(res.Item), Preview: res.Preview, Replay: res.Replay, Body: res.Body}
	if res.Request != nil {
		out.ApprovalRequest = toWireRequest(res.Request)
	}
	return status, out, nil
}

// ---- runtime recovery

type wireDecisionList struct {
	WorkID     string                   `json:"work_id"`
	WorkStatus string                   `json:"work_status"`
	Items      []wireWorkDecisionRecord `json:"items"`
}

func (s *Server) listDecisions(r *http.Request, c *agentowl.RuntimeCredential) (int, any, error) {
	ds, st, err := s.work.ListDecisions(r.Context(), c, r.PathValue("work"))
	if err != nil {
		return 0, nil, err
	}
	l := wireDecisionList{WorkID: r.PathValue("work"), WorkStatus: string(st), Items: []wireWorkDecisionRecord{}}
	for _, d := range ds {
		l.Items = append(l.Items, toWireDecision(d, false))
	}
	return http.StatusOK, l, nil
}

type wireDecisionReceipt struct {
	Decision   wireWorkDecisionRecord `json:"decision"`
	WorkStatus string                 `json:"work_status"`
}

func (s *Server) postReceipt(r *http.Request, c *agentowl.RuntimeCredential) (int, any, error) {
	v, err := s.work.RecordReceipt(r.Context(), c, r.PathValue("work"), r.PathValue("decision"))
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, wireDecisionReceipt{Decision: toWireDecision(v.Decision, false), WorkStatus: string(v.WorkStatus)}, nil
}
