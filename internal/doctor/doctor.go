// Package doctor is the tenant health report behind `agentowl work-doctor`
// (docs/operating.md): findings about a tenant's agent work, each with a
// severity and the command that looks into it or fixes it. It reads; it
// changes nothing. It holds rules only: no SQL, no HTTP.
package doctor

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/agentowl/agentowl"
	"github.com/agentowl/agentowl/internal/access"
	"github.com/agentowl/agentowl/internal/ratelimit"
	"github.com/agentowl/agentowl/internal/work"
)

// Severity ranks a finding. Only warnings and errors make a report
// unhealthy; notes report what is worth knowing (a check that could not
// run, a deliberate configuration that is often a mistake).
type Severity string

// Severities, mildest first.
const (
	Note    Severity = "info"
	Warning Severity = "warning"
	Error   Severity = "error"
)

func (s Severity) rank() int { return map[Severity]int{Note: 1, Warning: 2, Error: 3}[s] }

// Checks, the stable names of what a finding is about.
const (
	CheckCredentials       = "runtime_credentials"
	CheckFailingDeliveries = "failing_deliveries"
	CheckOverdueWork       = "overdue_work"
	CheckStuckOutbox       = "stuck_outbox"
	CheckPushReceipts      = "pushes_without_receipts"
	CheckQuota             = "quota"
	CheckPlainBindings     = "bindings_without_agent_work"
	CheckScheduler         = "scheduler_leader"
	CheckDeliveryEngines   = "delivery_engines"
	CheckMailDomains       = "bindings_outside_mail_domains"
)

// Finding is one thing the report found.
type Finding struct {
	Check    string
	Severity Severity
	// Subject is what it is about: "endpoint:<id>", "binding:<id>",
	// "work:<id>", "tenant" or "scheduler".
	Subject string
	Message string
	// Command is what to run next: it shows more, or fixes it.
	Command string
}

// Report is a tenant's findings, most severe first.
type Report struct {
	TenantID, Tenant string
	CheckedAt        time.Time
	Findings         []Finding
}

// Status is "error" or "warning" when the report has a finding of that
// severity, else "ok".
func (r *Report) Status() string {
	worst := Severity("")
	for _, f := range r.Findings {
		if f.Severity.rank() > worst.rank() {
			worst = f.Severity
		}
	}
	if worst == Warning || worst == Error {
		return string(worst)
	}
	return "ok"
}

// SchedulerStatus reports the maintenance scheduler's leadership
// (internal/maintenance implements it).
type SchedulerStatus interface {
	// Leader returns the replica that holds the leader lease and when the
	// lease lapses unless renewed; ok is false when no replica holds it.
	Leader(ctx context.Context) (id string, until time.Time, ok bool, err error)
}

// OverdueWork counts a tenant's overdue work (internal/maintenance
// implements it).
type OverdueWork interface {
	// OverdueCount returns how many of the tenant's work items broke an
	// overdue rule and have not recovered (open work_overdue incidents).
	OverdueCount(ctx context.Context, tenantID string) (int, error)
}

// DeliveryEngines reports the delivery engines' stall signs on every
// replica (internal/maintenance implements it).
type DeliveryEngines interface {
	// EngineFindings names each sign: slots held without an attempt
	// (stalls), an engine gone silent (killed or frozen: a warning, its
	// leases lapse in their time).
	EngineFindings(ctx context.Context) (stalls, silent []string, err error)
}

// RateUsage reads a rate limit's use; *ratelimit.Limiter implements it.
type RateUsage interface {
	Used(ctx context.Context, key string) (current, previous int64, err error)
	Limit() ratelimit.Limit
}

// Config tunes the checks. Every field has a default; Scheduler, Overdue
// and CallbackRate are optional, and the checks needing them report a note
// that they did not run.
type Config struct {
	// CredentialWarning: an agent-work endpoint whose every runtime
	// credential allowed to post callbacks expires within this is a
	// warning. Defaults to 7 days.
	CredentialWarning time.Duration
	// StuckAfter: a message due this long without an attempt in flight is
	// stuck. Defaults to 5m.
	StuckAfter time.Duration
	// ReceiptGrace: a decision without receipt this long after it was made
	// is reported. Defaults to 10m.
	ReceiptGrace time.Duration
	// QuotaShare is the share of a quota or rate at which it is reported
	// as near its limit. Defaults to 0.8.
	QuotaShare float64
	// MaxCallbacksPerWork is the per-work callback cap
	// (work.Config.MaxCallbacksPerWork). Defaults to 10,000.
	MaxCallbacksPerWork int
	// RetainedBytesLimit is a tenant's quota of retained attachment bytes
	// (attachment.Config.TenantRetainedBytes); 0 leaves it unchecked.
	RetainedBytesLimit int64
	// Limit bounds the items one check lists. Defaults to 20.
	Limit int
	// SMTPDomain is the server's SMTP domain (ingress.Config.SMTPDomain):
	// addresses generated there belong to no mail domain and are fine.
	SMTPDomain string

	Scheduler    SchedulerStatus
	Overdue      OverdueWork
	Engines      DeliveryEngines
	CallbackRate RateUsage
}

func (c Config) withDefaults() Config {
	def := func(v *time.Duration, d time.Duration) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&c.CredentialWarning, 7*24*time.Hour)
	def(&c.StuckAfter, 5*time.Minute)
	def(&c.ReceiptGrace, 10*time.Minute)
	if c.QuotaShare <= 0 || c.QuotaShare > 1 {
		c.QuotaShare = 0.8
	}
	if c.MaxCallbacksPerWork <= 0 {
		c.MaxCallbacksPerWork = 10_000
	}
	if c.Limit <= 0 {
		c.Limit = 20
	}
	return c
}

// Service runs the checks.
type Service struct {
	store agentowl.Store
	clock agentowl.Clock
	cfg   Config
}

// New returns a Service.
func New(st agentowl.Store, clock agentowl.Clock, cfg Config) *Service {
	return &Service{store: st, clock: clock, cfg: cfg.withDefaults()}
}

// Check reports on tenant's agent work. Admins only: it names runtime
// credentials, which members may not list.
func (s *Service) Check(ctx context.Context, p *access.Principal, tenant string) (*Report, error) {
	m, err := p.Tenant(tenant, agentowl.RoleAdmin)
	if err != nil {
		return nil, err
	}
	r := &Report{TenantID: m.TenantID, Tenant: m.TenantName, CheckedAt: s.clock.Now()}
	var eps []*agentowl.Endpoint
	err = s.store.Read(ctx, func(tx agentowl.Tx) error {
		if eps, err = tx.EndpointList(ctx, m.TenantID); err != nil {
			return err
		}
		for _, check := range []func(context.Context, agentowl.Tx, *Report, []*agentowl.Endpoint) error{
			s.credentials, s.deliveries, s.receipts, s.callbackQuota, s.retainedBytes, s.plainBindings, s.mailDomains,
		} {
			if err := check(ctx, tx, r, eps); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	for _, check := range []func(context.Context, *Report, []*agentowl.Endpoint) error{s.callbackRate, s.overdue, s.scheduler, s.engines} {
		if err := check(ctx, r, eps); err != nil {
			return nil, err
		}
	}
	slices.SortStableFunc(r.Findings, func(a, b Finding) int {
		return cmp.Or(b.Severity.rank()-a.Severity.rank(), strings.Compare(a.Check, b.Check))
	})
	return r, nil
}

func (r *Report) add(check string, sev Severity, subject, command, format string, args ...any) {
	r.Findings = append(r.Findings, Finding{Check: check, Severity: sev, Subject: subject, Message: fmt.Sprintf(format, args...),
		Command: command})
}

func ts(t time.Time) string { return t.UTC().Format(time.RFC3339) }

// credentials: an agent-work endpoint needs a live credential allowed to
// post callbacks, and one that does not expire soon.
func (s *Service) credentials(ctx context.Context, tx agentowl.Tx, r *Report, eps []*agentowl.Endpoint) error {
	now := r.CheckedAt
	for _, ep := range eps {
		if !ep.AgentWork {
			continue
		}
		creds, err := tx.RuntimeCredentialList(ctx, ep.ID)
		if err != nil {
			return err
		}
		var latest *agentowl.RuntimeCredential
		for _, c := range creds {
			if c.Active(now) && slices.Contains(c.Scopes, work.ScopeCallbacks) && (latest == nil || c.ExpiresAt.After(latest.ExpiresAt)) {
				latest = c
			}
		}
		create := "agentowl runtime-credentials create " + ep.ID + " --days 90"
		switch {
		case latest == nil:
			r.add(CheckCredentials, Error, "endpoint:"+ep.ID, create,
				"Endpoint %q takes agent work but has no live runtime credential with %s: its runtime cannot report progress or outcomes.",
				ep.Name, work.ScopeCallbacks)
		case latest.ExpiresAt.Sub(now) < s.cfg.CredentialWarning:
			r.add(CheckCredentials, Warning, "endpoint:"+ep.ID, create+" (install it, then revoke "+latest.ID+")",
				"Every runtime credential of endpoint %q with %s expires within %s; the last one, %s, expires at %s.",
				ep.Name, work.ScopeCallbacks, s.cfg.CredentialWarning, latest.ID, ts(latest.ExpiresAt))
		}
	}
	return nil
}

// deliveries: failed (unreviewed) and failing deliveries per endpoint, and
// messages no engine is taking.
func (s *Service) deliveries(ctx context.Context, tx agentowl.Tx, r *Report, eps []*agentowl.Endpoint) error {
	hs, err := tx.OutboxHealth(ctx, r.TenantID, r.CheckedAt.Add(-s.cfg.StuckAfter))
	if err != nil {
		return err
	}
	byID := map[string]*agentowl.Endpoint{}
	for _, ep := range eps {
		byID[ep.ID] = ep
	}
	stuck := 0
	var oldest *time.Time
	for _, h := range hs {
		stuck += h.Stuck
		if h.OldestStuck != nil && (oldest == nil || h.OldestStuck.Before(*oldest)) {
			oldest = h.OldestStuck
		}
		if h.EndpointID == "" {
			continue // AAP notifications: `agentowl deliveries`, not agent work
		}
		name, queue := h.EndpointID, "work-outbox"
		if ep := byID[h.EndpointID]; ep != nil {
			name = ep.Name
			if !ep.AgentWork {
				queue = "ingress-publications"
			}
		}
		subject := "endpoint:" + h.EndpointID
		if h.Failed > 0 {
			r.add(CheckFailingDeliveries, Error, subject, "agentowl "+queue+" list --endpoint "+h.EndpointID+" --state failed",
				"%d deliveries to endpoint %q failed (their retry window ended) and are not reviewed: redrive them "+
					"(agentowl %s redrive <id>) or resolve their incidents.", h.Failed, name, queue)
		}
		if h.Failing > 0 {
			r.add(CheckFailingDeliveries, Warning, subject, "agentowl "+queue+" list --endpoint "+h.EndpointID+" --state pending",
				"%d deliveries to endpoint %q are being retried after failed attempts.", h.Failing, name)
		}
	}
	if stuck > 0 {
		r.add(CheckStuckOutbox, Error, "tenant", "agentowl work-outbox list --state pending --older-than "+s.cfg.StuckAfter.String(),
			"%d messages have been due for over %s without an attempt (the oldest since %s): no replica is delivering, or "+
				"destination limits hold a backlog back. Check that a replica runs with AGENTOWL_DELIVERY=on (agentowl maintenance "+
				"status) and watch agentowl_delivery_oldest_due_seconds.",
			stuck, s.cfg.StuckAfter, ts(*oldest))
	}
	return nil
}

// receipts: decisions the runtime has not confirmed a while after they
// were made, on work that goes on.
func (s *Service) receipts(ctx context.Context, tx agentowl.Tx, r *Report, _ []*agentowl.Endpoint) error {
	ds, err := tx.DecisionsAwaitingReceipt(ctx, r.TenantID, r.CheckedAt.Add(-s.cfg.ReceiptGrace), s.cfg.Limit)
	if err != nil {
		return err
	}
	for _, d := range ds {
		dec := d.Decision
		var how, command string
		switch d.PushState {
		case agentowl.MessageFailed, agentowl.MessageCancelled:
			how, command = "its push "+string(d.PushState), "agentowl work-outbox redrive "+dec.MessageID
		case agentowl.MessagePending:
			how, command = "its push is still being retried", "agentowl work-outbox inspect "+dec.MessageID
		case agentowl.MessageDelivered:
			how, command = "its push was acknowledged without a receipt", "agentowl work inspect "+dec.WorkID
		default:
			how = "it was not pushed (the endpoint has no decision URL): the runtime must recover it from GET /runtime/v1/work/" +
				dec.WorkID + "/decisions"
			command = "agentowl work inspect " + dec.WorkID
		}
		r.add(CheckPushReceipts, Warning, "work:"+dec.WorkID, command,
			"Decision %q on work %s (endpoint %s), made at %s, has no receipt from the runtime; %s.",
			dec.ID, dec.WorkID, d.EndpointID, ts(dec.DecidedAt), how)
	}
	return nil
}

// callbackQuota: work near or at its callback cap cannot report its outcome
// once the cap is reached.
func (s *Service) callbackQuota(ctx context.Context, tx agentowl.Tx, r *Report, _ []*agentowl.Endpoint) error {
	bound := int(float64(s.cfg.MaxCallbacksPerWork) * s.cfg.QuotaShare)
	ws, err := tx.WorkByCallbacks(ctx, r.TenantID, bound, s.cfg.Limit)
	if err != nil {
		return err
	}
	for _, w := range ws {
		sev, what := Warning, "is near"
		if w.Callbacks >= s.cfg.MaxCallbacksPerWork {
			sev, what = Error, "has reached"
		}
		r.add(CheckQuota, sev, "work:"+w.ID, "agentowl work inspect "+w.ID,
			"Work %s (endpoint %s, %s) %s its cap of %d recorded callbacks (%d): further callbacks, its outcome included, are refused "+
				"with 409 callback_limit_reached. Raise AGENTOWL_MAX_CALLBACKS_PER_WORK or make the runtime report less often.",
			w.ID, w.EndpointID, w.Status, what, s.cfg.MaxCallbacksPerWork, w.Callbacks)
	}
	return nil
}

// retainedBytes: past its quota of retained attachment bytes, a tenant's
// new files are recorded blocked instead of kept.
func (s *Service) retainedBytes(ctx context.Context, tx agentowl.Tx, r *Report, _ []*agentowl.Endpoint) error {
	limit := s.cfg.RetainedBytesLimit
	if limit <= 0 {
		return nil
	}
	used, err := tx.RetainedBytes(ctx, r.TenantID)
	if err != nil {
		return err
	}
	sev, what := Warning, "is near"
	switch {
	case used >= limit:
		sev, what = Error, "has reached"
	case float64(used) < float64(limit)*s.cfg.QuotaShare:
		return nil
	}
	r.add(CheckQuota, sev, "tenant", "AGENTOWL_TENANT_RETAINED_BYTES=<bytes> agentowl serve",
		"The tenant %s its quota of retained attachment bytes (%d of %d): files past it are recorded blocked (quota), "+
			"without their bytes. Raise AGENTOWL_TENANT_RETAINED_BYTES or shorten AGENTOWL_ATTACHMENT_RETENTION.",
		what, used, limit)
	return nil
}

// callbackRate: an endpoint whose runtime used most of its callback rate in
// this minute or the last is about to get 429s.
func (s *Service) callbackRate(ctx context.Context, r *Report, eps []*agentowl.Endpoint) error {
	if s.cfg.CallbackRate == nil {
		return nil
	}
	limit := s.cfg.CallbackRate.Limit()
	if limit.Events <= 0 {
		return nil
	}
	for _, ep := range eps {
		if !ep.AgentWork {
			continue
		}
		cur, prev, err := s.cfg.CallbackRate.Used(ctx, ep.ID)
		if err != nil {
			return err
		}
		if used := max(cur, prev); float64(used) >= float64(limit.Events)*s.cfg.QuotaShare {
			r.add(CheckQuota, Warning, "endpoint:"+ep.ID, "AGENTOWL_CALLBACK_RATE=<per minute> agentowl serve",
				"The runtime of endpoint %q made %d callback requests in a minute; the limit is %d per %s, past which they are refused "+
					"with 429 rate_limited.", ep.Name, used, limit.Events, limit.Per)
		}
	}
	return nil
}

// plainBindings: events routed to an endpoint without agent work are
// delivered in the original format, without work, callbacks or decisions —
// deliberate for plain webhooks, a mistake mid-rollout.
func (s *Service) plainBindings(ctx context.Context, tx agentowl.Tx, r *Report, eps []*agentowl.Endpoint) error {
	bs, err := tx.BindingList(ctx, r.TenantID)
	if err != nil {
		return err
	}
	byID := map[string]*agentowl.Endpoint{}
	for _, ep := range eps {
		byID[ep.ID] = ep
	}
	for _, b := range bs {
		if ep := byID[b.EndpointID]; ep != nil && !ep.AgentWork {
			r.add(CheckPlainBindings, Note, "binding:"+b.ID, "agentowl endpoints update "+ep.ID+" --agent-work",
				"Binding %s (%s) routes to endpoint %q, which does not take agent work: its events are delivered without work, "+
					"callbacks or decisions. Pass the rollout gates (docs/operating.md) before turning agent work on.", b.ID, b.Channel, ep.Name)
		}
	}
	return nil
}

// mailDomains: smtp bindings whose address is not under a mail domain of
// their tenant (docs/channels.md, "Mail domains"): made before domains
// were assigned (the upgrade leaves a domain several tenants used
// unassigned), or whose domain was removed or given to another tenant
// since. They keep receiving mail; a system admin settles each domain.
// The tenant sees its own bindings; the system tenant's report also lists
// every tenant's, by domain, for its admins to settle.
func (s *Service) mailDomains(ctx context.Context, tx agentowl.Tx, r *Report, _ []*agentowl.Endpoint) error {
	p := agentowl.OutsideDomainsParams{TenantID: r.TenantID, ServerDomain: strings.ToLower(s.cfg.SMTPDomain), Limit: s.cfg.Limit}
	bs, err := tx.BindingListOutsideDomains(ctx, p)
	if err != nil {
		return err
	}
	for _, b := range bs {
		_, domain, _ := strings.Cut(b.Address, "@")
		r.add(CheckMailDomains, Warning, "binding:"+b.ID, "agentowl domains add "+domain+" --tenant "+r.Tenant+" (a system admin)",
			"Binding %s receives at %s, which is not under a mail domain assigned to this tenant: it keeps receiving mail, but "+
				"no new binding can be made there. Ask a system admin to assign %s to this tenant, or move the binding to an "+
				"assigned domain.", b.ID, b.Address, domain)
	}
	home, err := tx.TenantGetByID(ctx, r.TenantID)
	if err != nil || !home.System {
		return err
	}
	p.TenantID = ""
	if bs, err = tx.BindingListOutsideDomains(ctx, p); err != nil {
		return err
	}
	ts, err := tx.TenantList(ctx)
	if err != nil {
		return err
	}
	names := map[string]string{}
	for _, t := range ts {
		names[t.ID] = t.Name
	}
	byDomain := map[string][]string{}
	var domains []string
	for _, b := range bs {
		if b.TenantID == r.TenantID {
			continue // listed above
		}
		_, domain, _ := strings.Cut(b.Address, "@")
		if byDomain[domain] == nil {
			domains = append(domains, domain)
		}
		byDomain[domain] = append(byDomain[domain], b.Address+" ("+names[b.TenantID]+", "+b.ID+")")
	}
	for _, d := range domains {
		r.add(CheckMailDomains, Warning, "mail_domain:"+d, "agentowl domains add "+d+" --tenant <tenant>",
			"Live smtp bindings at %s are outside their tenants' mail domains: %s. They keep receiving mail; assign the domain "+
				"to the tenant it belongs to (or single addresses: agentowl domains add ADDRESS --tenant T), and have the others "+
				"move their bindings.", d, strings.Join(byDomain[d], ", "))
	}
	return nil
}

// overdue asks the maintenance scheduler's overdue rules.
func (s *Service) overdue(ctx context.Context, r *Report, _ []*agentowl.Endpoint) error {
	if s.cfg.Overdue == nil {
		r.add(CheckOverdueWork, Note, "tenant", "agentowl attention list --status open",
			"Overdue work was not checked: this server has no overdue-work detection.")
		return nil
	}
	n, err := s.cfg.Overdue.OverdueCount(ctx, r.TenantID)
	if err != nil {
		return err
	}
	if n > 0 {
		r.add(CheckOverdueWork, Warning, "tenant", "agentowl attention list --status open",
			"%d work items are overdue (a runtime stopped reporting, or a question waits past its expiry); each has an open incident.", n)
	}
	return nil
}

// engines: delivery engines holding slots without an attempt, or gone
// silent. They are server-wide, like the scheduler: every tenant's
// deliveries share the engines.
func (s *Service) engines(ctx context.Context, r *Report, _ []*agentowl.Endpoint) error {
	if s.cfg.Engines == nil {
		r.add(CheckDeliveryEngines, Note, "delivery", "agentowl maintenance status",
			"The delivery engines were not checked: this server reports no engine status.")
		return nil
	}
	stalls, silent, err := s.cfg.Engines.EngineFindings(ctx)
	if err != nil {
		return err
	}
	for _, f := range stalls {
		r.add(CheckDeliveryEngines, Error, "delivery", "agentowl maintenance status", "%s", f)
	}
	for _, f := range silent {
		r.add(CheckDeliveryEngines, Warning, "delivery", "agentowl maintenance status", "%s", f)
	}
	return nil
}

// scheduler: periodic maintenance needs exactly one live leader.
func (s *Service) scheduler(ctx context.Context, r *Report, _ []*agentowl.Endpoint) error {
	if s.cfg.Scheduler == nil {
		r.add(CheckScheduler, Note, "scheduler", "agentowl maintenance status",
			"The scheduler's leadership was not checked: this server reports no scheduler status.")
		return nil
	}
	id, until, ok, err := s.cfg.Scheduler.Leader(ctx)
	if err != nil {
		return err
	}
	switch {
	case !ok:
		r.add(CheckScheduler, Error, "scheduler", "agentowl maintenance status",
			"No replica leads the maintenance scheduler: overdue work, request expiry, recovery and retention do not run.")
	case !r.CheckedAt.Before(until):
		r.add(CheckScheduler, Error, "scheduler", "agentowl maintenance status",
			"The scheduler's leader %s let its lease lapse at %s without renewing it: it may be stuck or gone, and no replica "+
				"has taken over.", id, ts(until))
	}
	return nil
}
