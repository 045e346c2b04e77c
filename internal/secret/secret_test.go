package secret_test

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"testing"

	"github.com/agentowl/agentowl/internal/secret"
	"github.com/agentowl/agentowl/internal/secret/secrettest"
)

func newBox(t *testing.T) *secret.Box {
	t.Helper()
	b, err := secret.New(secret.NewKey())
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A sealed value opens only for the table, column and row it was sealed
// for, only under its key, and not once altered.
func TestSealBindsPlace(t *testing.T) {
	t.Parallel()
	box := newBox(t)
	plain := []byte("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	sealed, err := box.Seal("endpoints", "signing_secret", "ep_a", plain)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(sealed, plain) || sealed[0] != 1 {
		t.Fatalf("sealed value %x holds the plaintext or lacks the format byte", sealed)
	}
	if got, err := box.Open("endpoints", "signing_secret", "ep_a", sealed); err != nil || !bytes.Equal(got, plain) {
		t.Fatalf("open = %q, %v", got, err)
	}
	again, _ := box.Seal("endpoints", "signing_secret", "ep_a", plain)
	if bytes.Equal(again, sealed) {
		t.Error("sealing twice gave the same bytes: the nonce is not fresh")
	}
	for _, place := range [][3]string{
		{"endpoints", "signing_secret", "ep_b"},
		{"endpoints", "decision_secret", "ep_a"},
		{"bindings", "signing_secret", "ep_a"},
		// Length prefixes keep shifted boundaries apart.
		{"endpointss", "igning_secret", "ep_a"},
		{"endpoints", "signing_secretep_", "a"},
	} {
		if _, err := box.Open(place[0], place[1], place[2], sealed); err == nil {
			t.Errorf("the value sealed for endpoints.signing_secret of ep_a opened as %s.%s of %s", place[0], place[1], place[2])
		}
	}
	if _, err := newBox(t).Open("endpoints", "signing_secret", "ep_a", sealed); err == nil {
		t.Error("another key opened the value")
	}
	for i := range sealed {
		bad := bytes.Clone(sealed)
		bad[i] ^= 1
		if _, err := box.Open("endpoints", "signing_secret", "ep_a", bad); err == nil {
			t.Fatalf("a value altered at byte %d opened", i)
		}
	}
	for _, short := range [][]byte{nil, {1}, sealed[:20]} {
		if _, err := box.Open("endpoints", "signing_secret", "ep_a", short); err == nil {
			t.Errorf("a %d-byte value opened", len(short))
		}
	}
}

func TestNewRefusesOtherKeySizes(t *testing.T) {
	t.Parallel()
	for _, n := range []int{0, 16, 24, 31, 33} {
		if _, err := secret.New(make([]byte, n)); err == nil {
			t.Errorf("a %d-byte key was accepted", n)
		}
	}
}

// The key check is the value AgentOwl has recorded in key_checks since
// migration 5: databases that recorded it keep starting with their key.
func TestKeyCheckIsStable(t *testing.T) {
	t.Parallel()
	key := secret.NewKey()
	box, err := secret.New(key)
	if err != nil {
		t.Fatal(err)
	}
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte("agentowl/secret-key-check/v1"))
	if !bytes.Equal(box.KeyCheck(), mac.Sum(nil)) {
		t.Error("the key check changed: databases that recorded the old one would refuse their own key")
	}
	other, _ := secret.New(secret.NewKey())
	if bytes.Equal(box.KeyCheck(), other.KeyCheck()) {
		t.Error("two keys have the same check value")
	}
}

// Values sealed before the format byte existed (nonce, then GCM with a
// purpose string as associated data) open with OpenUnversioned, for their
// purpose only.
func TestOpenUnversioned(t *testing.T) {
	t.Parallel()
	key := secret.NewKey()
	box, err := secret.New(key)
	if err != nil {
		t.Fatal(err)
	}
	sealed := secrettest.SealUnversioned(key, "endpoint:ep_a:signing", []byte("whsec_old"))
	if got, err := box.OpenUnversioned("endpoint:ep_a:signing", sealed); err != nil || string(got) != "whsec_old" {
		t.Fatalf("open = %q, %v", got, err)
	}
	if _, err := box.OpenUnversioned("endpoint:ep_a:decision", sealed); err == nil {
		t.Error("an unversioned value opened for another purpose")
	}
	if _, err := box.Open("endpoints", "signing_secret", "ep_a", sealed); err == nil {
		t.Error("an unversioned value opened as a v1 value")
	}
}
