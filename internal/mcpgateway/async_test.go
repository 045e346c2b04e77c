package mcpgateway_test

import (
	"context"
	"encoding/pem"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/agentowl/agentowl/aap"
	"github.com/agentowl/agentowl/aap/sqlite"
	"github.com/agentowl/agentowl/internal/egress"
	"github.com/agentowl/agentowl/internal/server"
	"github.com/agentowl/agentowl/internal/server/servertest"
)

// Asynchronous mode: the gateway is a verified AAP receiver (the kit's
// aap.Receiver on its own store); a waiting call is woken by the
// provider's signed request.resolved notification and forwarded once. The
// gateway's fallback check runs every 30s here, longer than the test waits
// for the result, so the call can only have been woken by the webhook.
func TestAsynchronousModeWokenByWebhook(t *testing.T) {
	path := tempDB(t)
	st, err := sqlite.Open(context.Background(), path)
	must(t, err)
	rcv, err := aap.NewReceiver(aap.ReceiverConfig{Store: st})
	must(t, err)
	site := httptest.NewUnstartedServer(rcv)
	site.StartTLS()
	t.Cleanup(site.Close)
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: site.Certificate().Raw})
	p := newProvider(t, nil, func(c *server.Config) {
		c.Egress = egress.Config{AllowCIDRs: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}, ExtraRootsPEM: caPEM}
	})
	// Provisioning verifies the receiver: its registration is in the
	// gateway's store.
	pr := &aap.Provisioner{Provider: &aap.Client{BaseURL: p.url, Token: p.prov}, Registrations: st}
	cred, err := pr.Provision(context.Background(), aap.NewSubmission("mcp-gateway", site.URL+"/aap/events"))
	must(t, err)
	up := newUpstream(t)
	yaml := strings.Replace(gatewayYAML(up.srv.URL), "progress_interval: 10s", "progress_interval: 30s", 1) +
		"receiver:\n  url: " + site.URL + "/aap/events\n"
	g := startGatewayOn(t, yaml, cred.Client(nil), nil, st, path, rcv)
	agent := agentSession(t, g.srv.URL, agentToken, nil)
	e := &env{t: t, p: p}
	ch := e.call(context.Background(), agent, "issue_refund", refundArgs)
	id := waiting(t, g.store)
	p.decide(id, true, 10*time.Minute, "ok")
	res := receive(t, ch)
	if res.IsError || text(res) != "refund #1 issued" || up.refundCount() != 1 {
		t.Fatalf("result %v %q, %d refunds", res.IsError, text(res), up.refundCount())
	}
	// A denial arrives the same way.
	ch = e.call(context.Background(), agent, "issue_refund", `{"order":"C"}`)
	servertest.Eventually(t, "a second waiting call", func() bool {
		list, err := g.store.ListExecutions(context.Background(), aap.ExecWaiting)
		must(t, err)
		if len(list) == 1 {
			id = list[0].RequestID
		}
		return len(list) == 1 && id != ""
	})
	p.decide(id, false, 0, "no")
	if res := receive(t, ch); !res.IsError || !strings.HasPrefix(text(res), "denied") || up.refundCount() != 1 {
		t.Fatalf("denied: %q, %d refunds", text(res), up.refundCount())
	}
}
