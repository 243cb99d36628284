package sqlstore

import (
	"context"
	"fmt"
	"time"

	"github.com/acds-project/acds/store"
)

// The trust anchors of the replicas sharing a database
// (store.TrustRegistry): one row per replica in trust_anchors (migration
// 0005), replaced when the replica registers again.

var (
	_ store.TrustRegistry = (*SQLite)(nil)
	_ store.TrustRegistry = (*Postgres)(nil)
)

// PutTrustAnchor implements [store.TrustRegistry].
func (s *SQLite) PutTrustAnchor(ctx context.Context, a store.TrustAnchor, now time.Time) error {
	if err := store.CheckTrustAnchor(a); err != nil {
		return err
	}
	return s.write(ctx, true, func(w *writeConn) error {
		_, err := w.exec(`INSERT INTO trust_anchors (replica, anchor, updated_at) VALUES (?, ?, ?)
			ON CONFLICT (replica) DO UPDATE SET anchor = excluded.anchor, updated_at = excluded.updated_at`,
			a.Replica, a.Anchor, store.StoredTime(now).UnixMicro())
		if err != nil {
			return fmt.Errorf("store: put trust anchor: %w", err)
		}
		return nil
	})
}

// TrustAnchors implements [store.TrustRegistry].
func (s *SQLite) TrustAnchors(ctx context.Context) ([]store.TrustAnchor, error) {
	if s.closed.Load() {
		return nil, store.ErrClosed
	}
	rows, err := s.rdb.QueryContext(ctx, "SELECT replica, anchor, updated_at FROM trust_anchors ORDER BY replica")
	if err != nil {
		return nil, s.readErr("trust anchors", err)
	}
	defer rows.Close()
	var out []store.TrustAnchor
	for rows.Next() {
		var a store.TrustAnchor
		var updated int64
		if err := rows.Scan(&a.Replica, &a.Anchor, &updated); err != nil {
			return nil, s.readErr("trust anchors", err)
		}
		a.UpdatedAt = fromMicros(updated)
		out = append(out, a)
	}
	if err := rows.Err(); err != nil {
		return nil, s.readErr("trust anchors", err)
	}
	return out, nil
}

// PutTrustAnchor implements [store.TrustRegistry].
func (p *Postgres) PutTrustAnchor(ctx context.Context, a store.TrustAnchor, now time.Time) error {
	if err := store.CheckTrustAnchor(a); err != nil {
		return err
	}
	_, err := p.pool.Exec(ctx, `INSERT INTO trust_anchors (replica, anchor, updated_at) VALUES ($1, $2, $3)
		ON CONFLICT (replica) DO UPDATE SET anchor = excluded.anchor, updated_at = excluded.updated_at`,
		a.Replica, a.Anchor, store.StoredTime(now))
	if err != nil {
		return p.err("put trust anchor", err)
	}
	return nil
}

// TrustAnchors implements [store.TrustRegistry].
func (p *Postgres) TrustAnchors(ctx context.Context) ([]store.TrustAnchor, error) {
	if p.closed.Load() {
		return nil, store.ErrClosed
	}
	rows, err := p.pool.Query(ctx, "SELECT replica, anchor, updated_at FROM trust_anchors ORDER BY replica")
	if err != nil {
		return nil, p.err("trust anchors", err)
	}
	defer rows.Close()
	var out []store.TrustAnchor
	for rows.Next() {
		var a store.TrustAnchor
		if err := rows.Scan(&a.Replica, &a.Anchor, &a.UpdatedAt); err != nil {
			return nil, p.err("trust anchors", err)
		}
		a.UpdatedAt = a.UpdatedAt.UTC()
		out = append(out, a)
	}
	if err := rows.Err(); err != nil {
		return nil, p.err("trust anchors", err)
	}
	return out, nil
}
