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
	{"AttestationPut", testAttestationPut},
	{"AttestationsUnsigned", testAttestationsUnsigned},
}

func newAttestationKey(at time.Time) *agentowl.AttestationKey {
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	return &agentowl.AttestationKey{ID: "ed25519-" + agentowl.NewID("")[:13], PrivateKey: priv.Seed(), PublicKey: pub, CreatedAt: at}
}

// newAttestation is an attestation of a subject by key keyID, decided at
// decided and valid for an hour, with a token of its own.
func newAttestation(tenantID, keyID, kind, subject string, decided time.Time) *agentowl.Attestation {
	return &agentowl.Attestation{ID: agentowl.NewID(""), TenantID: tenantID, SubjectKind: kind, SubjectID: subject,
		KeyID: keyID, Token: "eyJ.eyJ." + agentowl.NewID("")[:8], DecidedAt: decided, ExpiresAt: decided.Add(time.Hour)}
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
	a := newAttestation(tn.ID, k.ID, agentowl.AttestationWorkDecision, "work_1/dec-1", e.now)
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

// testAttestationPut: a put records an attestation of a new subject; of a
// subject attested already, by a put or a create, it succeeds and keeps
// the first, and of racing puts exactly one is kept.
func testAttestationPut(t *testing.T, e *env) {
	k := newAttestationKey(e.now)
	e.write(t, func(tx agentowl.Tx) error { return tx.AttestationKeyCreate(e.ctx, k) })
	tn := e.tenant(t)
	attestation := func(kind, subject string) *agentowl.Attestation {
		return newAttestation(tn.ID, k.ID, kind, subject, e.now)
	}
	put := func(a *agentowl.Attestation) error {
		return e.writeErr(func(tx agentowl.Tx) error { return tx.AttestationPut(e.ctx, a) })
	}
	mustPut := func(what string, a *agentowl.Attestation) {
		t.Helper()
		if err := put(a); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	get := func(kind, subject string) *agentowl.Attestation {
		t.Helper()
		return read(t, e, func(tx agentowl.Tx) (*agentowl.Attestation, error) { return tx.AttestationGet(e.ctx, kind, subject) })
	}

	subject := agentowl.NewID("")
	first := attestation(agentowl.AttestationAAPRequest, subject)
	mustPut("put", first)
	equal(t, "put, read back", get(agentowl.AttestationAAPRequest, subject), first)
	second := attestation(agentowl.AttestationAAPRequest, subject)
	second.DecidedAt = e.now.Add(time.Second)
	mustPut("a second put of one subject", second)
	equal(t, "after a second put", get(agentowl.AttestationAAPRequest, subject), first)
	// The same subject ID of the other kind is another subject.
	other := attestation(agentowl.AttestationWorkDecision, subject)
	mustPut("put of another kind", other)
	equal(t, "another kind of subject", get(agentowl.AttestationWorkDecision, subject), other)

	// A decision signed in its transaction (create) wins over a put.
	created := attestation(agentowl.AttestationWorkDecision, "work_1/dec-1")
	e.write(t, func(tx agentowl.Tx) error { return tx.AttestationCreate(e.ctx, created) })
	mustPut("put after create", attestation(agentowl.AttestationWorkDecision, "work_1/dec-1"))
	equal(t, "after create and put", get(agentowl.AttestationWorkDecision, "work_1/dec-1"), created)

	// Replicas signing one decision at once: every put succeeds, one is kept.
	raced := agentowl.NewID("")
	const n = 4
	tokens := make(map[string]*agentowl.Attestation, n)
	errs := make(chan error, n)
	for range n {
		a := attestation(agentowl.AttestationAAPRequest, raced)
		tokens[a.Token] = a
		go func() { errs <- put(a) }()
	}
	for range n {
		if err := <-errs; err != nil {
			t.Fatalf("a racing put: %v", err)
		}
	}
	got := get(agentowl.AttestationAAPRequest, raced)
	equal(t, "the racing put kept", got, tokens[got.Token])
}

// testAttestationsUnsigned: the approved and denied requests decided in
// [from, to) without an attestation of their own, oldest decision first,
// at most limit; of any tenant. Pending, expired and cancelled requests,
// requests decided outside the window and signed ones are not listed.
func testAttestationsUnsigned(t *testing.T, e *env) {
	from, to := e.now.Add(time.Hour), e.now.Add(2*time.Hour)
	unsigned := func(limit int) []string {
		t.Helper()
		got := read(t, e, func(tx agentowl.Tx) ([]string, error) { return tx.AttestationsUnsigned(e.ctx, from, to, limit) })
		if got == nil {
			got = []string{}
		}
		return got
	}
	equal(t, "none yet", unsigned(10), []string{})

	in, elsewhere := e.instance(t, e.tenant(t).ID, e.now), e.instance(t, e.tenant(t).ID, e.now)
	decided := func(in *agentowl.Instance, d *agentowl.Decision) *agentowl.ApprovalRequest {
		t.Helper()
		r := e.request(t, in, e.now)
		e.resolve(t, r, d, d.DecidedAt.Add(agentowl.RetentionAfterDecision))
		return r
	}
	// The window's requests, listed oldest decision first.
	atFrom := decided(in, approved(from))
	deniedLater := decided(in, denied(from.Add(20*time.Minute)))
	otherTenant := decided(elsewhere, approved(from.Add(10*time.Minute)))
	// Decided when created (a policy's decision).
	atCreation := newRequest(in, from.Add(30*time.Minute))
	atCreation.Status, atCreation.Decision = agentowl.StatusApproved, approved(atCreation.CreatedAt)
	e.write(t, func(tx agentowl.Tx) error { return tx.RequestCreate(e.ctx, atCreation) })
	// Not listed: pending; expired and cancelled in the window; decided
	// before from or at to; signed, whether in its transaction or after.
	e.request(t, in, from)
	expired := e.request(t, in, e.now)
	expiredAt := from.Add(5 * time.Minute)
	e.resolve(t, expired, &agentowl.Decision{Status: agentowl.StatusExpired, DecidedAt: expiredAt, DecidedBy: "deadline"},
		expiredAt.Add(agentowl.RetentionAfterDecision))
	decided(in, &agentowl.Decision{Status: agentowl.StatusCancelled, DecidedAt: from.Add(6 * time.Minute)})
	decided(in, approved(from.Add(-time.Microsecond)))
	decided(in, denied(to))
	k := newAttestationKey(e.now)
	e.write(t, func(tx agentowl.Tx) error { return tx.AttestationKeyCreate(e.ctx, k) })
	signedIn, signedAfter := decided(in, approved(from.Add(time.Minute))), decided(in, denied(from.Add(2*time.Minute)))
	sign := func(r *agentowl.ApprovalRequest) *agentowl.Attestation {
		return newAttestation(r.TenantID, k.ID, agentowl.AttestationAAPRequest, r.ID, r.Decision.DecidedAt)
	}
	e.write(t, func(tx agentowl.Tx) error {
		return errors.Join(tx.AttestationCreate(e.ctx, sign(signedIn)), tx.AttestationPut(e.ctx, sign(signedAfter)),
			// Another kind of subject with a request's ID does not sign it.
			tx.AttestationPut(e.ctx, newAttestation(in.TenantID, k.ID, agentowl.AttestationWorkDecision, atFrom.ID, from)))
	})

	want := []string{atFrom.ID, otherTenant.ID, deniedLater.ID, atCreation.ID}
	equal(t, "unsigned in the window", unsigned(10), want)
	equal(t, "at most limit", unsigned(2), want[:2])

	// Signing one takes it off the list.
	e.write(t, func(tx agentowl.Tx) error { return tx.AttestationPut(e.ctx, sign(otherTenant)) })
	equal(t, "once one is signed", unsigned(2), []string{atFrom.ID, deniedLater.ID})
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
