package approval

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/agentowl/agentowl"
	"github.com/agentowl/agentowl/internal/access"
)

// Idempotency operations for keyed instance management.
const (
	opInstanceCreate = "instances.create"
	opInstanceUpdate = "instances.update"
)

// ProvisionInput is a validated ProvisionInstanceRequest.
type ProvisionInput struct {
	Name string // "" lets the provider assign one
	// Receiver is the request's delivery object, if any.
	Receiver *agentowl.Receiver
}

// UpdateInput is a validated UpdateInstanceRequest.
type UpdateInput struct {
	Name *string
	// ReceiverSet is true when the request's delivery object was present;
	// Receiver nil then means null (remove the receiver).
	ReceiverSet bool
	Receiver    *agentowl.Receiver
}

// Provisioned is an instance and the credential issued with it.
type Provisioned struct {
	Instance            *agentowl.Instance
	Credential          string
	CredentialExpiresAt *time.Time
	Replayed            bool
}

type sealedProvision struct {
	InstanceID string     `json:"instance_id"`
	Credential string     `json:"credential"`
	ExpiresAt  *time.Time `json:"expires_at,omitempty"`
}

func provisionHash(in *ProvisionInput) []byte {
	v := map[string]any{"instance_name": in.Name}
	if in.Receiver != nil {
		v["delivery"] = deliveryCanon(in.Receiver)
	}
	return agentowl.HashCanonical(v)
}

func deliveryCanon(d *agentowl.Receiver) map[string]any {
	return map[string]any{"type": d.Type, "url": d.URL, "registration_id": d.RegistrationID, "signing_secret": d.SigningSecret}
}

// ProvisionInstance creates an instance and its credential for provisioner p,
// keyed by idemKey. The same key and input return the original instance and
// credential (Replayed); a changed input is idempotency_conflict, also while
// the first submission is still in progress; a replay after deletion is
// instance_deleted.
func (s *Service) ProvisionInstance(ctx context.Context, p *access.Principal, idemKey string, in *ProvisionInput) (*Provisioned, error) {
	if in.Receiver != nil {
		if err := s.checkDelivery(in.Receiver); err != nil {
			return nil, err
		}
	}
	hash := provisionHash(in)
	var out *Provisioned
	err := s.submissions.run(ctx, "create/"+p.Token.ID+"/"+idemKey, hash, func() (err error) {
		out, err = s.provision(ctx, p, idemKey, in, hash)
		return err
	})
	return out, err
}

// provision is one keyed creation; submissions.run keeps it alone per key.
func (s *Service) provision(ctx context.Context, p *access.Principal, idemKey string, in *ProvisionInput, hash []byte) (*Provisioned, error) {
	// The instance ID is proposed to the receiver before anything commits.
	instanceID := agentowl.NewID("")
	if in.Receiver != nil {
		replay, err := s.provisionReplay(ctx, p, idemKey, hash)
		if err != nil || replay != nil {
			return replay, err
		}
		if err := s.verifyReceiver(ctx, p.Token.TenantID, in.Receiver, instanceID); err != nil {
			return nil, err
		}
	}
	for attempt := 0; ; attempt++ {
		var out *Provisioned
		err := s.store.Write(ctx, func(tx agentowl.Tx) error {
			rec, err := tx.IdempotencyGet(ctx, p.Token.ID, opInstanceCreate, idemKey)
			if err == nil {
				out, err = s.replayProvision(ctx, tx, p, idemKey, hash, rec)
				return err
			}
			if !errors.Is(err, agentowl.ErrNotFound) {
				return err
			}
			now := s.now()
			inst := &agentowl.Instance{
				ID: instanceID, TenantID: p.Token.TenantID, Name: in.Name, ProvisionerTokenID: p.Token.ID,
				Receiver: in.Receiver, ApprovalValidity: s.cfg.DefaultApprovalValidity, CreatedAt: now,
			}
			if inst.Name == "" {
				inst.Name = "instance-" + inst.ID[:8]
			}
			if err := tx.InstanceCreate(ctx, inst); err != nil {
				return err
			}
			var exp *time.Time
			if s.cfg.InstanceCredentialTTL > 0 {
				t := now.Add(s.cfg.InstanceCredentialTTL)
				exp = &t
			}
			secret, tok := s.access.NewInstanceCredential(inst.TenantID, inst.ID, exp)
			if err := tx.TokenCreate(ctx, tok); err != nil {
				return err
			}
			plain, err := json.Marshal(sealedProvision{InstanceID: inst.ID, Credential: secret, ExpiresAt: exp})
			if err != nil {
				return err
			}
			sealed, err := seal(p.Secret, idemKey, plain)
			if err != nil {
				return err
			}
			if err := tx.IdempotencyCreate(ctx, &agentowl.Idempotency{
				Owner: p.Token.ID, Operation: opInstanceCreate, Key: idemKey, InputHash: hash, ResourceID: inst.ID,
				Response: sealed, CreatedAt: now, RetainUntil: now.Add(agentowl.RetentionAfterDecision),
			}); err != nil {
				return err
			}
			out = &Provisioned{Instance: inst, Credential: secret, CredentialExpiresAt: exp}
			return access.Audit(ctx, tx, now, inst.TenantID, p, "instance.create", "instance:"+inst.ID, map[string]any{"name": inst.Name})
		})
		if errors.Is(err, agentowl.ErrConflict) && attempt == 0 {
			continue // a concurrent attempt with the same key (another process) committed first: replay it
		}
		if err != nil {
			return nil, err
		}
		return out, nil
	}
}

// provisionReplay returns the original result of a keyed creation, or nil
// when the key is new.
func (s *Service) provisionReplay(ctx context.Context, p *access.Principal, idemKey string, hash []byte) (*Provisioned, error) {
	var out *Provisioned
	err := s.store.Read(ctx, func(tx agentowl.Tx) error {
		rec, err := tx.IdempotencyGet(ctx, p.Token.ID, opInstanceCreate, idemKey)
		if errors.Is(err, agentowl.ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		out, err = s.replayProvision(ctx, tx, p, idemKey, hash, rec)
		return err
	})
	return out, err
}

func (s *Service) replayProvision(ctx context.Context, tx agentowl.Tx, p *access.Principal, idemKey string, hash []byte, rec *agentowl.Idempotency) (*Provisioned, error) {
	if string(rec.InputHash) != string(hash) {
		return nil, errKeyReused()
	}
	inst, err := tx.InstanceGet(ctx, rec.ResourceID)
	if errors.Is(err, agentowl.ErrNotFound) || (err == nil && inst.DeletedAt != nil) {
		return nil, agentowl.Errorf(agentowl.ECodeInstanceDeleted, "The instance created with this idempotency key has been deleted.")
	}
	if err != nil {
		return nil, err
	}
	plain, err := unseal(p.Secret, idemKey, rec.Response)
	if err != nil {
		return nil, fmt.Errorf("approval: open sealed provisioning response: %w", err)
	}
	var sp sealedProvision
	if err := json.Unmarshal(plain, &sp); err != nil {
		return nil, err
	}
	return &Provisioned{Instance: inst, Credential: sp.Credential, CredentialExpiresAt: sp.ExpiresAt, Replayed: true}, nil
}

// provisionerInstance loads an instance visible to provisioner p (its
// tenant, not deleted); anything else is not_found.
func provisionerInstance(ctx context.Context, tx agentowl.Tx, p *access.Principal, id string, forUpdate bool) (*agentowl.Instance, error) {
	if !agentowl.ValidUUID(id) {
		return nil, notFound("instance", id)
	}
	get := tx.InstanceGet
	if forUpdate {
		get = tx.InstanceGetForUpdate
	}
	inst, err := get(ctx, id)
	if errors.Is(err, agentowl.ErrNotFound) || (err == nil && inst.TenantID != p.Token.TenantID) {
		return nil, notFound("instance", id)
	}
	return inst, err
}

// GetInstance returns an instance in p's scope; deleted instances are not_found.
func (s *Service) GetInstance(ctx context.Context, p *access.Principal, id string) (*agentowl.Instance, error) {
	var inst *agentowl.Instance
	err := s.store.Read(ctx, func(tx agentowl.Tx) (err error) {
		inst, err = provisionerInstance(ctx, tx, p, id, false)
		if err == nil && inst.DeletedAt != nil {
			err = notFound("instance", id)
		}
		return err
	})
	return inst, err
}

// UpdateInstance applies a keyed update. The same key and input return the
// original response without applying it again; a changed input is
// idempotency_conflict, also while the first submission is in progress.
func (s *Service) UpdateInstance(ctx context.Context, p *access.Principal, id, idemKey string, in *UpdateInput) (*agentowl.Instance, error) {
	if in.ReceiverSet && in.Receiver != nil {
		if err := s.checkDelivery(in.Receiver); err != nil {
			return nil, err
		}
	}
	canon := map[string]any{}
	if in.Name != nil {
		canon["instance_name"] = *in.Name
	}
	if in.ReceiverSet {
		canon["delivery"] = nil
		if in.Receiver != nil {
			canon["delivery"] = deliveryCanon(in.Receiver)
		}
	}
	hash := agentowl.HashCanonical(canon)
	scope := p.Token.ID + "/" + id
	var out *agentowl.Instance
	err := s.submissions.run(ctx, "update/"+scope+"/"+idemKey, hash, func() (err error) {
		out, err = s.update(ctx, p, id, scope, idemKey, in, hash)
		return err
	})
	return out, err
}

// update is one keyed update; submissions.run keeps it alone per key.
func (s *Service) update(ctx context.Context, p *access.Principal, id, scope, idemKey string, in *UpdateInput, hash []byte) (*agentowl.Instance, error) {
	if in.ReceiverSet && in.Receiver != nil {
		// Verify the replacement before committing anything; a replay of a
		// committed update does not verify again. Deletion during the
		// verification wins: the transaction below then finds it deleted.
		replayed, err := s.updateReplay(ctx, p, id, scope, idemKey, hash)
		if err != nil || replayed != nil {
			return replayed, err
		}
		if err := s.verifyReceiver(ctx, p.Token.TenantID, in.Receiver, id); err != nil {
			return nil, err
		}
	}
	var out *agentowl.Instance
	err := s.store.Write(ctx, func(tx agentowl.Tx) error {
		inst, replayed, err := updateTarget(ctx, tx, p, id, true, scope, idemKey, hash)
		if err != nil || replayed != nil {
			out = replayed
			return err
		}
		if in.Name != nil {
			inst.Name = *in.Name
		}
		now := s.now()
		if in.ReceiverSet {
			if in.Receiver == nil && inst.Receiver != nil {
				// Removing the receiver ends its outstanding deliveries.
				if _, err := tx.MessageCancelDestination(ctx, InstanceDestination(id), s.clock.Now(), deliveredGrace); err != nil {
					return err
				}
			}
			inst.Receiver = in.Receiver
		}
		if err := tx.InstanceUpdate(ctx, inst); err != nil {
			return err
		}
		snapshot := *inst
		if snapshot.Receiver != nil {
			d := *snapshot.Receiver
			d.SigningSecret = "" // never retained in a replayable response
			snapshot.Receiver = &d
		}
		resp, err := json.Marshal(&snapshot)
		if err != nil {
			return err
		}
		if err := tx.IdempotencyCreate(ctx, &agentowl.Idempotency{
			Owner: scope, Operation: opInstanceUpdate, Key: idemKey, InputHash: hash, ResourceID: id,
			Response: resp, CreatedAt: now, RetainUntil: now.Add(agentowl.RetentionAfterDecision),
		}); err != nil {
			return err
		}
		out = &snapshot
		return access.Audit(ctx, tx, now, inst.TenantID, p, "instance.update", "instance:"+id, map[string]any{"name": inst.Name})
	})
	return out, err
}

// updateReplay returns the original response of a committed keyed update of
// a live instance, nil when the key is new.
func (s *Service) updateReplay(ctx context.Context, p *access.Principal, id, scope, idemKey string, hash []byte) (*agentowl.Instance, error) {
	var out *agentowl.Instance
	err := s.store.Read(ctx, func(tx agentowl.Tx) (err error) {
		_, out, err = updateTarget(ctx, tx, p, id, false, scope, idemKey, hash)
		return err
	})
	return out, err
}

// updateTarget reads the live instance id in p's scope that a keyed
// update changes (locked with forUpdate) and, when key idemKey of scope
// already updated it, that update's response: errKeyReused if it was for
// another input.
func updateTarget(ctx context.Context, tx agentowl.Tx, p *access.Principal, id string, forUpdate bool, scope, idemKey string, hash []byte) (inst, replayed *agentowl.Instance, err error) {
	if inst, err = provisionerInstance(ctx, tx, p, id, forUpdate); err != nil {
		return nil, nil, err
	}
	if inst.DeletedAt != nil {
		return nil, nil, notFound("instance", id)
	}
	rec, err := tx.IdempotencyGet(ctx, scope, opInstanceUpdate, idemKey)
	if errors.Is(err, agentowl.ErrNotFound) {
		return inst, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	if string(rec.InputHash) != string(hash) {
		return nil, nil, errKeyReused()
	}
	replayed = &agentowl.Instance{}
	if err := json.Unmarshal(rec.Response, replayed); err != nil {
		return nil, nil, err
	}
	return inst, replayed, nil
}

// deliveredGrace is how long notifications stay retained after their
// delivery ends.
const deliveredGrace = 24 * time.Hour

// DeleteInstance retires an instance: revokes its credentials and cancels its
// pending requests (no notifications). Repeated deletion succeeds while the
// deletion record is kept.
func (s *Service) DeleteInstance(ctx context.Context, p *access.Principal, id string) error {
	var cancelled []string
	err := s.writeRequest(ctx, func(tx agentowl.Tx) error {
		inst, err := provisionerInstance(ctx, tx, p, id, true)
		if err != nil || inst.DeletedAt != nil {
			return err
		}
		now := s.now()
		inst.DeletedAt = &now
		if err := tx.InstanceUpdate(ctx, inst); err != nil {
			return err
		}
		if err := tx.TokenRevokeByInstance(ctx, id, now); err != nil {
			return err
		}
		if _, err := tx.MessageCancelDestination(ctx, InstanceDestination(id), s.clock.Now(), deliveredGrace); err != nil {
			return err
		}
		if cancelled, err = tx.RequestPendingIDs(ctx, id); err != nil {
			return err
		}
		for _, rid := range cancelled {
			d := &agentowl.Decision{Status: agentowl.StatusCancelled, DecidedAt: now, DecidedBy: "instance-deleted"}
			if err := tx.RequestResolve(ctx, rid, d, now.Add(agentowl.RetentionAfterDecision)); err != nil {
				return err
			}
		}
		return access.Audit(ctx, tx, now, inst.TenantID, p, "instance.delete", "instance:"+id,
			map[string]any{"cancelled_requests": len(cancelled)})
	})
	if err == nil {
		s.hub.notify(cancelled...)
	}
	return err
}

// ---- operator views

// TenantInstances lists the live instances of the tenant named tenant, for
// its members.
func (s *Service) TenantInstances(ctx context.Context, p *access.Principal, tenant string) ([]*agentowl.Instance, error) {
	return access.ReadAs(ctx, s.store, p, tenant, agentowl.RoleMember, func(tx agentowl.Tx, m *agentowl.Membership) ([]*agentowl.Instance, error) {
		return tx.InstanceList(ctx, m.TenantID)
	})
}

// TenantInstance returns one instance of the tenant named tenant, deleted
// or not, for its members.
func (s *Service) TenantInstance(ctx context.Context, p *access.Principal, tenant, id string) (*agentowl.Instance, error) {
	m, err := p.Tenant(tenant, agentowl.RoleMember)
	if err != nil {
		return nil, err
	}
	if !agentowl.ValidUUID(id) {
		return nil, notFoundIn(m, "instance", id)
	}
	var inst *agentowl.Instance
	err = s.store.Read(ctx, func(tx agentowl.Tx) (err error) {
		inst, err = tx.InstanceGet(ctx, id)
		return err
	})
	if errors.Is(err, agentowl.ErrNotFound) || (err == nil && inst.TenantID != m.TenantID) {
		return nil, notFoundIn(m, "instance", id)
	}
	return inst, err
}

// SetApprovalValidity changes how long new approvals of an instance permit
// the call to start. Admins of the tenant named tenant only.
func (s *Service) SetApprovalValidity(ctx context.Context, p *access.Principal, tenant, id string, validity time.Duration) (*agentowl.Instance, error) {
	m, err := p.Tenant(tenant, agentowl.RoleAdmin)
	if err != nil {
		return nil, err
	}
	tenantID := m.TenantID
	if validity < time.Second || validity > s.cfg.MaxApprovalValidity {
		return nil, agentowl.FieldError(agentowl.ECodeInvalidField, "approval_validity", "approval_validity must be between 1s and %s.", s.cfg.MaxApprovalValidity)
	}
	var inst *agentowl.Instance
	err = s.store.Write(ctx, func(tx agentowl.Tx) (err error) {
		inst, err = tx.InstanceGetForUpdate(ctx, id)
		if errors.Is(err, agentowl.ErrNotFound) || (err == nil && (inst.TenantID != tenantID || inst.DeletedAt != nil)) {
			return notFoundIn(m, "instance", id)
		}
		if err != nil {
			return err
		}
		inst.ApprovalValidity = validity.Truncate(time.Second)
		if err := tx.InstanceUpdate(ctx, inst); err != nil {
			return err
		}
		return access.Audit(ctx, tx, s.now(), tenantID, p, "instance.set_approval_validity", "instance:"+id,
			map[string]any{"approval_validity": inst.ApprovalValidity.String()})
	})
	return inst, err
}
