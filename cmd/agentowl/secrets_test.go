package main

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/pressly/goose/v3"

	"github.com/agentowl/agentowl"
	"github.com/agentowl/agentowl/internal/outbox"
	"github.com/agentowl/agentowl/internal/secret/secrettest"
	"github.com/agentowl/agentowl/internal/store/postgres"
	"github.com/agentowl/agentowl/internal/store/sqlite"
	"github.com/agentowl/agentowl/internal/store/storetest"
	"github.com/agentowl/agentowl/webhook"
)

// Secrets at rest (README, "Secrets at rest"): tokens are stored as hashes,
// and the secrets AgentOwl must read back are sealed, so the database alone
// reveals none of them, in any encoding.

// database is where s's store lives: the SQLite file or the PostgreSQL URL.
func (s site) database() string {
	if s.dbURL != "" {
		return s.dbURL
	}
	return filepath.Join(s.dataDir, "agentowl.db")
}

// everySecret is one secret of every kind AgentOwl stores, each created
// over the API of a running server.
type everySecret struct {
	admin, provisioner string
	// instance's receiver is the test's receiver, verified with
	// receiverSecret.
	instance       harness
	receiverSecret string
	endpointID     string
	endpointSecret string // signs deliveries to the endpoint
	decisionSecret string // the bearer secret sent to its decision URL
	runtimeToken   string
	bindingID      string
	bindingSecret  string // signs events sent to the binding
	ingressPath    string // carries the binding's token

	rcv *receiver    // the instance's receiver
	rs  *runtimeSink // the endpoint
}

// startWithEverySecret starts a server on s whose egress reaches a
// receiver and a runtime sink of the test, and creates every secret on it.
func startWithEverySecret(t *testing.T, s site) (*running, *everySecret) {
	t.Helper()
	rcv := newReceiver(t, func(context.Context, string, int) answer { return answer{status: http.StatusNoContent} })
	rs := newRuntimeSink(t)
	srv := s.startWork(t, certPEM(rs.srv))
	return srv, createEverySecret(t, s, srv, rcv, rs)
}

// caPEM is the certificate a server's egress trusts to reach e's receivers.
func (e *everySecret) caPEM() []byte { return certPEM(e.rs.srv) }

// createEverySecret creates them on srv: the bootstrap operator token of s,
// a provisioner token, an instance with rcv as receiver, an endpoint at rs
// with a decision secret, a runtime credential and a signed binding.
func createEverySecret(t *testing.T, s site, srv *running, rcv *receiver, rs *runtimeSink) *everySecret {
	t.Helper()
	e := &everySecret{admin: s.adminToken(t), rcv: rcv, rs: rs}
	e.provisioner = provisionerToken(t, srv.url, e.admin)
	e.instance = provisionWithDelivery(t, srv.url, e.provisioner, "sealed", rcv)
	rcv.mu.Lock()
	e.receiverSecret = rcv.instances[e.instance.instanceID]
	rcv.mu.Unlock()
	tenant := srv.url + "/api/v1/tenants/default"

	random := make([]byte, 20)
	_, _ = rand.Read(random)
	e.decisionSecret = "decision-" + hex.EncodeToString(random)
	r := send(t, http.MethodPost, tenant+"/endpoints", e.admin, map[string]any{"name": "sealed", "url": rs.srv.URL + "/events",
		"config": map[string]any{"agent_work": true}, "decision_url": rs.srv.URL + "/decisions", "decision_secret": e.decisionSecret})
	expectStatus(t, "create endpoint", r, http.StatusCreated)
	e.endpointID, _ = r.object(t)["id"].(string)
	e.endpointSecret, _ = r.object(t)["signing_secret"].(string)

	r = send(t, http.MethodPost, tenant+"/endpoints/"+e.endpointID+"/runtime-credentials", e.admin, map[string]any{})
	expectStatus(t, "create runtime credential", r, http.StatusCreated)
	e.runtimeToken, _ = r.object(t)["token"].(string)

	e.bindingSecret = webhook.NewSecret()
	r = send(t, http.MethodPost, tenant+"/bindings", e.admin, map[string]any{"channel": "webhook", "endpoint_id": e.endpointID,
		"signing_secret": e.bindingSecret})
	expectStatus(t, "create binding", r, http.StatusCreated)
	e.bindingID, _ = r.object(t)["id"].(string)
	ingressURL, _ := r.object(t)["ingress_url"].(string)
	e.ingressPath = strings.TrimPrefix(ingressURL, srv.url)

	for name, v := range e.byName() {
		if len(v) < 16 {
			t.Fatalf("%s is %q: the API did not return it", name, v)
		}
	}
	return e
}

// byName names each secret.
func (e *everySecret) byName() map[string]string {
	token := e.ingressPath[strings.LastIndex(e.ingressPath, "/")+1:]
	return map[string]string{
		"the operator token": e.admin, "the provisioner token": e.provisioner, "the instance credential": e.instance.credential,
		"the runtime credential": e.runtimeToken, "the ingress token": token, "the receiver signing secret": e.receiverSecret,
		"the endpoint signing secret": e.endpointSecret, "the decision bearer secret": e.decisionSecret,
		"the binding signing secret": e.bindingSecret,
	}
}

// useEverySecret has srv use each secret it must read back: requestID's
// decision notifies the receiver (which verifies the signature), an event
// signed with the binding secret is accepted, its handoff reaches the
// endpoint signed with the endpoint secret, and a decision push would
// carry the decision secret.
func (e *everySecret) useEverySecret(t *testing.T, srv *running, requestID string) {
	t.Helper()
	rcv, rs := e.rcv, e.rs
	approve(t, srv.url, e.admin, requestID)
	notified := func() bool {
		for _, n := range rcv.notifications() {
			var ev wireEvent
			if json.Unmarshal(n.body, &ev) == nil && ev.RequestID == requestID && n.status < 300 {
				return true
			}
		}
		return false
	}
	if !within(10*time.Second, notified) {
		t.Fatalf("the receiver got no notification of %s", requestID)
	}
	rcv.checkEvents(t) // every signature verified with the receiver secret

	body := []byte(`{"text":"sealed at rest"}`)
	key, err := webhook.ParseSecret(e.bindingSecret)
	if err != nil {
		t.Fatal(err)
	}
	h := http.Header{}
	key.SetHeaders(h, "msg_"+uuid.NewString(), time.Now(), body)
	before := len(rs.deliveries())
	r := send(t, http.MethodPost, srv.url+e.ingressPath, "", json.RawMessage(body), webhook.HeaderID, h.Get(webhook.HeaderID),
		webhook.HeaderTimestamp, h.Get(webhook.HeaderTimestamp), webhook.HeaderSignature, h.Get(webhook.HeaderSignature))
	expectStatus(t, "signed event", r, http.StatusAccepted)
	if !within(10*time.Second, func() bool { return len(rs.deliveries()) > before }) {
		t.Fatal("the event was not handed to the endpoint")
	}
	endpointKey, err := webhook.ParseSecret(e.endpointSecret)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range rs.deliveries()[before:] {
		if _, err := endpointKey.Verify(d.header, d.body, time.Now(), webhook.DefaultTolerance); err != nil {
			t.Errorf("a handoff is not signed with the endpoint secret: %v", err)
		}
	}

	var target *outbox.Target
	err = srv.m.Store().Read(context.Background(), func(tx agentowl.Tx) (err error) {
		target, err = srv.m.Work().ResolveDecisionDestination(context.Background(), tx, "decision:"+e.endpointID+"/work_x/dec_x")
		return err
	})
	if err != nil || target == nil || target.Secret != e.endpointSecret || target.Header.Get("Authorization") != "Bearer "+e.decisionSecret {
		t.Errorf("decision push target %+v, %v: want the endpoint secret and the decision secret as bearer", target, err)
	}
}

// checkNoSecretStored fails the test if the database of s holds any of e's
// secrets in any form. The endpoint's URL, stored in plain text, must be
// found: the search does see the data.
func checkNoSecretStored(t *testing.T, s site, e *everySecret) {
	t.Helper()
	control := e.rs.srv.URL + "/events"
	secrets := e.byName()
	secrets["control"] = control
	hits := storetest.FindRaw(t, s.database(), secrets)
	if len(hits["control"]) == 0 {
		t.Fatalf("the search of %s did not find the control value %q", s.database(), control)
	}
	delete(hits, "control")
	for name, where := range hits {
		t.Errorf("%s is stored readably: %s", name, strings.Join(where, "; "))
	}
}

// Every kind of secret, created and used over the API, is found nowhere in
// the database read past the store: no table, and on SQLite no byte of
// the database file or its WAL, holds its text, base64 or hex (or, for
// whsec_ secrets, those of the key bytes).
func TestSecretsAtRestAreSealed(t *testing.T) {
	forEachBackend(t, func(t *testing.T, s site) {
		srv, e := startWithEverySecret(t, s)
		e.useEverySecret(t, srv, submitPending(t, e.instance, "sealed-1"))
		checkNoSecretStored(t, s, e)
		if err := srv.close(); err != nil {
			t.Fatal(err)
		}
		checkNoSecretStored(t, s, e) // SQLite: the checkpointed file
	})
}

// A database from before migration 11 (a receiver secret in plain text,
// endpoint and binding secrets sealed without a format byte) is sealed at
// start-up, all of it, and every secret still works: the receiver is
// notified with a valid signature, signed events are accepted, handoffs
// are signed, the decision secret is sent.
func TestUpgradeSealsSecretsFromBefore(t *testing.T) {
	forEachBackend(t, func(t *testing.T, s site) {
		srv, e := startWithEverySecret(t, s)
		pending := submitPending(t, e.instance, "before-upgrade")
		if err := srv.close(); err != nil {
			t.Fatal(err)
		}

		storeAsBeforeMigration11(t, s, e)
		if hits := storetest.FindRaw(t, s.database(), map[string]string{"receiver secret": e.receiverSecret}); len(hits) == 0 {
			t.Fatal("the database from before does not hold the receiver secret in plain text")
		}

		srv = s.startWork(t, e.caPEM())
		checkNoSecretStored(t, s, e)
		e.useEverySecret(t, srv, pending)
		if err := srv.close(); err != nil {
			t.Fatal(err)
		}
		// Starting again finds nothing left to seal and changes nothing.
		srv = s.startWork(t, e.caPEM())
		e.instance.url = srv.url
		e.useEverySecret(t, srv, submitPending(t, e.instance, "after-upgrade"))
		checkNoSecretStored(t, s, e)
	})
}

// storeAsBeforeMigration11 rolls s's database back to before migration 11
// and stores e's secrets as AgentOwl did then, under s's key.
func storeAsBeforeMigration11(t *testing.T, s site, e *everySecret) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(s.dataDir, "secret-key"))
	if err != nil {
		t.Fatal(err)
	}
	key, err := base64.StdEncoding.DecodeString(strings.TrimSpace(string(data)))
	if err != nil {
		t.Fatal(err)
	}
	driver, dialect, migrations, q := "sqlite", goose.DialectSQLite3, sqlite.Migrations(), func(s string) string { return s }
	if s.dbURL != "" {
		driver, dialect, migrations = "pgx", goose.DialectPostgres, postgres.Migrations()
		q = func(s string) string {
			for i := 1; strings.Contains(s, "?"); i++ {
				s = strings.Replace(s, "?", "$"+strconv.Itoa(i), 1)
			}
			return s
		}
	}
	db, err := sql.Open(driver, s.database())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	p, err := goose.NewProvider(dialect, db, migrations)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := p.DownTo(ctx, 10); err != nil {
		t.Fatal(err)
	}
	for _, u := range []struct {
		query string
		args  []any
	}{
		{`UPDATE instances SET delivery_secret = ? WHERE id = ?`, []any{e.receiverSecret, e.instance.instanceID}},
		{`UPDATE endpoints SET signing_secret = ?, decision_secret = ? WHERE id = ?`, []any{
			secrettest.SealUnversioned(key, "endpoint:"+e.endpointID+":signing", []byte(e.endpointSecret)),
			secrettest.SealUnversioned(key, "endpoint:"+e.endpointID+":decision", []byte(e.decisionSecret)), e.endpointID}},
		{`UPDATE bindings SET signing_secret = ? WHERE id = ?`, []any{
			secrettest.SealUnversioned(key, "binding:"+e.bindingID+":signing", []byte(e.bindingSecret)), e.bindingID}},
	} {
		res, err := db.ExecContext(ctx, q(u.query), u.args...)
		if err != nil {
			t.Fatalf("%s: %v", u.query, err)
		}
		if n, _ := res.RowsAffected(); n != 1 {
			t.Fatalf("%s changed %d rows", u.query, n)
		}
	}
}

// The data directory's files are the owner's alone even when the directory
// already exists with a wider mode: the database with its WAL and shared
// memory, the secret key and the operator token are 0600. A data directory
// AgentOwl creates is 0700.
func TestDataFilesAreOwnerOnly(t *testing.T) {
	t.Parallel()
	existing := filepath.Join(t.TempDir(), "existing")
	if err := os.Mkdir(existing, 0o755); err != nil {
		t.Fatal(err)
	}
	created := filepath.Join(t.TempDir(), "created", "data")
	for _, dir := range []string{existing, created} {
		srv := site{backend: "sqlite", dataDir: dir}.start(t, nil)
		// A write, so that the WAL exists.
		expectStatus(t, "create provisioner token", send(t, http.MethodPost, srv.url+"/api/v1/tenants/default/provisioner-tokens",
			site{dataDir: dir}.adminToken(t), map[string]any{"label": "modes"}), http.StatusCreated)
		want := map[string]os.FileMode{"agentowl.db": 0o600, "agentowl.db-wal": 0o600, "agentowl.db-shm": 0o600,
			"secret-key": 0o600, "operator-token": 0o600}
		if dir == created {
			want["."], want[".."] = 0o700|os.ModeDir, 0o700|os.ModeDir
		}
		for name, mode := range want {
			fi, err := os.Stat(filepath.Join(dir, name))
			if err != nil {
				t.Fatal(err)
			}
			if fi.Mode() != mode {
				t.Errorf("%s has mode %v, want %v", filepath.Join(dir, name), fi.Mode(), mode)
			}
		}
		srv.close()
	}
}
