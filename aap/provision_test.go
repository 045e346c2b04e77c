package aap_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/agentowl/agentowl/aap"
	"github.com/agentowl/agentowl/internal/clocktest"
	"github.com/agentowl/agentowl/internal/server/servertest"
	"github.com/agentowl/agentowl/webhook"
)

// Provisioning against the real provider: the receiver answers the
// verification only for the registration the provisioner stored; a retry of
// the same submission returns the same instance and credential; replacing
// delivery moves notifications to a new registration and secret and retires
// the old one.
func TestProvisionAndReplaceDelivery(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clock := clocktest.New(t0)
	rs := newReceiverSite(t, clock, nil)
	p := newProvider(t, clock, rs.caPEM())
	r, st := rs.current()
	prov := &aap.Provisioner{Provider: &aap.Client{BaseURL: p.url, Token: p.prov}, Registrations: st, Clock: clock}

	// A delivery whose registration the receiver does not expect fails
	// verification: the receiver never auto-accepts.
	stranger := aap.NewSubmission("stranger", rs.url())
	var ae *aap.APIError
	unexpected := &aap.Provisioner{Provider: prov.Provider, Registrations: &forgetfulStore{ReceiverStore: st}, Clock: clock}
	if _, err := unexpected.Provision(ctx, stranger); !errors.As(err, &ae) || ae.Code != "webhook_verification_failed" {
		t.Fatalf("provisioning with a registration the receiver does not expect: %v, want webhook_verification_failed", err)
	}

	sub := aap.NewSubmission("refund-agent", rs.url())
	path := filepath.Join(t.TempDir(), "sub.json")
	must(t, sub.Save(path))
	cred, err := prov.Provision(ctx, sub)
	must(t, err)
	saved, err := aap.LoadSubmission(path)
	must(t, err)
	again, err := prov.Provision(ctx, saved)
	must(t, err)
	if again.InstanceID != cred.InstanceID || again.Token != cred.Token {
		t.Fatalf("retrying the same submission gave %s, want the original %s", again.InstanceID, cred.InstanceID)
	}
	credPath := filepath.Join(t.TempDir(), "cred", "c.json")
	must(t, cred.Save(credPath))
	if fi, err := os.Stat(credPath); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("credential file mode %v (%v)", fi.Mode(), err)
	}
	if c2, err := aap.LoadCredential(credPath); err != nil || c2.Token != cred.Token || c2.Provider != p.url {
		t.Fatalf("LoadCredential = %+v, %v", c2, err)
	}
	reg, err := st.GetRegistration(ctx, sub.RegistrationID)
	must(t, err)
	if reg.InstanceID != cred.InstanceID || !reg.Confirmed {
		t.Fatalf("registration after provisioning: %+v", reg)
	}

	// Replace delivery: same URL, new registration and secret.
	repl := aap.NewSubmission("", rs.url())
	must(t, prov.ReplaceDelivery(ctx, cred.InstanceID, repl))
	regs, err := st.InstanceRegistrations(ctx, cred.InstanceID)
	must(t, err)
	if len(regs) != 1 || regs[0].ID != repl.RegistrationID || !regs[0].Confirmed {
		t.Fatalf("registrations after replacement: %+v", regs)
	}
	// Notifications now verify with the new secret and wake the harness.
	client := cred.Client(nil)
	req, err := client.CreateRequest(ctx, uuid.NewString(), &aap.Call{Tool: "issue_refund", Arguments: json.RawMessage(`{"amount":1}`), Timeout: "10m"})
	must(t, err)
	if !p.decide(req.ID, true, time.Minute) {
		t.Fatal("decide")
	}
	p.flush()
	ws, err := r.Wakeups(ctx, time.Minute, 10)
	must(t, err)
	if len(ws) != 1 || ws[0].RequestID != req.ID || ws[0].InstanceID != cred.InstanceID {
		t.Fatalf("wake-ups after replacement: %+v", ws)
	}
	// The old secret is no longer accepted.
	e := &recvEnv{t: t, clock: clock, store: st, r: r}
	oldKey, _ := webhook.ParseSecret(sub.Secret)
	id := uuid.NewString()
	if rec := e.send(e.signedWith(oldKey, id, clock.Now(), resolved(id, cred.InstanceID, uuid.NewString(), clock.Now()))); rec.Code != 401 {
		t.Fatalf("a notification signed with the retired secret: %d", rec.Code)
	}
}

// forgetfulStore pretends to store registrations: the receiver never
// learns about them.
type forgetfulStore struct{ aap.ReceiverStore }

func (forgetfulStore) PutRegistration(context.Context, *aap.Registration) error { return nil }

// A submission without a URL creates an instance without delivery (for a
// harness that long-polls, such as the MCP gateway): no receiver store is
// needed, a retry returns the same instance, and WaitRequest long-polls
// its requests.
func TestProvisionWithoutDelivery(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clock := clocktest.New(t0)
	p := newProvider(t, clock, nil)
	prov := &aap.Provisioner{Provider: &aap.Client{BaseURL: p.url, Token: p.prov}}
	sub := aap.NewSubmission("poller", "")
	cred, err := prov.Provision(ctx, sub)
	must(t, err)
	again, err := prov.Provision(ctx, sub)
	must(t, err)
	if again.InstanceID != cred.InstanceID || cred.RegistrationID != "" {
		t.Fatalf("instance %s then %s, registration %q", cred.InstanceID, again.InstanceID, cred.RegistrationID)
	}
	c := cred.Client(nil)
	req, err := c.CreateRequest(ctx, "k1", &aap.Call{Tool: "t", Arguments: json.RawMessage(`{}`), Timeout: "30m"})
	must(t, err)
	done := make(chan *aap.Request, 1)
	go func() {
		r, err := c.WaitRequest(ctx, req.ID, 30*time.Second)
		if err != nil {
			t.Error(err)
		}
		done <- r
	}()
	servertest.Eventually(t, "the long poll to wait", func() bool { return clock.Waiters() > 0 })
	if !p.decide(req.ID, false, 0) {
		t.Fatal("not pending")
	}
	if r := <-done; r == nil || r.Status != aap.StatusDenied {
		t.Fatalf("WaitRequest returned %+v", r)
	}
}
