package storetest

import (
	"strconv"
	"testing"

	"github.com/pressly/goose/v3"

	"github.com/agentowl/agentowl"
)

// mailDomainsUpgrade checks migration 00023 (mail domains) on data of
// version 22: each domain that the live smtp bindings of exactly one
// tenant use is assigned to it, since its first binding there; a domain
// several tenants use stays unassigned; deleted bindings and generated
// addresses (agent-…, which every tenant may have at the server's domain)
// do not count; every binding stays.
func mailDomainsUpgrade(t *testing.T, u upgradeDB) {
	t.Helper()
	ctx := migrateTo(t, u, 22)
	tru := map[bool]string{true: "true", false: "1"}[u.dialect == goose.DialectPostgres]
	fls := map[bool]string{true: "false", false: "0"}[u.dialect == goose.DialectPostgres]
	stmts := []string{
		`INSERT INTO tenants (id, name, system, created_at) VALUES ('t-1', 'one', ` + tru + `, 1), ('t-2', 'two', ` + fls + `, 1),
			('t-3', 'three', ` + fls + `, 1)`,
		`INSERT INTO endpoints (id, tenant_id, name, url, agent_work, signing_secret, created_at, updated_at) VALUES
			('ep-1', 't-1', 'rt', 'https://runtime.example.com/1', 1, 'sealed', 1, 1),
			('ep-2', 't-2', 'rt', 'https://runtime.example.com/2', 1, 'sealed', 1, 1),
			('ep-3', 't-3', 'rt', 'https://runtime.example.com/3', 1, 'sealed', 1, 1)`,
	}
	bindings := []struct {
		id, tenant, address string
		created             int
		deleted             bool
	}{
		{"b-1", "t-1", "help@one.example", 30, false},
		{"b-2", "t-1", "sales@one.example", 20, false},
		{"b-3", "t-2", "old@one.example", 10, true}, // deleted: does not count
		{"b-4", "t-1", "a@shared.example", 40, false},
		{"b-5", "t-2", "b@shared.example", 50, false},
		{"b-6", "t-2", "agent-abcdefghijklm@server.example", 60, false}, // generated
		{"b-7", "t-3", "agent-nopqrstuvwxyz@server.example", 70, false}, // generated
		{"b-8", "t-3", "desk@three.example", 80, false},
	}
	for _, b := range bindings {
		deleted := "NULL"
		if b.deleted {
			deleted = "90"
		}
		ep := "ep-" + b.tenant[2:]
		stmts = append(stmts, `INSERT INTO bindings (id, tenant_id, channel, name, endpoint_id, address, created_at, deleted_at)
			VALUES ('`+b.id+`', '`+b.tenant+`', 'smtp', '', '`+ep+`', '`+b.address+`', `+strconv.Itoa(b.created)+`, `+deleted+`)`)
	}
	stmts = append(stmts, `INSERT INTO bindings (id, tenant_id, channel, name, endpoint_id, token_hash, created_at)
		VALUES ('b-9', 't-2', 'webhook', '', 'ep-2', 'hash-9', 95)`)
	writeOldData(t, ctx, u.db, stmts)
	s := u.open(t)
	e := &env{s: s, ctx: ctx}
	got := read(t, e, func(tx agentowl.Tx) ([]*agentowl.MailDomain, error) { return tx.MailDomainList(ctx, "") })
	equal(t, "the domains assigned by the upgrade", got, []*agentowl.MailDomain{
		{Domain: "one.example", TenantID: "t-1", CreatedAt: fromMicros(20)},
		{Domain: "three.example", TenantID: "t-3", CreatedAt: fromMicros(80)},
	})
	outside := read(t, e, func(tx agentowl.Tx) ([]*agentowl.Binding, error) {
		return tx.BindingListOutsideDomains(ctx, agentowl.OutsideDomainsParams{ServerDomain: "server.example"})
	})
	var ids []string
	for _, b := range outside {
		ids = append(ids, b.ID)
	}
	equal(t, "the bindings outside their tenants' domains after the upgrade", ids, []string{"b-4", "b-5"})
	for _, b := range bindings {
		if b.deleted {
			continue
		}
		if got := read(t, e, func(tx agentowl.Tx) (*agentowl.Binding, error) { return tx.BindingGetByAddress(ctx, b.address) }); got.ID != b.id {
			t.Errorf("binding %s after the upgrade: %+v", b.id, got)
		}
	}
}
