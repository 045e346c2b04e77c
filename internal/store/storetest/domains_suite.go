package storetest

import (
	"slices"
	"testing"
	"time"

	"github.com/agentowl/agentowl"
)

// domainTests exercise the MailDomains area.
var domainTests = []suiteCase[*env]{
	{"MailDomains", testMailDomains},
	{"BindingListOutsideDomains", testBindingListOutsideDomains},
}

// testMailDomains: a domain belongs to one tenant at most; lists are by
// domain, per tenant or all; a removed domain is gone.
func testMailDomains(t *testing.T, e *env) {
	a, b := e.tenant(t), e.tenant(t)
	ds := []*agentowl.MailDomain{
		{Domain: "mail.acme.example", TenantID: a.ID, CreatedAt: e.now},
		{Domain: "b.example", TenantID: b.ID, CreatedAt: e.now.Add(time.Second)},
		{Domain: "support@agents.example", TenantID: a.ID, CreatedAt: e.now.Add(2 * time.Second)},
	}
	for _, d := range ds {
		e.write(t, func(tx agentowl.Tx) error { return tx.MailDomainCreate(e.ctx, d) })
	}
	wantErr(t, "the same domain for another tenant", e.writeErr(func(tx agentowl.Tx) error {
		return tx.MailDomainCreate(e.ctx, &agentowl.MailDomain{Domain: "mail.acme.example", TenantID: b.ID, CreatedAt: e.now})
	}), agentowl.ErrConflict)
	got := read(t, e, func(tx agentowl.Tx) (*agentowl.MailDomain, error) {
		return tx.MailDomainGet(e.ctx, "support@agents.example")
	})
	equal(t, "get", got, ds[2])
	_, _, err := readPair(e, func(tx agentowl.Tx) (*agentowl.MailDomain, int, error) {
		d, err := tx.MailDomainGet(e.ctx, "agents.example")
		return d, 0, err
	})
	wantErr(t, "an unassigned domain", err, agentowl.ErrNotFound)
	equal(t, "every tenant's", read(t, e, func(tx agentowl.Tx) ([]*agentowl.MailDomain, error) { return tx.MailDomainList(e.ctx, "") }),
		[]*agentowl.MailDomain{ds[1], ds[0], ds[2]})
	equal(t, "tenant a's", read(t, e, func(tx agentowl.Tx) ([]*agentowl.MailDomain, error) { return tx.MailDomainList(e.ctx, a.ID) }),
		[]*agentowl.MailDomain{ds[0], ds[2]})
	e.write(t, func(tx agentowl.Tx) error { return tx.MailDomainDelete(e.ctx, "mail.acme.example") })
	wantErr(t, "delete twice", e.writeErr(func(tx agentowl.Tx) error { return tx.MailDomainDelete(e.ctx, "mail.acme.example") }),
		agentowl.ErrNotFound)
	equal(t, "after the delete", read(t, e, func(tx agentowl.Tx) ([]*agentowl.MailDomain, error) { return tx.MailDomainList(e.ctx, a.ID) }),
		[]*agentowl.MailDomain{ds[2]})
	// Free again: another tenant may have it.
	e.write(t, func(tx agentowl.Tx) error {
		return tx.MailDomainCreate(e.ctx, &agentowl.MailDomain{Domain: "mail.acme.example", TenantID: b.ID, CreatedAt: e.now})
	})
}

// testBindingListOutsideDomains: a live smtp binding is outside when
// neither its address nor its domain is its tenant's, or when its address
// is assigned to another tenant; generated addresses at the server's
// domain, deleted bindings and other channels never are.
func testBindingListOutsideDomains(t *testing.T, e *env) {
	a, b := e.tenant(t), e.tenant(t)
	epA, epB := e.endpoint(t, a.ID), e.endpoint(t, b.ID)
	smtp := func(ep *agentowl.Endpoint, addr string) *agentowl.Binding {
		t.Helper()
		v := &agentowl.Binding{ID: wid("bnd"), TenantID: ep.TenantID, Channel: "smtp", Name: name("binding"), EndpointID: ep.ID,
			Address: addr, CreatedAt: e.now}
		e.write(t, func(tx agentowl.Tx) error { return tx.BindingCreate(e.ctx, v) })
		return v
	}
	for _, d := range []*agentowl.MailDomain{
		{Domain: "a.example", TenantID: a.ID, CreatedAt: e.now},
		{Domain: "sales@a.example", TenantID: b.ID, CreatedAt: e.now},
		{Domain: "named@server.example", TenantID: a.ID, CreatedAt: e.now},
	} {
		e.write(t, func(tx agentowl.Tx) error { return tx.MailDomainCreate(e.ctx, d) })
	}
	smtp(epA, "help@a.example")                               // its domain: fine
	smtp(epA, "named@server.example")                         // its address: fine
	smtp(epA, "agent-abcdefghijklm@server.example")           // generated: fine
	stolen := smtp(epA, "sales@a.example")                    // its domain, but the address is b's
	shared := smtp(epA, "info@shared.example")                // unassigned
	other := smtp(epB, "info2@a.example")                     // a's domain
	bOwn := smtp(epB, "sales2@a.example")                     // a's domain too
	nearGen := smtp(epB, "agent-abcdefghijkl@server.example") // not the generated shape
	gone := smtp(epA, "old@gone.example")
	e.write(t, func(tx agentowl.Tx) error { return tx.BindingDelete(e.ctx, gone.ID, e.now) })
	e.binding(t, epA) // a webhook

	ids := func(p agentowl.OutsideDomainsParams) []string {
		t.Helper()
		bs := read(t, e, func(tx agentowl.Tx) ([]*agentowl.Binding, error) { return tx.BindingListOutsideDomains(e.ctx, p) })
		out := mapped(bs, func(b *agentowl.Binding) string { return b.Address })
		if p.Limit == 0 {
			slices.Sort(out) // the store's order is by creation
		}
		return out
	}
	equal(t, "tenant a's", ids(agentowl.OutsideDomainsParams{TenantID: a.ID, ServerDomain: "server.example"}),
		[]string{shared.Address, stolen.Address})
	equal(t, "every tenant's", ids(agentowl.OutsideDomainsParams{ServerDomain: "server.example"}),
		[]string{nearGen.Address, other.Address, shared.Address, bOwn.Address, stolen.Address})
	if got := ids(agentowl.OutsideDomainsParams{ServerDomain: "server.example", Limit: 2}); len(got) != 2 {
		t.Errorf("limited to 2: %q", got)
	}
	equal(t, "without a server domain, generated addresses count", ids(agentowl.OutsideDomainsParams{TenantID: a.ID}),
		[]string{"agent-abcdefghijklm@server.example", shared.Address, stolen.Address})
}
