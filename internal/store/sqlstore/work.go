package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/agentowl/agentowl"
)

// SQL of agent work (agentowl.AgentWorkStore). Booleans are 0/1 integers; JSON is
// stored as text, event payloads as bytes.

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func nullBytes(b []byte) any {
	if b == nil {
		return nil
	}
	return b
}

func nullJSON(raw json.RawMessage) any {
	if len(raw) == 0 {
		return nil
	}
	return string(raw)
}

// ---- endpoints

// endpointCols end with the endpoint's sealed columns (endpointSecrets).
var endpointCols = `id, tenant_id, name, url, agent_work, decision_url, created_at, updated_at, deleted_at,
	overdue_accept_within, overdue_report_interval, overdue_input_expiry, paused_at, ` + endpointSecrets.cols()

// scanEndpoint reads an endpoint, opening its secrets.
func (t *tx) scanEndpoint(s scanner) (*agentowl.Endpoint, error) {
	var v agentowl.Endpoint
	var agentWork int
	var decisionURL sql.NullString
	var created, updated int64
	var deleted, acceptWithin, reportInterval, inputExpiry, paused sql.NullInt64
	sealed, raw := endpointSecrets.dest()
	if err := s.Scan(append([]any{&v.ID, &v.TenantID, &v.Name, &v.URL, &agentWork, &decisionURL,
		&created, &updated, &deleted, &acceptWithin, &reportInterval, &inputExpiry, &paused}, sealed...)...); err != nil {
		return nil, err
	}
	v.AgentWork, v.DecisionURL = agentWork != 0, decisionURL.String
	v.CreatedAt, v.UpdatedAt, v.DeletedAt, v.PausedAt = fromTS(created), fromTS(updated), fromNullTS(deleted), fromNullTS(paused)
	v.Overdue = scanOverdue(acceptWithin, reportInterval, inputExpiry)
	if err := endpointSecrets.open(t.db, v.ID, &v, raw); err != nil {
		return nil, err
	}
	return &v, nil
}

func (t *tx) EndpointCreate(ctx context.Context, v *agentowl.Endpoint) error {
	sealed, err := endpointSecrets.seal(t.db, v.ID, v)
	if err != nil {
		return err
	}
	accept, report, input := overdueArgs(v.Overdue)
	args := append([]any{v.ID, v.TenantID, v.Name, v.URL, boolInt(v.AgentWork), nullStr(v.DecisionURL),
		ts(v.CreatedAt), ts(v.UpdatedAt), nullTS(v.DeletedAt), accept, report, input, nullTS(v.PausedAt)}, sealed...)
	_, err = t.exec(ctx, `INSERT INTO endpoints (`+endpointCols+`) VALUES (`+marks(len(args))+`)`, args...)
	return err
}

func (t *tx) EndpointGet(ctx context.Context, id string) (*agentowl.Endpoint, error) {
	return one(t.queryRow(ctx, `SELECT `+endpointCols+` FROM endpoints WHERE id = ?`, id), t.scanEndpoint)
}

func (t *tx) EndpointUpdate(ctx context.Context, v *agentowl.Endpoint) error {
	sealed, err := endpointSecrets.seal(t.db, v.ID, v)
	if err != nil {
		return err
	}
	accept, report, input := overdueArgs(v.Overdue)
	args := append([]any{v.Name, v.URL, boolInt(v.AgentWork), nullStr(v.DecisionURL),
		ts(v.UpdatedAt), nullTS(v.DeletedAt), accept, report, input, nullTS(v.PausedAt)}, sealed...)
	return t.execOne(ctx, `UPDATE endpoints SET name = ?, url = ?, agent_work = ?, decision_url = ?,
		updated_at = ?, deleted_at = ?, overdue_accept_within = ?, overdue_report_interval = ?,
		overdue_input_expiry = ?, paused_at = ?, `+endpointSecrets.assignments()+` WHERE id = ?`, append(args, v.ID)...)
}

func (t *tx) EndpointList(ctx context.Context, tenantID string) ([]*agentowl.Endpoint, error) {
	rows, err := t.query(ctx, `SELECT `+endpointCols+` FROM endpoints WHERE tenant_id = ? AND deleted_at IS NULL
		ORDER BY created_at, id`, tenantID)
	return all(rows, err, t.scanEndpoint)
}

// ---- runtime credentials

const runtimeCredentialCols = `id, tenant_id, endpoint_id, hash, label, scopes, created_at, expires_at, revoked_at`

func scanRuntimeCredential(s scanner) (*agentowl.RuntimeCredential, error) {
	var v agentowl.RuntimeCredential
	var scopes string
	var created, expires int64
	var revoked sql.NullInt64
	if err := s.Scan(&v.ID, &v.TenantID, &v.EndpointID, &v.Hash, &v.Label, &scopes, &created, &expires, &revoked); err != nil {
		return nil, err
	}
	v.Scopes = strings.Fields(scopes)
	v.CreatedAt, v.ExpiresAt, v.RevokedAt = fromTS(created), fromTS(expires), fromNullTS(revoked)
	return &v, nil
}

func (t *tx) RuntimeCredentialCreate(ctx context.Context, v *agentowl.RuntimeCredential) error {
	_, err := t.exec(ctx, `INSERT INTO runtime_credentials (`+runtimeCredentialCols+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		v.ID, v.TenantID, v.EndpointID, v.Hash, v.Label, strings.Join(v.Scopes, " "), ts(v.CreatedAt), ts(v.ExpiresAt),
		nullTS(v.RevokedAt))
	return err
}

func (t *tx) RuntimeCredentialGetByHash(ctx context.Context, hash []byte) (*agentowl.RuntimeCredential, error) {
	return one(t.queryRow(ctx, `SELECT `+runtimeCredentialCols+` FROM runtime_credentials WHERE hash = ?`, hash), scanRuntimeCredential)
}

func (t *tx) RuntimeCredentialGet(ctx context.Context, id string) (*agentowl.RuntimeCredential, error) {
	return one(t.queryRow(ctx, `SELECT `+runtimeCredentialCols+` FROM runtime_credentials WHERE id = ?`, id), scanRuntimeCredential)
}

func (t *tx) RuntimeCredentialList(ctx context.Context, endpointID string) ([]*agentowl.RuntimeCredential, error) {
	rows, err := t.query(ctx, `SELECT `+runtimeCredentialCols+` FROM runtime_credentials WHERE endpoint_id = ?
		ORDER BY created_at, id`, endpointID)
	return all(rows, err, scanRuntimeCredential)
}

func (t *tx) RuntimeCredentialRevoke(ctx context.Context, id string, at time.Time) error {
	if err := t.revoke(ctx, "runtime_credentials", "id", id, at); err != nil {
		return err
	}
	_, err := t.RuntimeCredentialGet(ctx, id)
	return err
}

func (t *tx) RuntimeCredentialRevokeByEndpoint(ctx context.Context, endpointID string, at time.Time) error {
	return t.revoke(ctx, "runtime_credentials", "endpoint_id", endpointID, at)
}

// ---- bindings

// bindingCols end with the binding's sealed columns (bindingSecrets).
var bindingCols = `id, tenant_id, channel, name, endpoint_id, token_hash, address, created_at, deleted_at, handoff_delay, ` +
	bindingSecrets.cols()

// scanBinding reads a binding, opening its secrets.
func (t *tx) scanBinding(s scanner) (*agentowl.Binding, error) {
	var v agentowl.Binding
	var address sql.NullString
	var created int64
	var deleted sql.NullInt64
	var delay int64
	sealed, raw := bindingSecrets.dest()
	if err := s.Scan(append([]any{&v.ID, &v.TenantID, &v.Channel, &v.Name, &v.EndpointID, &v.TokenHash, &address,
		&created, &deleted, &delay}, sealed...)...); err != nil {
		return nil, err
	}
	v.Address, v.CreatedAt, v.DeletedAt = address.String, fromTS(created), fromNullTS(deleted)
	v.HandoffDelay = time.Duration(delay) * time.Microsecond
	if err := bindingSecrets.open(t.db, v.ID, &v, raw); err != nil {
		return nil, err
	}
	return &v, nil
}

func (t *tx) BindingCreate(ctx context.Context, v *agentowl.Binding) error {
	sealed, err := bindingSecrets.seal(t.db, v.ID, v)
	if err != nil {
		return err
	}
	args := append([]any{v.ID, v.TenantID, v.Channel, v.Name, v.EndpointID, nullBytes(v.TokenHash),
		nullStr(v.Address), ts(v.CreatedAt), nullTS(v.DeletedAt), v.HandoffDelay.Microseconds()}, sealed...)
	_, err = t.exec(ctx, `INSERT INTO bindings (`+bindingCols+`) VALUES (`+marks(len(args))+`)`, args...)
	return err
}

func (t *tx) BindingGet(ctx context.Context, id string) (*agentowl.Binding, error) {
	return one(t.queryRow(ctx, `SELECT `+bindingCols+` FROM bindings WHERE id = ?`, id), t.scanBinding)
}

// bindingRouteCols are BindingRoute's binding and endpoint columns.
var bindingRouteCols = qualified(bindingCols, "b") + `, ` + qualified(endpointCols, "e")

func (t *tx) BindingRoute(ctx context.Context, id, scope string, now time.Time, openKey string) (*agentowl.Route, error) {
	r := &agentowl.Route{}
	var cred sql.NullString
	reads := []groupRead{oneRow(&r.Binding, func(s scanner) (*agentowl.Binding, error) {
		// The binding's columns, then the endpoint's, then the credential.
		return t.scanBinding(scannerFunc(func(dest ...any) error {
			var err error
			r.Endpoint, err = t.scanEndpoint(scannerFunc(func(epDest ...any) error {
				return s.Scan(append(append(dest, epDest...), &cred)...)
			}))
			return err
		}))
	}, `SELECT `+bindingRouteCols+`, `+t.newestCredential("e.id")+`
		FROM bindings b JOIN endpoints e ON e.id = b.endpoint_id WHERE b.id = ?`, ts(now), scopeWord(scope), id)}
	if openKey != "" {
		reads = append(reads, oneRow(&r.Open, scanConversation, conversationOpenByKey, id, openKey))
	}
	if err := t.readGroup(ctx, reads...); err != nil {
		return nil, err
	}
	if r.Binding == nil {
		return nil, agentowl.ErrNotFound
	}
	r.Credential = cred.String
	return r, nil
}

func (t *tx) RuntimeCredentialNewest(ctx context.Context, endpointID, scope string, now time.Time) (string, error) {
	var cred sql.NullString
	err := t.queryRow(ctx, `SELECT `+t.newestCredential("?"), endpointID, ts(now), scopeWord(scope)).Scan(&cred)
	return cred.String, err
}

// newestCredential is the subquery of RuntimeCredentialNewest for the
// endpoint ID endpoint (a column or "?"); its other arguments are now and
// scopeWord(scope). Active is agentowl.RuntimeCredential.Active: not revoked,
// not expired; the store suite checks both on the same cases. (Not LIKE:
// SQLite prepares a statement again whenever a LIKE pattern is bound.)
func (t *tx) newestCredential(endpoint string) string {
	return `(SELECT c.id FROM runtime_credentials c WHERE c.endpoint_id = ` + endpoint + `
		AND c.revoked_at IS NULL AND c.expires_at > ? AND ` + t.db.dialect.StrPos + `(' ' || c.scopes || ' ', ?) > 0
		ORDER BY c.created_at DESC, c.id DESC LIMIT 1)`
}

// scopeWord is scope as a whole word of a space-separated list.
func scopeWord(scope string) string { return " " + scope + " " }

func (t *tx) BindingGetByToken(ctx context.Context, tokenHash []byte) (*agentowl.Binding, error) {
	return one(t.queryRow(ctx, `SELECT `+bindingCols+` FROM bindings WHERE token_hash = ? AND deleted_at IS NULL`, tokenHash),
		t.scanBinding)
}

func (t *tx) BindingGetByAddress(ctx context.Context, address string) (*agentowl.Binding, error) {
	return one(t.queryRow(ctx, `SELECT `+bindingCols+` FROM bindings WHERE address = ? AND deleted_at IS NULL`, address),
		t.scanBinding)
}

func (t *tx) BindingList(ctx context.Context, tenantID string) ([]*agentowl.Binding, error) {
	rows, err := t.query(ctx, `SELECT `+bindingCols+` FROM bindings WHERE tenant_id = ? AND deleted_at IS NULL
		ORDER BY created_at, id`, tenantID)
	return all(rows, err, t.scanBinding)
}

func (t *tx) BindingDelete(ctx context.Context, id string, at time.Time) error {
	if _, err := t.exec(ctx, `UPDATE bindings SET deleted_at = ? WHERE id = ? AND deleted_at IS NULL`, ts(at), id); err != nil {
		return err
	}
	_, err := t.BindingGet(ctx, id)
	return err
}

func (t *tx) BindingCountByEndpoint(ctx context.Context, endpointID string) (int, error) {
	var n int
	err := t.queryRow(ctx, `SELECT count(*) FROM bindings WHERE endpoint_id = ? AND deleted_at IS NULL`, endpointID).Scan(&n)
	return n, err
}

// ---- conversations

const conversationCols = `id, tenant_id, binding_id, channel, key, status, runtime_session_id, created_at, last_event_at,
	ended_at`

func scanConversation(s scanner) (*agentowl.Conversation, error) {
	var v agentowl.Conversation
	var key, session sql.NullString
	var created, last int64
	var ended sql.NullInt64
	if err := s.Scan(&v.ID, &v.TenantID, &v.BindingID, &v.Channel, &key, &v.Status, &session, &created, &last,
		&ended); err != nil {
		return nil, err
	}
	v.Key, v.RuntimeSessionID = key.String, session.String
	v.CreatedAt, v.LastEventAt, v.EndedAt = fromTS(created), fromTS(last), fromNullTS(ended)
	return &v, nil
}

func (t *tx) ConversationCreate(ctx context.Context, v *agentowl.Conversation) error {
	return t.execLater(ctx, nil, `INSERT INTO conversations (`+conversationCols+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		v.ID, v.TenantID, v.BindingID, v.Channel, nullStr(v.Key), v.Status, nullStr(v.RuntimeSessionID), ts(v.CreatedAt),
		ts(v.LastEventAt), nullTS(v.EndedAt))
}

func (t *tx) ConversationGet(ctx context.Context, id string) (*agentowl.Conversation, error) {
	return one(t.queryRow(ctx, `SELECT `+conversationCols+` FROM conversations WHERE id = ?`, id), scanConversation)
}

const conversationOpenByKey = `SELECT ` + conversationCols + ` FROM conversations
	WHERE binding_id = ? AND key = ? AND status = 'open'`

func (t *tx) ConversationGetOpenByKey(ctx context.Context, bindingID, key string) (*agentowl.Conversation, error) {
	return one(t.queryRow(ctx, conversationOpenByKey, bindingID, key), scanConversation)
}

func (t *tx) ConversationTouch(ctx context.Context, id string, lastEventAt time.Time) error {
	return t.execLater(ctx, mustExist, `UPDATE conversations SET last_event_at = ? WHERE id = ?`, ts(lastEventAt), id)
}

func (t *tx) ConversationEnd(ctx context.Context, id string, at time.Time) error {
	err := t.execOne(ctx, `UPDATE conversations SET status = 'ended', ended_at = ? WHERE id = ? AND status = 'open'`, ts(at), id)
	if !errors.Is(err, agentowl.ErrNotFound) {
		return err
	}
	if _, err := t.ConversationGet(ctx, id); err != nil {
		return err
	}
	return agentowl.ErrConflict
}

func (t *tx) ConversationEndIdle(ctx context.Context, channel string, now time.Time, window time.Duration, limit int) (int, error) {
	idle := ts(now.Add(-window))
	res, err := t.exec(ctx, `UPDATE conversations SET status = 'ended', ended_at = last_event_at + ?
		WHERE id IN (SELECT id FROM conversations WHERE status = 'open' AND channel = ? AND last_event_at <= ? LIMIT ?)
			AND status = 'open' AND last_event_at <= ?`, window.Microseconds(), channel, idle, limit, idle)
	return affected(res, err)
}

func (t *tx) ConversationSetSession(ctx context.Context, id, sessionID string) error {
	return t.execLater(ctx, mustExist, `UPDATE conversations SET runtime_session_id = ? WHERE id = ?`, nullStr(sessionID), id)
}

// ---- events

const eventCols = `id, tenant_id, binding_id, conversation_id, channel, sender, received_at, headers, payload,
	attachments, dedupe_key, follow_up`

func scanEvent(s scanner) (*agentowl.Event, error) {
	var v agentowl.Event
	var headers, attachments string
	var received int64
	var dedupe sql.NullString
	var followUp int
	if err := s.Scan(&v.ID, &v.TenantID, &v.BindingID, &v.ConversationID, &v.Channel, &v.Sender, &received, &headers,
		&v.Payload, &attachments, &dedupe, &followUp); err != nil {
		return nil, err
	}
	v.ReceivedAt, v.Attachments, v.DedupeKey, v.FollowUp = fromTS(received), json.RawMessage(attachments), dedupe.String, followUp != 0
	if err := json.Unmarshal([]byte(headers), &v.Headers); err != nil {
		return nil, err
	}
	return &v, nil
}

func (t *tx) EventCreate(ctx context.Context, v *agentowl.Event) error {
	headers, err := json.Marshal(v.Headers)
	if err != nil {
		return err
	}
	attachments := string(v.Attachments)
	if attachments == "" {
		attachments = "[]"
	}
	return t.execLater(ctx, nil, `INSERT INTO events (`+eventCols+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		v.ID, v.TenantID, v.BindingID, v.ConversationID, v.Channel, v.Sender, ts(v.ReceivedAt), string(headers),
		[]byte(v.Payload), attachments, nullStr(v.DedupeKey), boolInt(v.FollowUp))
}

func (t *tx) EventGet(ctx context.Context, id string) (*agentowl.Event, error) {
	return one(t.queryRow(ctx, `SELECT `+eventCols+` FROM events WHERE id = ?`, id), scanEvent)
}

func (t *tx) EventGetByDedupeKey(ctx context.Context, bindingID, key string) (*agentowl.Event, error) {
	return one(t.queryRow(ctx, `SELECT `+eventCols+` FROM events WHERE binding_id = ? AND dedupe_key = ?`, bindingID, key),
		scanEvent)
}

// ---- work

const workCols = `id, tenant_id, endpoint_id, conversation_id, event_id, generation, replay_of, delivery_id, credential_id,
	status, sequence, runtime_session_id, result_summary, result_url, requests, error, callbacks, created_at, updated_at, ended_at`

func scanWork(s scanner) (*agentowl.Work, error) {
	var v agentowl.Work
	var replayOf, credential, session, summary, resultURL, requests, errJSON sql.NullString
	var status string
	var created, updated int64
	var ended sql.NullInt64
	if err := s.Scan(&v.ID, &v.TenantID, &v.EndpointID, &v.ConversationID, &v.EventID, &v.Generation, &replayOf, &v.DeliveryID,
		&credential, &status, &v.Sequence, &session, &summary, &resultURL, &requests, &errJSON, &v.Callbacks,
		&created, &updated, &ended); err != nil {
		return nil, err
	}
	v.ReplayOf, v.CredentialID, v.Status = replayOf.String, credential.String, agentowl.WorkStatus(status)
	v.RuntimeSessionID, v.ResultSummary, v.ResultURL = session.String, summary.String, resultURL.String
	if requests.Valid {
		v.Requests = json.RawMessage(requests.String)
	}
	if errJSON.Valid {
		v.Error = json.RawMessage(errJSON.String)
	}
	v.CreatedAt, v.UpdatedAt, v.EndedAt = fromTS(created), fromTS(updated), fromNullTS(ended)
	return &v, nil
}

func (t *tx) WorkCreate(ctx context.Context, v *agentowl.Work) error {
	return t.execLater(ctx, nil, `INSERT INTO work (`+workCols+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		v.ID, v.TenantID, v.EndpointID, v.ConversationID, v.EventID, v.Generation, nullStr(v.ReplayOf), v.DeliveryID,
		nullStr(v.CredentialID), string(v.Status), v.Sequence, nullStr(v.RuntimeSessionID), nullStr(v.ResultSummary),
		nullStr(v.ResultURL), nullJSON(v.Requests), nullJSON(v.Error), v.Callbacks, ts(v.CreatedAt), ts(v.UpdatedAt),
		nullTS(v.EndedAt))
}

const workByID = `SELECT ` + workCols + ` FROM work WHERE id = ?`

// workByIDForUpdate is workByID locking the row (WorkGetForUpdate): every
// write that checks work against its callbacks, items or decisions reads
// it so first.
func (t *tx) workByIDForUpdate() string { return workByID + t.db.dialect.ForUpdate }

func (t *tx) WorkGet(ctx context.Context, id string) (*agentowl.Work, error) {
	return one(t.queryRow(ctx, workByID, id), scanWork)
}

func (t *tx) WorkStatuses(ctx context.Context, ids []string) (map[string]agentowl.WorkStatus, error) {
	out := make(map[string]agentowl.WorkStatus, len(ids))
	for _, part := range chunks(ids) {
		rows, err := t.query(ctx, `SELECT id, status FROM work WHERE id IN (`+marks(len(part))+`)`, anys(part)...)
		if err != nil {
			return nil, err
		}
		for rows.Next() {
			var id, status string
			if err := rows.Scan(&id, &status); err != nil {
				rows.Close()
				return nil, err
			}
			out[id] = agentowl.WorkStatus(status)
		}
		err = rows.Err()
		rows.Close()
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

func (t *tx) WorkGetForUpdate(ctx context.Context, id string) (*agentowl.Work, error) {
	return one(t.queryRow(ctx, t.workByIDForUpdate(), id), scanWork)
}

func (t *tx) WorkUpdate(ctx context.Context, v *agentowl.Work) error {
	return t.execLater(ctx, mustExist, `UPDATE work SET status = ?, sequence = ?, runtime_session_id = ?, result_summary = ?, result_url = ?,
		requests = ?, error = ?, callbacks = ?, updated_at = ?, ended_at = ? WHERE id = ?`,
		string(v.Status), v.Sequence, nullStr(v.RuntimeSessionID), nullStr(v.ResultSummary), nullStr(v.ResultURL),
		nullJSON(v.Requests), nullJSON(v.Error), v.Callbacks, ts(v.UpdatedAt), nullTS(v.EndedAt), v.ID)
}

func (t *tx) WorkList(ctx context.Context, p agentowl.WorkListParams) ([]*agentowl.Work, error) {
	where, args := []string{"tenant_id = ?"}, []any{p.TenantID}
	where, args = eq(where, args, "status", p.Status)
	where, args = eq(where, args, "endpoint_id", p.EndpointID)
	where, args = eq(where, args, "conversation_id", p.ConversationID)
	return listNewest(ctx, t, workCols, "work", where, args, p.After, p.Limit, scanWork)
}

func (t *tx) WorkByEvent(ctx context.Context, eventID string) ([]*agentowl.Work, error) {
	rows, err := t.query(ctx, `SELECT `+workCols+` FROM work WHERE event_id = ? ORDER BY created_at, generation, id`, eventID)
	return all(rows, err, scanWork)
}

func (t *tx) WorkMaxGeneration(ctx context.Context, eventID, endpointID string) (int, error) {
	var n int
	err := t.queryRow(ctx, `SELECT coalesce(max(generation), 0) FROM work WHERE event_id = ? AND endpoint_id = ?`,
		eventID, endpointID).Scan(&n)
	return n, err
}

// ---- callbacks

const callbackCols = `work_id, callback_id, sequence, status, occurred_at, runtime_session_id, body, body_hash, stale,
	work_status, credential_id, recorded_at`

func scanCallback(s scanner) (*agentowl.Callback, error) {
	var v agentowl.Callback
	var status, workStatus string
	var session sql.NullString
	var stale int
	var recorded int64
	if err := s.Scan(&v.WorkID, &v.CallbackID, &v.Sequence, &status, &v.OccurredAt, &session, &v.Body, &v.BodyHash, &stale,
		&workStatus, &v.CredentialID, &recorded); err != nil {
		return nil, err
	}
	v.Status, v.WorkStatus, v.RuntimeSessionID = agentowl.WorkStatus(status), agentowl.WorkStatus(workStatus), session.String
	v.Stale, v.RecordedAt = stale != 0, fromTS(recorded)
	return &v, nil
}

func (t *tx) CallbackCreate(ctx context.Context, v *agentowl.Callback) error {
	return t.execLater(ctx, nil, `INSERT INTO work_callbacks (`+callbackCols+`, seq)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, (SELECT coalesce(max(seq), 0) + 1 FROM work_callbacks WHERE work_id = ?))`,
		v.WorkID, v.CallbackID, v.Sequence, string(v.Status), v.OccurredAt, nullStr(v.RuntimeSessionID), v.Body, v.BodyHash,
		boolInt(v.Stale), string(v.WorkStatus), v.CredentialID, ts(v.RecordedAt), v.WorkID)
}

func (t *tx) CallbackGet(ctx context.Context, workID, callbackID string) (*agentowl.Callback, error) {
	return one(t.queryRow(ctx, `SELECT `+callbackCols+` FROM work_callbacks WHERE work_id = ? AND callback_id = ?`,
		workID, callbackID), scanCallback)
}

func (t *tx) CallbackGetBySequence(ctx context.Context, workID string, sequence int64) (*agentowl.Callback, error) {
	return one(t.queryRow(ctx, `SELECT `+callbackCols+` FROM work_callbacks WHERE work_id = ? AND sequence = ?`,
		workID, sequence), scanCallback)
}

func (t *tx) WorkForCallback(ctx context.Context, workID, callbackID string, sequence int64, requests []string) (*agentowl.CallbackCheck, error) {
	c := &agentowl.CallbackCheck{Decided: map[string]bool{}}
	var found []*agentowl.Callback
	var decided []string
	items, args := `status <> 'resolved'`, []any{workID}
	if len(requests) > 0 {
		items += ` OR request_id IN (?` + strings.Repeat(`, ?`, len(requests)-1) + `)`
		for _, r := range requests {
			args = append(args, r)
		}
	}
	err := t.readGroup(ctx,
		oneRow(&c.Work, scanWork, t.workByIDForUpdate(), workID),
		allRows(&found, scanCallback, `SELECT `+callbackCols+` FROM work_callbacks WHERE work_id = ? AND (callback_id = ? OR sequence = ?)`,
			workID, callbackID, sequence),
		allRows(&c.Items, scanAttention, `SELECT `+attentionCols+` FROM attention_items WHERE work_id = ? AND (`+items+`)
			ORDER BY created_at DESC, id`, args...),
		allRows(&decided, scanString, `SELECT attention_id FROM work_decisions WHERE work_id = ?
			AND attention_id IN (SELECT id FROM attention_items WHERE work_id = ? AND status <> 'resolved')`, workID, workID))
	if err == nil && c.Work == nil {
		err = agentowl.ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	for _, cb := range found {
		if cb.CallbackID == callbackID {
			c.ByID = cb
		}
		if cb.Sequence == sequence {
			c.BySequence = cb
		}
	}
	for _, id := range decided {
		c.Decided[id] = true
	}
	return c, nil
}

func (t *tx) CallbackList(ctx context.Context, workID string, limit int) ([]*agentowl.Callback, error) {
	rows, err := t.query(ctx, `SELECT `+callbackCols+` FROM work_callbacks WHERE work_id = ? ORDER BY seq DESC LIMIT ?`,
		workID, listLimit(limit))
	out, err := all(rows, err, scanCallback)
	slices.Reverse(out)
	return out, err
}
