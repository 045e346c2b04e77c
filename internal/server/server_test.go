package server_test

import (
	"context"
	"strings"
	"testing"

	"github.com/agentowl/agentowl/internal/server"
	"github.com/agentowl/agentowl/internal/store/storetest"
)

// Two replicas on one PostgreSQL database with different secret keys (each
// created its own DATA-DIR/secret-key): the second refuses to start.
func TestReplicaWithAnotherSecretKeyRefusesToStart(t *testing.T) {
	if storetest.PostgresURL(t) == "" {
		t.Skip("AGENTOWL_TEST_DATABASE_URL not set: the replica check needs PostgreSQL")
	}
	url := storetest.FreshPostgresURL(t)
	firstDir := t.TempDir()
	first, err := server.Start(context.Background(), server.Config{DataDir: firstDir, Listen: "127.0.0.1:0", DatabaseURL: url})
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	second, err := server.Start(context.Background(), server.Config{DataDir: t.TempDir(), Listen: "127.0.0.1:0", DatabaseURL: url})
	if err == nil {
		second.Close()
	}
	if err == nil || !strings.Contains(err.Error(), "AGENTOWL_SECRET_KEY") {
		t.Fatalf("second replica with its own key: %v, want a refusal naming AGENTOWL_SECRET_KEY", err)
	}
	// The same key (copied file) starts fine.
	third, err := server.Start(context.Background(), server.Config{DataDir: firstDir, Listen: "127.0.0.1:0", DatabaseURL: url})
	if err != nil {
		t.Fatalf("replica with the same key: %v", err)
	}
	third.Close()
}
