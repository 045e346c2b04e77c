// Package notify holds in-app notifications (docs/console.md): which state
// changes notify (results, failures, input requests; routine progress is
// quiet), who receives them (the tenant's operators, filtered by their
// preferences per cause kind and per endpoint), one logical notice per
// cause and recipient, read state, and the deep link of each notice. Notices
// are in-app only: nothing is emailed or pushed.
//
// The use-cases that change state record the notice in the same
// transaction with RecordTx, so a notice exists exactly when its cause
// committed.
package notify

import (
	"context"
	"crypto/rand"
	"encoding/base32"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/agentowl/agentowl"
	"github.com/agentowl/agentowl/internal/access"
)

// Kinds of causes: what a recipient's preferences mute by.
const (
	// KindResult: work completed.
	KindResult = "result"
	// KindFailure: failed work, handoffs and decision pushes that exhausted
	// their retries: every incident of the inbox.
	KindFailure = "failure"
	// KindInput: a runtime's question or approval request, a pending AAP
	// approval request.
	KindInput = "input"
)

// Kinds lists every kind, in display order.
var Kinds = []string{KindResult, KindFailure, KindInput}

// Causes: the state changes that notify.
const (
	CauseWorkCompleted   = "work_completed"   // a completed callback
	CauseIncident        = "incident"         // an incident opened in the inbox
	CauseNeedsInput      = "needs_input"      // a runtime request item (one per revision)
	CauseApprovalPending = "approval_pending" // an AAP request awaiting a person
)

var kindOf = map[string]string{
	CauseWorkCompleted:   KindResult,
	CauseIncident:        KindFailure,
	CauseNeedsInput:      KindInput,
	CauseApprovalPending: KindInput,
}

// Subjects: what a notice's deep link opens.
const (
	SubjectWork      = "work"
	SubjectAttention = "attention"
)

// maxTitleBytes bounds a notice's title (it quotes what a runtime or agent
// wrote).
const maxTitleBytes = 300

// Cause is one state change to notify a tenant's operators of.
type Cause struct {
	TenantID string
	// Cause is one of the Cause… constants.
	Cause string
	// SubjectKind and SubjectID say what the deep link opens: the work of a
	// result, the attention item of an incident or request.
	SubjectKind, SubjectID string
	// EndpointID is the endpoint the cause belongs to ("" for AAP requests).
	EndpointID string
	Title      string
	At         time.Time
}

// RecordTx records c for each of its tenant's operators who has not muted
// its kind or endpoint, in tx: call it in the transaction of the state
// change. Whatever the retries, duplicates and concurrent writers, each
// recipient gets one notice per cause (the store's unique key).
func RecordTx(ctx context.Context, tx agentowl.Tx, c Cause) error {
	kind, ok := kindOf[c.Cause]
	if !ok || c.SubjectID == "" {
		return errors.New("notify: unknown cause " + c.Cause)
	}
	return tx.NotificationFanOut(ctx, &agentowl.NotificationFanOut{TenantID: c.TenantID, CauseKey: c.Cause + ":" + c.SubjectID,
		Kind: kind, Cause: c.Cause, Subject: c.SubjectKind + ":" + c.SubjectID, EndpointID: c.EndpointID,
		Title: agentowl.Clip(oneLine(c.Title), maxTitleBytes), CreatedAt: c.At, IDPrefix: newIDPrefix()}, nil)
}

// newIDPrefix is "ntf_" and 80 random bits; the store appends each
// recipient's position.
func newIDPrefix() string {
	var b [10]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand does not fail on supported platforms
	}
	return "ntf_" + strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(b[:])) + "_"
}

func oneLine(s string) string {
	return strings.Map(func(r rune) rune {
		if r < ' ' || r == 0x7f {
			return ' '
		}
		return r
	}, s)
}

// Link is the console deep link of notice n of tenant: the work or
// attention item it is about. Following it needs a console session in that
// tenant; anyone else gets 404.
func Link(tenant string, n *agentowl.Notification) string {
	kind, id, _ := strings.Cut(n.Subject, ":")
	path := "attention"
	if kind == SubjectWork {
		path = "work"
	}
	return "/console/t/" + tenant + "/" + path + "/" + id
}

// Service is the recipients' use-cases: their notices and preferences.
type Service struct {
	store agentowl.Store
	clock agentowl.Clock
}

// New returns a Service.
func New(st agentowl.Store, clock agentowl.Clock) *Service {
	return &Service{store: st, clock: clock}
}

// ListParams selects the caller's notices.
type ListParams struct {
	UnreadOnly bool
	After      *agentowl.Cursor
	Limit      int
}

// List returns the caller's notices in tenant, newest first, and how many
// are unread. Each operator sees only their own. Members may.
func (s *Service) List(ctx context.Context, p *access.Principal, tenant string, params ListParams) ([]*agentowl.Notification, int, error) {
	if _, err := p.Tenant(tenant, agentowl.RoleMember); err != nil {
		return nil, 0, err
	}
	var out []*agentowl.Notification
	var unread int
	err := s.store.Read(ctx, func(tx agentowl.Tx) (err error) {
		out, err = tx.NotificationList(ctx, agentowl.NotificationListParams{OperatorID: p.Operator.ID,
			UnreadOnly: params.UnreadOnly, After: params.After, Limit: params.Limit})
		if err != nil {
			return err
		}
		unread, err = tx.NotificationUnread(ctx, p.Operator.ID)
		return err
	})
	return out, unread, err
}

// Unread counts the caller's unread notices in tenant. Members may.
func (s *Service) Unread(ctx context.Context, p *access.Principal, tenant string) (int, error) {
	if _, err := p.Tenant(tenant, agentowl.RoleMember); err != nil {
		return 0, err
	}
	var n int
	err := s.store.Read(ctx, func(tx agentowl.Tx) (err error) {
		n, err = tx.NotificationUnread(ctx, p.Operator.ID)
		return err
	})
	return n, err
}

// Get returns one of the caller's notices; another operator's is not_found.
func (s *Service) Get(ctx context.Context, p *access.Principal, tenant, id string) (*agentowl.Notification, error) {
	m, err := p.Tenant(tenant, agentowl.RoleMember)
	if err != nil {
		return nil, err
	}
	var n *agentowl.Notification
	err = s.store.Read(ctx, func(tx agentowl.Tx) (err error) {
		n, err = tx.NotificationGet(ctx, p.Operator.ID, id)
		return err
	})
	if errors.Is(err, agentowl.ErrNotFound) {
		return nil, agentowl.Errorf(agentowl.ECodeNotFound, "No notification %q for you in tenant %q.", id, m.TenantName)
	}
	return n, err
}

// MarkRead marks one of the caller's notices read (again: no change) and
// returns it. Members may.
func (s *Service) MarkRead(ctx context.Context, p *access.Principal, tenant, id string) (*agentowl.Notification, error) {
	m, err := p.Tenant(tenant, agentowl.RoleMember)
	if err != nil {
		return nil, err
	}
	var n *agentowl.Notification
	err = s.store.Write(ctx, func(tx agentowl.Tx) error {
		if _, err := tx.NotificationMarkRead(ctx, p.Operator.ID, []string{id}, s.clock.Now()); err != nil {
			return err
		}
		var err error
		n, err = tx.NotificationGet(ctx, p.Operator.ID, id)
		return err
	})
	if errors.Is(err, agentowl.ErrNotFound) {
		return nil, agentowl.Errorf(agentowl.ECodeNotFound, "No notification %q for you in tenant %q.", id, m.TenantName)
	}
	return n, err
}

// MarkAllRead marks every unread notice of the caller read and returns how
// many. Members may.
func (s *Service) MarkAllRead(ctx context.Context, p *access.Principal, tenant string) (int, error) {
	if _, err := p.Tenant(tenant, agentowl.RoleMember); err != nil {
		return 0, err
	}
	var n int
	err := s.store.Write(ctx, func(tx agentowl.Tx) (err error) {
		n, err = tx.NotificationMarkRead(ctx, p.Operator.ID, nil, s.clock.Now())
		return err
	})
	return n, err
}

// Prefs are a recipient's preferences: what they do not want notices about.
// Everything else notifies them.
type Prefs struct {
	// MutedKinds are kinds (result, failure, input) they get no notice of.
	MutedKinds []string
	// MutedEndpoints are endpoints whose causes they get no notice of.
	MutedEndpoints []string
}

// maxMutedEndpoints bounds a recipient's muted endpoints (docs/limits.md).
const maxMutedEndpoints = 100

// GetPrefs returns the caller's preferences in tenant. Members may.
func (s *Service) GetPrefs(ctx context.Context, p *access.Principal, tenant string) (*Prefs, error) {
	if _, err := p.Tenant(tenant, agentowl.RoleMember); err != nil {
		return nil, err
	}
	var mutes []agentowl.NotificationMute
	err := s.store.Read(ctx, func(tx agentowl.Tx) (err error) {
		mutes, err = tx.NotificationMutes(ctx, p.Operator.ID)
		return err
	})
	if err != nil {
		return nil, err
	}
	return prefsOf(mutes), nil
}

func prefsOf(mutes []agentowl.NotificationMute) *Prefs {
	out := &Prefs{MutedKinds: []string{}, MutedEndpoints: []string{}}
	for _, m := range mutes {
		if m.By == "kind" {
			out.MutedKinds = append(out.MutedKinds, m.Value)
		} else {
			out.MutedEndpoints = append(out.MutedEndpoints, m.Value)
		}
	}
	slices.Sort(out.MutedKinds)
	slices.Sort(out.MutedEndpoints)
	return out
}

// SetPrefs replaces the caller's preferences in tenant: every muted kind
// must be a kind, every muted endpoint one of the tenant's endpoints (at
// most 100). The change is audited. Members may.
func (s *Service) SetPrefs(ctx context.Context, p *access.Principal, tenant string, in Prefs) (*Prefs, error) {
	m, err := p.Tenant(tenant, agentowl.RoleMember)
	if err != nil {
		return nil, err
	}
	var mutes []agentowl.NotificationMute
	seen := map[agentowl.NotificationMute]bool{}
	add := func(mu agentowl.NotificationMute) {
		if !seen[mu] {
			seen[mu] = true
			mutes = append(mutes, mu)
		}
	}
	for _, k := range in.MutedKinds {
		if !slices.Contains(Kinds, k) {
			return nil, agentowl.FieldError(agentowl.ECodeInvalidField, "muted_kinds", "%q is not a kind; kinds are result, failure and input.", k)
		}
		add(agentowl.NotificationMute{By: "kind", Value: k})
	}
	if len(in.MutedEndpoints) > maxMutedEndpoints {
		return nil, agentowl.FieldError(agentowl.ECodeInvalidField, "muted_endpoints", "At most %d endpoints can be muted.", maxMutedEndpoints)
	}
	for _, id := range in.MutedEndpoints {
		if id == "" || len(id) > 64 {
			return nil, agentowl.FieldError(agentowl.ECodeInvalidField, "muted_endpoints", "%q is not an endpoint ID.", id)
		}
		add(agentowl.NotificationMute{By: "endpoint", Value: id})
	}
	err = s.store.Write(ctx, func(tx agentowl.Tx) error {
		for _, mu := range mutes {
			if mu.By != "endpoint" {
				continue
			}
			ep, err := tx.EndpointGet(ctx, mu.Value)
			if errors.Is(err, agentowl.ErrNotFound) || (err == nil && ep.TenantID != m.TenantID) {
				return agentowl.FieldError(agentowl.ECodeInvalidField, "muted_endpoints", "No endpoint %q in tenant %q.", mu.Value, m.TenantName)
			}
			if err != nil {
				return err
			}
		}
		if err := tx.NotificationSetMutes(ctx, m.TenantID, p.Operator.ID, mutes); err != nil {
			return err
		}
		return access.Audit(ctx, tx, s.clock.Now(), m.TenantID, p, "notification.preferences", "operator:"+p.Operator.Name,
			map[string]any{"muted_kinds": len(in.MutedKinds), "muted_endpoints": len(in.MutedEndpoints)})
	})
	if err != nil {
		return nil, err
	}
	return prefsOf(mutes), nil
}
