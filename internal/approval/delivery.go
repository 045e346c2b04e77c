package approval

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"time"

	"github.com/agentowl/agentowl"
	"github.com/agentowl/agentowl/internal/outbox"
	"github.com/agentowl/agentowl/internal/ratelimit"
)

// ReceiverVerifier sends the signed webhook.verification to a proposed
// receiver; any failure is webhook_verification_failed.
type ReceiverVerifier interface {
	Verify(ctx context.Context, d *agentowl.Receiver, instanceID string) error
}

// Receivers is what asynchronous mode needs of the rest of the server:
// receivers are verified before they are configured, and terminal decisions
// record request.resolved notifications for the delivery engine. A provider
// without it is synchronous-only and answers webhook configuration with
// unsupported_delivery_type.
type Receivers struct {
	Verifier ReceiverVerifier
	// CheckURL rejects URLs whose host is an IP literal that egress refuses.
	CheckURL func(string) error
	// Wake prompts the delivery engine after a notification commits.
	Wake func()
}

// MessageKindRequestResolved is the outbox kind of AAP notifications.
const MessageKindRequestResolved = "aap.request_resolved"

// NotificationWindow is how long a notification is retried: seven days after
// the decision.
const NotificationWindow = 168 * time.Hour

// InstanceDestination names an instance's receiver as a delivery destination.
func InstanceDestination(instanceID string) string { return "instance:" + instanceID }

// ResolveDestination is the outbox.Resolver of "instance:<id>"
// destinations: the instance's current receiver URL and signing secret, or
// no target once the instance is deleted or has no receiver, which ends the
// message.
func ResolveDestination(ctx context.Context, tx agentowl.Tx, destination string) (*outbox.Target, error) {
	id, found := strings.CutPrefix(destination, "instance:")
	if !found {
		return nil, nil
	}
	inst, err := tx.InstanceGet(ctx, id)
	if errors.Is(err, agentowl.ErrNotFound) {
		return nil, nil
	}
	if err != nil || inst.DeletedAt != nil || inst.Receiver == nil {
		return nil, err
	}
	return &outbox.Target{URL: inst.Receiver.URL, Secret: inst.Receiver.SigningSecret}, nil
}

// checkDelivery validates a proposed receiver.
func (s *Service) checkDelivery(d *agentowl.Receiver) error {
	if err := d.Validate(); err != nil {
		return err
	}
	if s.async == nil {
		return agentowl.FieldError(agentowl.ECodeUnsupportedDelivery, "delivery",
			"This provider runs in synchronous mode only; webhook delivery is not enabled.")
	}
	if err := s.async.CheckURL(d.URL); err != nil {
		return agentowl.FieldError(agentowl.ECodeInvalidWebhookURL, "delivery.url", "The webhook URL is not allowed: %s.", err)
	}
	return nil
}

// verifyReceiver sends the verification of receiver d for instanceID,
// within the tenant's registration limit. Callers run it inside
// submissions.run, so one keyed submission verifies at a time.
func (s *Service) verifyReceiver(ctx context.Context, tenantID string, d *agentowl.Receiver, instanceID string) error {
	if ok, wait := s.registerTenant.Allow(ctx, tenantID); !ok {
		return ratelimit.Error("receiver registrations for this account", wait)
	}
	return s.async.Verifier.Verify(ctx, d, instanceID)
}

type resolvedEvent struct {
	ID         string `json:"id"`
	Type       string `json:"type"`
	InstanceID string `json:"instance_id"`
	RequestID  string `json:"request_id"`
	CreatedAt  string `json:"created_at"`
}

// recordNotification writes the request.resolved message for r in tx when
// its instance has a receiver. It reports whether it wrote one.
func (s *Service) recordNotification(ctx context.Context, tx agentowl.Tx, inst *agentowl.Instance, r *agentowl.ApprovalRequest) (bool, error) {
	if inst == nil || inst.Receiver == nil || inst.DeletedAt != nil {
		return false, nil
	}
	id := agentowl.NewID("")
	body, err := json.Marshal(resolvedEvent{ID: id, Type: "request.resolved", InstanceID: inst.ID, RequestID: r.ID,
		CreatedAt: r.Decision.DecidedAt.UTC().Format(time.RFC3339)})
	if err != nil {
		return false, err
	}
	_, err = outbox.Enqueue(ctx, tx, s.clock.Now(), outbox.Message{
		ID: id, TenantID: inst.TenantID, Kind: MessageKindRequestResolved, Destination: InstanceDestination(inst.ID),
		Subject: r.ID, Body: body, Deadline: r.Decision.DecidedAt.Add(NotificationWindow),
	})
	return true, err
}

func (s *Service) wakeDelivery() {
	if s.async != nil && s.async.Wake != nil {
		s.async.Wake()
	}
}
