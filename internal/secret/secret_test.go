package secret_test

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/agentowl/agentowl/internal/secret"
	"github.com/agentowl/agentowl/internal/secret/secrettest"
)

// boxOf is the Box of the current key and previous keys.
func boxOf(t *testing.T, current []byte, previous ...[]byte) *secret.Box {
	t.Helper()
	b, err := secret.New(current, previous...)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A sealed value opens only for the table, column and row it was sealed
// for, only under its key, and not once altered.
func TestSealBindsPlace(t *testing.T) {
	t.Parallel()
	box := secrettest.NewBox(t)
	plain := []byte("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	sealed, err := box.Seal("endpoints", "signing_secret", "ep_a", plain)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(sealed, plain) || sealed[0] != 2 || !bytes.Equal(sealed[1:5], box.KeyCheck()[:4]) {
		t.Fatalf("sealed value %x holds the plaintext or lacks the format byte and key identifier", sealed)
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
	if _, err := secrettest.NewBox(t).Open("endpoints", "signing_secret", "ep_a", sealed); err == nil {
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
	box := boxOf(t, key)
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
	box := boxOf(t, key)
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

// A value names the key that sealed it: a Box with the new key as current
// and the old one as previous opens values of both, seals under the new
// one only, and picks each value's key by its identifier; a Box given
// only one key opens only that key's values and says which key a value
// needs.
func TestKeySelection(t *testing.T) {
	t.Parallel()
	oldKey, newKey := secret.NewKey(), secret.NewKey()
	oldBox := boxOf(t, oldKey)
	ring := boxOf(t, newKey, oldKey)
	newBox := boxOf(t, newKey)
	if !bytes.Equal(ring.KeyCheck(), newBox.KeyCheck()) || len(ring.PreviousKeyChecks()) != 1 ||
		!bytes.Equal(ring.PreviousKeyChecks()[0], oldBox.KeyCheck()) {
		t.Fatal("the ring's current key is not the new key, or its previous key is not the old one")
	}
	if !ring.HasKey(oldBox.KeyCheck()) || !ring.HasKey(newBox.KeyCheck()) || newBox.HasKey(oldBox.KeyCheck()) {
		t.Error("HasKey does not tell the keys a box holds")
	}

	byOld, _ := oldBox.Seal("endpoints", "signing_secret", "ep_a", []byte("old"))
	byRing, _ := ring.Seal("endpoints", "signing_secret", "ep_a", []byte("new"))
	if ring.SealedByCurrent(byOld) || !ring.SealedByCurrent(byRing) || !newBox.SealedByCurrent(byRing) {
		t.Error("SealedByCurrent does not tell the new key's values from the old key's")
	}
	if !bytes.HasPrefix(byRing, ring.SealedPrefix()) || bytes.HasPrefix(byOld, ring.SealedPrefix()) {
		t.Error("SealedPrefix does not tell the new key's values from the old key's")
	}
	if id, ok := secret.KeyID(byOld); !ok || id != hex.EncodeToString(oldBox.KeyCheck()[:secret.KeyIDSize]) {
		t.Errorf("KeyID of the old key's value = %q, %v", id, ok)
	}
	for _, c := range []struct {
		box    *secret.Box
		sealed []byte
		want   string // "" for a refusal
	}{
		{ring, byOld, "old"}, {ring, byRing, "new"}, {newBox, byRing, "new"}, {oldBox, byOld, "old"},
		{newBox, byOld, ""}, {oldBox, byRing, ""},
	} {
		got, err := c.box.Open("endpoints", "signing_secret", "ep_a", c.sealed)
		if c.want == "" {
			if err == nil {
				t.Errorf("a box without the sealing key opened %q", got)
			} else if id, _ := secret.KeyID(c.sealed); !strings.Contains(err.Error(), id) {
				t.Errorf("the refusal %q does not name the key %s the value needs", err, id)
			}
			continue
		}
		if err != nil || string(got) != c.want {
			t.Errorf("open = %q, %v; want %q", got, err, c.want)
		}
	}
	// The key identifier is bound to the value: a value whose identifier
	// is changed to another key's does not open under that key.
	forged := bytes.Clone(byOld)
	copy(forged[1:1+secret.KeyIDSize], ring.KeyCheck())
	if _, err := ring.Open("endpoints", "signing_secret", "ep_a", forged); err == nil {
		t.Error("a value relabelled with the new key's identifier opened")
	}
}

// Values of the first format (before values named their key) still open,
// under whichever key of the box sealed them, for their place only.
func TestOpenFormatV1(t *testing.T) {
	t.Parallel()
	oldKey, newKey := secret.NewKey(), secret.NewKey()
	v1 := secrettest.SealV1(oldKey, "bindings", "signing_secret", "bnd_a", []byte("whsec_v1"))
	ring := boxOf(t, newKey, oldKey)
	if got, err := ring.Open("bindings", "signing_secret", "bnd_a", v1); err != nil || string(got) != "whsec_v1" {
		t.Fatalf("open v1 with the ring = %q, %v", got, err)
	}
	if ring.SealedByCurrent(v1) {
		t.Error("a v1 value counts as sealed by the current key")
	}
	if _, ok := secret.KeyID(v1); ok {
		t.Error("a v1 value names a key")
	}
	if _, err := ring.Open("bindings", "signing_secret", "bnd_b", v1); err == nil {
		t.Error("a v1 value opened for another row")
	}
	only, _ := secret.New(newKey)
	if _, err := only.Open("bindings", "signing_secret", "bnd_a", v1); err == nil {
		t.Error("a v1 value opened under a key that did not seal it")
	}
	// Unversioned values too open under whichever key sealed them.
	unv := secrettest.SealUnversioned(oldKey, "binding:bnd_a:signing", []byte("whsec_0"))
	if got, err := ring.OpenUnversioned("binding:bnd_a:signing", unv); err != nil || string(got) != "whsec_0" {
		t.Errorf("open unversioned with the ring = %q, %v", got, err)
	}
}

// A previous key equal to the current key, or a missing one, is ignored;
// a previous key of the wrong size is refused.
func TestNewWithPrevious(t *testing.T) {
	t.Parallel()
	k := secret.NewKey()
	b, err := secret.New(k, k, nil)
	if err != nil || len(b.PreviousKeyChecks()) != 0 {
		t.Fatalf("New(k, k, nil) = %d previous keys, %v; want 0", len(b.PreviousKeyChecks()), err)
	}
	if _, err := secret.New(k, make([]byte, 16)); err == nil {
		t.Error("a 16-byte previous key was accepted")
	}
}
