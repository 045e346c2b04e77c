package httpapi

import (
	"encoding/hex"
	"net/http"
	"strconv"

	"github.com/agentowl/agentowl"
	"github.com/agentowl/agentowl/internal/access"
	"github.com/agentowl/agentowl/internal/auditchain"
)

// The audit chain's export (internal/auditchain; `agentowl audit export`
// and `audit verify` read it page by page): the entries with their hashes
// in seq order, and the signed checkpoints.

// seqPage reads a page's limit and its after cursor: a non-negative
// integer, 0 when absent.
func seqPage(r *http.Request) (limit int, after int64, err error) {
	if limit, err = limitParam(r); err != nil {
		return 0, 0, err
	}
	v := r.URL.Query().Get("after")
	if v == "" {
		return limit, 0, nil
	}
	after, err = strconv.ParseInt(v, 10, 64)
	if err != nil || after < 0 {
		return 0, 0, agentowl.FieldError(agentowl.ECodeInvalidField, "after", "after must be a non-negative integer.")
	}
	return limit, after, nil
}

type wireAuditChain struct {
	TenantID string                 `json:"tenant_id"`
	HeadSeq  int64                  `json:"head_seq"`
	HeadHash string                 `json:"head_hash"`
	Items    []auditchain.WireEntry `json:"items"`
	// Next is the after of the next page; null on the last.
	Next *int64 `json:"next"`
}

func (s *Server) auditChain(r *http.Request, p *access.Principal) (int, any, error) {
	limit, after, err := seqPage(r)
	if err != nil {
		return 0, nil, err
	}
	q := agentowl.AuditChainParams{Limit: limit}
	switch r.URL.Query().Get("unchained") {
	case "", "false":
		q.AfterSeq = after
	case "true":
		q.Unchained, q.AfterID = true, after
	default:
		return 0, nil, agentowl.FieldError(agentowl.ECodeInvalidField, "unchained", "unchained must be true or false.")
	}
	page, err := s.access.AuditChain(r.Context(), p, r.PathValue("tenant"), q)
	if err != nil {
		return 0, nil, err
	}
	out := wireAuditChain{TenantID: page.TenantID, Items: make([]auditchain.WireEntry, 0, len(page.Entries))}
	if page.Head != nil {
		out.HeadSeq, out.HeadHash = page.Head.Seq, hex.EncodeToString(page.Head.Hash)
	}
	for _, e := range page.Entries {
		out.Items = append(out.Items, auditchain.ToWire(&auditchain.Entry{ID: e.ID, TenantID: e.TenantID, Seq: e.Seq, At: e.At,
			Actor: e.Actor, Action: e.Action, Target: e.Target, RequestID: e.RequestID, Details: e.DetailsJSON,
			PrevHash: e.PrevHash, Hash: e.Hash}))
	}
	if len(page.Entries) == limit {
		last := page.Entries[len(page.Entries)-1]
		next := last.Seq
		if q.Unchained {
			next = last.ID
		}
		out.Next = &next
	}
	return http.StatusOK, out, nil
}

func (s *Server) auditCheckpoints(r *http.Request, p *access.Principal) (int, any, error) {
	limit, after, err := seqPage(r)
	if err != nil {
		return 0, nil, err
	}
	tenantID, cps, err := s.access.AuditCheckpoints(r.Context(), p, r.PathValue("tenant"), after, limit)
	if err != nil {
		return 0, nil, err
	}
	items := make([]auditchain.WireCheckpoint, 0, len(cps))
	for _, c := range cps {
		items = append(items, auditchain.WireCheckpoint{Type: auditchain.LineCheckpoint, Seq: c.Seq, Head: hex.EncodeToString(c.Head),
			At: c.At.UTC().Format(auditchain.TimeFormat), JWS: c.JWS})
	}
	var next *int64
	if len(cps) == limit {
		n := cps[len(cps)-1].Seq
		next = &n
	}
	return http.StatusOK, map[string]any{"tenant_id": tenantID, "items": items, "next": next}, nil
}
