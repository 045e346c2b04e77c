package main

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentowl/agentowl/internal/secret"
	"github.com/agentowl/agentowl/internal/server"
)

// writeKey writes key, base64, to a new file and returns its path.
func writeKey(t *testing.T, key []byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "key")
	if err := os.WriteFile(path, []byte(base64.StdEncoding.EncodeToString(key)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// expectStartRefused checks that a server on s with the keys refuses to
// start with a message holding want.
func expectStartRefused(t *testing.T, s site, want string, key []byte, previous []byte) {
	t.Helper()
	cfg := s.config(nil, nil)
	cfg.SecretKey, cfg.PreviousSecretKey = key, previous
	srv, err := server.Start(context.Background(), cfg)
	if err == nil {
		srv.Close()
		t.Fatalf("a server with that key started; want a refusal saying %q", want)
	}
	if !strings.Contains(err.Error(), want) {
		t.Errorf("refusal %q does not say %q", err, want)
	}
}

// `agentowl secrets rotate-key` re-seals every kind of secret with a new
// key; stopped after one batch, the database refuses either key alone, and
// run again it finishes and says the old key can be removed. A server with
// only the new key then uses every secret; one with only the old key, or
// with a key that opens nothing, refuses to start and says why.
func TestRotateKeyCommand(t *testing.T) {
	forEachBackend(t, func(t *testing.T, s site) {
		srv, e := startWithEverySecret(t, s)
		if err := srv.close(); err != nil {
			t.Fatal(err)
		}
		oldKey, err := server.KeyFile(s.dataDir)
		if err != nil {
			t.Fatal(err)
		}
		newKey := secret.NewKey()
		where := []string{"--data-dir", s.dataDir}
		if s.dbURL != "" {
			where = []string{"--database-url", s.dbURL}
		}
		rotate := append([]string{"secrets", "rotate-key", "--new-key-file", writeKey(t, newKey), "--old-key-file", writeKey(t, oldKey)}, where...)

		out := runCLI(t, append(rotate, "--batch", "2", "--batches", "1")...).ok(t)
		if !strings.Contains(out, "Re-sealed 2") || !strings.Contains(out, "run rotate-key again") {
			t.Fatalf("one batch of rotate-key printed:\n%s", out)
		}
		expectStartRefused(t, s, "AGENTOWL_SECRET_KEY_PREVIOUS", newKey, nil)
		expectStartRefused(t, s, "rotation to a new key is under way", oldKey, nil)

		out = runCLI(t, rotate...).ok(t)
		if !strings.Contains(out, "the old key can be removed") {
			t.Fatalf("rotate-key run to the end printed:\n%s", out)
		}
		status := runCLI(t, append([]string{"secrets", "key-status", "--json"}, where...)...).ok(t)
		for _, want := range []string{`"remaining": 0`, `"rotation_under_way": false`, `"retired_key": "` + hex.EncodeToString(mustBox(t, oldKey).KeyCheck()[:secret.KeyIDSize])} {
			if !strings.Contains(status, want) {
				t.Errorf("key-status --json lacks %s:\n%s", want, status)
			}
		}

		expectStartRefused(t, s, "retired by a finished key rotation", oldKey, nil)
		expectStartRefused(t, s, "opens none of this database's secrets", secret.NewKey(), nil)
		srv = s.startWorkWith(t, e.caPEM(), func(cfg *server.Config) { cfg.SecretKey = newKey })
		e.instance.url = srv.url
		e.useEverySecret(t, srv, submitPending(t, e.instance, "after-rotation"))
		checkNoSecretStored(t, s, e)
	})
}

func mustBox(t *testing.T, key []byte) *secret.Box {
	t.Helper()
	b, err := secret.New(key)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
