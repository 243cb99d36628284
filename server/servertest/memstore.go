// Package servertest has in-memory fakes of the server's dependencies for
// tests: a Store with the same lease semantics as the real backends, and
// fake Pipeline, Enclave, Fetcher and Verifier seams whose behaviour tests
// can steer. They are for tests only: the fake enclave proves nothing.
package servertest

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/acds-project/acds"
	"github.com/acds-project/acds/store"
)

// MemStore is an in-memory store.Store. It passes the store conformance
// suite (internal/stores/sqlstore/storetest), so server tests that use it rely on the
// same behaviour as with SQLite or PostgreSQL: argument validation
// (ErrInvalid), owner isolation, microsecond UTC times, newest-first pages
// with opaque cursors, leases and attempts, context cancellation and
// ErrClosed after Close. Nothing survives the process. The zero value is not
// usable; call NewMemStore.
type MemStore struct {
	mu          sync.Mutex
	sessions    map[string]store.Session // by pseudonym
	byToken     map[string]string        // token hash -> pseudonym
	passphrases map[string]string
	requests    map[string]*store.Request
	deliveries  map[string]*store.Delivery   // by request id (webhooks.go)
	anchors     map[string]store.TrustAnchor // by replica
	closed      bool
}

// NewMemStore returns an empty MemStore.
func NewMemStore() *MemStore {
	return &MemStore{
		sessions:    make(map[string]store.Session),
		byToken:     make(map[string]string),
		passphrases: make(map[string]string),
		requests:    make(map[string]*store.Request),
		deliveries:  make(map[string]*store.Delivery),
	}
}

var _ store.Store = (*MemStore)(nil)

// Limits, as the real backends apply them.
const (
	// maxName bounds ids, owners, pseudonyms and worker names (as
	// store.CheckName).
	maxName = 200
	// maxEncodedHash bounds a stored passphrase hash.
	maxEncodedHash = 1024
)

// begin checks ctx, then takes the lock; it fails with ErrClosed after
// Close. On success the caller must unlock m.mu.
func (m *MemStore) begin(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("memstore: %w", err)
	}
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return store.ErrClosed
	}
	return nil
}

// dbTime is a time as the stores keep it: UTC, microsecond precision.
func dbTime(t time.Time) time.Time { return store.StoredTime(t) }

// dbOptTime is dbTime that keeps the zero time zero.
func dbOptTime(t time.Time) time.Time {
	if t.IsZero() {
		return time.Time{}
	}
	return dbTime(t)
}

// validName reports whether v could name a stored row; lookups by a name
// that could not are simply not found.
func validName(v string) bool { return v != "" && len(v) <= maxName }

// CreateSession implements store.Store.
func (m *MemStore) CreateSession(ctx context.Context, s store.Session) error {
	if err := store.CheckSession(s); err != nil {
		return err
	}
	if err := m.begin(ctx); err != nil {
		return err
	}
	defer m.mu.Unlock()
	if _, ok := m.sessions[s.Pseudonym]; ok {
		return store.ErrConflict
	}
	if _, ok := m.byToken[string(s.TokenHash)]; ok {
		return store.ErrConflict
	}
	s.TokenHash = slices.Clone(s.TokenHash)
	s.CreatedAt, s.ExpiresAt = dbTime(s.CreatedAt), dbTime(s.ExpiresAt)
	m.sessions[s.Pseudonym] = s
	m.byToken[string(s.TokenHash)] = s.Pseudonym
	return nil
}

// SessionByTokenHash implements store.Store.
func (m *MemStore) SessionByTokenHash(ctx context.Context, h []byte) (store.Session, error) {
	if err := store.CheckTokenHash(h); err != nil {
		return store.Session{}, err
	}
	if err := m.begin(ctx); err != nil {
		return store.Session{}, err
	}
	defer m.mu.Unlock()
	p, ok := m.byToken[string(h)]
	if !ok {
		return store.Session{}, store.ErrNotFound
	}
	s := m.sessions[p]
	s.TokenHash = slices.Clone(s.TokenHash)
	return s, nil
}

// SetPassphrase implements store.Store. It replaces an existing passphrase.
func (m *MemStore) SetPassphrase(ctx context.Context, pseudonym, enc string) error {
	if err := store.CheckName("pseudonym", pseudonym); err != nil {
		return err
	}
	if enc == "" || len(enc) > maxEncodedHash {
		return fmt.Errorf("memstore: encoded passphrase hash must be 1..%d bytes: %w", maxEncodedHash, store.ErrInvalid)
	}
	if err := m.begin(ctx); err != nil {
		return err
	}
	defer m.mu.Unlock()
	m.passphrases[pseudonym] = enc
	return nil
}

// Passphrase implements store.Store.
func (m *MemStore) Passphrase(ctx context.Context, pseudonym string) (string, error) {
	if err := store.CheckName("pseudonym", pseudonym); err != nil {
		return "", err
	}
	if err := m.begin(ctx); err != nil {
		return "", err
	}
	defer m.mu.Unlock()
	p, ok := m.passphrases[pseudonym]
	if !ok {
		return "", store.ErrNotFound
	}
	return p, nil
}

// DeleteExpiredSessions implements store.Store.
func (m *MemStore) DeleteExpiredSessions(ctx context.Context, now time.Time) (int, error) {
	if err := m.begin(ctx); err != nil {
		return 0, err
	}
	defer m.mu.Unlock()
	now = dbTime(now)
	n := 0
	for k, s := range m.sessions {
		if s.ExpiresAt.Before(now) {
			delete(m.sessions, k)
			delete(m.byToken, string(s.TokenHash))
			n++
		}
	}
	return n, nil
}

// DeleteSession implements store.Store.
func (m *MemStore) DeleteSession(ctx context.Context, tokenHash []byte) error {
	if err := store.CheckTokenHash(tokenHash); err != nil {
		return err
	}
	if err := m.begin(ctx); err != nil {
		return err
	}
	defer m.mu.Unlock()
	key, ok := m.byToken[string(tokenHash)]
	if !ok {
		return store.ErrNotFound
	}
	delete(m.sessions, key)
	delete(m.byToken, string(tokenHash))
	return nil
}

// DeleteSessionsOf implements store.Store.
func (m *MemStore) DeleteSessionsOf(ctx context.Context, pseudonym string, keep []byte) (int, error) {
	if err := store.CheckName("pseudonym", pseudonym); err != nil {
		return 0, err
	}
	if err := m.begin(ctx); err != nil {
		return 0, err
	}
	defer m.mu.Unlock()
	n := 0
	for k, s := range m.sessions {
		if store.SessionOwner(k) == pseudonym && (keep == nil || string(s.TokenHash) != string(keep)) {
			delete(m.sessions, k)
			delete(m.byToken, string(s.TokenHash))
			n++
		}
	}
	return n, nil
}

func clone(r *store.Request) store.Request {
	c := *r
	c.Input = slices.Clone(r.Input)
	c.Sealed = slices.Clone(r.Sealed)
	c.Result = slices.Clone(r.Result)
	c.Error = slices.Clone(r.Error)
	return c
}

// CreateRequest implements store.Store. As the real backends, it stores the
// request as StatusProcessing with no attempts, lease, result or error,
// whatever r says about those, and sets UpdatedAt to CreatedAt.
func (m *MemStore) CreateRequest(ctx context.Context, r store.Request) error {
	if err := store.CheckNewRequest(r); err != nil {
		return err
	}
	if err := m.begin(ctx); err != nil {
		return err
	}
	defer m.mu.Unlock()
	if _, ok := m.requests[r.ID]; ok {
		return store.ErrConflict
	}
	created := dbTime(r.CreatedAt)
	m.requests[r.ID] = &store.Request{
		ID:        r.ID,
		Owner:     r.Owner,
		Kind:      r.Kind,
		Status:    acds.StatusProcessing,
		Input:     slices.Clone(r.Input),
		Sealed:    slices.Clone(r.Sealed),
		Affinity:  r.Affinity,
		CreatedAt: created,
		UpdatedAt: created,
	}
	if r.Callback != "" {
		m.deliveries[r.ID] = &store.Delivery{RequestID: r.ID, Owner: r.Owner, URL: r.Callback, NextAt: created, CreatedAt: created}
	}
	return nil
}

// GetRequest implements store.Store.
func (m *MemStore) GetRequest(ctx context.Context, owner, id string) (store.Request, error) {
	if !validName(owner) || !validName(id) {
		return store.Request{}, store.ErrNotFound
	}
	if err := m.begin(ctx); err != nil {
		return store.Request{}, err
	}
	defer m.mu.Unlock()
	r, ok := m.requests[id]
	if !ok || r.Owner != owner {
		return store.Request{}, store.ErrNotFound
	}
	return clone(r), nil
}

// newer orders requests newest first: created_at desc, then id desc.
func newer(a, b *store.Request) bool {
	if !a.CreatedAt.Equal(b.CreatedAt) {
		return a.CreatedAt.After(b.CreatedAt)
	}
	return a.ID > b.ID
}

// ListRequests implements store.Store, with the real stores' cursor
// format (store.EncodeCursor); anything else is ErrInvalid.
func (m *MemStore) ListRequests(ctx context.Context, owner string, p store.Page) ([]store.Request, string, error) {
	if err := store.CheckName("owner", owner); err != nil {
		return nil, "", err
	}
	g := store.NewPager(p)
	var after *store.Request
	if p.Cursor != "" {
		createdAt, id, err := store.DecodeCursor(p.Cursor)
		if err != nil {
			return nil, "", err
		}
		after = &store.Request{CreatedAt: createdAt, ID: id}
	}
	if err := m.begin(ctx); err != nil {
		return nil, "", err
	}
	defer m.mu.Unlock()
	var all []*store.Request
	for _, r := range m.requests {
		if r.Owner == owner && (after == nil || newer(after, r)) {
			all = append(all, r)
		}
	}
	slices.SortFunc(all, func(a, b *store.Request) int {
		if newer(a, b) {
			return -1
		}
		return 1
	})
	for _, r := range all {
		if !g.Room() {
			break
		}
		g.Add(clone(r))
	}
	items, next := g.Page()
	return items, next, nil
}

// DeleteRequest implements store.Store.
func (m *MemStore) DeleteRequest(ctx context.Context, owner, id string) error {
	if !validName(owner) || !validName(id) {
		return store.ErrNotFound
	}
	if err := m.begin(ctx); err != nil {
		return err
	}
	defer m.mu.Unlock()
	r, ok := m.requests[id]
	if !ok || r.Owner != owner {
		return store.ErrNotFound
	}
	delete(m.requests, id)
	delete(m.deliveries, id)
	return nil
}

// Claim implements store.Store. The store's mutex serialises claims, so no
// two callers can lease the same request.
func (m *MemStore) Claim(ctx context.Context, o store.ClaimOptions) (*store.Request, error) {
	o, err := store.NormalizeClaim(o)
	if err != nil {
		return nil, err
	}
	now := o.Now
	if err := m.begin(ctx); err != nil {
		return nil, err
	}
	defer m.mu.Unlock()
	for {
		var oldest *store.Request
		for _, r := range m.requests {
			if r.Status != acds.StatusProcessing || (!r.LeaseUntil.IsZero() && r.LeaseUntil.After(now)) {
				continue
			}
			if o.Affinity != "" && r.Affinity != "" && r.Affinity != o.Affinity {
				continue
			}
			if o.Isolate && !isolationCandidate(r, o.Solo) {
				continue
			}
			if oldest == nil || newer(oldest, r) {
				oldest = r
			}
		}
		if oldest == nil {
			return nil, nil
		}
		if o.Isolate && oldest.LeaseOwner != "" { // a lease that ran out
			if oldest.Isolation == store.Solo {
				m.failClaimable(oldest, o.Crashed, now)
				continue
			}
			oldest.Isolation = store.Suspect
			oldest.Attempts = max(oldest.Attempts-1, 0)
			oldest.LeaseOwner, oldest.LeaseUntil = "", time.Time{}
			if !o.Solo {
				continue
			}
		}
		if o.MaxAttempts > 0 && oldest.Attempts >= o.MaxAttempts {
			m.failClaimable(oldest, o.Exhausted, now)
			continue
		}
		if o.Solo {
			oldest.Isolation = store.Solo
		}
		oldest.Attempts++
		oldest.LeaseOwner = o.Worker
		oldest.LeaseUntil = dbTime(now.Add(o.Lease))
		oldest.UpdatedAt = now
		c := clone(oldest)
		return &c, nil
	}
}

// isolationCandidate reports whether a claim with crash isolation (solo
// or not) considers r, a processing request whose lease, if any, ran out:
// a normal claim never takes a suspect, and a solo claim takes only
// suspects, Solo requests whose lease ran out (to fail them) and
// requests whose lease ran out (which become suspects).
func isolationCandidate(r *store.Request, solo bool) bool {
	if solo {
		return r.Isolation != store.NotIsolated || r.LeaseOwner != ""
	}
	return r.Isolation != store.Suspect
}

// failClaimable ends r, found by a claim, as failed with problem.
func (m *MemStore) failClaimable(r *store.Request, problem []byte, now time.Time) {
	r.Status = acds.StatusFailed
	r.Error = slices.Clone(problem)
	r.Sealed, r.Affinity = nil, ""
	r.LeaseOwner, r.LeaseUntil = "", time.Time{}
	r.UpdatedAt, r.CompletedAt = now, now
}

// Release implements store.Store.
func (m *MemStore) Release(ctx context.Context, id, worker string) error {
	if err := m.begin(ctx); err != nil {
		return err
	}
	defer m.mu.Unlock()
	r, err := m.leased(id, worker)
	if err != nil {
		return err
	}
	r.LeaseOwner, r.LeaseUntil = "", time.Time{}
	if r.Isolation == store.Solo {
		r.Isolation = store.Suspect
	}
	return nil
}

// Suspects implements store.Store.
func (m *MemStore) Suspects(ctx context.Context, now time.Time, affinity string) (int, error) {
	if err := m.begin(ctx); err != nil {
		return 0, err
	}
	defer m.mu.Unlock()
	now = dbOptTime(now)
	n := 0
	for _, r := range m.requests {
		if r.Status != acds.StatusProcessing || (affinity != "" && r.Affinity != "" && r.Affinity != affinity) {
			continue
		}
		orphan := r.Isolation == store.NotIsolated && r.LeaseOwner != "" && !r.LeaseUntil.After(now)
		if orphan || (r.Isolation == store.Suspect && r.LeaseOwner == "") {
			n++
		}
	}
	return n, nil
}

// leased returns the request id if worker holds its lease (even one that
// has run out but was not re-claimed); ErrLeaseLost otherwise.
func (m *MemStore) leased(id, worker string) (*store.Request, error) {
	r, ok := m.requests[id]
	if !ok || r.Status != acds.StatusProcessing || worker == "" || r.LeaseOwner != worker {
		return nil, store.ErrLeaseLost
	}
	return r, nil
}

// Heartbeat implements store.Store.
func (m *MemStore) Heartbeat(ctx context.Context, id, worker string, until time.Time) error {
	if err := m.begin(ctx); err != nil {
		return err
	}
	defer m.mu.Unlock()
	r, err := m.leased(id, worker)
	if err != nil {
		return err
	}
	r.LeaseUntil = dbOptTime(until)
	return nil
}

func (m *MemStore) end(ctx context.Context, id, worker, status string, result, problem []byte, now time.Time) error {
	if err := m.begin(ctx); err != nil {
		return err
	}
	defer m.mu.Unlock()
	r, err := m.leased(id, worker)
	if err != nil {
		return err
	}
	now = dbOptTime(now)
	r.Status = status
	r.Result, r.Error = slices.Clone(result), slices.Clone(problem)
	r.Sealed, r.Affinity = nil, ""
	r.LeaseOwner, r.LeaseUntil = "", time.Time{}
	r.UpdatedAt, r.CompletedAt = now, now
	return nil
}

// Complete implements store.Store.
func (m *MemStore) Complete(ctx context.Context, id, worker string, result []byte, now time.Time) error {
	return m.end(ctx, id, worker, acds.StatusCompleted, result, nil, now)
}

// Fail implements store.Store.
func (m *MemStore) Fail(ctx context.Context, id, worker string, problem []byte, now time.Time) error {
	return m.end(ctx, id, worker, acds.StatusFailed, nil, problem, now)
}

// EraseSealedBefore implements store.Store.
func (m *MemStore) EraseSealedBefore(ctx context.Context, t time.Time) (int, error) {
	if err := m.begin(ctx); err != nil {
		return 0, err
	}
	defer m.mu.Unlock()
	t = dbTime(t)
	n := 0
	for _, r := range m.requests {
		if r.Sealed != nil && r.CreatedAt.Before(t) {
			r.Sealed, r.Affinity = nil, ""
			n++
		}
	}
	return n, nil
}

// EraseEndedBefore implements store.Store.
func (m *MemStore) EraseEndedBefore(ctx context.Context, t, now time.Time, limit int) (int, error) {
	if limit <= 0 {
		return 0, fmt.Errorf("%w: limit %d", store.ErrInvalid, limit)
	}
	if err := m.begin(ctx); err != nil {
		return 0, err
	}
	defer m.mu.Unlock()
	t, now = dbTime(t), dbTime(now)
	var ended []*store.Request
	for _, r := range m.requests {
		if r.ErasedAt.IsZero() && !r.CompletedAt.IsZero() && r.CompletedAt.Before(t) {
			ended = append(ended, r)
		}
	}
	slices.SortFunc(ended, func(a, b *store.Request) int { return a.CompletedAt.Compare(b.CompletedAt) })
	ended = ended[:min(len(ended), limit)]
	for _, r := range ended {
		r.Input, r.Result, r.Sealed = nil, nil, nil
		r.ErasedAt, r.UpdatedAt = now, now
	}
	return len(ended), nil
}

// Close implements store.Store. It is idempotent; every other method
// returns ErrClosed afterwards (Snapshot still works).
func (m *MemStore) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.closed = true
	return nil
}

// Snapshot returns a copy of every stored request, for tests that look at
// raw rows (e.g. to check that credentials are sealed).
func (m *MemStore) Snapshot() []store.Request {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]store.Request, 0, len(m.requests))
	for _, r := range m.requests {
		out = append(out, clone(r))
	}
	return out
}

// QueueStats implements store.QueueStatter, as the SQL stores do.
func (m *MemStore) QueueStats(ctx context.Context) (store.QueueStats, error) {
	if err := m.begin(ctx); err != nil {
		return store.QueueStats{}, err
	}
	defer m.mu.Unlock()
	var st store.QueueStats
	for _, r := range m.requests {
		if r.Status == acds.StatusProcessing {
			st.Processing++
			if st.Oldest.IsZero() || r.CreatedAt.Before(st.Oldest) {
				st.Oldest = r.CreatedAt
			}
		}
	}
	return st, nil
}

// PutTrustAnchor implements store.TrustRegistry, as the SQL stores do.
func (m *MemStore) PutTrustAnchor(ctx context.Context, a store.TrustAnchor, now time.Time) error {
	if err := store.CheckTrustAnchor(a); err != nil {
		return err
	}
	if err := m.begin(ctx); err != nil {
		return err
	}
	defer m.mu.Unlock()
	if m.anchors == nil {
		m.anchors = make(map[string]store.TrustAnchor)
	}
	m.anchors[a.Replica] = store.TrustAnchor{Replica: a.Replica, Anchor: bytes.Clone(a.Anchor), UpdatedAt: dbTime(now)}
	return nil
}

// TrustAnchors implements store.TrustRegistry.
func (m *MemStore) TrustAnchors(ctx context.Context) ([]store.TrustAnchor, error) {
	if err := m.begin(ctx); err != nil {
		return nil, err
	}
	defer m.mu.Unlock()
	out := make([]store.TrustAnchor, 0, len(m.anchors))
	for _, a := range m.anchors {
		a.Anchor = bytes.Clone(a.Anchor)
		out = append(out, a)
	}
	slices.SortFunc(out, func(a, b store.TrustAnchor) int { return strings.Compare(a.Replica, b.Replica) })
	return out, nil
}
