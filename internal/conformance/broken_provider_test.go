package conformance

import (
	"context"
	"encoding/json"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentowl/agentowl/internal/store/storetest"
)

// brokenProvider breaks AgentOwl's real provider in exactly one way.
type brokenProvider struct {
	name string
	// fails is the one check this violation must fail.
	fails string
	// setup installs the violation on the tamper in front of AgentOwl.
	setup func(tp *tamper, a *agentOwl)
}

var brokenProviders = []brokenProvider{
	{"answers a missing credential with 403", PAuthCredential, func(tp *tamper, a *agentOwl) {
		tp.before = func(tc *tamperCtx) bool {
			if tc.r.Header.Get("Authorization") == "" {
				tc.answer(http.StatusForbidden, errorBody("authorization", "forbidden"))
				return true
			}
			return false
		}
	}},
	{"lets instance credentials manage instances", PAuthTokenKinds, func(tp *tamper, a *agentOwl) {
		tp.before = func(tc *tamperCtx) bool {
			if tc.isInstances() && strings.HasPrefix(tc.token(), "owl_inst_") {
				tc.r.Header.Set("Authorization", "Bearer "+a.prov)
			}
			return false
		}
	}},
	{"shows a request to another instance", PAuthIsolation, func(tp *tamper, a *agentOwl) {
		tp.after = func(tc *tamperCtx) {
			if !tc.isRequests() {
				return
			}
			if tc.r.Method == http.MethodPost && tc.status == http.StatusCreated {
				if m := tc.respJSON(); m != nil {
					tp.set("owner:"+m["id"].(string), tc.token())
				}
			}
			if id := tc.pathID(); id != "" && tc.status == http.StatusNotFound {
				if owner, ok := tp.get("owner:" + id).(string); ok && owner != tc.token() {
					tc.replay(func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+owner) })
				}
			}
		}
	}},
	{"lengthens the requested window", PCreateRetrieve, func(tp *tamper, a *agentOwl) {
		tp.after = func(tc *tamperCtx) {
			if m := tc.respJSON(); tc.isRequests() && m != nil && m["deadline_at"] != nil {
				d, _ := time.Parse(time.RFC3339Nano, m["deadline_at"].(string))
				m["deadline_at"] = d.Add(time.Hour).UTC().Format(time.RFC3339Nano)
				tc.setResp(m)
			}
		}
	}},
	{"ignores ?wait", PLongPoll, func(tp *tamper, a *agentOwl) {
		tp.before = func(tc *tamperCtx) bool {
			q := tc.r.URL.Query()
			q.Del("wait")
			tc.r.URL.RawQuery = q.Encode()
			return false
		}
	}},
	{"refuses a repeated cancellation", PCancel, func(tp *tamper, a *agentOwl) {
		tp.after = func(tc *tamperCtx) {
			if id := tc.pathID(); tc.isRequests() && tc.r.Method == http.MethodDelete && tc.status == http.StatusOK {
				if tp.get("cancelled:"+id) != nil {
					tc.status, tc.resp = http.StatusConflict, []byte(strings.ReplaceAll(string(errorBody("conflict", "already_terminal")), "{rid}", tc.header.Get("X-Request-ID")))
				}
				tp.set("cancelled:"+id, true)
			}
		}
	}},
	{"compares idempotent submissions as bytes", PIdemReplay, func(tp *tamper, a *agentOwl) {
		tp.before = func(tc *tamperCtx) bool {
			if tc.isRequests() && tc.r.Method == http.MethodPost {
				k := "key:" + tc.token() + ":" + tc.r.Header.Get("Idempotency-Key")
				first, seen := tp.get(k).(string)
				if !seen {
					tp.set(k, string(tc.body))
				} else if first != string(tc.body) && sameBody(first, string(tc.body)) {
					tc.r.Header.Set("Idempotency-Key", tc.r.Header.Get("Idempotency-Key")+"-bytes-differ")
				}
			}
			return false
		}
	}},
	{"reuses a request for another body", PIdemConflict, func(tp *tamper, a *agentOwl) {
		tp.after = func(tc *tamperCtx) {
			if !tc.isRequests() || tc.r.Method != http.MethodPost {
				return
			}
			k := "first:" + tc.token() + ":" + tc.r.Header.Get("Idempotency-Key")
			if tc.status == http.StatusCreated {
				tp.set(k, tc.resp)
			}
			if first, ok := tp.get(k).([]byte); ok && tc.status == http.StatusConflict {
				tc.status, tc.resp = http.StatusOK, first
			}
		}
	}},
	{"turns a cancelled request into an expired one at its deadline", PTerminalCancelled, func(tp *tamper, a *agentOwl) {
		tp.after = func(tc *tamperCtx) {
			m := tc.respJSON()
			if !tc.isRequests() || m == nil || m["status"] != "cancelled" {
				return
			}
			d, _ := time.Parse(time.RFC3339Nano, m["deadline_at"].(string))
			if time.Now().After(d) {
				m["status"] = "expired"
				m["decision"] = map[string]any{"status": "expired", "decided_at": m["deadline_at"]}
				tc.setResp(m)
			}
		}
	}},
	{"never expires a request", PExpiry, func(tp *tamper, a *agentOwl) {
		tp.after = func(tc *tamperCtx) {
			if m := tc.respJSON(); tc.isRequests() && tc.r.Method == http.MethodGet && m != nil && m["status"] == "expired" {
				m["status"] = "pending"
				delete(m, "decision")
				tc.setResp(m)
			}
		}
	}},
	{"ignores unknown fields", PContractUnknown, func(tp *tamper, a *agentOwl) {
		allowed := map[string]bool{"tool": true, "arguments": true, "timeout": true, "agent_reasoning": true, "context": true,
			"instance_name": true, "delivery": true}
		tp.before = func(tc *tamperCtx) bool {
			var m map[string]any
			if len(tc.body) > 0 && decodeUseNumber(tc.body, &m) == nil {
				for k := range m {
					if !allowed[k] {
						delete(m, k)
					}
				}
				tc.body, _ = json.Marshal(m)
			}
			return false
		}
	}},
	{"makes up a missing Idempotency-Key", PContractInvalid, func(tp *tamper, a *agentOwl) {
		tp.before = func(tc *tamperCtx) bool {
			if tc.r.Method == http.MethodPost && tc.r.Header.Get("Idempotency-Key") == "" {
				tc.r.Header.Set("Idempotency-Key", newUUID())
			}
			return false
		}
	}},
	{"changes arguments after accepting a request", PImmutable, func(tp *tamper, a *agentOwl) {
		tp.after = func(tc *tamperCtx) {
			if m := tc.respJSON(); tc.isRequests() && tc.r.Method == http.MethodGet && m != nil {
				if args, ok := m["arguments"].(map[string]any); ok {
					delete(args, "Currency")
					tc.setResp(m)
				}
			}
		}
	}},
	{"returns the credential on instance reads", PInstLifecycle, func(tp *tamper, a *agentOwl) {
		tp.after = func(tc *tamperCtx) {
			if !tc.isInstances() {
				return
			}
			if m := tc.respJSON(); tc.r.Method == http.MethodPost && m != nil && m["instance"] != nil {
				cred, _ := m["credential"].(map[string]any)
				tp.set("cred:"+m["instance"].(map[string]any)["id"].(string), cred["token"])
			}
			if tok, ok := tp.get("cred:" + tc.pathID()).(string); ok && tc.r.Method == http.MethodGet {
				tc.header.Set("X-Debug-Credential", tok)
			}
		}
	}},
	{"keeps a deleted instance's credential working", PInstDelete, func(tp *tamper, a *agentOwl) {
		tp.after = func(tc *tamperCtx) {
			if tc.isRequests() && tc.r.Method == http.MethodGet && tc.pathID() != "" {
				k := "last:" + tc.token() + ":" + tc.pathID()
				if tc.status == http.StatusOK {
					tp.set(k, tamperCtx{status: tc.status, header: tc.header.Clone(), resp: tc.resp})
				} else if last, ok := tp.get(k).(tamperCtx); ok && tc.status == http.StatusUnauthorized {
					tc.status, tc.header, tc.resp = last.status, last.header, last.resp
				}
			}
		}
	}},
	{"recreates a deleted instance on a replay", PInstDeleteRetry, func(tp *tamper, a *agentOwl) {
		tp.after = func(tc *tamperCtx) {
			if tc.isInstances() && tc.r.Method == http.MethodPost && tc.status == http.StatusConflict && tc.respErrorCode() == "instance_deleted" {
				tc.replay(func(r *http.Request) { r.Header.Set("Idempotency-Key", newUUID()) })
			}
		}
	}},
	{"applies a replayed update again", PInstUpdateRetry, func(tp *tamper, a *agentOwl) {
		tp.before = func(tc *tamperCtx) bool {
			if tc.isInstances() && tc.r.Method == http.MethodPatch {
				k := "patch:" + tc.pathID() + ":" + tc.r.Header.Get("Idempotency-Key")
				if prev, ok := tp.get(k).(string); ok && prev == string(tc.body) {
					tc.r.Header.Set("Idempotency-Key", newUUID())
				}
				tp.set(k, string(tc.body))
			}
			return false
		}
	}},
	{"moves expires_at on every read", PDecisionApproved, func(tp *tamper, a *agentOwl) {
		tp.after = func(tc *tamperCtx) {
			if m := tc.respJSON(); tc.isRequests() && m != nil && m["status"] == "approved" {
				d := m["decision"].(map[string]any)
				d["expires_at"] = time.Now().UTC().Add(5 * time.Minute).Format(time.RFC3339)
				tc.setResp(m)
			}
		}
	}},
	{"lets a cancellation replace a denial", PDecisionDenied, func(tp *tamper, a *agentOwl) {
		tp.after = func(tc *tamperCtx) {
			m := tc.respJSON()
			if !tc.isRequests() || m == nil {
				return
			}
			id := tc.pathID()
			if m["status"] == "denied" && tc.r.Method == http.MethodGet {
				tp.set("denied:"+id, true)
			}
			if tp.get("denied:"+id) == nil {
				return
			}
			if tc.r.Method == http.MethodDelete {
				tp.set("overridden:"+id, true)
				tc.replay(func(r *http.Request) { r.Method = http.MethodGet })
				tc.status = http.StatusOK
				m = tc.respJSON()
			}
			if tp.get("overridden:"+id) != nil && m != nil && m["status"] == "denied" {
				m["status"] = "cancelled"
				m["decision"].(map[string]any)["status"] = "cancelled"
				tc.setResp(m)
			}
		}
	}},
	{"adds a field the contract does not have", PContractResponses, func(tp *tamper, a *agentOwl) {
		tp.after = func(tc *tamperCtx) {
			if m := tc.respJSON(); tc.isRequests() && tc.r.Method == http.MethodGet && tc.status == http.StatusOK && m != nil {
				m["provider_debug"] = true
				tc.setResp(m)
			}
		}
	}},
}

func (tc *tamperCtx) respErrorCode() string {
	x := Exchange{RespBody: tc.resp}
	return x.ErrorCode()
}

// sameBody reports whether two JSON bodies hold the same values.
func sameBody(a, b string) bool {
	var va, vb any
	if decodeUseNumber([]byte(a), &va) != nil || decodeUseNumber([]byte(b), &vb) != nil {
		return false
	}
	return reflect.DeepEqual(va, vb)
}

// TestBrokenProviders: each provider check fails against a provider that
// violates its requirement, and only that check; the same tamper with no
// violation passes everything. Every provider check has a broken provider.
func TestBrokenProviders(t *testing.T) {
	t.Parallel()
	covered := map[string]bool{}
	for _, bp := range brokenProviders {
		covered[bp.fails] = true
	}
	for _, c := range (&providerRun{}).checks() {
		if !covered[c.ID] {
			t.Errorf("check %s has no broken provider that makes it fail", c.ID)
		}
	}
	cases := append([]brokenProvider{{name: "passes everything through", setup: func(*tamper, *agentOwl) {}}}, brokenProviders...)
	// The runs mostly wait (deadlines, long polls): all of them run at
	// once, whatever go test's -parallel, then each is judged.
	reports := make([]*Report, len(cases))
	errs := make([]error, len(cases))
	var wg sync.WaitGroup
	for i, bp := range cases {
		// Each run has its own AgentOwl: one SQLite database takes one
		// write at a time, and the runs' writes would queue.
		a := startAgentOwl(t, storetest.Backends(t)[0], agentOwlOptions{memoryDisk: true})
		tp, url := newTamper(t, a.url)
		bp.setup(tp, a)
		wg.Go(func() {
			reports[i], errs[i] = CheckProvider(context.Background(), ProviderConfig{URL: url, ProvisionerToken: a.prov,
				Decider: a.decider(), Contract: testContract(t), Parallel: 4, Only: syncChecks})
		})
	}
	wg.Wait()
	for i, bp := range cases {
		t.Run(bp.name, func(t *testing.T) {
			if errs[i] != nil {
				t.Fatal(errs[i])
			}
			var fails []string
			if bp.fails != "" {
				fails = []string{bp.fails}
			}
			requireOutcome(t, reports[i], fails, nil)
		})
	}
}

// syncChecks selects the provider checks that need no receiver.
var syncChecks = []string{"provider.auth.", "provider.requests.", "provider.idempotency.", "provider.terminal.", "provider.expiry.",
	"provider.contract.", "provider.immutability.", "provider.instances.", "provider.decision."}
