package sqlstore

import (
	"context"
	"time"

	"github.com/agentowl/agentowl"
)

func (t *tx) SlotsMake(ctx context.Context, key string, limit int) error {
	_, err := t.exec(ctx, `WITH RECURSIVE n(slot) AS (SELECT 0 UNION ALL SELECT slot + 1 FROM n WHERE slot + 1 < ?)
		INSERT INTO delivery_slots (key, slot, owner, lease_until) SELECT CAST(? AS TEXT), slot, NULL, 0 FROM n WHERE true
		ON CONFLICT (key, slot) DO NOTHING`, limit, key)
	return err
}

func (t *tx) SlotLease(ctx context.Context, key, owner string, limit, n int, now, until time.Time) ([]int, error) {
	rows, err := t.query(ctx, `UPDATE delivery_slots SET owner = ?, lease_until = ? WHERE key = ? AND slot IN (
		SELECT slot FROM delivery_slots WHERE key = ? AND slot < ? AND (owner IS NULL OR lease_until <= ?)
		ORDER BY slot LIMIT ?`+t.db.dialect.SkipLocked+`) RETURNING slot`,
		owner, ts(until), key, key, limit, ts(now), n)
	return all(rows, err, func(s scanner) (int, error) {
		var n int
		return n, s.Scan(&n)
	})
}

func (t *tx) SlotRenew(ctx context.Context, owner string, slots []agentowl.Slot, now, until time.Time) ([]agentowl.Slot, error) {
	var kept []agentowl.Slot
	for _, s := range slots {
		res, err := t.exec(ctx, `UPDATE delivery_slots SET lease_until = ?
			WHERE key = ? AND slot = ? AND owner = ? AND lease_until = ? AND lease_until > ?`,
			ts(until), s.Key, s.N, owner, ts(s.Until), ts(now))
		if err != nil {
			return nil, err
		}
		if n, err := res.RowsAffected(); err != nil {
			return nil, err
		} else if n == 1 {
			kept = append(kept, agentowl.Slot{Key: s.Key, N: s.N, Until: until})
		}
	}
	return kept, nil
}

func (t *tx) SlotRelease(ctx context.Context, owner string, slots []agentowl.Slot) error {
	for _, s := range slots {
		if _, err := t.exec(ctx, `UPDATE delivery_slots SET owner = NULL WHERE key = ? AND slot = ? AND owner = ? AND lease_until = ?`,
			s.Key, s.N, owner, ts(s.Until)); err != nil {
			return err
		}
	}
	return nil
}

func (t *tx) EngineReport(ctx context.Context, r *agentowl.EngineReport, forgetBefore time.Time) error {
	if _, err := t.exec(ctx, `DELETE FROM delivery_engines WHERE seen_at < ?`, ts(forgetBefore)); err != nil {
		return err
	}
	_, err := t.exec(ctx, `INSERT INTO delivery_engines (owner, started_at, seen_at, attempts, slots_busy, slots_idle, slots_stale, slots_reclaimed)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (owner) DO UPDATE SET seen_at = excluded.seen_at, attempts = excluded.attempts,
		slots_busy = excluded.slots_busy, slots_idle = excluded.slots_idle, slots_stale = excluded.slots_stale,
		slots_reclaimed = excluded.slots_reclaimed`,
		r.Owner, ts(r.StartedAt), ts(r.SeenAt), r.Attempts, r.SlotsBusy, r.SlotsIdle, r.SlotsStale, r.SlotsReclaimed)
	return err
}

func (t *tx) EngineGone(ctx context.Context, owner string) error {
	_, err := t.exec(ctx, `DELETE FROM delivery_engines WHERE owner = ?`, owner)
	return err
}

func (t *tx) EngineList(ctx context.Context) ([]*agentowl.EngineReport, error) {
	rows, err := t.query(ctx, `SELECT owner, started_at, seen_at, attempts, slots_busy, slots_idle, slots_stale, slots_reclaimed
		FROM delivery_engines ORDER BY owner`)
	return all(rows, err, func(s scanner) (*agentowl.EngineReport, error) {
		var r agentowl.EngineReport
		var started, seen int64
		err := s.Scan(&r.Owner, &started, &seen, &r.Attempts, &r.SlotsBusy, &r.SlotsIdle, &r.SlotsStale, &r.SlotsReclaimed)
		r.StartedAt, r.SeenAt = fromTS(started), fromTS(seen)
		return &r, err
	})
}
