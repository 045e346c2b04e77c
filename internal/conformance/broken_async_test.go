package conformance

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentowl/agentowl/internal/store/storetest"
)

// brokenAsync breaks the webhook side of AgentOwl's real provider in one
// way: hook sits between the provider's delivery and the kit's receiver,
// api (if set) in front of the provider's API.
type brokenAsync struct {
	name  string
	fails string
	hook  func(tp *tamper)
	api   func(tp *tamper)
}

func (tc *tamperCtx) bodyField(name string) string {
	var m map[string]any
	_ = json.Unmarshal(tc.body, &m)
	s, _ := m[name].(string)
	return s
}

var brokenAsyncs = []brokenAsync{
	{name: "sends verification messages as text/plain", fails: AVerificationSigned, hook: func(tp *tamper) {
		tp.before = func(tc *tamperCtx) bool {
			if tc.bodyField("type") == "webhook.verification" {
				tc.r.Header.Set("Content-Type", "text/plain")
			}
			return false
		}
	}},
	{name: "accepts a bare 200 as verification", fails: AVerificationRequired, hook: func(tp *tamper) {
		tp.after = func(tc *tamperCtx) {
			if tc.bodyField("type") == "webhook.verification" && tc.status == http.StatusOK && strings.TrimSpace(string(tc.resp)) == "{}" {
				tc.resp = []byte(`{"challenge":"` + tc.bodyField("challenge") + `"}`)
			}
		}
	}},
	{name: "does not compare the challenge", fails: AUpdateUncommitted, hook: func(tp *tamper) {
		tp.after = func(tc *tamperCtx) {
			var got struct{ Challenge string }
			if tc.bodyField("type") == "webhook.verification" && tc.status == http.StatusOK && json.Unmarshal(tc.resp, &got) == nil &&
				got.Challenge != "" && got.Challenge != tc.bodyField("challenge") {
				tc.resp = []byte(`{"challenge":"` + tc.bodyField("challenge") + `"}`)
			}
		}
	}},
	{name: "sends an acknowledged notification again", fails: ANotification, hook: func(tp *tamper) {
		tp.after = func(tc *tamperCtx) {
			if tc.bodyField("type") == "request.resolved" && tc.status < 300 && tp.get("again:"+tc.bodyField("id")) == nil {
				tp.set("again:"+tc.bodyField("id"), true)
				status, header, resp := tc.status, tc.header, tc.resp
				tc.forward()
				tc.status, tc.header, tc.resp = status, header, resp
			}
		}
	}},
	{name: "re-encodes the body on retries", fails: ARetry, hook: func(tp *tamper) {
		tp.before = func(tc *tamperCtx) bool {
			if tc.bodyField("type") == "request.resolved" {
				k := "seen:" + tc.r.URL.Path + ":" + tc.bodyField("id")
				if tp.get(k) != nil {
					var buf bytes.Buffer
					json.Indent(&buf, tc.body, "", " ")
					tc.body = buf.Bytes()
				}
				tp.set(k, true)
			}
			return false
		}
	}},
	{name: "retries a 429 at once", fails: ARetryAfter, hook: func(tp *tamper) {
		tp.after = func(tc *tamperCtx) {
			if tc.status == http.StatusTooManyRequests {
				tc.forward()
			}
		}
	}},
	{name: "follows redirects", fails: ANoRedirect, hook: func(tp *tamper) {
		tp.after = func(tc *tamperCtx) {
			if loc := tc.header.Get("Location"); tc.status/100 == 3 && loc != "" {
				req, _ := http.NewRequest(http.MethodPost, loc, bytes.NewReader(tc.body))
				req.Header = tc.r.Header.Clone()
				client := &http.Client{Transport: &http.Transport{TLSClientConfig: tp.state["tls"].(*tlsClient).cfg}}
				if resp, err := client.Do(req); err == nil {
					resp.Body.Close()
					tc.status, tc.header, tc.resp = resp.StatusCode, resp.Header, nil
				}
			}
		}
	}},
	{name: "replays completed notifications to a replacement receiver", fails: AMoveQueued, hook: func(tp *tamper) {
		tp.after = func(tc *tamperCtx) {
			if tc.bodyField("type") != "request.resolved" {
				return
			}
			inst, path := tc.bodyField("instance_id"), tc.r.URL.Path
			tp.mu.Lock()
			acked, _ := tp.state["acked:"+inst].([]tamperCtx)
			first := tp.state["path:"+inst] == nil
			prevPath, _ := tp.state["path:"+inst].(string)
			tp.state["path:"+inst] = path
			if tc.status < 300 {
				tp.state["acked:"+inst] = append(acked, tamperCtx{r: tc.r.Clone(context.Background()), body: tc.body})
			}
			tp.mu.Unlock()
			if !first && prevPath != path {
				for _, old := range acked {
					cp := &tamperCtx{tp: tp, r: tc.r.Clone(context.Background()), body: old.body}
					cp.r.Header = old.r.Header.Clone()
					cp.forward()
				}
			}
		}
	}},
	{name: "keeps retrying after the instance is deleted", fails: ADeleteStops, hook: func(tp *tamper) {
		tp.after = func(tc *tamperCtx) {
			if tc.bodyField("type") == "request.resolved" && tc.status == http.StatusServiceUnavailable {
				cp := &tamperCtx{tp: tp, r: tc.r.Clone(context.Background()), body: tc.body}
				time.AfterFunc(1500*time.Millisecond, cp.forward)
			}
		}
	}},
	{name: "drops the fragment of a receiver URL", fails: AUnsafeURL, api: func(tp *tamper) {
		tp.before = func(tc *tamperCtx) bool {
			if tc.isInstances() && tc.r.Method == http.MethodPost {
				tc.body = bytes.Replace(tc.body, []byte("#frag"), nil, 1)
			}
			return false
		}
	}},
}

type tlsClient struct{ cfg *tls.Config }

// TestBrokenAsyncProviders: each asynchronous check fails against a
// provider whose webhooks (or API) violate its requirement, and only
// that check among the asynchronous ones.
func TestBrokenAsyncProviders(t *testing.T) {
	t.Parallel()
	hookTLS, hookCA := selfSigned(t)
	covered := map[string]bool{}
	for _, b := range brokenAsyncs {
		covered[b.fails] = true
	}
	for _, c := range (&providerRun{}).asyncChecks() {
		if !covered[c.ID] {
			t.Errorf("check %s has no broken provider that makes it fail", c.ID)
		}
	}
	cases := append([]brokenAsync{{name: "passes everything through"}}, brokenAsyncs...)
	reports := make([]*Report, len(cases))
	errs := make([]error, len(cases))
	var wg sync.WaitGroup
	for i, bc := range cases {
		a := startAgentOwl(t, storetest.Backends(t)[0], agentOwlOptions{caPEM: hookCA, retryMin: 100 * time.Millisecond, retryMax: 400 * time.Millisecond, manyRegistrations: true, memoryDisk: true})
		// The kit's receiver serves plain HTTP behind the hook tamper,
		// which terminates TLS for the provider.
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		hook, hookURL := newTamperTLS(t, "http://"+ln.Addr().String(), hookTLS)
		hook.state["tls"] = &tlsClient{cfg: clientTrusting(t, hookCA)}
		if bc.hook != nil {
			bc.hook(hook)
		}
		apiURL := a.url
		if bc.api != nil {
			tp, u := newTamper(t, a.url)
			bc.api(tp)
			apiURL = u
		}
		async := &AsyncConfig{Listener: ln, PublicURL: hookURL, DeliveryWait: 15 * time.Second, RetryAfter: 2 * time.Second, Quiet: 1500 * time.Millisecond}
		wg.Go(func() {
			reports[i], errs[i] = CheckProvider(context.Background(), ProviderConfig{URL: apiURL, ProvisionerToken: a.prov,
				Contract: testContract(t), Async: async, Only: []string{"provider.async."}})
		})
	}
	wg.Wait()
	for i, bc := range cases {
		t.Run(bc.name, func(t *testing.T) {
			if errs[i] != nil {
				t.Fatal(errs[i])
			}
			var fails []string
			if bc.fails != "" {
				fails = []string{bc.fails}
			}
			requireOutcome(t, reports[i], fails, nil)
		})
	}
}
