// Package storetest is the conformance suite of [store.Store]: every backend
// runs the same tests, so the server can rely on the behaviour documented on
// the interface whichever database it is given.
//
// A backend's test calls Run with a function that opens a fresh, empty
// store for one subtest (and registers its cleanup with t.Cleanup):
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) store.Store {
//			s, err := sqlstore.OpenSQLite(t.Context(), filepath.Join(t.TempDir(), "acds.db"))
//			if err != nil {
//				t.Fatal(err)
//			}
//			t.Cleanup(func() { s.Close() })
//			return s
//		})
//	}
//
// The suite uses pinned clocks; it never sleeps on the wall clock.
package storetest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/acds-project/acds"
	"github.com/acds-project/acds/store"
)

// T0 is the pinned "now" of the suite. It has nanoseconds on purpose:
// stores keep microseconds.
var T0 = time.Date(2026, 3, 4, 5, 6, 7, 891234567, time.UTC)

// us is the precision the stores keep.
func us(t time.Time) time.Time { return t.UTC().Truncate(time.Microsecond) }

// Run runs the conformance suite against the stores that open returns.
// Each subtest opens its own store.
func Run(t *testing.T, open func(t *testing.T) store.Store) {
	t.Helper()
	tests := []struct {
		name string
		fn   func(t *testing.T, s store.Store)
	}{
		{"Sessions", testSessions},
		{"DeleteExpiredSessions", testDeleteExpiredSessions},
		{"Passphrases", testPassphrases},
		{"CreateGet", testCreateGet},
		{"CreateInvalid", testCreateInvalid},
		{"LargeValues", testLargeValues},
		{"OwnerIsolation", testOwnerIsolation},
		{"ListPagination", testListPagination},
		{"ListLimitClamp", testListLimitClamp},
		{"ListMaxBytes", testListMaxBytes},
		{"ListBadCursor", testListBadCursor},
		{"Delete", testDelete},
		{"ClaimComplete", testClaimComplete},
		{"ClaimFail", testClaimFail},
		{"ClaimOrder", testClaimOrder},
		{"ClaimInvalid", testClaimInvalid},
		{"LeaseExpiry", testLeaseExpiry},
		{"Exhaustion", testExhaustion},
		{"CrashIsolation", testCrashIsolation},
		{"CrashIsolationSoloOrphan", testCrashIsolationSoloOrphan},
		{"CrashIsolationAffinity", testCrashIsolationAffinity},
		{"Release", testRelease},
		{"EraseSealedBefore", testEraseSealedBefore},
		{"QueueStats", testQueueStats},
		{"TrustAnchors", testTrustAnchors},
		{"EraseEndedBefore", testEraseEndedBefore},
		{"RevokeSessions", testRevokeSessions},
		{"ClaimAffinity", testClaimAffinity},
		{"Webhooks", testWebhooks},
		{"ConcurrentCreate", testConcurrentCreate},
		{"ConcurrentClaim", testConcurrentClaim},
		{"CanceledContext", testCanceledContext},
		{"Close", testClose},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.fn(t, open(t))
		})
	}
}

// Token returns a session token hash derived from name.
func Token(name string) []byte {
	h := sha256.Sum256([]byte("token:" + name))
	return h[:]
}

// NewRequest returns a process request of owner created at created.
func NewRequest(owner string, created time.Time) store.Request {
	return store.Request{
		ID:        uuid.NewString(),
		Owner:     owner,
		Kind:      acds.KindProcess,
		Status:    acds.StatusProcessing,
		Input:     []byte(`{"data":{"resourceType":"Bundle"}}`),
		CreatedAt: created,
	}
}

// testEraseEndedBefore checks retention: only requests that ended before
// the cut-off lose their input, result and sealed data, oldest first and
// at most limit at a time; processing requests and a failed request's
// problem stay, and the record says when it was erased.
func testEraseEndedBefore(t *testing.T, s store.Store) {
	ctx := t.Context()
	end := func(r store.Request, at time.Time, fail bool) {
		t.Helper()
		r.Kind, r.Sealed = acds.KindFetchAndAttest, []byte("sealed")
		require.NoError(t, s.CreateRequest(ctx, r))
		c, err := s.Claim(ctx, claimOpts("w-"+r.ID, at))
		require.NoError(t, err)
		require.Equal(t, r.ID, c.ID)
		if fail {
			require.NoError(t, s.Fail(ctx, r.ID, "w-"+r.ID, []byte(`{"type":"urn:acds:problem:record-not-found"}`), at))
		} else {
			require.NoError(t, s.Complete(ctx, r.ID, "w-"+r.ID, []byte(`{"outputFormat":"fhir_r4","output":{}}`), at))
		}
	}
	old1 := NewRequest("anon-r", T0)
	old2 := NewRequest("anon-r", T0.Add(time.Second))
	oldFailed := NewRequest("anon-r", T0.Add(2*time.Second))
	recent := NewRequest("anon-r", T0.Add(3*time.Second))
	end(old1, T0.Add(time.Hour), false)
	end(old2, T0.Add(2*time.Hour), false)
	end(oldFailed, T0.Add(3*time.Hour), true)
	end(recent, T0.Add(10*time.Hour), false)
	queued := NewRequest("anon-r", T0)
	require.NoError(t, s.CreateRequest(ctx, queued))

	_, err := s.EraseEndedBefore(ctx, T0.Add(5*time.Hour), T0.Add(11*time.Hour), 0)
	require.ErrorIs(t, err, store.ErrInvalid, "limit 0")

	now := T0.Add(11 * time.Hour)
	n, err := s.EraseEndedBefore(ctx, T0.Add(5*time.Hour), now, 2)
	require.NoError(t, err)
	require.Equal(t, 2, n, "at most limit")
	n, err = s.EraseEndedBefore(ctx, T0.Add(5*time.Hour), now, 2)
	require.NoError(t, err)
	require.Equal(t, 1, n, "the rest, fewer than limit")
	n, err = s.EraseEndedBefore(ctx, T0.Add(5*time.Hour), now, 2)
	require.NoError(t, err)
	require.Zero(t, n, "nothing twice")

	for _, r := range []store.Request{old1, old2, oldFailed} {
		got, err := s.GetRequest(ctx, "anon-r", r.ID)
		require.NoError(t, err)
		require.Empty(t, got.Input, "input erased")
		require.Empty(t, got.Result, "result erased")
		require.Empty(t, got.Sealed)
		require.True(t, got.ErasedAt.Equal(us(now)), "erased at %v", got.ErasedAt)
		require.True(t, got.UpdatedAt.Equal(us(now)))
		require.False(t, got.CompletedAt.IsZero(), "the record keeps when it ended")
		require.NotEqual(t, acds.StatusProcessing, got.Status)
	}
	got, err := s.GetRequest(ctx, "anon-r", oldFailed.ID)
	require.NoError(t, err)
	require.JSONEq(t, `{"type":"urn:acds:problem:record-not-found"}`, string(got.Error), "a failure's problem stays")
	got, err = s.GetRequest(ctx, "anon-r", recent.ID)
	require.NoError(t, err)
	require.NotEmpty(t, got.Result, "ended after the cut-off: kept")
	require.True(t, got.ErasedAt.IsZero())
	got, err = s.GetRequest(ctx, "anon-r", queued.ID)
	require.NoError(t, err)
	require.Equal(t, queued.Input, got.Input, "a processing request is never erased")
	require.True(t, got.ErasedAt.IsZero())
}

// testRevokeSessions checks DeleteSession and DeleteSessionsOf: a revoked
// token is gone at once, the others of the pseudonym go except the kept
// one, and another pseudonym's sessions — including one whose name
// shares a prefix — stay.
func testRevokeSessions(t *testing.T, s store.Store) {
	ctx := t.Context()
	mk := func(key, token string) {
		t.Helper()
		require.NoError(t, s.CreateSession(ctx, store.Session{Pseudonym: key, TokenHash: Token(token), CreatedAt: T0, ExpiresAt: T0.Add(time.Hour)}))
	}
	mk("anon_a", "bare")
	mk("anon_a.x1", "a1")
	mk("anon_a.x2", "a2")
	mk("anon_a.x3", "a3")
	mk("anon_ab.x1", "ab") // a longer pseudonym with the same prefix
	mk("anon_b.x1", "b1")

	require.NoError(t, s.DeleteSession(ctx, Token("a1")))
	_, err := s.SessionByTokenHash(ctx, Token("a1"))
	require.ErrorIs(t, err, store.ErrNotFound)
	require.ErrorIs(t, s.DeleteSession(ctx, Token("a1")), store.ErrNotFound, "twice")
	require.ErrorIs(t, s.DeleteSession(ctx, []byte("short")), store.ErrInvalid)

	n, err := s.DeleteSessionsOf(ctx, "anon_a", Token("a3"))
	require.NoError(t, err)
	require.Equal(t, 2, n, "bare and a2 go, a3 is kept")
	for tok, live := range map[string]bool{"bare": false, "a2": false, "a3": true, "ab": true, "b1": true} {
		_, err := s.SessionByTokenHash(ctx, Token(tok))
		if live {
			require.NoError(t, err, tok)
		} else {
			require.ErrorIs(t, err, store.ErrNotFound, tok)
		}
	}
	n, err = s.DeleteSessionsOf(ctx, "anon_a", nil)
	require.NoError(t, err)
	require.Equal(t, 1, n, "keep nil removes every session")
	require.Equal(t, "anon_a", store.SessionOwner("anon_a.x1"))
	require.Equal(t, "anon_a", store.SessionOwner("anon_a"))
}

// testQueueStats checks a store's QueueStats, when it has one: it counts
// exactly the requests still processing (leased or not) and names the
// creation time of the oldest of them.
func testQueueStats(t *testing.T, s store.Store) {
	qs, ok := s.(store.QueueStatter)
	if !ok {
		t.Skip("the store does not implement store.QueueStatter")
	}
	ctx := t.Context()
	st, err := qs.QueueStats(ctx)
	require.NoError(t, err)
	require.Equal(t, store.QueueStats{}, st, "an empty store")

	first := NewRequest("anon-q", T0)
	second := NewRequest("anon-q", T0.Add(time.Second))
	third := NewRequest("anon-q", T0.Add(2*time.Second))
	for _, r := range []store.Request{first, second, third} {
		require.NoError(t, s.CreateRequest(ctx, r))
	}
	st, err = qs.QueueStats(ctx)
	require.NoError(t, err)
	require.Equal(t, 3, st.Processing)
	require.True(t, st.Oldest.Equal(us(T0)), "oldest %v, want %v", st.Oldest, us(T0))

	// A leased request is still processing; a completed one is not.
	c, err := s.Claim(ctx, claimOpts("w1", T0.Add(time.Minute)))
	require.NoError(t, err)
	require.Equal(t, first.ID, c.ID)
	st, err = qs.QueueStats(ctx)
	require.NoError(t, err)
	require.Equal(t, 3, st.Processing)
	require.NoError(t, s.Complete(ctx, c.ID, "w1", []byte(`{}`), T0.Add(time.Minute)))
	st, err = qs.QueueStats(ctx)
	require.NoError(t, err)
	require.Equal(t, 2, st.Processing)
	require.True(t, st.Oldest.Equal(us(T0.Add(time.Second))), "oldest %v after completing the first", st.Oldest)
	require.NoError(t, s.DeleteRequest(ctx, "anon-q", second.ID))
	st, err = qs.QueueStats(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, st.Processing)
	require.True(t, st.Oldest.Equal(us(T0.Add(2*time.Second))))
}

// testTrustAnchors checks a store's trust registry, when it has one:
// anchors come back ordered by replica with the time they were put, a
// replica registering again replaces its anchor, and malformed anchors
// are ErrInvalid.
func testTrustAnchors(t *testing.T, s store.Store) {
	tr, ok := s.(store.TrustRegistry)
	if !ok {
		t.Skip("the store does not implement store.TrustRegistry")
	}
	ctx := t.Context()
	as, err := tr.TrustAnchors(ctx)
	require.NoError(t, err)
	require.Empty(t, as, "an empty store")

	require.NoError(t, tr.PutTrustAnchor(ctx, store.TrustAnchor{Replica: "replica-b", Anchor: []byte("b1")}, T0))
	require.NoError(t, tr.PutTrustAnchor(ctx, store.TrustAnchor{Replica: "replica-a", Anchor: []byte("a1")}, T0.Add(time.Second)))
	as, err = tr.TrustAnchors(ctx)
	require.NoError(t, err)
	require.Len(t, as, 2)
	require.Equal(t, "replica-a", as[0].Replica)
	require.Equal(t, []byte("a1"), as[0].Anchor)
	require.True(t, as[0].UpdatedAt.Equal(us(T0.Add(time.Second))), "updated %v", as[0].UpdatedAt)
	require.Equal(t, "replica-b", as[1].Replica)
	require.True(t, as[1].UpdatedAt.Equal(us(T0)), "updated %v", as[1].UpdatedAt)

	// Registering again replaces, never adds.
	require.NoError(t, tr.PutTrustAnchor(ctx, store.TrustAnchor{Replica: "replica-b", Anchor: []byte("b2")}, T0.Add(time.Minute)))
	as, err = tr.TrustAnchors(ctx)
	require.NoError(t, err)
	require.Len(t, as, 2)
	require.Equal(t, []byte("b2"), as[1].Anchor)
	require.True(t, as[1].UpdatedAt.Equal(us(T0.Add(time.Minute))))

	// A returned anchor is the caller's: changing it changes nothing stored.
	as[1].Anchor[0] = 'x'
	again, err := tr.TrustAnchors(ctx)
	require.NoError(t, err)
	require.Equal(t, []byte("b2"), again[1].Anchor)

	for name, a := range map[string]store.TrustAnchor{
		"empty replica":  {Anchor: []byte("x")},
		"long replica":   {Replica: strings.Repeat("r", store.MaxIDLen+1), Anchor: []byte("x")},
		"empty anchor":   {Replica: "replica-c"},
		"anchor too big": {Replica: "replica-c", Anchor: make([]byte, store.MaxAnchorLen+1)},
	} {
		require.ErrorIs(t, tr.PutTrustAnchor(ctx, a, T0), store.ErrInvalid, name)
	}
	as, err = tr.TrustAnchors(ctx)
	require.NoError(t, err)
	require.Len(t, as, 2, "a refused anchor was stored")
}

func claimOpts(worker string, now time.Time) store.ClaimOptions {
	return store.ClaimOptions{
		Worker:      worker,
		Lease:       time.Minute,
		MaxAttempts: 3,
		Exhausted:   []byte(`{"type":"urn:acds:problem:internal","detail":"attempts exhausted"}`),
		Now:         now,
	}
}

func testSessions(t *testing.T, s store.Store) {
	ctx := t.Context()
	ses := store.Session{Pseudonym: "anon-a", TokenHash: Token("a"), CreatedAt: T0, ExpiresAt: T0.Add(24 * time.Hour)}
	require.NoError(t, s.CreateSession(ctx, ses))

	got, err := s.SessionByTokenHash(ctx, Token("a"))
	require.NoError(t, err)
	require.Equal(t, "anon-a", got.Pseudonym)
	require.Equal(t, Token("a"), got.TokenHash)
	require.True(t, got.CreatedAt.Equal(us(T0)), "created %v", got.CreatedAt)
	require.True(t, got.ExpiresAt.Equal(us(T0.Add(24*time.Hour))), "expires %v", got.ExpiresAt)
	require.Equal(t, time.UTC, got.CreatedAt.Location())

	_, err = s.SessionByTokenHash(ctx, Token("nobody"))
	require.ErrorIs(t, err, store.ErrNotFound)

	dupName := ses
	dupName.TokenHash = Token("other")
	require.ErrorIs(t, s.CreateSession(ctx, dupName), store.ErrConflict)
	dupHash := ses
	dupHash.Pseudonym = "anon-b"
	require.ErrorIs(t, s.CreateSession(ctx, dupHash), store.ErrConflict)

	short := ses
	short.Pseudonym, short.TokenHash = "anon-c", []byte("short")
	require.ErrorIs(t, s.CreateSession(ctx, short), store.ErrInvalid)
	_, err = s.SessionByTokenHash(ctx, []byte("short"))
	require.ErrorIs(t, err, store.ErrInvalid)
	require.ErrorIs(t, s.CreateSession(ctx, store.Session{TokenHash: Token("x"), CreatedAt: T0, ExpiresAt: T0}), store.ErrInvalid)
}

func testDeleteExpiredSessions(t *testing.T, s store.Store) {
	ctx := t.Context()
	for i, exp := range []time.Duration{-2 * time.Hour, -time.Second, time.Hour} {
		name := fmt.Sprintf("anon-%d", i)
		require.NoError(t, s.CreateSession(ctx, store.Session{
			Pseudonym: name, TokenHash: Token(name), CreatedAt: T0.Add(-25 * time.Hour), ExpiresAt: T0.Add(exp),
		}))
	}
	n, err := s.DeleteExpiredSessions(ctx, T0)
	require.NoError(t, err)
	require.Equal(t, 2, n)
	_, err = s.SessionByTokenHash(ctx, Token("anon-0"))
	require.ErrorIs(t, err, store.ErrNotFound)
	_, err = s.SessionByTokenHash(ctx, Token("anon-1"))
	require.ErrorIs(t, err, store.ErrNotFound)
	_, err = s.SessionByTokenHash(ctx, Token("anon-2"))
	require.NoError(t, err)
	n, err = s.DeleteExpiredSessions(ctx, T0)
	require.NoError(t, err)
	require.Zero(t, n)
}

func testPassphrases(t *testing.T, s store.Store) {
	ctx := t.Context()
	_, err := s.Passphrase(ctx, "anon-a")
	require.ErrorIs(t, err, store.ErrNotFound)
	h1 := "$argon2id$v=19$m=65536,t=1,p=4$c2FsdHNhbHQ$aGFzaGhhc2g"
	h2 := "$argon2id$v=19$m=65536,t=1,p=4$b3RoZXJzYWx0$b3RoZXJoYXNo"
	require.NoError(t, s.SetPassphrase(ctx, "anon-a", h1))
	got, err := s.Passphrase(ctx, "anon-a")
	require.NoError(t, err)
	require.Equal(t, h1, got)
	require.NoError(t, s.SetPassphrase(ctx, "anon-a", h2), "replacing a passphrase")
	got, err = s.Passphrase(ctx, "anon-a")
	require.NoError(t, err)
	require.Equal(t, h2, got)
	_, err = s.Passphrase(ctx, "anon-b")
	require.ErrorIs(t, err, store.ErrNotFound)
	require.ErrorIs(t, s.SetPassphrase(ctx, "anon-b", ""), store.ErrInvalid)
	require.ErrorIs(t, s.SetPassphrase(ctx, "", h1), store.ErrInvalid)
}

func testCreateGet(t *testing.T, s store.Store) {
	ctx := t.Context()
	r := NewRequest("anon-a", T0)
	r.Kind = acds.KindFetchAndAttest
	r.Sealed = []byte{0, 1, 2, 0xff}
	r.Attempts, r.LeaseOwner, r.LeaseUntil = 7, "ignored", T0 // a new request has neither
	require.NoError(t, s.CreateRequest(ctx, r))

	got, err := s.GetRequest(ctx, "anon-a", r.ID)
	require.NoError(t, err)
	require.Equal(t, r.ID, got.ID)
	require.Equal(t, "anon-a", got.Owner)
	require.Equal(t, acds.KindFetchAndAttest, got.Kind)
	require.Equal(t, acds.StatusProcessing, got.Status)
	require.Equal(t, r.Input, got.Input)
	require.Equal(t, r.Sealed, got.Sealed)
	require.Empty(t, got.Result)
	require.Empty(t, got.Error)
	require.Zero(t, got.Attempts)
	require.Empty(t, got.LeaseOwner)
	require.True(t, got.LeaseUntil.IsZero())
	require.True(t, got.CreatedAt.Equal(us(T0)), "created %v", got.CreatedAt)
	require.True(t, got.UpdatedAt.Equal(us(T0)), "updated %v", got.UpdatedAt)
	require.True(t, got.CompletedAt.IsZero())

	dup := NewRequest("anon-b", T0)
	dup.ID = r.ID
	require.ErrorIs(t, s.CreateRequest(ctx, dup), store.ErrConflict)

	_, err = s.GetRequest(ctx, "anon-a", uuid.NewString())
	require.ErrorIs(t, err, store.ErrNotFound)
}

// Bundle returns a FHIR-like JSON bundle of about size bytes: the shape of
// a real input, compressible as real inputs are.
func Bundle(size int) []byte {
	var b bytes.Buffer
	b.WriteString(`{"outputFormat":"fhir_r4","data":{"resourceType":"Bundle","type":"collection","entry":[`)
	for i := 0; b.Len() < size-200; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"fullUrl":"urn:uuid:%s","resource":{"resourceType":"Observation","id":"o%d","status":"final",`+
			`"code":{"coding":[{"system":"http://loinc.org","code":"8867-4","display":"Heart rate"}]},`+
			`"subject":{"reference":"Patient/p%d"},"effectiveDateTime":"2026-03-%02dT%02d:%02d:00Z",`+
			`"valueQuantity":{"value":%d,"unit":"/min","system":"http://unitsofmeasure.org","code":"/min"}}}`,
			uuid.NewString(), i, i%7, 1+i%28, i%24, (i*7)%60, 50+(i*37)%70)
	}
	b.WriteString(`]}}`)
	return b.Bytes()
}

// Stores may encode values as they like; what comes back must be the
// bytes that went in, for small, large, compressible and random values.
func testLargeValues(t *testing.T, s store.Store) {
	ctx := t.Context()
	random := make([]byte, 8<<10)
	for i := range random {
		random[i] = byte(i*7919 + i/3*104729)
	}
	inputs := [][]byte{Bundle(600), Bundle(16 << 10), Bundle(1 << 20), random, {}, []byte("x")}
	var ids []string
	for i, in := range inputs {
		r := NewRequest("anon-a", T0.Add(time.Duration(i)*time.Second))
		r.Input = in
		r.Sealed = random[:1000]
		require.NoError(t, s.CreateRequest(ctx, r))
		ids = append(ids, r.ID)
		got, err := s.GetRequest(ctx, "anon-a", r.ID)
		require.NoError(t, err)
		require.True(t, bytes.Equal(in, got.Input), "input %d (%d bytes) changed", i, len(in))
		require.True(t, bytes.Equal(random[:1000], got.Sealed))
	}
	items, _, err := s.ListRequests(ctx, "anon-a", store.Page{Limit: 100})
	require.NoError(t, err)
	require.Len(t, items, len(inputs))
	for _, it := range items {
		i := slices.Index(ids, it.ID)
		require.True(t, bytes.Equal(inputs[i], it.Input), "listed input %d changed", i)
	}
	results := [][]byte{Bundle(64 << 10), random, []byte(`{}`)}
	for i := range inputs {
		c, err := s.Claim(ctx, claimOpts("w1", T0.Add(time.Hour)))
		require.NoError(t, err)
		require.NotNil(t, c)
		require.Equal(t, ids[i], c.ID)
		require.True(t, bytes.Equal(inputs[i], c.Input), "claimed input %d changed", i)
		res := results[i%len(results)]
		require.NoError(t, s.Complete(ctx, c.ID, "w1", res, T0.Add(time.Hour)))
		got, err := s.GetRequest(ctx, "anon-a", c.ID)
		require.NoError(t, err)
		require.True(t, bytes.Equal(res, got.Result), "result %d changed", i)
	}
}

func testCreateInvalid(t *testing.T, s store.Store) {
	ctx := t.Context()
	for name, mut := range map[string]func(*store.Request){
		"no id":        func(r *store.Request) { r.ID = "" },
		"no owner":     func(r *store.Request) { r.Owner = "" },
		"bad kind":     func(r *store.Request) { r.Kind = "mine" },
		"ended status": func(r *store.Request) { r.Status = acds.StatusCompleted },
		"no time":      func(r *store.Request) { r.CreatedAt = time.Time{} },
		"long id":      func(r *store.Request) { r.ID = string(bytes.Repeat([]byte("x"), 1000)) },
	} {
		r := NewRequest("anon-a", T0)
		mut(&r)
		require.ErrorIs(t, s.CreateRequest(ctx, r), store.ErrInvalid, name)
	}
	items, _, err := s.ListRequests(ctx, "anon-a", store.Page{Limit: 10})
	require.NoError(t, err)
	require.Empty(t, items, "an invalid request must not be stored")
}

func testOwnerIsolation(t *testing.T, s store.Store) {
	ctx := t.Context()
	a := NewRequest("anon-a", T0)
	b := NewRequest("anon-b", T0)
	require.NoError(t, s.CreateRequest(ctx, a))
	require.NoError(t, s.CreateRequest(ctx, b))

	_, err := s.GetRequest(ctx, "anon-b", a.ID)
	require.ErrorIs(t, err, store.ErrNotFound)
	require.ErrorIs(t, s.DeleteRequest(ctx, "anon-b", a.ID), store.ErrNotFound)
	_, err = s.GetRequest(ctx, "anon-a", a.ID)
	require.NoError(t, err, "a failed delete by another owner must not erase the request")

	items, next, err := s.ListRequests(ctx, "anon-b", store.Page{Limit: 100})
	require.NoError(t, err)
	require.Empty(t, next)
	require.Len(t, items, 1)
	require.Equal(t, b.ID, items[0].ID)

	// A cursor names a request; it must not open another owner's list.
	_, cur, err := pageAfter(ctx, s, "anon-a", a)
	require.NoError(t, err)
	items, _, err = s.ListRequests(ctx, "anon-b", store.Page{Cursor: cur, Limit: 100})
	if err == nil {
		for _, it := range items {
			require.Equal(t, "anon-b", it.Owner)
		}
	} else {
		require.ErrorIs(t, err, store.ErrInvalid)
	}
}

// pageAfter returns a cursor positioned just before r by listing with limit 1
// from a newer request of the same owner.
func pageAfter(ctx context.Context, s store.Store, owner string, r store.Request) ([]store.Request, string, error) {
	newer := NewRequest(owner, r.CreatedAt.Add(time.Hour))
	if err := s.CreateRequest(ctx, newer); err != nil {
		return nil, "", err
	}
	return s.ListRequests(ctx, owner, store.Page{Limit: 1})
}

func testListPagination(t *testing.T, s store.Store) {
	ctx := t.Context()
	// 23 requests over 8 distinct timestamps: several share a timestamp, so
	// ordering and cursors must break ties by id.
	var want []store.Request
	for i := range 23 {
		r := NewRequest("anon-a", T0.Add(time.Duration(i/3)*time.Second))
		require.NoError(t, s.CreateRequest(ctx, r))
		want = append(want, r)
	}
	require.NoError(t, s.CreateRequest(ctx, NewRequest("anon-b", T0.Add(time.Hour))))

	var got []store.Request
	cur := ""
	for pages := 0; ; pages++ {
		require.Less(t, pages, 10, "pagination does not end")
		items, next, err := s.ListRequests(ctx, "anon-a", store.Page{Cursor: cur, Limit: 5})
		require.NoError(t, err)
		require.LessOrEqual(t, len(items), 5)
		got = append(got, items...)
		if pages == 1 {
			// A request created between page fetches is newer than the
			// cursor: it must not shift the remaining pages.
			require.NoError(t, s.CreateRequest(ctx, NewRequest("anon-a", T0.Add(time.Minute))))
		}
		if next == "" {
			require.NotEmpty(t, items)
			break
		}
		require.Len(t, items, 5, "a page with a next cursor is full")
		cur = next
	}
	require.Len(t, got, len(want))
	seen := map[string]bool{}
	for i, r := range got {
		require.False(t, seen[r.ID], "request %s listed twice", r.ID)
		seen[r.ID] = true
		require.Equal(t, "anon-a", r.Owner)
		if i > 0 {
			prev := got[i-1]
			after := prev.CreatedAt.After(r.CreatedAt) || (prev.CreatedAt.Equal(r.CreatedAt) && prev.ID > r.ID)
			require.True(t, after, "not newest first at %d: %v/%s then %v/%s", i, prev.CreatedAt, prev.ID, r.CreatedAt, r.ID)
		}
	}
	for _, r := range want {
		require.True(t, seen[r.ID], "request %s missing from the pages", r.ID)
	}

	// An exact multiple of the limit: the last full page has no next cursor.
	items, next, err := s.ListRequests(ctx, "anon-b", store.Page{Limit: 1})
	require.NoError(t, err)
	require.Len(t, items, 1)
	require.Empty(t, next)
}

// testListMaxBytes checks that a page ends once its inputs and results
// reach Page.MaxBytes, always holds one request, and that the cursors it
// then gives still list every request once, in order.
func testListMaxBytes(t *testing.T, s store.Store) {
	ctx := t.Context()
	const size = 10 << 10
	var ids []string // newest first
	for i := range 7 {
		r := NewRequest("anon-a", T0.Add(time.Duration(6-i)*time.Second))
		r.Input = Bundle(size)
		require.NoError(t, s.CreateRequest(ctx, r))
		ids = append(ids, r.ID)
	}
	// A completed request counts its result too.
	c, err := s.Claim(ctx, claimOpts("w1", T0.Add(time.Hour)))
	require.NoError(t, err)
	require.Equal(t, ids[6], c.ID, "the oldest is claimed first")
	require.NoError(t, s.Complete(ctx, c.ID, "w1", Bundle(size), T0.Add(time.Hour)))

	list := func(max int) [][]string {
		var pages [][]string
		cur := ""
		for range 10 {
			items, next, err := s.ListRequests(ctx, "anon-a", store.Page{Cursor: cur, Limit: 100, MaxBytes: max})
			require.NoError(t, err)
			require.NotEmpty(t, items)
			var page []string
			for _, it := range items {
				page = append(page, it.ID)
			}
			pages = append(pages, page)
			if next == "" {
				return pages
			}
			cur = next
		}
		t.Fatal("pagination does not end")
		return nil
	}
	flat := func(pages [][]string) []string {
		var all []string
		for _, p := range pages {
			all = append(all, p...)
		}
		return all
	}
	// Three inputs reach 3×size: pages of 3, 3, and the last request,
	// whose input and result are 2×size.
	pages := list(3*size - 1)
	require.Equal(t, ids, flat(pages))
	require.Equal(t, []int{3, 3, 1}, []int{len(pages[0]), len(pages[1]), len(pages[2])}, "page sizes")
	// A bound below one request still gives one request per page.
	pages = list(1)
	require.Equal(t, ids, flat(pages))
	require.Len(t, pages, 7)
	// No bound, or a bound above everything: one page.
	for _, max := range []int{0, -1, 100 * size} {
		pages = list(max)
		require.Len(t, pages, 1, "MaxBytes %d", max)
		require.Equal(t, ids, pages[0])
	}
}

func testListLimitClamp(t *testing.T, s store.Store) {
	ctx := t.Context()
	for i := range 102 {
		require.NoError(t, s.CreateRequest(ctx, NewRequest("anon-a", T0.Add(time.Duration(i)*time.Millisecond))))
	}
	items, next, err := s.ListRequests(ctx, "anon-a", store.Page{Limit: 1000})
	require.NoError(t, err)
	require.Len(t, items, 100)
	require.NotEmpty(t, next)
	items, _, err = s.ListRequests(ctx, "anon-a", store.Page{Cursor: next, Limit: 1000})
	require.NoError(t, err)
	require.Len(t, items, 2)
	for _, lim := range []int{0, -5} {
		items, next, err = s.ListRequests(ctx, "anon-a", store.Page{Limit: lim})
		require.NoError(t, err)
		require.Len(t, items, 1)
		require.NotEmpty(t, next)
	}
	items, _, err = s.ListRequests(ctx, "nobody", store.Page{Limit: 10})
	require.NoError(t, err)
	require.Empty(t, items)
}

func testListBadCursor(t *testing.T, s store.Store) {
	ctx := t.Context()
	require.NoError(t, s.CreateRequest(ctx, NewRequest("anon-a", T0)))
	for _, c := range []string{"!", "not-a-cursor", "djEuMTIzLg", "eHl6", string(bytes.Repeat([]byte("A"), 5000))} {
		_, _, err := s.ListRequests(ctx, "anon-a", store.Page{Cursor: c, Limit: 10})
		require.ErrorIs(t, err, store.ErrInvalid, "cursor %.20q", c)
	}
}

func testDelete(t *testing.T, s store.Store) {
	ctx := t.Context()
	r := NewRequest("anon-a", T0)
	r.Kind, r.Sealed = acds.KindFetchAndAttest, []byte("sealed-credentials")
	require.NoError(t, s.CreateRequest(ctx, r))
	done := NewRequest("anon-a", T0.Add(time.Second))
	require.NoError(t, s.CreateRequest(ctx, done))

	// r is being processed when its owner deletes it.
	c, err := s.Claim(ctx, claimOpts("w1", T0))
	require.NoError(t, err)
	require.Equal(t, r.ID, c.ID)
	require.NoError(t, s.DeleteRequest(ctx, "anon-a", r.ID))
	_, err = s.GetRequest(ctx, "anon-a", r.ID)
	require.ErrorIs(t, err, store.ErrNotFound)
	require.ErrorIs(t, s.DeleteRequest(ctx, "anon-a", r.ID), store.ErrNotFound)
	require.ErrorIs(t, s.Heartbeat(ctx, r.ID, "w1", T0.Add(time.Hour)), store.ErrLeaseLost)
	require.ErrorIs(t, s.Complete(ctx, r.ID, "w1", []byte(`{}`), T0), store.ErrLeaseLost)
	_, err = s.GetRequest(ctx, "anon-a", r.ID)
	require.ErrorIs(t, err, store.ErrNotFound, "completing a deleted request must not bring it back")

	// A completed request: its result goes with it.
	c, err = s.Claim(ctx, claimOpts("w1", T0))
	require.NoError(t, err)
	require.Equal(t, done.ID, c.ID)
	require.NoError(t, s.Complete(ctx, done.ID, "w1", []byte(`{"output":"x"}`), T0))
	require.NoError(t, s.DeleteRequest(ctx, "anon-a", done.ID))
	items, _, err := s.ListRequests(ctx, "anon-a", store.Page{Limit: 10})
	require.NoError(t, err)
	require.Empty(t, items)
	c, err = s.Claim(ctx, claimOpts("w1", T0.Add(time.Hour)))
	require.NoError(t, err)
	require.Nil(t, c, "a deleted request must not be claimable")
}

func testClaimComplete(t *testing.T, s store.Store) {
	ctx := t.Context()
	r := NewRequest("anon-a", T0)
	r.Kind, r.Sealed = acds.KindFetchAndAttest, []byte("sealed")
	require.NoError(t, s.CreateRequest(ctx, r))

	now := T0.Add(time.Second)
	c, err := s.Claim(ctx, claimOpts("w1", now))
	require.NoError(t, err)
	require.NotNil(t, c)
	require.Equal(t, r.ID, c.ID)
	require.Equal(t, 1, c.Attempts)
	require.Equal(t, "w1", c.LeaseOwner)
	require.True(t, c.LeaseUntil.Equal(us(now.Add(time.Minute))), "lease until %v", c.LeaseUntil)
	require.Equal(t, r.Input, c.Input)
	require.Equal(t, r.Sealed, c.Sealed, "the worker needs the sealed credentials")
	require.Equal(t, acds.StatusProcessing, c.Status)

	again, err := s.Claim(ctx, claimOpts("w2", now))
	require.NoError(t, err)
	require.Nil(t, again, "a leased request must not be claimed twice")

	require.ErrorIs(t, s.Heartbeat(ctx, r.ID, "w2", now.Add(time.Hour)), store.ErrLeaseLost)
	require.NoError(t, s.Heartbeat(ctx, r.ID, "w1", now.Add(2*time.Minute)))
	got, err := s.GetRequest(ctx, "anon-a", r.ID)
	require.NoError(t, err)
	require.True(t, got.LeaseUntil.Equal(us(now.Add(2*time.Minute))))
	require.Equal(t, 1, got.Attempts)

	require.ErrorIs(t, s.Complete(ctx, r.ID, "w2", []byte(`{}`), now), store.ErrLeaseLost)
	result := []byte(`{"outputFormat":"fhir_r4"}`)
	done := now.Add(5 * time.Second)
	require.NoError(t, s.Complete(ctx, r.ID, "w1", result, done))

	got, err = s.GetRequest(ctx, "anon-a", r.ID)
	require.NoError(t, err)
	require.Equal(t, acds.StatusCompleted, got.Status)
	require.Equal(t, result, got.Result)
	require.Empty(t, got.Error)
	require.Empty(t, got.Sealed, "completion erases the sealed credentials")
	require.Equal(t, r.Input, got.Input)
	require.Empty(t, got.LeaseOwner)
	require.True(t, got.LeaseUntil.IsZero())
	require.True(t, got.CompletedAt.Equal(us(done)))
	require.True(t, got.UpdatedAt.Equal(us(done)))
	require.True(t, got.CreatedAt.Equal(us(T0)))

	require.ErrorIs(t, s.Complete(ctx, r.ID, "w1", result, done), store.ErrLeaseLost, "a request ends once")
	require.ErrorIs(t, s.Fail(ctx, r.ID, "w1", []byte(`{}`), done), store.ErrLeaseLost)
	require.ErrorIs(t, s.Heartbeat(ctx, r.ID, "w1", done.Add(time.Hour)), store.ErrLeaseLost)
	c, err = s.Claim(ctx, claimOpts("w3", done.Add(time.Hour)))
	require.NoError(t, err)
	require.Nil(t, c, "an ended request is not claimable")
	require.ErrorIs(t, s.Complete(ctx, uuid.NewString(), "w1", result, done), store.ErrLeaseLost)
}

func testClaimFail(t *testing.T, s store.Store) {
	ctx := t.Context()
	r := NewRequest("anon-a", T0)
	r.Sealed = []byte("sealed")
	require.NoError(t, s.CreateRequest(ctx, r))
	c, err := s.Claim(ctx, claimOpts("w1", T0))
	require.NoError(t, err)
	require.NotNil(t, c)
	problem := []byte(`{"type":"urn:acds:problem:invalid-fhir","status":422}`)
	require.ErrorIs(t, s.Fail(ctx, r.ID, "w2", problem, T0), store.ErrLeaseLost)
	require.NoError(t, s.Fail(ctx, r.ID, "w1", problem, T0.Add(time.Second)))
	got, err := s.GetRequest(ctx, "anon-a", r.ID)
	require.NoError(t, err)
	require.Equal(t, acds.StatusFailed, got.Status)
	require.Equal(t, problem, got.Error)
	require.Empty(t, got.Result)
	require.Empty(t, got.Sealed, "failure erases the sealed credentials")
	require.True(t, got.CompletedAt.Equal(us(T0.Add(time.Second))))
	require.Empty(t, got.LeaseOwner)
	require.ErrorIs(t, s.Complete(ctx, r.ID, "w1", []byte(`{}`), T0), store.ErrLeaseLost)
}

func testClaimOrder(t *testing.T, s store.Store) {
	ctx := t.Context()
	var ids []string
	// Created out of order: claims go oldest first.
	for _, d := range []time.Duration{3, 1, 2} {
		r := NewRequest("anon-a", T0.Add(d*time.Second))
		require.NoError(t, s.CreateRequest(ctx, r))
		ids = append(ids, r.ID)
	}
	want := []string{ids[1], ids[2], ids[0]}
	for i, id := range want {
		c, err := s.Claim(ctx, claimOpts(fmt.Sprintf("w%d", i), T0.Add(time.Hour)))
		require.NoError(t, err)
		require.NotNil(t, c)
		require.Equal(t, id, c.ID, "claim %d", i)
	}
	c, err := s.Claim(ctx, claimOpts("w9", T0.Add(time.Hour)))
	require.NoError(t, err)
	require.Nil(t, c)
}

func testClaimInvalid(t *testing.T, s store.Store) {
	ctx := t.Context()
	require.NoError(t, s.CreateRequest(ctx, NewRequest("anon-a", T0)))
	o := claimOpts("", T0)
	_, err := s.Claim(ctx, o)
	require.ErrorIs(t, err, store.ErrInvalid)
	o = claimOpts("w1", T0)
	o.Lease = 0
	_, err = s.Claim(ctx, o)
	require.ErrorIs(t, err, store.ErrInvalid)
	o = claimOpts("w1", T0)
	o.MaxAttempts = -1
	_, err = s.Claim(ctx, o)
	require.ErrorIs(t, err, store.ErrInvalid)
	// Nothing was claimed by the invalid calls.
	c, err := s.Claim(ctx, claimOpts("w1", T0))
	require.NoError(t, err)
	require.NotNil(t, c)
	require.Equal(t, 1, c.Attempts)
}

func testLeaseExpiry(t *testing.T, s store.Store) {
	ctx := t.Context()
	r := NewRequest("anon-a", T0)
	require.NoError(t, s.CreateRequest(ctx, r))

	c, err := s.Claim(ctx, claimOpts("w1", T0)) // lease until T0+1m
	require.NoError(t, err)
	require.NotNil(t, c)
	c, err = s.Claim(ctx, claimOpts("w2", T0.Add(30*time.Second)))
	require.NoError(t, err)
	require.Nil(t, c, "lease still valid")

	require.NoError(t, s.Heartbeat(ctx, r.ID, "w1", T0.Add(2*time.Minute)))
	c, err = s.Claim(ctx, claimOpts("w2", T0.Add(90*time.Second)))
	require.NoError(t, err)
	require.Nil(t, c, "the heartbeat extended the lease")

	// w1 died: once its lease runs out, w2 takes over.
	c, err = s.Claim(ctx, claimOpts("w2", T0.Add(2*time.Minute)))
	require.NoError(t, err)
	require.NotNil(t, c, "a lease that has run out is claimable")
	require.Equal(t, r.ID, c.ID)
	require.Equal(t, 2, c.Attempts)
	require.Equal(t, "w2", c.LeaseOwner)

	require.ErrorIs(t, s.Heartbeat(ctx, r.ID, "w1", T0.Add(time.Hour)), store.ErrLeaseLost)
	require.ErrorIs(t, s.Complete(ctx, r.ID, "w1", []byte(`{}`), T0.Add(3*time.Minute)), store.ErrLeaseLost)
	require.ErrorIs(t, s.Fail(ctx, r.ID, "w1", []byte(`{}`), T0.Add(3*time.Minute)), store.ErrLeaseLost)
	require.NoError(t, s.Complete(ctx, r.ID, "w2", []byte(`{"ok":true}`), T0.Add(3*time.Minute)))
	got, err := s.GetRequest(ctx, "anon-a", r.ID)
	require.NoError(t, err)
	require.Equal(t, acds.StatusCompleted, got.Status)
	require.Equal(t, []byte(`{"ok":true}`), got.Result)
}

func testExhaustion(t *testing.T, s store.Store) {
	ctx := t.Context()
	r := NewRequest("anon-a", T0)
	r.Kind, r.Sealed = acds.KindFetchAndAttest, []byte("sealed")
	require.NoError(t, s.CreateRequest(ctx, r))

	now := T0
	for attempt := 1; attempt <= 3; attempt++ {
		c, err := s.Claim(ctx, claimOpts(fmt.Sprintf("w%d", attempt), now))
		require.NoError(t, err)
		require.NotNil(t, c, "attempt %d", attempt)
		require.Equal(t, attempt, c.Attempts)
		now = now.Add(2 * time.Minute) // the worker dies; its lease runs out
	}
	// A younger request waits behind the exhausted one: Claim fails the
	// exhausted request and moves on to it.
	next := NewRequest("anon-a", T0.Add(time.Second))
	require.NoError(t, s.CreateRequest(ctx, next))

	o := claimOpts("w4", now)
	c, err := s.Claim(ctx, o)
	require.NoError(t, err)
	require.NotNil(t, c)
	require.Equal(t, next.ID, c.ID)
	require.Equal(t, 1, c.Attempts)

	got, err := s.GetRequest(ctx, "anon-a", r.ID)
	require.NoError(t, err)
	require.Equal(t, acds.StatusFailed, got.Status)
	require.Equal(t, o.Exhausted, got.Error)
	require.Empty(t, got.Sealed, "exhaustion erases the sealed credentials")
	require.Empty(t, got.LeaseOwner)
	require.Equal(t, 3, got.Attempts)
	require.True(t, got.CompletedAt.Equal(us(now)))
	require.ErrorIs(t, s.Complete(ctx, r.ID, "w3", []byte(`{}`), now), store.ErrLeaseLost)

	// MaxAttempts 0 means no limit.
	o = claimOpts("w5", now.Add(time.Hour))
	o.MaxAttempts = 0
	for i := range 5 {
		c, err := s.Claim(ctx, o)
		require.NoError(t, err)
		require.NotNil(t, c)
		require.Equal(t, next.ID, c.ID)
		require.Equal(t, i+2, c.Attempts)
		o.Now = o.Now.Add(time.Hour)
	}
}

func testEraseSealedBefore(t *testing.T, s store.Store) {
	ctx := t.Context()
	var rs []store.Request
	for i := range 3 {
		r := NewRequest("anon-a", T0.Add(time.Duration(i)*time.Hour))
		r.Kind, r.Sealed = acds.KindFetchAndAttest, []byte(fmt.Sprintf("sealed-%d", i))
		require.NoError(t, s.CreateRequest(ctx, r))
		rs = append(rs, r)
	}
	plain := NewRequest("anon-a", T0)
	require.NoError(t, s.CreateRequest(ctx, plain))

	n, err := s.EraseSealedBefore(ctx, T0.Add(90*time.Minute))
	require.NoError(t, err)
	require.Equal(t, 2, n)
	for i, r := range rs {
		got, err := s.GetRequest(ctx, "anon-a", r.ID)
		require.NoError(t, err)
		if i < 2 {
			require.Empty(t, got.Sealed, "request %d", i)
		} else {
			require.Equal(t, r.Sealed, got.Sealed)
		}
		require.Equal(t, r.Input, got.Input, "erasing credentials keeps the input")
		require.Equal(t, acds.StatusProcessing, got.Status)
	}
	n, err = s.EraseSealedBefore(ctx, T0.Add(90*time.Minute))
	require.NoError(t, err)
	require.Zero(t, n)
}

// testClaimAffinity: a request with an affinity is claimed only by workers
// of that affinity (or of none), until erasing its sealed credentials
// frees it for any worker; the affinity is stored and read back.
func testClaimAffinity(t *testing.T, s store.Store) {
	ctx := t.Context()
	a := NewRequest("anon-a", T0)
	a.Kind, a.Sealed, a.Affinity = acds.KindFetchAndAttest, []byte("sealed by A"), "replica-a"
	require.NoError(t, s.CreateRequest(ctx, a))
	got, err := s.GetRequest(ctx, "anon-a", a.ID)
	require.NoError(t, err)
	require.Equal(t, "replica-a", got.Affinity)

	o := claimOpts("worker-b", T0.Add(time.Second))
	o.Affinity = "replica-b"
	c, err := s.Claim(ctx, o)
	require.NoError(t, err)
	require.Nil(t, c, "replica B claimed a request reserved for replica A")

	// A request without an affinity is anyone's.
	plain := NewRequest("anon-a", T0.Add(time.Millisecond))
	require.NoError(t, s.CreateRequest(ctx, plain))
	c, err = s.Claim(ctx, o)
	require.NoError(t, err)
	require.NotNil(t, c)
	require.Equal(t, plain.ID, c.ID)
	require.NoError(t, s.Complete(ctx, plain.ID, "worker-b", []byte(`{}`), T0.Add(time.Second)))

	oa := claimOpts("worker-a", T0.Add(time.Second))
	oa.Affinity = "replica-a"
	c, err = s.Claim(ctx, oa)
	require.NoError(t, err)
	require.NotNil(t, c)
	require.Equal(t, a.ID, c.ID)
	require.Equal(t, a.Sealed, c.Sealed)

	// A's worker is gone: once the lease runs out B still may not claim it,
	// until the credentials are erased; then B claims it without them.
	later := T0.Add(2 * time.Minute)
	o.Now = later
	c, err = s.Claim(ctx, o)
	require.NoError(t, err)
	require.Nil(t, c)
	n, err := s.EraseSealedBefore(ctx, later)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	c, err = s.Claim(ctx, o)
	require.NoError(t, err)
	require.NotNil(t, c)
	require.Equal(t, a.ID, c.ID)
	require.Empty(t, c.Sealed)
	require.Empty(t, c.Affinity)

	// A worker without an affinity claims anything; an oversized affinity
	// is invalid.
	d := NewRequest("anon-a", T0.Add(2*time.Millisecond))
	d.Affinity = "replica-c"
	require.NoError(t, s.CreateRequest(ctx, d))
	c, err = s.Claim(ctx, claimOpts("worker-any", later))
	require.NoError(t, err)
	require.NotNil(t, c)
	require.Equal(t, d.ID, c.ID)
	long := NewRequest("anon-a", T0)
	long.Affinity = strings.Repeat("x", store.MaxIDLen+1)
	require.ErrorIs(t, s.CreateRequest(ctx, long), store.ErrInvalid)
}

func testConcurrentCreate(t *testing.T, s store.Store) {
	ctx := t.Context()
	const goroutines, each = 16, 12
	var wg sync.WaitGroup
	errs := make(chan error, goroutines*each)
	ids := make(chan string, goroutines*each)
	// One id is created by every goroutine at once: exactly one wins.
	contested := uuid.NewString()
	var wins, conflicts sync.Map
	for g := range goroutines {
		wg.Go(func() {
			for i := range each {
				r := NewRequest("anon-a", T0.Add(time.Duration(g*each+i)*time.Millisecond))
				if i == each/2 {
					r.ID = contested
					err := s.CreateRequest(ctx, r)
					switch {
					case err == nil:
						wins.Store(g, true)
					case errors.Is(err, store.ErrConflict):
						conflicts.Store(g, true)
					default:
						errs <- err
					}
					continue
				}
				if err := s.CreateRequest(ctx, r); err != nil {
					errs <- err
					continue
				}
				ids <- r.ID
			}
		})
	}
	wg.Wait()
	close(errs)
	close(ids)
	for err := range errs {
		require.NoError(t, err)
	}
	count := func(m *sync.Map) (n int) {
		m.Range(func(_, _ any) bool { n++; return true })
		return n
	}
	require.Equal(t, 1, count(&wins), "exactly one create of a contested id succeeds")
	require.Equal(t, goroutines-1, count(&conflicts))
	n := 0
	for id := range ids {
		_, err := s.GetRequest(ctx, "anon-a", id)
		require.NoError(t, err)
		n++
	}
	require.Equal(t, goroutines*(each-1), n)
}

func testConcurrentClaim(t *testing.T, s store.Store) {
	ConcurrentClaim(t, []store.Store{s}, 120, 12)
}

// ConcurrentClaim creates n requests in stores[0], then runs workers
// goroutines per store that claim and complete requests until none is
// left, and checks that every request was claimed exactly once and
// completed. With several stores on one database it checks that the
// guarantee holds across processes.
func ConcurrentClaim(t *testing.T, stores []store.Store, n, workers int) {
	t.Helper()
	ctx := t.Context()
	want := map[string]bool{}
	for i := range n {
		r := NewRequest(fmt.Sprintf("anon-%d", i%5), T0.Add(time.Duration(i)*time.Millisecond))
		require.NoError(t, stores[0].CreateRequest(ctx, r))
		want[r.ID] = true
	}
	var mu sync.Mutex
	claims := map[string][]string{}
	var wg sync.WaitGroup
	errs := make(chan error, len(stores)*workers)
	for si, s := range stores {
		for w := range workers {
			worker := fmt.Sprintf("s%d-w%d", si, w)
			wg.Go(func() {
				for {
					// A long lease: nothing expires, so a second claim of a
					// request would be a double claim.
					o := claimOpts(worker, T0.Add(time.Hour))
					o.Lease = 24 * time.Hour
					c, err := s.Claim(ctx, o)
					if err != nil {
						errs <- fmt.Errorf("%s: claim: %w", worker, err)
						return
					}
					if c == nil {
						return
					}
					mu.Lock()
					claims[c.ID] = append(claims[c.ID], worker)
					mu.Unlock()
					if err := s.Complete(ctx, c.ID, worker, []byte(`{"by":"`+worker+`"}`), T0.Add(2*time.Hour)); err != nil {
						errs <- fmt.Errorf("%s: complete: %w", worker, err)
						return
					}
				}
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.Len(t, claims, n, "every request is claimed")
	for id, by := range claims {
		require.True(t, want[id], "claimed an unknown request %s", id)
		require.Len(t, by, 1, "request %s claimed by %v", id, by)
	}
	for id := range want {
		for i := range 5 {
			r, err := stores[0].GetRequest(ctx, fmt.Sprintf("anon-%d", i), id)
			if errors.Is(err, store.ErrNotFound) {
				continue
			}
			require.NoError(t, err)
			require.Equal(t, acds.StatusCompleted, r.Status)
			require.Equal(t, 1, r.Attempts)
			require.Equal(t, []byte(`{"by":"`+claims[id][0]+`"}`), r.Result)
		}
	}
}

func testCanceledContext(t *testing.T, s store.Store) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	r := NewRequest("anon-a", T0)
	require.ErrorIs(t, s.CreateRequest(ctx, r), context.Canceled)
	_, err := s.GetRequest(t.Context(), "anon-a", r.ID)
	require.ErrorIs(t, err, store.ErrNotFound, "a create that reported failure must not have stored the request")
	_, err = s.Claim(ctx, claimOpts("w1", T0))
	require.ErrorIs(t, err, context.Canceled)
}

func testClose(t *testing.T, s store.Store) {
	ctx := t.Context()
	require.NoError(t, s.CreateRequest(ctx, NewRequest("anon-a", T0)))
	require.NoError(t, s.Close())
	require.NoError(t, s.Close(), "Close is idempotent")
	require.ErrorIs(t, s.CreateRequest(ctx, NewRequest("anon-a", T0)), store.ErrClosed)
	_, err := s.Claim(ctx, claimOpts("w1", T0))
	require.ErrorIs(t, err, store.ErrClosed)
	_, _, err = s.ListRequests(ctx, "anon-a", store.Page{Limit: 1})
	require.ErrorIs(t, err, store.ErrClosed)
}
