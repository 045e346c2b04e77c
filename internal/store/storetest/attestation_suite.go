package storetest

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"testing"
	"time"

	"github.com/agentowl/agentowl"
	"github.com/agentowl/agentowl/internal/secret/secrettest"
	"github.com/agentowl/agentowl/internal/store/postgres"
	"github.com/agentowl/agentowl/internal/store/sqlite"
)

// attestationTests exercise the AttestationStore area.
var attestationTests = []struct {
	name string
	run  func(t *testing.T, e *env)
}{
	{"AttestationKeys", testAttestationKeys},
	{"Attestations", testAttestations},
}

func newAttestationKey(at time.Time) *agentowl.AttestationKey {
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	return &agentowl.AttestationKey{ID: "ed25519-" + agentowl.NewID("")[:13], PrivateKey: priv.Seed(), PublicKey: pub, CreatedAt: at}
}

// testAttestationKeys: one key signs at a time; rotation retires it and
// adds the next in one step; the list holds every key without private
// keys, oldest first, with the latest expiry each key signed until.
func testAttestationKeys(t *testing.T, e *env) {
	_, _, err := readPair(e, func(tx agentowl.Tx) (*agentowl.AttestationKey, int, error) {
		k, err := tx.AttestationKeyActive(e.ctx)
		return k, 0, err
	})
	wantErr(t, "no key yet", err, agentowl.ErrNotFound)
	first := newAttestationKey(e.now)
	e.write(t, func(tx agentowl.Tx) error { return tx.AttestationKeyCreate(e.ctx, first) })
	// A second replica starting at the same time loses: one key signs.
	wantErr(t, "a second signing key", e.writeErr(func(tx agentowl.Tx) error {
		return tx.AttestationKeyCreate(e.ctx, newAttestationKey(e.now))
	}), agentowl.ErrConflict)
	got := read(t, e, func(tx agentowl.Tx) (*agentowl.AttestationKey, error) { return tx.AttestationKeyActive(e.ctx) })
	equal(t, "the signing key", got, first)

	second := newAttestationKey(e.now.Add(time.Hour))
	e.write(t, func(tx agentowl.Tx) error { return tx.AttestationKeyRotate(e.ctx, second, e.now.Add(time.Hour)) })
	got = read(t, e, func(tx agentowl.Tx) (*agentowl.AttestationKey, error) { return tx.AttestationKeyActive(e.ctx) })
	equal(t, "the signing key after rotation", got, second)

	tn := e.tenant(t)
	for i, exp := range []time.Duration{time.Minute, 3 * time.Hour, 2 * time.Hour} {
		a := &agentowl.Attestation{ID: agentowl.NewID(""), TenantID: tn.ID, SubjectKind: agentowl.AttestationAAPRequest,
			SubjectID: agentowl.NewID(""), KeyID: first.ID, Token: "t", DecidedAt: e.now, ExpiresAt: e.now.Add(exp)}
		if i == 2 {
			a.KeyID = second.ID
		}
		e.write(t, func(tx agentowl.Tx) error { return tx.AttestationCreate(e.ctx, a) })
	}
	list := read(t, e, func(tx agentowl.Tx) ([]*agentowl.AttestationKey, error) { return tx.AttestationKeyList(e.ctx) })
	retired := e.now.Add(time.Hour)
	want := []*agentowl.AttestationKey{
		{ID: first.ID, PublicKey: first.PublicKey, CreatedAt: first.CreatedAt, RetiredAt: &retired, LastExpiresAt: e.now.Add(3 * time.Hour)},
		{ID: second.ID, PublicKey: second.PublicKey, CreatedAt: second.CreatedAt, LastExpiresAt: e.now.Add(2 * time.Hour)},
	}
	equal(t, "the keys", list, want)
}

// testAttestations: one attestation per subject; read back by subject.
func testAttestations(t *testing.T, e *env) {
	k := newAttestationKey(e.now)
	e.write(t, func(tx agentowl.Tx) error { return tx.AttestationKeyCreate(e.ctx, k) })
	tn := e.tenant(t)
	a := &agentowl.Attestation{ID: agentowl.NewID(""), TenantID: tn.ID, SubjectKind: agentowl.AttestationWorkDecision,
		SubjectID: "work_1/dec-1", KeyID: k.ID, Token: "eyJ.eyJ.sig", DecidedAt: e.now, ExpiresAt: e.now.Add(time.Hour)}
	e.write(t, func(tx agentowl.Tx) error { return tx.AttestationCreate(e.ctx, a) })
	got := read(t, e, func(tx agentowl.Tx) (*agentowl.Attestation, error) {
		return tx.AttestationGet(e.ctx, agentowl.AttestationWorkDecision, "work_1/dec-1")
	})
	equal(t, "read back", got, a)
	_, _, err := readPair(e, func(tx agentowl.Tx) (*agentowl.Attestation, int, error) {
		v, err := tx.AttestationGet(e.ctx, agentowl.AttestationAAPRequest, "work_1/dec-1")
		return v, 0, err
	})
	wantErr(t, "another kind of subject", err, agentowl.ErrNotFound)
	dup := *a
	dup.ID = agentowl.NewID("")
	wantErr(t, "a second attestation of one subject", e.writeErr(func(tx agentowl.Tx) error {
		return tx.AttestationCreate(e.ctx, &dup)
	}), agentowl.ErrConflict)
}

// AttestationKeySealedAtRest checks, on a fresh store of backend b, that
// an attestation key's private key is sealed at rest (no form of the seed
// in its column; it opens for its table, column and row only) and that a
// store opened without the secret key cannot read the signing key.
func AttestationKeySealedAtRest(t *testing.T, b Backend) {
	t.Helper()
	url, box := b.URL(t), secrettest.NewBox(t)
	e := &env{s: OpenURL(t, url, box), ctx: t.Context(), now: time.Now().UTC().Truncate(time.Microsecond)}
	k := newAttestationKey(e.now)
	e.write(t, func(tx agentowl.Tx) error { return tx.AttestationKeyCreate(e.ctx, k) })
	raw := openRaw(t, url)
	stored := rawColumn(t, raw, url, "attestation_keys", "private_key_sealed", k.ID)
	for form, v := range SecretForms(string(k.PrivateKey)) {
		if bytes.Contains(stored, v) {
			t.Errorf("attestation_keys.private_key_sealed holds its %s", form)
		}
	}
	if got, err := box.Open("attestation_keys", "private_key_sealed", k.ID, stored); err != nil || !bytes.Equal(got, k.PrivateKey) {
		t.Errorf("the sealed key opens as %x, %v", got, err)
	}
	if _, err := box.Open("attestation_keys", "private_key_sealed", "other", stored); err == nil {
		t.Error("the sealed key opens for another row")
	}
	keyless := openKeyless(t, url)
	err := keyless.Read(e.ctx, func(tx agentowl.Tx) error { _, err := tx.AttestationKeyActive(e.ctx); return err })
	if err == nil || errors.Is(err, agentowl.ErrNotFound) {
		t.Errorf("a store opened without the key read the signing key: %v", err)
	}
}

// openKeyless opens the store at url without a secret key, closed at
// test end.
func openKeyless(t *testing.T, url string) agentowl.Store {
	t.Helper()
	open := sqlite.Open
	if isPostgres(url) {
		open = postgres.Open
	}
	st, err := open(t.Context(), url, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}
