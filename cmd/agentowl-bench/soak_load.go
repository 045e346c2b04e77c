package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/agentowl/agentowl/webhook"
)

// target is one tenant's pair of destinations at one receiver: an AAP
// instance whose webhook is there, and an agent-work endpoint (handoffs
// and decision pushes) with its binding and runtime credential.
type target struct {
	tenant       string
	admin        string // the tenant's admin operator token
	recv         behaviour
	instanceCred string
	ingressPath  string
	runtimeToken string
}

// setupTenants creates n tenants through the system tenant's admin, each
// with a target at every receiver; targets[t][b] is tenant t's at b.
func setupTenants(ctx context.Context, f *fleet, rs *receiverSet, systemAdmin string, n int) ([][numBehaviours]*target, error) {
	targets := make([][numBehaviours]*target, n)
	for t := range n {
		name := fmt.Sprintf("soak-%d", t+1)
		admin, prov, err := createTenant(ctx, f, systemAdmin, name)
		if err != nil {
			return nil, err
		}
		for b := range numBehaviours {
			tg := &target{tenant: name, admin: admin, recv: b}
			if err := tg.provision(ctx, f, rs, t, prov); err != nil {
				return nil, fmt.Errorf("%s at %s: %w", name, b, err)
			}
			targets[t][b] = tg
		}
	}
	return targets, nil
}

// createTenant creates tenant name through the system tenant's admin and
// returns the new tenant's admin operator token and a provisioner token.
func createTenant(ctx context.Context, f *fleet, systemAdmin, name string) (admin, prov string, err error) {
	var nt struct {
		Admin struct {
			Token string `json:"token"`
		} `json:"admin"`
	}
	if _, _, err := f.call(ctx, http.MethodPost, "/api/v1/tenants", systemAdmin, map[string]any{"name": name}, nil, &nt); err != nil {
		return "", "", fmt.Errorf("create tenant %s: %w", name, err)
	}
	var pt struct {
		Token string `json:"token"`
	}
	if _, _, err := f.call(ctx, http.MethodPost, "/api/v1/tenants/"+name+"/provisioner-tokens", nt.Admin.Token, map[string]any{"label": "soak"}, nil, &pt); err != nil {
		return "", "", fmt.Errorf("provisioner token of %s: %w", name, err)
	}
	return nt.Admin.Token, pt.Token, nil
}

// provision creates the target's instance (its receiver verified on the
// way), endpoint, runtime credential and binding; tenant t's messages
// arrive under pathOf(t, …).
func (tg *target) provision(ctx context.Context, f *fleet, rs *receiverSet, t int, provToken string) error {
	if err := tg.provisionInstance(ctx, f, rs, t, provToken); err != nil {
		return err
	}
	base := "/api/v1/tenants/" + tg.tenant
	at := rs.url(tg.recv)
	bearer := randomHex(16)
	var ep struct {
		ID            string `json:"id"`
		SigningSecret string `json:"signing_secret"`
	}
	if _, _, err := f.call(ctx, http.MethodPost, base+"/endpoints", tg.admin, map[string]any{
		"name": "soak-" + tg.recv.String(), "url": at + pathOf(t, msgHandoff), "config": map[string]any{"agent_work": true},
		"decision_url": at + pathOf(t, msgPush), "decision_secret": bearer,
	}, nil, &ep); err != nil {
		return fmt.Errorf("endpoint: %w", err)
	}
	if err := rs.rec.addRoute(tg.recv, pathOf(t, msgHandoff), msgHandoff, ep.SigningSecret, ""); err != nil {
		return err
	}
	if err := rs.rec.addRoute(tg.recv, pathOf(t, msgPush), msgPush, ep.SigningSecret, bearer); err != nil {
		return err
	}
	var cred struct {
		Token string `json:"token"`
	}
	if _, _, err := f.call(ctx, http.MethodPost, base+"/endpoints/"+ep.ID+"/runtime-credentials", tg.admin, map[string]any{}, nil, &cred); err != nil {
		return fmt.Errorf("runtime credential: %w", err)
	}
	tg.runtimeToken = cred.Token
	var bnd struct {
		IngressURL string `json:"ingress_url"`
	}
	if _, _, err := f.call(ctx, http.MethodPost, base+"/bindings", tg.admin, map[string]any{"channel": "webhook", "endpoint_id": ep.ID}, nil, &bnd); err != nil {
		return fmt.Errorf("binding: %w", err)
	}
	u, err := url.Parse(bnd.IngressURL)
	if err != nil {
		return fmt.Errorf("binding's ingress URL %q: %w", bnd.IngressURL, err)
	}
	tg.ingressPath = u.Path
	return nil
}

// provisionInstance creates the target's AAP instance, its webhook at the
// target's receiver under pathOf(t, msgNotification) (verified on the way).
func (tg *target) provisionInstance(ctx context.Context, f *fleet, rs *receiverSet, t int, provToken string) error {
	at := rs.url(tg.recv)
	regID, secret := uuid.NewString(), webhook.NewSecret()
	if err := rs.rec.addRoute(tg.recv, pathOf(t, msgNotification), msgNotification, secret, ""); err != nil {
		return err
	}
	var inst struct {
		Credential struct {
			Token string `json:"token"`
		} `json:"credential"`
	}
	if _, _, err := f.call(ctx, http.MethodPost, "/v1/instances", provToken, map[string]any{
		"instance_name": "soak-" + tg.recv.String(),
		"delivery": map[string]any{"type": "webhook", "url": at + pathOf(t, msgNotification),
			"registration_id": regID, "signing_secret": secret},
	}, map[string]string{"Idempotency-Key": regID}, &inst); err != nil {
		return fmt.Errorf("instance: %w", err)
	}
	tg.instanceCred = inst.Credential.Token
	return nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// loadPhase is the part of the run a message's cause belongs to.
type loadPhase int

const (
	phaseBaseline loadPhase = iota // only the fast receiver in use
	phaseMix                       // every receiver
)

// expectation is a message the receivers must get, and when its cause was
// answered.
type expectation struct {
	recv  behaviour
	at    time.Time
	phase loadPhase
}

// ledger is what the load expects, and the operations that failed.
type ledger struct {
	mu     sync.Mutex
	want   map[subject]expectation
	ops    [numMsgKinds]int // operations started, by the message kind they are for
	failed []string
	nFail  int
}

func (l *ledger) expect(s subject, e expectation) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.want[s] = e
}

func (l *ledger) fail(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.nFail++
	if len(l.failed) < 10 {
		l.failed = append(l.failed, err.Error())
	}
}

// load runs the operations: each is the calls that cause one message
// (a push's operation causes its handoff too).
type load struct {
	f      *fleet
	ledger *ledger
	run    string // makes keys unique to the run
	seq    atomic.Int64
}

// opTimeout bounds one operation, its calls sent again included.
const opTimeout = 90 * time.Second

// do runs operation kind against tg and records what it leads to expect.
func (ld *load) do(ctx context.Context, kind msgKind, tg *target, ph loadPhase) {
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	n := ld.seq.Add(1)
	var err error
	switch kind {
	case msgNotification:
		err = ld.notification(ctx, tg, ph, n)
	case msgHandoff:
		_, err = ld.event(ctx, tg, ph, n)
	case msgPush:
		err = ld.push(ctx, tg, ph, n)
	}
	if err != nil {
		ld.ledger.fail(fmt.Errorf("%s to %s (%s): %w", kind, tg.recv, tg.tenant, err))
	}
}

// notification creates an AAP request and approves it.
func (ld *load) notification(ctx context.Context, tg *target, ph loadPhase, n int64) error {
	var req struct {
		ID string `json:"id"`
	}
	if _, _, err := ld.f.call(ctx, http.MethodPost, "/v1/requests", tg.instanceCred,
		map[string]any{"tool": "issue_refund", "timeout": "30m", "arguments": map[string]any{"n": n}},
		map[string]string{"Idempotency-Key": fmt.Sprintf("%s-req-%d", ld.run, n)}, &req); err != nil {
		return err
	}
	_, uncertain, err := ld.f.call(ctx, http.MethodPost, "/api/v1/tenants/"+tg.tenant+"/approvals/"+req.ID+"/decision", tg.admin,
		map[string]any{"decision": "approve"}, nil, nil)
	// A decision sent again after its answer was lost finds itself made.
	var ae *apiError
	if err != nil && !(uncertain && errors.As(err, &ae) && ae.status == http.StatusConflict) {
		return err
	}
	ld.ledger.expect(subject{msgNotification, "request.resolved " + req.ID}, expectation{recv: tg.recv, at: time.Now(), phase: ph})
	return nil
}

// accepted is an ingress event's answer.
type accepted struct {
	EventID        string `json:"event_id"`
	ConversationID string `json:"conversation_id"`
}

// event posts an inbound event to the target's binding.
func (ld *load) event(ctx context.Context, tg *target, ph loadPhase, n int64) (accepted, error) {
	var acc accepted
	if _, _, err := ld.f.call(ctx, http.MethodPost, tg.ingressPath, "", map[string]any{"text": "soak", "n": n},
		map[string]string{"Idempotency-Key": fmt.Sprintf("%s-evt-%d", ld.run, n)}, &acc); err != nil {
		return acc, err
	}
	ld.ledger.expect(subject{msgHandoff, acc.EventID}, expectation{recv: tg.recv, at: time.Now(), phase: ph})
	return acc, nil
}

// push posts an event, has the runtime ask for an approval on its work,
// and decides it as the operator: the decision is pushed to the runtime.
func (ld *load) push(ctx context.Context, tg *target, ph loadPhase, n int64) error {
	acc, err := ld.event(ctx, tg, ph, n)
	if err != nil {
		return err
	}
	base := "/api/v1/tenants/" + tg.tenant
	var works struct {
		Items []struct {
			ID      string `json:"id"`
			EventID string `json:"event_id"`
		} `json:"items"`
	}
	if _, _, err := ld.f.call(ctx, http.MethodGet, base+"/work?conversation="+acc.ConversationID, tg.admin, nil, nil, &works); err != nil {
		return err
	}
	workID := ""
	for _, w := range works.Items {
		if w.EventID == acc.EventID {
			workID = w.ID
		}
	}
	if workID == "" {
		return fmt.Errorf("event %s has no work", acc.EventID)
	}
	digest := randomHex(32)
	now := time.Now().UTC()
	if _, _, err := ld.f.call(ctx, http.MethodPost, "/runtime/v1/work/"+workID+"/callbacks", tg.runtimeToken, map[string]any{
		"version": "agent-work.v1", "callback_id": workID + ":1", "work_id": workID, "sequence": 1,
		"status": "needs_input", "occurred_at": now.Format(time.RFC3339Nano),
		"requests": []any{map[string]any{"id": "soak", "revision": 1, "kind": "approval", "prompt": "May I?",
			"allowed_decisions": []string{"approve", "reject"}, "expires_at": now.Add(time.Hour).Format(time.RFC3339),
			"action": map[string]any{"description": "soak action", "digest": digest}}},
	}, nil, nil); err != nil {
		return err
	}
	var items struct {
		Items []struct {
			ID string `json:"id"`
		} `json:"items"`
	}
	if _, _, err := ld.f.call(ctx, http.MethodGet, base+"/attention?work="+workID, tg.admin, nil, nil, &items); err != nil {
		return err
	}
	if len(items.Items) != 1 {
		return fmt.Errorf("work %s has %d attention items, want 1", workID, len(items.Items))
	}
	decisionID := fmt.Sprintf("%s-dec-%d", ld.run, n)
	if _, _, err := ld.f.call(ctx, http.MethodPost, base+"/attention/"+items.Items[0].ID+"/decision", tg.admin, map[string]any{
		"decision_id": decisionID, "request_revision": 1, "decision": "approve", "expected_action_digest": digest,
	}, nil, nil); err != nil {
		return err
	}
	ld.ledger.expect(subject{msgPush, decisionID}, expectation{recv: tg.recv, at: time.Now(), phase: ph})
	return nil
}

// chooser spreads operations over the receivers in turn, keeping each
// slow receiver under what its four slots can carry (the timeout
// receiver holds a slot 10 s per message), and over operation kinds and
// tenants.
type chooser struct {
	tenants     int
	next, spill int
	last        [numBehaviours]time.Time
	count       [numBehaviours]int
}

// minGap is the least time between two operations for receiver b.
func minGap(b behaviour) time.Duration {
	switch b {
	case recvTimeout:
		return 8 * time.Second // ≤ 2 messages per 8 s; 4 slots × 10 s carry 0.4/s
	case recvSlow2s:
		return 1500 * time.Millisecond // ≤ 2 messages per 1.5 s; 4 slots × 2 s carry 2/s
	}
	return 0
}

// pick returns the next operation: its receiver, its kind and its tenant.
// In the baseline only the fast receiver is used.
func (c *chooser) pick(now time.Time, ph loadPhase) (behaviour, msgKind, int) {
	b := recvFast
	if ph == phaseMix {
		b = behaviour(c.next % int(numBehaviours))
		c.next++
		// A capped receiver's turn goes to another, never the fast one,
		// so that the fast receiver gets an eighth of the rate in the mix
		// as it gets in the baseline.
		for range numBehaviours {
			if now.Sub(c.last[b]) >= minGap(b) {
				break
			}
			b = behaviour(1 + c.spill%(int(numBehaviours)-1))
			c.spill++
		}
	}
	c.last[b] = now
	n := c.count[b]
	c.count[b]++
	return b, msgKind(n % int(numMsgKinds)), (n / int(numMsgKinds)) % c.tenants
}
