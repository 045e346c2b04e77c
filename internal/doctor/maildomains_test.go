package doctor_test

import (
	"strings"
	"testing"

	"github.com/agentowl/agentowl"
	"github.com/agentowl/agentowl/internal/doctor"
)

// smtpBinding stores a live smtp binding of tenantID at address.
func (e *env) smtpBinding(tenantID string, ep *agentowl.Endpoint, address string) *agentowl.Binding {
	b := &agentowl.Binding{ID: id("bnd"), TenantID: tenantID, Channel: "smtp", EndpointID: ep.ID, Address: address, CreatedAt: e.clock.Now()}
	e.write(func(tx agentowl.Tx) error { return tx.BindingCreate(e.ctx, b) })
	return b
}

func (e *env) assign(domain, tenantID string) {
	e.write(func(tx agentowl.Tx) error {
		return tx.MailDomainCreate(e.ctx, &agentowl.MailDomain{Domain: domain, TenantID: tenantID, CreatedAt: e.clock.Now()})
	})
}

// Bindings outside their tenant's mail domains (what the upgrade leaves at
// a domain several tenants used, or a removed domain) are reported to
// their tenant, and every tenant's to the system tenant's admins, by
// domain; generated addresses at the server's SMTP domain are fine.
func TestMailDomainFindings(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, e *env) {
		e.doctor = doctor.New(e.st, e.clock, doctor.Config{Scheduler: e.sched, Overdue: e.overdue, Engines: e.sched,
			SMTPDomain: "Server.Example"})
		ep, _, _ := e.healthy()
		// acme is the system tenant (bootstrapped first); beta is another.
		betaID, beta := e.tenant("beta")
		epB := &agentowl.Endpoint{ID: id("ep"), TenantID: betaID, Name: "rt", URL: "https://runtime.example/b",
			SigningSecret: []byte("sealed"), CreatedAt: e.clock.Now(), UpdatedAt: e.clock.Now()}
		e.write(func(tx agentowl.Tx) error { return tx.EndpointCreate(e.ctx, epB) })
		e.assign("beta.example", betaID)
		e.smtpBinding(betaID, epB, "desk@beta.example")                     // its domain
		e.smtpBinding(betaID, epB, "agent-abcdefghijklm@server.example")    // generated
		e.smtpBinding(e.tenantID, ep, "agent-nopqrstuvwxyz@server.example") // generated
		mine := e.smtpBinding(e.tenantID, ep, "help@shared.example")
		theirs := e.smtpBinding(betaID, epB, "info@shared.example")
		e.expect("a healthy tenant", "warning", "bindings_outside_mail_domains warning binding:"+mine.ID,
			"bindings_outside_mail_domains warning mail_domain:shared.example")
		r := e.report()
		if f := r.Findings[0]; !strings.Contains(f.Message, "help@shared.example") ||
			f.Command != "agentowl domains add shared.example --tenant acme (a system admin)" {
			t.Errorf("the tenant's finding: %+v", f)
		}
		if f := r.Findings[1]; !strings.Contains(f.Message, "info@shared.example (beta, "+theirs.ID+")") ||
			strings.Contains(f.Message, "help@shared.example") {
			t.Errorf("the system admins' finding: %+v", f)
		}
		// Another tenant sees its own binding only.
		br, err := e.doctor.Check(e.ctx, beta, "beta")
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, f := range br.Findings {
			if f.Check == doctor.CheckMailDomains {
				got = append(got, f.Subject)
				if strings.Contains(f.Message, "help@") {
					t.Errorf("beta's report shows acme's address: %+v", f)
				}
			}
		}
		if strings.Join(got, " ") != "binding:"+theirs.ID {
			t.Errorf("beta's mail domain findings: %q", got)
		}
		// The domain assigned to acme settles acme's binding; beta's stays listed.
		e.assign("shared.example", e.tenantID)
		e.expect("shared.example assigned to acme", "warning", "bindings_outside_mail_domains warning mail_domain:shared.example")
	})
}
