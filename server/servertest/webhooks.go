package servertest

import (
	"context"
	"time"

	"github.com/acds-project/acds"
	"github.com/acds-project/acds/store"
)

var _ store.Webhooks = (*MemStore)(nil)

// ClaimDelivery implements store.Webhooks.
func (m *MemStore) ClaimDelivery(ctx context.Context, now, until time.Time) (*store.Delivery, error) {
	if err := m.begin(ctx); err != nil {
		return nil, err
	}
	defer m.mu.Unlock()
	now = dbTime(now)
	var best *store.Delivery
	for id, d := range m.deliveries {
		r := m.requests[id]
		if r == nil || r.Status == acds.StatusProcessing || d.NextAt.After(now) {
			continue
		}
		if best == nil || d.NextAt.Before(best.NextAt) || (d.NextAt.Equal(best.NextAt) && d.RequestID < best.RequestID) {
			best = d
		}
	}
	if best == nil {
		return nil, nil
	}
	best.NextAt = dbTime(until)
	best.Attempts++
	cp := *best
	return &cp, nil
}

// RetryDelivery implements store.Webhooks.
func (m *MemStore) RetryDelivery(ctx context.Context, requestID string, next time.Time, lastError string) error {
	if err := m.begin(ctx); err != nil {
		return err
	}
	defer m.mu.Unlock()
	d := m.deliveries[requestID]
	if d == nil {
		return store.ErrNotFound
	}
	d.NextAt, d.LastError = dbTime(next), lastError
	return nil
}

// EndDelivery implements store.Webhooks.
func (m *MemStore) EndDelivery(ctx context.Context, requestID string) error {
	if err := m.begin(ctx); err != nil {
		return err
	}
	defer m.mu.Unlock()
	if m.deliveries[requestID] == nil {
		return store.ErrNotFound
	}
	delete(m.deliveries, requestID)
	return nil
}
