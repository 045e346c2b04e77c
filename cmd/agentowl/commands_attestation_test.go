package main

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// goldenAttestation writes the attest package's first golden vector (an
// approved AAP request of issue_refund) and its JWK Set to files.
func goldenAttestation(t *testing.T) (token, jwks, dir string) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "attest", "testdata", "vectors.json"))
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		JWKS    json.RawMessage `json:"jwks"`
		Vectors []struct {
			Token string `json:"token"`
		} `json:"vectors"`
	}
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatal(err)
	}
	dir = t.TempDir()
	jwks = filepath.Join(dir, "jwks.json")
	if err := os.WriteFile(jwks, v.JWKS, 0o600); err != nil {
		t.Fatal(err)
	}
	return v.Vectors[0].Token, jwks, dir
}

// TestAttestationVerifyCommand: the golden attestation verifies with its
// facts and arguments; other arguments, another request, a changed byte,
// an unknown key and expiry (unless --any-time) make the command fail.
func TestAttestationVerifyCommand(t *testing.T) {
	token, jwks, dir := goldenAttestation(t)
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	tok := write("token.jws", token+"\n")
	wrapped := write("answer.json", `{"attestation": "`+token+`", "id": "x"}`)
	args := write("args.json", `{"amount": {"currency": "EUR", "value": "20.00"}, "order_id": "ord_1234"}`)
	otherArgs := write("other.json", `{"amount": {"currency": "EUR", "value": "2000.00"}, "order_id": "ord_1234"}`)
	tampered := write("tampered.jws", strings.Replace(token, token[len(token)-10:len(token)-9], map[bool]string{true: "B", false: "A"}[token[len(token)-10] == 'A'], 1))
	at := "2026-03-01T09:31:00Z"
	facts := []string{"--issuer", "https://owl.example.com", "--request", "6f1c2b4e-8a3d-4c5e-9f70-1a2b3c4d5e6f", "--tool", "issue_refund"}

	ok := runCLI(t, append([]string{"attestation", "verify", tok, "--jwks", jwks, "--at", at, "--arguments", args}, facts...)...)
	if ok.err != nil || !strings.Contains(ok.stdout, "verified") || !strings.Contains(ok.stdout, "approved") {
		t.Fatalf("verify: %v\n%s%s", ok.err, ok.stdout, ok.stderr)
	}
	if r := runCLI(t, "attestation", "verify", wrapped, "--jwks", jwks, "--at", at, "--json"); r.err != nil || !strings.Contains(r.stdout, `"verified": true`) {
		t.Errorf("a route's JSON answer: %v\n%s", r.err, r.stdout)
	}
	for name, a := range map[string][]string{
		"other arguments": append([]string{"attestation", "verify", tok, "--jwks", jwks, "--at", at, "--arguments", otherArgs}, facts...),
		"another request": {"attestation", "verify", tok, "--jwks", jwks, "--at", at, "--request", "00000000-0000-4000-8000-000000000000"},
		"another issuer":  {"attestation", "verify", tok, "--jwks", jwks, "--at", at, "--issuer", "https://evil.example"},
		"a denial wanted": {"attestation", "verify", tok, "--jwks", jwks, "--at", at, "--decision", "denied"},
		"a changed byte":  {"attestation", "verify", tampered, "--jwks", jwks, "--at", at},
		"expired":         {"attestation", "verify", tok, "--jwks", jwks, "--at", "2026-03-01T09:35:00Z"},
		"unknown key":     {"attestation", "verify", tok, "--jwks", write("empty.json", `{"keys": []}`), "--at", at},
		"no --jwks":       {"attestation", "verify", tok},
	} {
		if r := runCLI(t, a...); r.err == nil {
			t.Errorf("%s: verified\n%s", name, r.stdout)
		}
	}
	if r := runCLI(t, "attestation", "verify", tok, "--jwks", jwks, "--at", "2027-01-01T00:00:00Z", "--any-time"); r.err != nil {
		t.Errorf("--any-time on an expired attestation: %v", r.err)
	}
	// From standard input.
	var stdout, stderr bytes.Buffer
	root := newRootCommand(&stdout, &stderr)
	root.SetIn(strings.NewReader(token))
	root.SetArgs([]string{"attestation", "verify", "-", "--jwks", jwks, "--at", at})
	if err := root.ExecuteContext(t.Context()); err != nil || !strings.Contains(stdout.String(), "issue_refund") {
		t.Errorf("from stdin: %v\n%s%s", err, stdout.String(), stderr.String())
	}
}

// TestAttestationKeysCommands: rotate makes a new signing key and retires
// the previous one, which list shows published; no private key is printed.
func TestAttestationKeysCommands(t *testing.T) {
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	t.Setenv("AGENTOWL_SECRET_KEY", base64.StdEncoding.EncodeToString(key))
	dir := t.TempDir()
	first := runCLI(t, "attestation-keys", "rotate", "--data-dir", dir, "--json")
	second := runCLI(t, "attestation-keys", "rotate", "--data-dir", dir, "--json")
	if first.err != nil || second.err != nil {
		t.Fatalf("rotate: %v %v\n%s%s", first.err, second.err, first.stderr, second.stderr)
	}
	var a, b map[string]any
	_ = json.Unmarshal([]byte(first.stdout), &a)
	_ = json.Unmarshal([]byte(second.stdout), &b)
	if a["kid"] == nil || a["kid"] == b["kid"] || b["signing"] != true {
		t.Fatalf("rotate answers %v then %v", a, b)
	}
	list := runCLI(t, "attestation-keys", "list", "--data-dir", dir, "--json")
	var l struct {
		Items []map[string]any `json:"items"`
	}
	if err := json.Unmarshal([]byte(list.stdout), &l); err != nil || list.err != nil {
		t.Fatalf("list: %v %v: %s", list.err, err, list.stdout)
	}
	if len(l.Items) != 2 || l.Items[0]["kid"] != a["kid"] || l.Items[0]["signing"] != false || l.Items[0]["published"] != true ||
		l.Items[1]["signing"] != true {
		t.Errorf("list: %s", list.stdout)
	}
	for _, out := range []string{first.stdout, second.stdout, list.stdout} {
		if strings.Contains(out, `"d"`) || strings.Contains(strings.ToLower(out), "private") {
			t.Errorf("a private key in the output: %s", out)
		}
	}
	human := runCLI(t, "attestation-keys", "list", "--data-dir", dir)
	if human.err != nil || !strings.Contains(human.stdout, "retired") || !strings.Contains(human.stdout, "signing") {
		t.Errorf("list: %v\n%s", human.err, human.stdout)
	}
	// Without the secret key, rotation refuses.
	t.Setenv("AGENTOWL_SECRET_KEY", "")
	if r := runCLI(t, "attestation-keys", "rotate", "--data-dir", t.TempDir()); r.err == nil {
		t.Error("rotate without a secret key succeeded")
	}
}
