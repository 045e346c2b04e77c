package main

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentowl/agentowl/internal/maintenance"
)

// TestCLIAuditChain: `audit export` writes the header, the signed
// checkpoints and every entry with its hashes; `audit verify` accepts the
// server's chain and the file (offline, with the JWK Set in a file), and
// on a file whose entry was edited fails naming that entry.
func TestCLIAuditChain(t *testing.T) {
	forEachBackend(t, func(t *testing.T, s site) {
		srv := s.start(t, nil)
		_, op := s.operator(t, srv)
		for _, label := range []string{"a", "b", "c"} {
			op("provisioner-tokens", "create", "--label", label).ok(t)
		}
		// The running scheduler signs the first checkpoint when its job
		// first runs; this run makes sure one has.
		if _, err := srv.m.Scheduler().RunJob(t.Context(), maintenance.JobAuditCheckpoints); err != nil {
			t.Fatal(err)
		}
		op("provisioner-tokens", "create", "--label", "after-the-checkpoint").ok(t)

		dir := t.TempDir()
		file := filepath.Join(dir, "audit.jsonl")
		op("audit", "export", "--tenant", "default", "--format", "jsonl", "-o", file).ok(t)
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSpace(string(data)), "\n")
		kinds := map[string]int{}
		edit := -1
		for i, l := range lines {
			var v map[string]any
			if err := json.Unmarshal([]byte(l), &v); err != nil {
				t.Fatalf("line %d: %v", i+1, err)
			}
			kinds[v["type"].(string)]++
			if v["type"] == "entry" && v["action"] == "provisioner_token.create" && edit < 0 {
				edit = i
			}
		}
		if kinds["audit_export"] != 1 || kinds["checkpoint"] < 1 || kinds["entry"] < 5 || edit < 0 || !strings.Contains(lines[0], `"audit_export"`) {
			t.Fatalf("export lines by type: %v\n%s", kinds, data)
		}

		out := op("audit", "verify", "--tenant", "default").ok(t)
		if !strings.Contains(out, "OK: the chain verifies") || !strings.Contains(out, "match the chain") {
			t.Errorf("audit verify:\n%s", out)
		}

		resp, err := http.Get(srv.url + "/.well-known/agentowl/jwks.json")
		if err != nil {
			t.Fatal(err)
		}
		jwks, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		jwksFile := filepath.Join(dir, "jwks.json")
		if err := os.WriteFile(jwksFile, jwks, 0o600); err != nil {
			t.Fatal(err)
		}
		doc := cliJSON(t, runCLI(t, "audit", "verify", "--from", file, "--jwks", jwksFile, "--json"))
		if doc["findings"] == nil || len(doc["findings"].([]any)) != 0 || doc["checkpoints_matched"] != float64(kinds["checkpoint"]) {
			t.Errorf("offline verify: %v", doc)
		}
		runCLI(t, "audit", "verify", "--from", file).failed(t, "--jwks is required")

		// An entry of the file edited: verification names it.
		var e map[string]any
		_ = json.Unmarshal([]byte(lines[edit]), &e)
		lines[edit] = strings.Replace(lines[edit], `"actor":"operator:admin"`, `"actor":"operator:mallory"`, 1)
		tampered := filepath.Join(dir, "tampered.jsonl")
		if err := os.WriteFile(tampered, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		r := runCLI(t, "audit", "verify", "--from", tampered, "--jwks", jwksFile)
		if r.err == nil || !strings.Contains(r.stdout, "FAILED: entry seq") || !strings.Contains(r.stdout, "altered") {
			t.Fatalf("verify of an edited export: err %v\n%s", r.err, r.stdout)
		}
		want := "seq " + jsonNumber(e["seq"]) + " id " + jsonNumber(e["id"])
		if !strings.Contains(r.stdout, want) {
			t.Errorf("the finding does not name %s:\n%s", want, r.stdout)
		}
	})
}

func jsonNumber(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
