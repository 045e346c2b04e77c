package attestation

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/agentowl/agentowl/internal/clocktest"
	"github.com/agentowl/agentowl/internal/store/storetest"
	"github.com/agentowl/agentowl/internal/syncbuf"
)

// What the background signer cannot sign (here: its store is gone) is
// logged, not dropped in silence; the sweep and the readers sign it later.
func TestBackgroundSigningFailureIsLogged(t *testing.T) {
	st := storetest.OpenSQLite(t)
	var logs syncbuf.Buffer
	s, err := New(st, clocktest.New(time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)),
		Config{Issuer: "https://agentowl.example", Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Ensure(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	s.After("0190f5c4-0000-7000-8000-000000000001")
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(logs.String(), "signing decisions after their transactions failed") {
		if time.Now().After(deadline) {
			t.Fatalf("no failure logged within 30 s; logs:\n%s", logs.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}
