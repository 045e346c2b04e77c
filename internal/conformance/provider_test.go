package conformance

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"slices"
	"testing"

	"github.com/agentowl/agentowl/internal/store/storetest"
)

// exampleReport is the committed JSON of a run against AgentOwl
// (docs/conformance.md refers to it). AGENTOWL_WRITE_CONFORMANCE_EXAMPLE=1
// makes TestProviderAgentOwl rewrite it from its SQLite run.
const exampleReport = "docs/conformance-example.json"

// TestProviderAgentOwl: AgentOwl passes every provider check, on each
// store.
func TestProviderAgentOwl(t *testing.T) {
	t.Parallel()
	for i, b := range storetest.Backends(t) {
		t.Run(b.Name, func(t *testing.T) {
			t.Parallel()
			async, opts := asyncSetup(t)
			a := startAgentOwl(t, b, opts)
			rep, err := CheckProvider(context.Background(), ProviderConfig{URL: a.url, ProvisionerToken: a.prov,
				Decider: a.decider(), Contract: testContract(t), Async: async})
			if err != nil {
				t.Fatal(err)
			}
			requireOutcome(t, rep, nil, nil)
			if i == 0 && os.Getenv("AGENTOWL_WRITE_CONFORMANCE_EXAMPLE") == "1" && !t.Failed() {
				var buf bytes.Buffer
				if err := WriteJSON(&buf, rep); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(repoFile(exampleReport), buf.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// TestExampleReport: the committed example is still a report of every
// provider check, all passed, in the current format.
func TestExampleReport(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile(repoFile(exampleReport))
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var rep Report
	if err := dec.Decode(&rep); err != nil {
		t.Fatalf("%s is not a report: %v", exampleReport, err)
	}
	if rep.FormatVersion != FormatVersion || rep.Subject != "provider" || rep.Tool != "agentowl conformance" {
		t.Errorf("%s: format_version %d, tool %q, subject %q", exampleReport, rep.FormatVersion, rep.Tool, rep.Subject)
	}
	var want []string
	p := &providerRun{}
	for _, c := range append(p.checks(), p.asyncChecks()...) {
		want = append(want, c.ID)
	}
	var got []string
	for _, c := range rep.Checks {
		got = append(got, c.ID)
		if c.Status != Pass {
			t.Errorf("%s: %s in the example: %s", c.ID, c.Status, c.Reason)
		}
	}
	slices.Sort(want)
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("%s has checks %v, the kit has %v: regenerate it (AGENTOWL_WRITE_CONFORMANCE_EXAMPLE=1 go test -run TestProviderAgentOwl ./internal/conformance)", exampleReport, got, want)
	}
	if s := rep.Summary; s.Fail != 0 || s.Skip != 0 || s.Pass != len(rep.Checks) {
		t.Errorf("%s: summary %+v for %d checks", exampleReport, s, len(rep.Checks))
	}
}
