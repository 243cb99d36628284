package storetest

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/acds-project/acds"
	"github.com/acds-project/acds/store"
)

// crashed is the problem the isolation tests store on a request whose solo
// attempt died.
var crashed = []byte(`{"type":"urn:acds:problem:internal","detail":"processing could not complete"}`)

// isolated returns claim options with crash isolation, solo or not.
func isolated(worker string, now time.Time, solo bool) store.ClaimOptions {
	o := claimOpts(worker, now)
	o.Isolate, o.Solo, o.Crashed = true, solo, crashed
	return o
}

// testCrashIsolation: a process dies with two requests in flight, one of
// which killed it. Both become suspects, uncharged; each is retried alone;
// the one whose solo attempt dies too is failed with the Crashed problem,
// the other completes, charged one attempt in all.
func testCrashIsolation(t *testing.T, s store.Store) {
	ctx := t.Context()
	guilty, innocent, queued := NewRequest("anon-a", T0), NewRequest("anon-a", T0.Add(time.Millisecond)), NewRequest("anon-a", T0.Add(2*time.Millisecond))
	guilty.Kind, guilty.Sealed = acds.KindFetchAndAttest, []byte("sealed")
	for _, r := range []store.Request{guilty, innocent, queued} {
		require.NoError(t, s.CreateRequest(ctx, r))
	}
	get := func(id string) store.Request {
		t.Helper()
		r, err := s.GetRequest(ctx, "anon-a", id)
		require.NoError(t, err)
		return r
	}
	suspects := func(now time.Time) int {
		t.Helper()
		n, err := s.Suspects(ctx, now, "")
		require.NoError(t, err)
		return n
	}
	// One process runs the first two; it dies (leases until T0+1m).
	for i, want := range []string{guilty.ID, innocent.ID} {
		c, err := s.Claim(ctx, isolated(fmt.Sprintf("dead/%d", i), T0, false))
		require.NoError(t, err)
		require.Equal(t, want, c.ID)
		require.Equal(t, store.NotIsolated, c.Isolation)
	}
	require.Zero(t, suspects(T0.Add(30*time.Second)), "a running lease is no suspect")
	require.Equal(t, 2, suspects(T0.Add(time.Minute)), "both leases ran out")

	// A normal claim passes over them (making them suspects, their lost
	// attempt uncounted) to the queued request.
	now := T0.Add(2 * time.Minute)
	c, err := s.Claim(ctx, isolated("live/0", now, false))
	require.NoError(t, err)
	require.Equal(t, queued.ID, c.ID)
	require.NoError(t, s.Complete(ctx, queued.ID, "live/0", []byte(`{}`), now))
	for _, id := range []string{guilty.ID, innocent.ID} {
		r := get(id)
		require.Equal(t, store.Suspect, r.Isolation)
		require.Zero(t, r.Attempts, "the attempt that died with others is not counted")
		require.Empty(t, r.LeaseOwner)
		require.Equal(t, acds.StatusProcessing, r.Status)
	}
	c, err = s.Claim(ctx, isolated("live/1", now, false))
	require.NoError(t, err)
	require.Nil(t, c, "a normal claim took a suspect")
	require.Equal(t, 2, suspects(now))

	// The guilty one is retried alone, and its process dies again.
	c, err = s.Claim(ctx, isolated("live/solo", now, true))
	require.NoError(t, err)
	require.Equal(t, guilty.ID, c.ID)
	require.Equal(t, store.Solo, c.Isolation)
	require.Equal(t, 1, c.Attempts)
	require.Equal(t, []byte("sealed"), c.Sealed)
	require.Equal(t, 1, suspects(now))

	// Once that lease ran out, any claim fails it.
	now = now.Add(2 * time.Minute)
	c, err = s.Claim(ctx, isolated("next/0", now, false))
	require.NoError(t, err)
	require.Nil(t, c)
	r := get(guilty.ID)
	require.Equal(t, acds.StatusFailed, r.Status)
	require.Equal(t, crashed, r.Error)
	require.Empty(t, r.Sealed, "failing erases the sealed credentials")
	require.Empty(t, r.LeaseOwner)
	require.True(t, r.CompletedAt.Equal(us(now)))
	require.Equal(t, 1, suspects(now))

	// The innocent one, retried alone, completes: one attempt counted.
	c, err = s.Claim(ctx, isolated("next/solo", now, true))
	require.NoError(t, err)
	require.Equal(t, innocent.ID, c.ID)
	require.Equal(t, 1, c.Attempts)
	require.NoError(t, s.Complete(ctx, innocent.ID, "next/solo", []byte(`{"ok":true}`), now))
	r = get(innocent.ID)
	require.Equal(t, acds.StatusCompleted, r.Status)
	require.Equal(t, 1, r.Attempts)
	require.Zero(t, suspects(now.Add(time.Hour)))
	c, err = s.Claim(ctx, isolated("next/solo", now.Add(time.Hour), true))
	require.NoError(t, err)
	require.Nil(t, c)
}

// testCrashIsolationSoloOrphan: a solo claim takes a request whose lease
// ran out directly (no normal claim came first), without counting the lost
// attempt; a solo claim finds nothing while no attempt has died.
func testCrashIsolationSoloOrphan(t *testing.T, s store.Store) {
	ctx := t.Context()
	r := NewRequest("anon-a", T0)
	require.NoError(t, s.CreateRequest(ctx, r))
	c, err := s.Claim(ctx, isolated("w1", T0, true))
	require.NoError(t, err)
	require.Nil(t, c, "a solo claim took a request no attempt of which died")
	c, err = s.Claim(ctx, isolated("w1", T0, false))
	require.NoError(t, err)
	require.Equal(t, r.ID, c.ID)
	c, err = s.Claim(ctx, isolated("w2", T0.Add(2*time.Minute), true))
	require.NoError(t, err)
	require.Equal(t, r.ID, c.ID)
	require.Equal(t, store.Solo, c.Isolation)
	require.Equal(t, 1, c.Attempts)
	require.Equal(t, "w2", c.LeaseOwner)
	require.ErrorIs(t, s.Heartbeat(ctx, r.ID, "w1", T0.Add(time.Hour)), store.ErrLeaseLost)
	require.NoError(t, s.Heartbeat(ctx, r.ID, "w2", T0.Add(time.Hour)))
	require.NoError(t, s.Fail(ctx, r.ID, "w2", []byte(`{"type":"urn:acds:problem:invalid-fhir"}`), T0.Add(3*time.Minute)))
	got, err := s.GetRequest(ctx, "anon-a", r.ID)
	require.NoError(t, err)
	require.Equal(t, acds.StatusFailed, got.Status)
	require.Equal(t, []byte(`{"type":"urn:acds:problem:invalid-fhir"}`), got.Error)

	o := claimOpts("w3", T0)
	o.Solo = true
	_, err = s.Claim(ctx, o)
	require.ErrorIs(t, err, store.ErrInvalid, "a solo claim without isolation")
}

// testRelease: a released lease makes the request claimable at once, its
// attempt still counted; a released solo lease leaves a suspect; only the
// lease holder can release, and only a processing request.
func testRelease(t *testing.T, s store.Store) {
	ctx := t.Context()
	r := NewRequest("anon-a", T0)
	require.NoError(t, s.CreateRequest(ctx, r))
	c, err := s.Claim(ctx, isolated("w1", T0, false))
	require.NoError(t, err)
	require.Equal(t, r.ID, c.ID)
	require.ErrorIs(t, s.Release(ctx, r.ID, "w2"), store.ErrLeaseLost)
	require.NoError(t, s.Release(ctx, r.ID, "w1"))
	require.ErrorIs(t, s.Release(ctx, r.ID, "w1"), store.ErrLeaseLost, "released twice")
	require.ErrorIs(t, s.Heartbeat(ctx, r.ID, "w1", T0.Add(time.Hour)), store.ErrLeaseLost)
	n, err := s.Suspects(ctx, T0.Add(time.Hour), "")
	require.NoError(t, err)
	require.Zero(t, n, "a released request is no suspect")

	c, err = s.Claim(ctx, isolated("w2", T0.Add(time.Second), false))
	require.NoError(t, err)
	require.NotNil(t, c, "a released request is claimable before its lease would have run out")
	require.Equal(t, 2, c.Attempts)
	require.Equal(t, store.NotIsolated, c.Isolation)

	// A solo lease given back: a suspect again, for the next solo claim.
	c, err = s.Claim(ctx, isolated("w3", T0.Add(5*time.Minute), true))
	require.NoError(t, err)
	require.Equal(t, r.ID, c.ID)
	require.Equal(t, 2, c.Attempts, "the lost attempt is taken back, the solo one counted")
	require.NoError(t, s.Release(ctx, r.ID, "w3"))
	got, err := s.GetRequest(ctx, "anon-a", r.ID)
	require.NoError(t, err)
	require.Equal(t, store.Suspect, got.Isolation)
	require.Empty(t, got.LeaseOwner)
	c, err = s.Claim(ctx, isolated("w4", T0.Add(5*time.Minute), false))
	require.NoError(t, err)
	require.Nil(t, c, "a normal claim took a released suspect")
	c, err = s.Claim(ctx, isolated("w4", T0.Add(5*time.Minute), true))
	require.NoError(t, err)
	require.Equal(t, r.ID, c.ID)
	require.Equal(t, 3, c.Attempts)
	require.NoError(t, s.Complete(ctx, r.ID, "w4", []byte(`{}`), T0.Add(6*time.Minute)))
	require.ErrorIs(t, s.Release(ctx, r.ID, "w4"), store.ErrLeaseLost, "an ended request")
}

// testCrashIsolationAffinity: suspects keep their affinity; Suspects and
// solo claims of another replica pass them by.
func testCrashIsolationAffinity(t *testing.T, s store.Store) {
	ctx := t.Context()
	r := NewRequest("anon-a", T0)
	r.Kind, r.Sealed, r.Affinity = acds.KindFetchAndAttest, []byte("sealed by A"), "replica-a"
	require.NoError(t, s.CreateRequest(ctx, r))
	oa := isolated("a/0", T0, false)
	oa.Affinity = "replica-a"
	c, err := s.Claim(ctx, oa)
	require.NoError(t, err)
	require.Equal(t, r.ID, c.ID)

	later := T0.Add(2 * time.Minute)
	for aff, want := range map[string]int{"replica-b": 0, "replica-a": 1, "": 1} {
		n, err := s.Suspects(ctx, later, aff)
		require.NoError(t, err)
		require.Equal(t, want, n, "suspects for affinity %q", aff)
	}
	ob := isolated("b/solo", later, true)
	ob.Affinity = "replica-b"
	c, err = s.Claim(ctx, ob)
	require.NoError(t, err)
	require.Nil(t, c, "replica B retried a request reserved for replica A")
	oa = isolated("a/solo", later, true)
	oa.Affinity = "replica-a"
	c, err = s.Claim(ctx, oa)
	require.NoError(t, err)
	require.Equal(t, r.ID, c.ID)
	require.Equal(t, r.Sealed, c.Sealed)
}
