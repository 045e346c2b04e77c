package console

import (
	"context"
	"net/http"
	"net/url"

	"github.com/agentowl/agentowl"
	"github.com/agentowl/agentowl/internal/access"
	"github.com/agentowl/agentowl/internal/work"
)

// Endpoints (the API's /endpoints and the CLI's `endpoints list|pause|
// resume`): the tenant's endpoints and whether each is delivering or
// holding its handoffs. Pause and resume are an admin's, forms with a
// confirmation step like a conversation's link and reset: the first post
// shows what will change, the second (step=submit) does it.

type endpointListView struct {
	Items []*agentowl.Endpoint
	// Admin may pause and resume.
	Admin bool
	Error *errorViewData
}

func (c *Console) endpointList(q *req) error { return c.renderEndpoints(q, http.StatusOK, nil) }

// renderEndpoints shows the endpoint list and, when a pause or resume was
// refused, why.
func (c *Console) renderEndpoints(q *req, status int, failed error) error {
	eps, err := c.svc.Work.ListEndpoints(q.r.Context(), q.p(), q.tenant)
	if err != nil {
		return err
	}
	_, notAdmin := q.p().Tenant(q.tenant, agentowl.RoleAdmin)
	v := endpointListView{Items: eps, Admin: notAdmin == nil}
	if failed != nil {
		v.Error = errorView(failed)
	}
	return c.render(q, status, "endpoints", "Endpoints", "endpoints", v)
}

// endpointConfirmView is the review step of a pause or resume.
type endpointConfirmView struct {
	E      *work.EndpointView
	Action string // "pause" or "resume"
}

// pauseOrResume is work.Service.PauseEndpoint or ResumeEndpoint.
type pauseOrResume func(ctx context.Context, p *access.Principal, tenant, id string) (*agentowl.Endpoint, error)

func (c *Console) endpointPause(q *req) error {
	return c.endpointPauseOrResume(q, "pause", c.svc.Work.PauseEndpoint)
}

func (c *Console) endpointResume(q *req) error {
	return c.endpointPauseOrResume(q, "resume", c.svc.Work.ResumeEndpoint)
}

// endpointPauseOrResume shows the confirmation of a pause or resume
// (nothing changes) unless the form is its submit step, where do runs and
// the list shows the outcome. A refusal shows the list again with its code
// and status, as the API refuses it (a member's post: forbidden).
func (c *Console) endpointPauseOrResume(q *req, action string, do pauseOrResume) error {
	ctx, id := q.r.Context(), q.r.PathValue("id")
	if q.r.PostForm.Get("step") == "submit" {
		if _, err := do(ctx, q.p(), q.tenant, id); err != nil {
			return c.renderEndpoints(q, c.status(q.r, err), err)
		}
		return q.redirect("/endpoints?done=" + url.QueryEscape(action+"d"))
	}
	if _, err := q.p().Tenant(q.tenant, agentowl.RoleAdmin); err != nil {
		return c.renderEndpoints(q, c.status(q.r, err), err)
	}
	ev, err := c.svc.Work.InspectEndpoint(ctx, q.p(), q.tenant, id)
	if err != nil {
		return c.renderEndpoints(q, c.status(q.r, err), err)
	}
	return c.render(q, http.StatusOK, "endpoint_confirm", "Confirm "+action, "endpoints", endpointConfirmView{E: ev, Action: action})
}
