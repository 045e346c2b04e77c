package maintenance

import (
	"context"
	"errors"
	"time"

	"github.com/agentowl/agentowl"
	"github.com/agentowl/agentowl/internal/auditchain"
)

// JobAuditCheckpoints signs a checkpoint of each tenant's audit chain
// head every AuditCheckpoints.Every entries or Interval
// (internal/auditchain).
const JobAuditCheckpoints = "audit_checkpoints"

// AuditCheckpoints configures the audit chain's signed checkpoints.
type AuditCheckpoints struct {
	// Signer signs each checkpoint as a compact JWS with a key of the
	// published JWK Set (the server's attestation keys); nil leaves the
	// job with nothing to do (it reports skipped), and the audit log's
	// retention then purges by time alone.
	Signer auditchain.Signer
	// Every: a tenant's head is signed once this many entries followed its
	// last checkpoint (AGENTOWL_AUDIT_CHECKPOINT_EVERY). Defaults to 1000.
	Every int
	// Interval: and at least this often while entries follow it
	// (AGENTOWL_AUDIT_CHECKPOINT_INTERVAL). Defaults to 10m.
	Interval time.Duration
}

// DefaultAuditCheckpointInterval is the job's default interval: how soon
// after the Every-th entry its checkpoint is signed.
const DefaultAuditCheckpointInterval = 10 * time.Second

func (c AuditCheckpoints) withDefaults() AuditCheckpoints {
	if c.Every <= 0 {
		c.Every = 1000
	}
	if c.Interval <= 0 {
		c.Interval = 10 * time.Minute
	}
	return c
}

// Due reports whether a tenant's chain head needs a checkpoint now.
func (c AuditCheckpoints) Due(h *agentowl.AuditChainHead, now time.Time) bool {
	c = c.withDefaults()
	pending := h.Seq - h.CheckpointSeq
	return pending > 0 && (h.CheckpointSeq == 0 || pending >= int64(c.Every) || !now.Before(h.CheckpointAt.Add(c.Interval)))
}

// auditCheckpoints signs the checkpoints that are due. Two replicas that
// sign one head at once record one checkpoint (the second is a conflict).
func (s *Scheduler) auditCheckpoints(ctx context.Context) (int64, string, error) {
	c := s.cfg.AuditCheckpoints
	if c.Signer == nil {
		return 0, outcomeSkipped, nil
	}
	var heads []*agentowl.AuditChainHead
	if err := s.store.Read(ctx, func(tx agentowl.Tx) (err error) {
		heads, err = tx.AuditChainHeads(ctx)
		return err
	}); err != nil {
		return 0, "", err
	}
	var n int64
	for _, h := range heads {
		now := s.clock.Now()
		if !c.Due(h, now) {
			continue
		}
		jws, err := c.Signer.Sign(ctx, auditchain.CheckpointPayload(h.TenantID, h.Seq, h.Hash, now))
		if err != nil {
			return n, "", err
		}
		err = s.store.Write(ctx, func(tx agentowl.Tx) error {
			return tx.AuditCheckpointAdd(ctx, &agentowl.AuditCheckpoint{TenantID: h.TenantID, Seq: h.Seq, Head: h.Hash,
				At: now.UTC().Truncate(time.Microsecond), JWS: jws})
		})
		switch {
		case errors.Is(err, agentowl.ErrConflict):
		case err != nil:
			return n, "", err
		default:
			n++
		}
	}
	return n, outcomeOK, nil
}
