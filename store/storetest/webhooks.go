package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/acds-project/acds/store"
)

// testWebhooks checks a store's webhook deliveries, when it keeps them: a
// request created with a Callback has a delivery that is not due while
// the request is processing, is claimed once it ended (most overdue
// first), is leased until the claim's end, is due again at the time a
// retry names, ends with EndDelivery, and goes with its request.
func testWebhooks(t *testing.T, s store.Store) {
	ws, ok := s.(store.Webhooks)
	if !ok {
		t.Skip("the store does not implement store.Webhooks")
	}
	ctx := t.Context()
	claim := func(now time.Time) *store.Delivery {
		t.Helper()
		d, err := ws.ClaimDelivery(ctx, now, now.Add(time.Minute))
		require.NoError(t, err)
		return d
	}
	require.Nil(t, claim(T0), "an empty store")

	a := NewRequest("anon-w", T0)
	a.Callback = "https://receiver.example/hook?a=1"
	b := NewRequest("anon-w", T0.Add(time.Second))
	b.Callback = "https://receiver.example/hook?b=1"
	plain := NewRequest("anon-w", T0.Add(2*time.Second))
	for _, r := range []store.Request{a, b, plain} {
		require.NoError(t, s.CreateRequest(ctx, r))
	}
	long := NewRequest("anon-w", T0)
	long.Callback = "https://x.example/" + string(make([]byte, store.MaxCallbackLen))
	require.ErrorIs(t, s.CreateRequest(ctx, long), store.ErrInvalid)
	require.Nil(t, claim(T0.Add(time.Hour)), "deliveries of processing requests are not due")

	// All end at once: a's delivery is the more overdue (created first).
	now := T0.Add(time.Minute)
	for range 3 { // a, b and plain, oldest first
		c, err := s.Claim(ctx, claimOpts("w", now))
		require.NoError(t, err)
		require.NoError(t, s.Complete(ctx, c.ID, "w", []byte(`{}`), now))
	}
	d := claim(now)
	require.NotNil(t, d)
	require.Equal(t, a.ID, d.RequestID)
	require.Equal(t, "anon-w", d.Owner)
	require.Equal(t, a.Callback, d.URL)
	require.Equal(t, 1, d.Attempts)
	require.True(t, d.NextAt.Equal(us(now.Add(time.Minute))), "leased until %v", d.NextAt)
	require.True(t, d.CreatedAt.Equal(us(T0)))

	// a is leased: the next claim is b; then nothing is due.
	d2 := claim(now)
	require.NotNil(t, d2)
	require.Equal(t, b.ID, d2.RequestID)
	require.Nil(t, claim(now.Add(30*time.Second)))

	// A failed attempt of a: due again at the time named, attempts kept.
	require.NoError(t, ws.RetryDelivery(ctx, a.ID, now.Add(10*time.Second), "503 from the receiver"))
	require.Nil(t, claim(now.Add(9*time.Second)))
	d = claim(now.Add(10 * time.Second))
	require.NotNil(t, d)
	require.Equal(t, a.ID, d.RequestID)
	require.Equal(t, 2, d.Attempts)
	require.Equal(t, "503 from the receiver", d.LastError)

	// Delivered: gone for good.
	require.NoError(t, ws.EndDelivery(ctx, a.ID))
	require.ErrorIs(t, ws.EndDelivery(ctx, a.ID), store.ErrNotFound)
	require.ErrorIs(t, ws.RetryDelivery(ctx, a.ID, now, ""), store.ErrNotFound)

	// Deleting b's request deletes its delivery.
	require.NoError(t, s.DeleteRequest(ctx, "anon-w", b.ID))
	require.Nil(t, claim(now.Add(time.Hour)))
	if err := ws.EndDelivery(ctx, b.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the delivery of a deleted request: %v", err)
	}
}
