package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/acds-project/acds/store"
)

var (
	_ store.Webhooks = (*SQLite)(nil)
	_ store.Webhooks = (*Postgres)(nil)
)

// maxDeliveryError bounds the stored description of a failed attempt.
const maxDeliveryError = 512

func clipError(s string) string {
	if len(s) > maxDeliveryError {
		return s[:maxDeliveryError]
	}
	return s
}

// ClaimDelivery implements [store.Webhooks]. Claims are serialised by the
// single writer.
func (s *SQLite) ClaimDelivery(ctx context.Context, now, until time.Time) (*store.Delivery, error) {
	var d *store.Delivery
	err := s.write(ctx, false, func(w *writeConn) error {
		d = nil
		var id string
		err := w.queryRow(`SELECT w.request_id FROM webhooks w JOIN requests r ON r.id = w.request_id
			WHERE w.next_at <= ? AND r.status IN ('completed', 'failed')
			ORDER BY w.next_at, w.request_id LIMIT 1`, store.StoredTime(now).UnixMicro()).Scan(&id)
		if errors.Is(err, sql.ErrNoRows) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("store: claim delivery: %w", err)
		}
		if _, err := w.exec(`UPDATE webhooks SET next_at = ?, attempts = attempts + 1 WHERE request_id = ?`,
			store.StoredTime(until).UnixMicro(), id); err != nil {
			return fmt.Errorf("store: claim delivery: %w", err)
		}
		var next, created int64
		x := store.Delivery{}
		if err := w.queryRow(`SELECT w.request_id, r.owner, w.url, w.attempts, w.next_at, w.last_error, w.created_at
			FROM webhooks w JOIN requests r ON r.id = w.request_id WHERE w.request_id = ?`, id).
			Scan(&x.RequestID, &x.Owner, &x.URL, &x.Attempts, &next, &x.LastError, &created); err != nil {
			return fmt.Errorf("store: claim delivery: %w", err)
		}
		x.NextAt, x.CreatedAt = fromMicros(next), fromMicros(created)
		d = &x
		return nil
	})
	if err != nil {
		return nil, err // d may still be written by a job the deadline left behind
	}
	return d, nil
}

// RetryDelivery implements [store.Webhooks].
func (s *SQLite) RetryDelivery(ctx context.Context, requestID string, next time.Time, lastError string) error {
	return s.write(ctx, true, func(w *writeConn) error {
		res, err := w.exec(`UPDATE webhooks SET next_at = ?, last_error = ? WHERE request_id = ?`,
			store.StoredTime(next).UnixMicro(), clipError(lastError), requestID)
		if err != nil {
			return fmt.Errorf("store: retry delivery: %w", err)
		}
		return oneRow(res, store.ErrNotFound)
	})
}

// EndDelivery implements [store.Webhooks].
func (s *SQLite) EndDelivery(ctx context.Context, requestID string) error {
	return s.write(ctx, true, func(w *writeConn) error {
		res, err := w.exec(`DELETE FROM webhooks WHERE request_id = ?`, requestID)
		if err != nil {
			return fmt.Errorf("store: end delivery: %w", err)
		}
		return oneRow(res, store.ErrNotFound)
	})
}

// ClaimDelivery implements [store.Webhooks] with FOR UPDATE SKIP LOCKED:
// replicas sharing the database each take a different delivery.
func (p *Postgres) ClaimDelivery(ctx context.Context, now, until time.Time) (*store.Delivery, error) {
	var d store.Delivery
	var next, created time.Time
	err := p.pool.QueryRow(ctx, `UPDATE webhooks w SET next_at = $2, attempts = w.attempts + 1
		FROM requests r
		WHERE r.id = w.request_id AND w.request_id = (
			SELECT w2.request_id FROM webhooks w2 JOIN requests r2 ON r2.id = w2.request_id
			WHERE w2.next_at <= $1 AND r2.status IN ('completed', 'failed')
			ORDER BY w2.next_at, w2.request_id LIMIT 1 FOR UPDATE OF w2 SKIP LOCKED)
		RETURNING w.request_id, r.owner, w.url, w.attempts, w.next_at, w.last_error, w.created_at`,
		store.StoredTime(now), store.StoredTime(until)).
		Scan(&d.RequestID, &d.Owner, &d.URL, &d.Attempts, &next, &d.LastError, &created)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, p.err("claim delivery", err)
	}
	d.NextAt, d.CreatedAt = next.UTC(), created.UTC()
	return &d, nil
}

// RetryDelivery implements [store.Webhooks].
func (p *Postgres) RetryDelivery(ctx context.Context, requestID string, next time.Time, lastError string) error {
	tag, err := p.pool.Exec(ctx, `UPDATE webhooks SET next_at = $2, last_error = $3 WHERE request_id = $1`,
		requestID, store.StoredTime(next), clipError(lastError))
	if err != nil {
		return p.err("retry delivery", err)
	}
	if tag.RowsAffected() == 0 {
		return store.ErrNotFound
	}
	return nil
}

// EndDelivery implements [store.Webhooks].
func (p *Postgres) EndDelivery(ctx context.Context, requestID string) error {
	tag, err := p.pool.Exec(ctx, `DELETE FROM webhooks WHERE request_id = $1`, requestID)
	if err != nil {
		return p.err("end delivery", err)
	}
	if tag.RowsAffected() == 0 {
		return store.ErrNotFound
	}
	return nil
}
