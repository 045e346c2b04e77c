package main

import (
	"context"
	"strings"
	"testing"

	"github.com/agentowl/agentowl/internal/store/storetest"
)

// Two replicas on one PostgreSQL database with different secret keys (each
// created its own DATA-DIR/secret-key): the second refuses to start.
func TestReplicaWithAnotherSecretKeyRefusesToStart(t *testing.T) {
	if storetest.PostgresURL(t) == "" {
		t.Skip("AGENTOWL_TEST_DATABASE_URL not set: the replica check needs PostgreSQL")
	}
	url := storetest.FreshPostgresURL(t)
	first := &Main{Config: Config{DataDir: t.TempDir(), Listen: "127.0.0.1:0", DatabaseURL: url}}
	if err := first.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	second := &Main{Config: Config{DataDir: t.TempDir(), Listen: "127.0.0.1:0", DatabaseURL: url}}
	err := second.Run(context.Background())
	second.Close()
	if err == nil || !strings.Contains(err.Error(), "AGENTOWL_SECRET_KEY") {
		t.Fatalf("second replica with its own key: %v, want a refusal naming AGENTOWL_SECRET_KEY", err)
	}
	// The same key (copied file) starts fine.
	third := &Main{Config: Config{DataDir: first.Config.DataDir, Listen: "127.0.0.1:0", DatabaseURL: url}}
	if err := third.Run(context.Background()); err != nil {
		t.Fatalf("replica with the same key: %v", err)
	}
	third.Close()
}
