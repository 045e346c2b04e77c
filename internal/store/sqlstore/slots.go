package sqlstore

import (
	"context"
	"time"

	"github.com/agentowl/agentowl/internal/store"
)

func (t *tx) SlotLease(ctx context.Context, key, owner string, limit, n int, now, until time.Time) ([]int, error) {
	// Slot rows are made on first use; a key's rows are few (its limit).
	if _, err := t.exec(ctx, `WITH RECURSIVE n(slot) AS (SELECT 0 UNION ALL SELECT slot + 1 FROM n WHERE slot + 1 < ?)
		INSERT INTO delivery_slots (key, slot, owner, lease_until) SELECT CAST(? AS TEXT), slot, NULL, 0 FROM n WHERE true
		ON CONFLICT (key, slot) DO NOTHING`, limit, key); err != nil {
		return nil, err
	}
	rows, err := t.query(ctx, `UPDATE delivery_slots SET owner = ?, lease_until = ? WHERE key = ? AND slot IN (
		SELECT slot FROM delivery_slots WHERE key = ? AND slot < ? AND (owner IS NULL OR lease_until <= ?)
		ORDER BY slot LIMIT ?`+t.db.dialect.SkipLocked+`) RETURNING slot`,
		owner, ts(until), key, key, limit, ts(now), n)
	return all(rows, err, func(s scanner) (int, error) {
		var n int
		return n, s.Scan(&n)
	})
}

func (t *tx) SlotRenew(ctx context.Context, owner string, now, until time.Time) ([]store.Slot, error) {
	rows, err := t.query(ctx, `UPDATE delivery_slots SET lease_until = ? WHERE owner = ? AND lease_until > ? RETURNING key, slot`,
		ts(until), owner, ts(now))
	return all(rows, err, func(s scanner) (store.Slot, error) {
		var sl store.Slot
		return sl, s.Scan(&sl.Key, &sl.N)
	})
}

func (t *tx) SlotRelease(ctx context.Context, owner string, slots []store.Slot) error {
	for _, s := range slots {
		if _, err := t.exec(ctx, `UPDATE delivery_slots SET owner = NULL WHERE key = ? AND slot = ? AND owner = ?`,
			s.Key, s.N, owner); err != nil {
			return err
		}
	}
	return nil
}
