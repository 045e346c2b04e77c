package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"time"

	"github.com/agentowl/agentowl"
)

// Times are stored as Unix microseconds.
func ts(t time.Time) int64 { return t.UnixMicro() }

func fromTS(v int64) time.Time { return time.UnixMicro(v).UTC() }

func nullTS(t *time.Time) any {
	if t == nil {
		return nil
	}
	return t.UnixMicro()
}

func fromNullTS(v sql.NullInt64) *time.Time {
	if !v.Valid {
		return nil
	}
	t := fromTS(v.Int64)
	return &t
}

func nullStr(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// ---- tenants and operators

const tenantCols = `id, name, system, created_at`

func (t *tx) TenantCreate(ctx context.Context, v *agentowl.Tenant) error {
	_, err := t.exec(ctx, `INSERT INTO tenants (id, name, system, created_at) VALUES (?, ?, ?, ?)`, v.ID, v.Name, v.System, ts(v.CreatedAt))
	return err
}

func scanTenant(s scanner) (*agentowl.Tenant, error) {
	var v agentowl.Tenant
	var created int64
	if err := s.Scan(&v.ID, &v.Name, &v.System, &created); err != nil {
		return nil, err
	}
	v.CreatedAt = fromTS(created)
	return &v, nil
}

func (t *tx) TenantGetByName(ctx context.Context, name string) (*agentowl.Tenant, error) {
	return one(t.queryRow(ctx, `SELECT `+tenantCols+` FROM tenants WHERE name = ?`, name), scanTenant)
}

func (t *tx) TenantGetByID(ctx context.Context, id string) (*agentowl.Tenant, error) {
	return one(t.queryRow(ctx, `SELECT `+tenantCols+` FROM tenants WHERE id = ?`, id), scanTenant)
}

func (t *tx) TenantList(ctx context.Context) ([]*agentowl.Tenant, error) {
	rows, err := t.query(ctx, `SELECT `+tenantCols+` FROM tenants ORDER BY name`)
	return all(rows, err, scanTenant)
}

const operatorCols = `id, tenant_id, name, role, created_at`

func (t *tx) OperatorCreate(ctx context.Context, v *agentowl.Operator) error {
	_, err := t.exec(ctx, `INSERT INTO operators (id, tenant_id, name, role, created_at) VALUES (?, ?, ?, ?, ?)`,
		v.ID, v.TenantID, v.Name, string(v.Role), ts(v.CreatedAt))
	return err
}

func scanOperator(s scanner) (*agentowl.Operator, error) {
	var v agentowl.Operator
	var role string
	var created int64
	if err := s.Scan(&v.ID, &v.TenantID, &v.Name, &role, &created); err != nil {
		return nil, err
	}
	v.Role, v.CreatedAt = agentowl.Role(role), fromTS(created)
	return &v, nil
}

func (t *tx) OperatorGetByName(ctx context.Context, tenantID, name string) (*agentowl.Operator, error) {
	return one(t.queryRow(ctx, `SELECT `+operatorCols+` FROM operators WHERE tenant_id = ? AND name = ?`, tenantID, name), scanOperator)
}

func (t *tx) OperatorGetByID(ctx context.Context, id string) (*agentowl.Operator, error) {
	return one(t.queryRow(ctx, `SELECT `+operatorCols+` FROM operators WHERE id = ?`, id), scanOperator)
}

func (t *tx) OperatorSetRole(ctx context.Context, id string, role agentowl.Role) error {
	return t.execOne(ctx, `UPDATE operators SET role = ? WHERE id = ?`, string(role), id)
}

func (t *tx) OperatorMembership(ctx context.Context, operatorID string) (*agentowl.Operator, *agentowl.Membership, error) {
	var m agentowl.Membership
	o, err := one(t.queryRow(ctx, `SELECT o.id, o.tenant_id, o.name, o.role, o.created_at, tn.name FROM operators o
		JOIN tenants tn ON tn.id = o.tenant_id WHERE o.id = ?`, operatorID), func(s scanner) (*agentowl.Operator, error) {
		return scanOperator(scannerFunc(func(dest ...any) error { return s.Scan(append(dest, &m.TenantName)...) }))
	})
	if err != nil {
		return nil, nil, err
	}
	m.OperatorID, m.TenantID, m.Role = o.ID, o.TenantID, o.Role
	return o, &m, nil
}

func (t *tx) OperatorListByTenant(ctx context.Context, tenantID string) ([]*agentowl.Operator, error) {
	rows, err := t.query(ctx, `SELECT `+operatorCols+` FROM operators WHERE tenant_id = ? ORDER BY name`, tenantID)
	return all(rows, err, scanOperator)
}

// ---- tokens

const tokenCols = `id, kind, hash, tenant_id, operator_id, instance_id, label, created_at, expires_at, revoked_at`

func scanToken(s scanner) (*agentowl.Token, error) {
	var v agentowl.Token
	dest, finish := tokenFields(&v)
	if err := s.Scan(dest...); err != nil {
		return nil, err
	}
	finish()
	return &v, nil
}

// tokenFields returns the scan destinations of tokenCols for v, and the
// function that fills v from them once scanned: queries that join tokens
// scan them after their own columns.
func tokenFields(v *agentowl.Token) ([]any, func()) {
	var kind string
	var op, inst sql.NullString
	var created int64
	var expires, revoked sql.NullInt64
	return []any{&v.ID, &kind, &v.Hash, &v.TenantID, &op, &inst, &v.Label, &created, &expires, &revoked}, func() {
		v.Kind, v.OperatorID, v.InstanceID = agentowl.TokenKind(kind), op.String, inst.String
		v.CreatedAt, v.ExpiresAt, v.RevokedAt = fromTS(created), fromNullTS(expires), fromNullTS(revoked)
	}
}

func (t *tx) TokenCreate(ctx context.Context, v *agentowl.Token) error {
	_, err := t.exec(ctx, `INSERT INTO tokens (`+tokenCols+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		v.ID, string(v.Kind), v.Hash, v.TenantID, nullStr(v.OperatorID), nullStr(v.InstanceID), v.Label,
		ts(v.CreatedAt), nullTS(v.ExpiresAt), nullTS(v.RevokedAt))
	return err
}

func (t *tx) TokenGetByHash(ctx context.Context, hash []byte) (*agentowl.Token, error) {
	return one(t.queryRow(ctx, `SELECT `+tokenCols+` FROM tokens WHERE hash = ?`, hash), scanToken)
}

func (t *tx) TokenGetByID(ctx context.Context, id string) (*agentowl.Token, error) {
	return one(t.queryRow(ctx, `SELECT `+tokenCols+` FROM tokens WHERE id = ?`, id), scanToken)
}

func (t *tx) TokenList(ctx context.Context, p agentowl.TokenListParams) ([]*agentowl.Token, error) {
	q := `SELECT ` + tokenCols + ` FROM tokens WHERE tenant_id = ? AND kind = ?`
	args := []any{p.TenantID, string(p.Kind)}
	if p.OperatorID != "" {
		q += ` AND operator_id = ?`
		args = append(args, p.OperatorID)
	}
	if p.InstanceID != "" {
		q += ` AND instance_id = ?`
		args = append(args, p.InstanceID)
	}
	rows, err := t.query(ctx, q+` ORDER BY created_at, id`, args...)
	return all(rows, err, scanToken)
}

func (t *tx) TokenRevoke(ctx context.Context, id string, at time.Time) error {
	if err := t.revoke(ctx, "tokens", "id", id, at); err != nil {
		return err
	}
	_, err := t.TokenGetByID(ctx, id)
	return err
}

// revoke sets revoked_at to at on the rows of table whose column is v and
// that are not revoked yet: a revocation keeps its first time.
func (t *tx) revoke(ctx context.Context, table, column, v string, at time.Time) error {
	_, err := t.exec(ctx, `UPDATE `+table+` SET revoked_at = ? WHERE `+column+` = ? AND revoked_at IS NULL`, ts(at), v)
	return err
}

func (t *tx) TokenRevokeByInstance(ctx context.Context, instanceID string, at time.Time) error {
	return t.revoke(ctx, "tokens", "instance_id", instanceID, at)
}

// ---- instances

// instanceCols end with the instance's sealed columns (instanceSecrets).
var instanceCols = `id, tenant_id, name, provisioner_token_id, delivery_type, delivery_url, delivery_registration_id,
	approval_validity_seconds, created_at, deleted_at, ` + instanceSecrets.cols()

// scanInstance reads an instance, opening its receiver signing secret.
func (t *tx) scanInstance(s scanner) (*agentowl.Instance, error) {
	var v agentowl.Instance
	var dtype, durl, dreg sql.NullString
	var validity, created int64
	var deleted sql.NullInt64
	sealed, raw := instanceSecrets.dest()
	if err := s.Scan(append([]any{&v.ID, &v.TenantID, &v.Name, &v.ProvisionerTokenID, &dtype, &durl, &dreg,
		&validity, &created, &deleted}, sealed...)...); err != nil {
		return nil, err
	}
	if dtype.Valid {
		v.Receiver = &agentowl.Receiver{Type: dtype.String, URL: durl.String, RegistrationID: dreg.String}
	}
	v.ApprovalValidity = time.Duration(validity) * time.Second
	v.CreatedAt, v.DeletedAt = fromTS(created), fromNullTS(deleted)
	if err := instanceSecrets.open(t.db, v.ID, &v, raw); err != nil {
		return nil, err
	}
	return &v, nil
}

// deliveryArgs are an instance's delivery columns but the sealed one.
func deliveryArgs(d *agentowl.Receiver) []any {
	if d == nil {
		return []any{nil, nil, nil}
	}
	return []any{d.Type, d.URL, d.RegistrationID}
}

func (t *tx) InstanceCreate(ctx context.Context, v *agentowl.Instance) error {
	sealed, err := instanceSecrets.seal(t.db, v.ID, v)
	if err != nil {
		return err
	}
	args := append([]any{v.ID, v.TenantID, v.Name, v.ProvisionerTokenID}, deliveryArgs(v.Receiver)...)
	args = append(args, int64(v.ApprovalValidity/time.Second), ts(v.CreatedAt), nullTS(v.DeletedAt))
	args = append(args, sealed...)
	_, err = t.exec(ctx, `INSERT INTO instances (`+instanceCols+`) VALUES (`+marks(len(args))+`)`, args...)
	return err
}

func (t *tx) InstanceGet(ctx context.Context, id string) (*agentowl.Instance, error) {
	return one(t.queryRow(ctx, `SELECT `+instanceCols+` FROM instances WHERE id = ?`, id), t.scanInstance)
}

func (t *tx) InstanceGetForUpdate(ctx context.Context, id string) (*agentowl.Instance, error) {
	return one(t.queryRow(ctx, `SELECT `+instanceCols+` FROM instances WHERE id = ?`+t.db.dialect.ForUpdate, id), t.scanInstance)
}

func (t *tx) InstanceGetShared(ctx context.Context, id string) (*agentowl.Instance, error) {
	return one(t.queryRow(ctx, instanceShared+t.db.dialect.ForShare, id), t.scanInstance)
}

func (t *tx) InstanceUpdate(ctx context.Context, v *agentowl.Instance) error {
	sealed, err := instanceSecrets.seal(t.db, v.ID, v)
	if err != nil {
		return err
	}
	args := append([]any{v.Name}, deliveryArgs(v.Receiver)...)
	args = append(args, int64(v.ApprovalValidity/time.Second), nullTS(v.DeletedAt))
	args = append(append(args, sealed...), v.ID)
	return t.execOne(ctx, `UPDATE instances SET name = ?, delivery_type = ?, delivery_url = ?, delivery_registration_id = ?,
		approval_validity_seconds = ?, deleted_at = ?, `+instanceSecrets.assignments()+` WHERE id = ?`, args...)
}

func (t *tx) InstanceList(ctx context.Context, tenantID string) ([]*agentowl.Instance, error) {
	rows, err := t.query(ctx, `SELECT `+instanceCols+` FROM instances WHERE tenant_id = ? AND deleted_at IS NULL
		ORDER BY created_at, id`, tenantID)
	return all(rows, err, t.scanInstance)
}

// ---- idempotency

const idempotencyByKey = `SELECT scope, operation, key, input_hash, resource_id, response, created_at, retain_until
	FROM idempotency_keys WHERE scope = ? AND operation = ? AND key = ?`

func (t *tx) IdempotencyGet(ctx context.Context, scope, operation, key string) (*agentowl.Idempotency, error) {
	return one(t.queryRow(ctx, idempotencyByKey, scope, operation, key), scanIdempotency)
}

func scanIdempotency(s scanner) (*agentowl.Idempotency, error) {
	var v agentowl.Idempotency
	var created, retain int64
	err := s.Scan(&v.Owner, &v.Operation, &v.Key, &v.InputHash, &v.ResourceID, &v.Response, &created, &retain)
	v.CreatedAt, v.RetainUntil = fromTS(created), fromTS(retain)
	return &v, err
}

func (t *tx) IdempotencyCreate(ctx context.Context, v *agentowl.Idempotency) error {
	return t.execLater(ctx, nil, `INSERT INTO idempotency_keys (scope, operation, key, input_hash, resource_id, response, created_at, retain_until)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?)`, v.Owner, v.Operation, v.Key, v.InputHash, v.ResourceID, v.Response,
		ts(v.CreatedAt), ts(v.RetainUntil))
}

// ---- approval requests

const requestCols = `id, tenant_id, instance_id, idempotency_key, input_hash, tool, arguments, timeout, agent_reasoning,
	context, status, created_at, deadline_at, decided_at, decision_note, decision_expires_at, decided_by`

func scanRequest(s scanner) (*agentowl.ApprovalRequest, error) {
	var v agentowl.ApprovalRequest
	var args string
	var reasoning, rctx, note, decidedBy sql.NullString
	var status string
	var created, deadline int64
	var decided, expires sql.NullInt64
	if err := s.Scan(&v.ID, &v.TenantID, &v.InstanceID, &v.IdempotencyKey, &v.InputHash, &v.Tool, &args, &v.Timeout,
		&reasoning, &rctx, &status, &created, &deadline, &decided, &note, &expires, &decidedBy); err != nil {
		return nil, err
	}
	v.Arguments = json.RawMessage(args)
	if reasoning.Valid {
		v.AgentReasoning = &reasoning.String
	}
	if rctx.Valid {
		v.Context = json.RawMessage(rctx.String)
	}
	v.Status = agentowl.ApprovalStatus(status)
	v.CreatedAt, v.DeadlineAt = fromTS(created), fromTS(deadline)
	if decided.Valid {
		v.Decision = &agentowl.Decision{Status: v.Status, Note: note.String, DecidedAt: fromTS(decided.Int64), DecidedBy: decidedBy.String}
		if expires.Valid {
			v.Decision.ExpiresAt = fromTS(expires.Int64)
		}
	}
	return &v, nil
}

func decisionArgs(d *agentowl.Decision) (decided, note, expires, by any) {
	if d == nil {
		return nil, nil, nil, nil
	}
	decided, note, by = ts(d.DecidedAt), nullStr(d.Note), nullStr(d.DecidedBy)
	if !d.ExpiresAt.IsZero() {
		expires = ts(d.ExpiresAt)
	}
	return
}

func (t *tx) RequestCreate(ctx context.Context, v *agentowl.ApprovalRequest) error {
	var reasoning, rctx any
	if v.AgentReasoning != nil {
		reasoning = *v.AgentReasoning
	}
	if v.Context != nil {
		rctx = string(v.Context)
	}
	decided, note, expires, by := decisionArgs(v.Decision)
	return t.execLater(ctx, nil, `INSERT INTO approval_requests (`+requestCols+`, retain_until)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		v.ID, v.TenantID, v.InstanceID, v.IdempotencyKey, v.InputHash, v.Tool, string(v.Arguments), v.Timeout,
		reasoning, rctx, string(v.Status), ts(v.CreatedAt), ts(v.DeadlineAt), decided, note, expires, by, retainArg(v))
}

// retainArg is the purge time of a request terminal at creation: seven days
// after its decision. Pending requests are never purged.
func retainArg(v *agentowl.ApprovalRequest) any {
	if v.Decision == nil {
		return nil
	}
	return ts(v.Decision.DecidedAt.Add(agentowl.RetentionAfterDecision))
}

func (t *tx) RequestGet(ctx context.Context, id string) (*agentowl.ApprovalRequest, error) {
	return one(t.queryRow(ctx, `SELECT `+requestCols+` FROM approval_requests WHERE id = ?`, id), scanRequest)
}

const requestByKey = `SELECT ` + requestCols + ` FROM approval_requests WHERE instance_id = ? AND idempotency_key = ?`

var instanceShared = `SELECT ` + instanceCols + ` FROM instances WHERE id = ?` // + the dialect's ForShare

func (t *tx) RequestGetByKey(ctx context.Context, instanceID, key string) (*agentowl.ApprovalRequest, error) {
	return one(t.queryRow(ctx, requestByKey, instanceID, key), scanRequest)
}

func (t *tx) RequestForCreate(ctx context.Context, instanceID, key string) (*agentowl.CreateCheck, error) {
	c := &agentowl.CreateCheck{}
	policies, args := policyQuery(`(SELECT tenant_id FROM instances WHERE id = ?)`, []any{instanceID}, instanceID)
	err := t.readGroup(ctx,
		oneRow(&c.Existing, scanRequest, requestByKey, instanceID, key),
		oneRow(&c.Instance, t.scanInstance, instanceShared+t.db.dialect.ForShare, instanceID),
		allRows(&c.Policies, scanPolicy, policies, args...))
	if err != nil {
		return nil, err
	}
	return c, nil
}

// requestResolved is RequestResolve's outcome when no pending request
// changed: ErrConflict if the request is there (already terminal),
// ErrNotFound if not.
var requestResolved = &rowCheck{none: agentowl.ErrConflict, missing: agentowl.ErrNotFound,
	exists: `SELECT 1 FROM approval_requests WHERE id = ?`, existsArgs: 1}

var requestWithInstanceCols = prefixed("r", requestCols) + ", " + prefixed("i", instanceCols)

func (t *tx) RequestGetShared(ctx context.Context, id string) (*agentowl.ApprovalRequest, *agentowl.Instance, error) {
	r, inst, _, err := t.RequestGetSharedRecord(ctx, id, "", "")
	return r, inst, err
}

func (t *tx) RequestGetSharedRecord(ctx context.Context, id, operation, key string) (*agentowl.ApprovalRequest, *agentowl.Instance, *agentowl.Idempotency, error) {
	var r *agentowl.ApprovalRequest
	var inst *agentowl.Instance
	var rec *agentowl.Idempotency
	lock := ""
	if t.db.dialect.ForShare != "" {
		lock = t.db.dialect.ForShare + " OF i"
	}
	reads := []groupRead{oneRow(&r, func(s scanner) (*agentowl.ApprovalRequest, error) {
		// The request's columns, then the instance's.
		return scanRequest(scannerFunc(func(dest ...any) error {
			var err error
			inst, err = t.scanInstance(scannerFunc(func(instDest ...any) error {
				return s.Scan(append(dest, instDest...)...)
			}))
			return err
		}))
	}, `SELECT `+requestWithInstanceCols+` FROM approval_requests r JOIN instances i ON i.id = r.instance_id WHERE r.id = ?`+lock, id)}
	if operation != "" {
		reads = append(reads, oneRow(&rec, scanIdempotency, idempotencyByKey, id, operation, key))
	}
	if err := t.readGroup(ctx, reads...); err != nil {
		return nil, nil, nil, err
	}
	if r == nil {
		return nil, nil, nil, agentowl.ErrNotFound
	}
	return r, inst, rec, nil
}

func (t *tx) RequestResolve(ctx context.Context, id string, d *agentowl.Decision, retainUntil time.Time) error {
	decided, note, expires, by := decisionArgs(d)
	return t.execLater(ctx, requestResolved, `UPDATE approval_requests SET status = ?, decided_at = ?, decision_note = ?,
		decision_expires_at = ?, decided_by = ?, retain_until = ? WHERE id = ? AND status = 'pending'`,
		string(d.Status), decided, note, expires, by, ts(retainUntil), id, id)
}

func (t *tx) RequestList(ctx context.Context, p agentowl.RequestListParams) ([]*agentowl.ApprovalRequest, error) {
	where, args := []string{"tenant_id = ?"}, []any{p.TenantID}
	where, args = eq(where, args, "instance_id", p.InstanceID)
	switch {
	case p.Status == agentowl.StatusPending && !p.Now.IsZero():
		where, args = append(where, "status = 'pending' AND deadline_at > ?"), append(args, ts(p.Now))
	case p.Status == agentowl.StatusExpired && !p.Now.IsZero():
		where, args = append(where, "(status = 'expired' OR (status = 'pending' AND deadline_at <= ?))"), append(args, ts(p.Now))
	case p.Status != "":
		where, args = append(where, "status = ?"), append(args, string(p.Status))
	}
	return listNewest(ctx, t, requestCols, "approval_requests", where, args, p.After, p.Limit, scanRequest)
}

func scanString(s scanner) (string, error) {
	var v string
	err := s.Scan(&v)
	return v, err
}

func (t *tx) RequestPendingIDs(ctx context.Context, instanceID string) ([]string, error) {
	rows, err := t.query(ctx, `SELECT id FROM approval_requests WHERE instance_id = ? AND status = 'pending' ORDER BY id`, instanceID)
	return all(rows, err, scanString)
}

func (t *tx) RequestDueForExpiry(ctx context.Context, now time.Time, limit int) ([]string, error) {
	rows, err := t.query(ctx, `SELECT id FROM approval_requests WHERE status = 'pending' AND deadline_at <= ?
		ORDER BY deadline_at LIMIT ?`, ts(now), limit)
	return all(rows, err, scanString)
}

// ---- policies

const policyCols = `id, tenant_id, instance_id, name, tool, condition, effect, note, priority, created_at`

func scanPolicy(s scanner) (*agentowl.Policy, error) {
	var v agentowl.Policy
	var inst sql.NullString
	var effect string
	var created int64
	if err := s.Scan(&v.ID, &v.TenantID, &inst, &v.Name, &v.Tool, &v.Condition, &effect, &v.Note, &v.Priority, &created); err != nil {
		return nil, err
	}
	v.InstanceID, v.Effect, v.CreatedAt = inst.String, agentowl.PolicyEffect(effect), fromTS(created)
	return &v, nil
}

func (t *tx) PolicyCreate(ctx context.Context, v *agentowl.Policy) error {
	_, err := t.exec(ctx, `INSERT INTO policies (`+policyCols+`, seq)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, (SELECT coalesce(max(seq), 0) + 1 FROM policies))`,
		v.ID, v.TenantID, nullStr(v.InstanceID), v.Name, v.Tool, v.Condition, string(v.Effect), v.Note, v.Priority, ts(v.CreatedAt))
	return err
}

func (t *tx) PolicyGet(ctx context.Context, id string) (*agentowl.Policy, error) {
	return one(t.queryRow(ctx, `SELECT `+policyCols+` FROM policies WHERE id = ?`, id), scanPolicy)
}

func (t *tx) PolicyDelete(ctx context.Context, id string) error {
	return t.execOne(ctx, `DELETE FROM policies WHERE id = ?`, id)
}

func (t *tx) PolicyList(ctx context.Context, tenantID, instanceID string) ([]*agentowl.Policy, error) {
	q, args := policyQuery("?", []any{tenantID}, instanceID)
	rows, err := t.query(ctx, q, args...)
	return all(rows, err, scanPolicy)
}

// policyQuery selects the rules of tenant (an SQL expression taking args)
// that apply to instanceID ("" for all of them), in evaluation order.
func policyQuery(tenant string, args []any, instanceID string) (string, []any) {
	q := `SELECT ` + policyCols + ` FROM policies WHERE tenant_id = ` + tenant
	if instanceID != "" {
		q += ` AND (instance_id IS NULL OR instance_id = ?)`
		args = append(args, instanceID)
	}
	return q + ` ORDER BY instance_id IS NULL, priority, created_at, seq`, args
}

// ---- audit

func (t *tx) AuditAppend(ctx context.Context, e *agentowl.AuditEntry) error {
	details, err := json.Marshal(e.Details)
	if err != nil {
		return err
	}
	if e.Details == nil {
		details = []byte("{}")
	}
	// Chained to the tenant's previous entry (auditchain.go); the ID and
	// hashes are read back with the commit: nobody needs them before.
	return t.auditAppendChained(ctx, e, string(details))
}

func (t *tx) AuditList(ctx context.Context, p agentowl.AuditListParams) ([]*agentowl.AuditEntry, error) {
	rows, err := t.query(ctx, `SELECT `+auditChainCols+` FROM audit_log
		WHERE tenant_id = ? ORDER BY id DESC LIMIT ?`, p.TenantID, listLimit(p.Limit))
	return all(rows, err, scanChained)
}

// ---- AAP acknowledgements

func (t *tx) AAPAckSet(ctx context.Context, a *agentowl.AAPAck) error {
	_, err := t.exec(ctx, `INSERT INTO aap_acks (request_id, tenant_id, assignee, acknowledged_at) VALUES (?, ?, ?, ?)
		ON CONFLICT (request_id) DO UPDATE SET assignee = excluded.assignee, acknowledged_at = excluded.acknowledged_at`,
		a.RequestID, a.TenantID, a.Assignee, ts(a.At))
	return err
}

func (t *tx) AAPAckGet(ctx context.Context, requestID string) (*agentowl.AAPAck, error) {
	return one(t.queryRow(ctx, `SELECT request_id, tenant_id, assignee, acknowledged_at FROM aap_acks WHERE request_id = ?`, requestID),
		func(s scanner) (*agentowl.AAPAck, error) {
			var a agentowl.AAPAck
			var at int64
			err := s.Scan(&a.RequestID, &a.TenantID, &a.Assignee, &at)
			a.At = fromTS(at)
			return &a, err
		})
}

// ---- rate counters

func (t *tx) CounterAdd(ctx context.Context, key string, windowStart time.Time, delta int64) (int64, error) {
	var total int64
	err := t.queryRow(ctx, `INSERT INTO rate_counters (key, window_start, count) VALUES (?, ?, ?)
		ON CONFLICT (key, window_start) DO UPDATE SET count = rate_counters.count + excluded.count
		RETURNING count`, key, ts(windowStart), delta).Scan(&total)
	return total, err
}

// ---- retention

func (t *tx) Purge(ctx context.Context, now time.Time) (int64, error) {
	var total int64
	for _, q := range []string{
		// A request with a notification is kept while the notification is.
		`DELETE FROM approval_requests WHERE retain_until IS NOT NULL AND retain_until <= ?
			AND NOT EXISTS (SELECT 1 FROM outbox o WHERE o.subject = approval_requests.id)`,
		`DELETE FROM outbox WHERE state <> 'pending' AND retain_until <= ?`,
		// Counter windows are at most an hour; a day later nobody reads them.
		`DELETE FROM rate_counters WHERE window_start <= ? - 86400000000`,
		// Destination slots unused for a day are made again on next use.
		`DELETE FROM delivery_slots WHERE lease_until <= ? - 86400000000`,
		`DELETE FROM idempotency_keys WHERE retain_until <= ?`,
		// Console sessions and login links are useless once expired; a day
		// later they go.
		`DELETE FROM console_sessions WHERE expires_at <= ? - 86400000000`,
		// A deleted instance's row goes once its deletion record has been kept
		// for the retention period and no request or token refers to it.
		`DELETE FROM tokens WHERE kind = 'instance' AND revoked_at IS NOT NULL AND revoked_at <= ? - ` + retentionMicros + `
			AND instance_id IN (SELECT id FROM instances WHERE deleted_at IS NOT NULL)`,
		`DELETE FROM policies WHERE instance_id IN (SELECT id FROM instances WHERE deleted_at IS NOT NULL AND deleted_at <= ? - ` + retentionMicros + `)`,
		`DELETE FROM instances WHERE deleted_at IS NOT NULL AND deleted_at <= ? - ` + retentionMicros + `
			AND NOT EXISTS (SELECT 1 FROM approval_requests r WHERE r.instance_id = instances.id)
			AND NOT EXISTS (SELECT 1 FROM tokens k WHERE k.instance_id = instances.id)`,
	} {
		res, err := t.exec(ctx, q, ts(now))
		if err != nil {
			return total, err
		}
		n, _ := res.RowsAffected()
		total += n
	}
	return total, nil
}

var retentionMicros = itoa(agentowl.RetentionAfterDecision.Microseconds())
