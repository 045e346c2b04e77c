package storetest

import (
	"context"
	"database/sql"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentowl/agentowl"
	"github.com/agentowl/agentowl/internal/secret"
	"github.com/agentowl/agentowl/internal/secret/secrettest"
)

// Secret key rotation (sqlstore/rotate.go): a store opened with a new key
// as current and the database's key as previous re-seals every sealed
// column under the new key in batches, while the records are written and
// read; afterwards the new key alone opens everything, the old key alone
// and a key that opens nothing are refused.

// sealedSet is records with sealed secrets and the plain values they must
// read back with.
type sealedSet struct {
	mu        sync.Mutex
	instances map[string]string    // receiver signing secret
	endpoints map[string][2]string // signing, decision secret
	bindings  map[string]string    // signing or provider secret
}

func newSealedSet() *sealedSet {
	return &sealedSet{instances: map[string]string{}, endpoints: map[string][2]string{}, bindings: map[string]string{}}
}

// add writes one record of each kind with fresh secrets to st.
func (s *sealedSet) add(ctx context.Context, st agentowl.Store, tenantID string, now time.Time) error {
	inst := newInstance(tenantID, now)
	inst.Receiver = newDelivery()
	ep := newEndpoint(tenantID, now)
	ep.SigningSecret = []byte("whsec_ep-" + agentowl.NewID(""))
	ep.DecisionURL, ep.DecisionSecret = "https://decide.example.com/d", []byte("bearer-"+agentowl.NewID(""))
	hook := newBinding(ep, now)
	hook.SigningSecret = []byte("whsec_bnd-" + agentowl.NewID(""))
	sms := newBinding(ep, now)
	sms.Channel, sms.ProviderSecret = "sms", []byte("twilio-"+agentowl.NewID(""))
	if err := st.Write(ctx, func(tx agentowl.Tx) error {
		return errors.Join(tx.InstanceCreate(ctx, inst), tx.EndpointCreate(ctx, ep), tx.BindingCreate(ctx, hook), tx.BindingCreate(ctx, sms))
	}); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.instances[inst.ID] = inst.Receiver.SigningSecret
	s.endpoints[ep.ID] = [2]string{string(ep.SigningSecret), string(ep.DecisionSecret)}
	s.bindings[hook.ID], s.bindings[sms.ID] = string(hook.SigningSecret), string(sms.ProviderSecret)
	return nil
}

// rotateSigningSecret gives endpoint id a new signing secret.
func (s *sealedSet) rotateSigningSecret(ctx context.Context, st agentowl.Store, id string) error {
	fresh := "whsec_new-" + agentowl.NewID("")
	if err := st.Write(ctx, func(tx agentowl.Tx) error {
		ep, err := tx.EndpointGet(ctx, id)
		if err != nil {
			return err
		}
		ep.SigningSecret = []byte(fresh)
		return tx.EndpointUpdate(ctx, ep)
	}); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	v := s.endpoints[id]
	v[0] = fresh
	s.endpoints[id] = v
	return nil
}

// check reads every record of s from st and compares its secrets.
func (s *sealedSet) check(ctx context.Context, st agentowl.Store) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return st.Read(ctx, func(tx agentowl.Tx) error {
		var errs []error
		for id, want := range s.instances {
			v, err := tx.InstanceGet(ctx, id)
			if err != nil {
				return err
			}
			if v.Receiver == nil || v.Receiver.SigningSecret != want {
				errs = append(errs, errors.New("instance "+id+": wrong receiver secret"))
			}
		}
		for id, want := range s.endpoints {
			v, err := tx.EndpointGet(ctx, id)
			if err != nil {
				return err
			}
			if string(v.SigningSecret) != want[0] || string(v.DecisionSecret) != want[1] {
				errs = append(errs, errors.New("endpoint "+id+": wrong secrets"))
			}
		}
		for id, want := range s.bindings {
			v, err := tx.BindingGet(ctx, id)
			if err != nil {
				return err
			}
			if got := string(v.SigningSecret) + string(v.ProviderSecret); got != want {
				errs = append(errs, errors.New("binding "+id+": wrong secret"))
			}
		}
		return errors.Join(errs...)
	})
}

// someEndpoints returns up to n endpoint ids of s.
func (s *sealedSet) someEndpoints(n int) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for id := range s.endpoints {
		if len(out) == n {
			break
		}
		out = append(out, id)
	}
	return out
}

// openKeys opens the store at url with current and previous keys.
func openKeys(ctx context.Context, url string, current []byte, previous ...[]byte) (agentowl.Store, error) {
	box, err := secret.New(current, previous...)
	if err != nil {
		return nil, err
	}
	return Open(ctx, url, box)
}

func mustOpenKeys(t *testing.T, url string, current []byte, previous ...[]byte) agentowl.Store {
	t.Helper()
	st, err := openKeys(t.Context(), url, current, previous...)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	return st
}

// expectRefused checks that opening url with keys fails with want.
func expectRefused(t *testing.T, url string, want error, what string, current []byte, previous ...[]byte) {
	t.Helper()
	st, err := openKeys(t.Context(), url, current, previous...)
	if err == nil {
		st.Close()
	}
	if !errors.Is(err, want) {
		t.Errorf("open with %s: %v, want %v", what, err, want)
	}
}

// ResealBatch runs one batch of SecretsReseal on st.
func ResealBatch(ctx context.Context, st agentowl.Store, cursor agentowl.ResealCursor, limit int) (int, agentowl.ResealCursor, error) {
	var n int
	var next agentowl.ResealCursor
	err := st.Write(ctx, func(tx agentowl.Tx) (err error) {
		n, next, err = tx.SecretsReseal(ctx, cursor, limit)
		return err
	})
	return n, next, err
}

// finishRotation runs passes of batches on st until the rotation ends,
// calling between after each batch; it fails after three passes.
func finishRotation(t *testing.T, st agentowl.Store, limit int, between func()) int {
	t.Helper()
	ctx, total := t.Context(), 0
	for pass := 0; pass < 3; pass++ {
		var cursor agentowl.ResealCursor
		for !cursor.Done {
			n, next, err := ResealBatch(ctx, st, cursor, limit)
			if err != nil {
				t.Fatalf("re-seal: %v", err)
			}
			if n > limit {
				t.Fatalf("a batch of %d re-sealed %d values", limit, n)
			}
			total, cursor = total+n, next
			between()
		}
		var done bool
		if err := st.Write(ctx, func(tx agentowl.Tx) (err error) {
			done, err = tx.SecretKeyRotationFinish(ctx, time.Now())
			return err
		}); err != nil {
			t.Fatal(err)
		}
		if done {
			return total
		}
	}
	t.Fatal("the rotation did not finish in three passes")
	return 0
}

func keyStatus(t *testing.T, st agentowl.Store) agentowl.SecretKeyStatus {
	t.Helper()
	var s agentowl.SecretKeyStatus
	if err := st.Read(t.Context(), func(tx agentowl.Tx) (err error) { s, err = tx.SecretKeyStatus(t.Context()); return err }); err != nil {
		t.Fatal(err)
	}
	return s
}

// checkAllSealedBy fails unless every sealed value at url begins as the
// values box's current key seals.
func checkAllSealedBy(t *testing.T, url string, box *secret.Box) {
	t.Helper()
	raw := openRaw(t, url)
	for _, c := range [][2]string{{"instances", "delivery_secret_sealed"}, {"endpoints", "signing_secret"}, {"endpoints", "decision_secret"},
		{"bindings", "signing_secret"}, {"bindings", "provider_secret"}} {
		rows, err := raw.QueryContext(t.Context(), `SELECT id, `+c[1]+` FROM `+c[0]+` WHERE `+c[1]+` IS NOT NULL`)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for rows.Next() {
			var id string
			var v []byte
			if err := rows.Scan(&id, &v); err != nil {
				t.Fatal(err)
			}
			if !box.SealedByCurrent(v) {
				t.Errorf("%s.%s of %s is not sealed by the new key", c[0], c[1], id)
			}
			n++
		}
		rows.Close()
		if n == 0 {
			t.Errorf("%s.%s holds no sealed value: the check saw nothing", c[0], c[1])
		}
	}
}

// rawExecWrite runs a statement on the database at url past the store
// (which must be closed on SQLite), its ? placeholders numbered for
// PostgreSQL.
func rawExecWrite(t *testing.T, url, query string, args ...any) {
	t.Helper()
	driver, dsn := "pgx", url
	if !isPostgres(url) {
		driver, dsn = "sqlite", "file:"+url
	} else {
		for i := 1; strings.Contains(query, "?"); i++ {
			query = strings.Replace(query, "?", "$"+strconv.Itoa(i), 1)
		}
	}
	db, err := sql.Open(driver, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.ExecContext(t.Context(), query, args...); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
}

// seedForRotation writes n records of each kind under oldKey at url, one
// endpoint's signing secret in the first sealed format (before values
// named their key), and returns them.
func seedForRotation(t *testing.T, url string, oldKey []byte, n int) (*sealedSet, string) {
	t.Helper()
	ctx, now := t.Context(), time.Now().UTC().Truncate(time.Microsecond)
	st := mustOpenKeys(t, url, oldKey)
	tn := newTenant(now)
	if err := st.Write(ctx, func(tx agentowl.Tx) error { return tx.TenantCreate(ctx, tn) }); err != nil {
		t.Fatal(err)
	}
	set := newSealedSet()
	for range n {
		if err := set.add(ctx, st, tn.ID, now); err != nil {
			t.Fatal(err)
		}
	}
	st.Close()
	id := set.someEndpoints(1)[0]
	rawExecWrite(t, url, `UPDATE endpoints SET signing_secret = ? WHERE id = ?`,
		secrettest.SealV1(oldKey, "endpoints", "signing_secret", id, []byte(set.endpoints[id][0])), id)
	return set, tn.ID
}

// KeyRotationUnderLoad rotates the key of a fresh store of backend b while
// a second store on the same database (another replica, given both keys)
// creates records with secrets, changes endpoints' signing secrets and
// reads every record back, between every two batches of the rotation.
// Then the new key alone opens the database and reads every secret; the
// old key alone, and a key that opens nothing, are refused.
func KeyRotationUnderLoad(t *testing.T, b Backend) {
	url, oldKey, newKey := b.URL(t), secret.NewKey(), secret.NewKey()
	set, tenantID := seedForRotation(t, url, oldKey, 10)
	ctx := t.Context()

	// Both "replicas" restart with the new key as current and the old one
	// as previous: the first start records the rotation.
	rotator := mustOpenKeys(t, url, newKey, oldKey)
	replica := mustOpenKeys(t, url, newKey, oldKey)
	if s := keyStatus(t, rotator); s.Previous == nil || s.Remaining != s.Sealed || s.Sealed < 50 {
		t.Fatalf("after the restart with both keys the status is %+v: want a rotation with every value to re-seal", s)
	}
	if err := set.check(ctx, replica); err != nil {
		t.Fatalf("before the rotation: %v", err)
	}

	// The load runs rounds until the rotation ends; the rotation waits for
	// a round to end after each of its batches, so the two interleave.
	stop, progressed, loadDone := make(chan struct{}), make(chan struct{}, 1), make(chan error, 1)
	rounds := 0
	go func() {
		loadDone <- func() error {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return nil
				default:
				}
				if err := set.add(ctx, replica, tenantID, time.Now().UTC().Truncate(time.Microsecond)); err != nil {
					return err
				}
				for _, id := range set.someEndpoints(2) {
					if err := set.rotateSigningSecret(ctx, replica, id); err != nil {
						return err
					}
				}
				if err := set.check(ctx, replica); err != nil {
					return err
				}
				rounds++
				select {
				case progressed <- struct{}{}:
				default:
				}
			}
		}()
	}()
	batches := 0
	resealed := finishRotation(t, rotator, 7, func() {
		batches++
		select {
		case <-progressed:
		case err := <-loadDone:
			t.Fatalf("the load stopped: %v", err)
		}
	})
	close(stop)
	if err := <-loadDone; err != nil {
		t.Fatalf("load during the rotation: %v", err)
	}
	if batches < 5 || resealed == 0 || rounds < batches {
		t.Fatalf("%d batches re-sealed %d values beside %d load rounds: the rotation did not run under load", batches, resealed, rounds)
	}
	s := keyStatus(t, rotator)
	if s.Remaining != 0 || s.Previous != nil || len(s.Retired) == 0 {
		t.Errorf("after the rotation the status is %+v: want nothing remaining, no previous key, the old key retired", s)
	}
	rotator.Close()
	replica.Close()

	newBox, _ := secret.New(newKey)
	checkAllSealedBy(t, url, newBox)
	only := mustOpenKeys(t, url, newKey)
	if err := set.check(ctx, only); err != nil {
		t.Errorf("with the new key only: %v", err)
	}
	only.Close()
	expectRefused(t, url, secret.ErrKeyRetired, "the old key only", oldKey)
	expectRefused(t, url, secret.ErrKeyMismatch, "a key that opens nothing", secret.NewKey())
	expectRefused(t, url, secret.ErrKeyMismatch, "a key that opens nothing, the old one as previous", secret.NewKey(), oldKey)
}

// KeyRotationResumes stops a rotation after one batch (the process ends),
// checks what each key alone is told meanwhile, then continues it to the
// end from a new process.
func KeyRotationResumes(t *testing.T, b Backend) {
	url, oldKey, newKey := b.URL(t), secret.NewKey(), secret.NewKey()
	set, _ := seedForRotation(t, url, oldKey, 4)
	ctx := t.Context()

	first := mustOpenKeys(t, url, newKey, oldKey)
	total := keyStatus(t, first).Sealed
	n, cursor, err := ResealBatch(ctx, first, agentowl.ResealCursor{}, 5)
	if err != nil || n != 5 || cursor.Done {
		t.Fatalf("first batch: %d re-sealed, %+v, %v; want 5 and more to do", n, cursor, err)
	}
	if s := keyStatus(t, first); s.Remaining != total-5 {
		t.Fatalf("after one batch %d of %d remain, want %d", s.Remaining, total, total-5)
	}
	first.Close() // the rotation stops here

	expectRefused(t, url, secret.ErrPreviousKeyNeeded, "the new key only, mid-rotation", newKey)
	expectRefused(t, url, secret.ErrKeyRotating, "the old key only, mid-rotation", oldKey)
	expectRefused(t, url, secret.ErrRotationUnfinished, "a third key with the new one as previous, mid-rotation", secret.NewKey(), newKey)
	expectRefused(t, url, secret.ErrKeyMismatch, "a key that opens nothing, mid-rotation", secret.NewKey())

	second := mustOpenKeys(t, url, newKey, oldKey)
	if err := set.check(ctx, second); err != nil {
		t.Fatalf("mid-rotation with both keys: %v", err)
	}
	if got := finishRotation(t, second, 5, func() {}); got != total-5 {
		t.Errorf("the continued rotation re-sealed %d values, want the %d left", got, total-5)
	}
	// Finishing again is a no-op.
	if got := finishRotation(t, second, 5, func() {}); got != 0 {
		t.Errorf("a rotation run again after the end re-sealed %d values", got)
	}
	second.Close()

	only := mustOpenKeys(t, url, newKey)
	defer only.Close()
	if err := set.check(ctx, only); err != nil {
		t.Errorf("with the new key only: %v", err)
	}
}
