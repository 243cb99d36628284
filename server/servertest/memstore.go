// Package servertest has in-memory fakes of the server's dependencies for
// tests: a Store with the same lease semantics as the real backends, and
// fake Pipeline, Enclave, Fetcher and Verifier seams whose behaviour tests
// can steer. They are for tests only: the fake enclave proves nothing.
package servertest

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/acds-project/acds/internal/store"
)

// MemStore is an in-memory store.Store. It keeps every semantic of the
// interface (owner isolation, newest-first cursor pages, leases, attempts)
// but nothing survives the process. The zero value is not usable; call
// NewMemStore.
type MemStore struct {
	mu          sync.Mutex
	sessions    map[string]store.Session // by pseudonym
	passphrases map[string]string
	requests    map[string]*store.Request
	closed      bool
}

// NewMemStore returns an empty MemStore.
func NewMemStore() *MemStore {
	return &MemStore{
		sessions:    make(map[string]store.Session),
		passphrases: make(map[string]string),
		requests:    make(map[string]*store.Request),
	}
}

var _ store.Store = (*MemStore)(nil)

func (m *MemStore) lock() error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return store.ErrClosed
	}
	return nil
}

// CreateSession implements store.Store.
func (m *MemStore) CreateSession(ctx context.Context, s store.Session) error {
	if err := m.lock(); err != nil {
		return err
	}
	defer m.mu.Unlock()
	if _, ok := m.sessions[s.Pseudonym]; ok {
		return store.ErrConflict
	}
	for _, o := range m.sessions {
		if bytes.Equal(o.TokenHash, s.TokenHash) {
			return store.ErrConflict
		}
	}
	s.TokenHash = slices.Clone(s.TokenHash)
	m.sessions[s.Pseudonym] = s
	return nil
}

// SessionByTokenHash implements store.Store.
func (m *MemStore) SessionByTokenHash(ctx context.Context, h []byte) (store.Session, error) {
	if err := m.lock(); err != nil {
		return store.Session{}, err
	}
	defer m.mu.Unlock()
	for _, s := range m.sessions {
		if bytes.Equal(s.TokenHash, h) {
			s.TokenHash = slices.Clone(s.TokenHash)
			return s, nil
		}
	}
	return store.Session{}, store.ErrNotFound
}

// SetPassphrase implements store.Store.
func (m *MemStore) SetPassphrase(ctx context.Context, pseudonym, enc string) error {
	if err := m.lock(); err != nil {
		return err
	}
	defer m.mu.Unlock()
	m.passphrases[pseudonym] = enc
	return nil
}

// Passphrase implements store.Store.
func (m *MemStore) Passphrase(ctx context.Context, pseudonym string) (string, error) {
	if err := m.lock(); err != nil {
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
	if err := m.lock(); err != nil {
		return 0, err
	}
	defer m.mu.Unlock()
	n := 0
	for k, s := range m.sessions {
		if s.ExpiresAt.Before(now) {
			delete(m.sessions, k)
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

// CreateRequest implements store.Store.
func (m *MemStore) CreateRequest(ctx context.Context, r store.Request) error {
	if err := m.lock(); err != nil {
		return err
	}
	defer m.mu.Unlock()
	if _, ok := m.requests[r.ID]; ok {
		return store.ErrConflict
	}
	c := clone(&r)
	c.Status = store.StatusProcessing
	m.requests[r.ID] = &c
	return nil
}

// GetRequest implements store.Store.
func (m *MemStore) GetRequest(ctx context.Context, owner, id string) (store.Request, error) {
	if err := m.lock(); err != nil {
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

func encodeCursor(r *store.Request) string {
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(r.CreatedAt.UnixNano(), 10) + "/" + r.ID))
}

func decodeCursor(c string) (*store.Request, error) {
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil {
		return nil, fmt.Errorf("memstore: bad cursor: %w", store.ErrInvalid)
	}
	ts, id, ok := strings.Cut(string(b), "/")
	n, err := strconv.ParseInt(ts, 10, 64)
	if !ok || err != nil {
		return nil, fmt.Errorf("memstore: bad cursor: %w", store.ErrInvalid)
	}
	return &store.Request{CreatedAt: time.Unix(0, n), ID: id}, nil
}

// ListRequests implements store.Store.
func (m *MemStore) ListRequests(ctx context.Context, owner string, p store.Page) ([]store.Request, string, error) {
	limit := min(max(p.Limit, 1), 100)
	var after *store.Request
	if p.Cursor != "" {
		var err error
		if after, err = decodeCursor(p.Cursor); err != nil {
			return nil, "", err
		}
	}
	if err := m.lock(); err != nil {
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
	next := ""
	if len(all) > limit {
		all = all[:limit]
		next = encodeCursor(all[limit-1])
	}
	out := make([]store.Request, len(all))
	for i, r := range all {
		out[i] = clone(r)
	}
	return out, next, nil
}

// DeleteRequest implements store.Store.
func (m *MemStore) DeleteRequest(ctx context.Context, owner, id string) error {
	if err := m.lock(); err != nil {
		return err
	}
	defer m.mu.Unlock()
	r, ok := m.requests[id]
	if !ok || r.Owner != owner {
		return store.ErrNotFound
	}
	delete(m.requests, id)
	return nil
}

// Claim implements store.Store.
func (m *MemStore) Claim(ctx context.Context, o store.ClaimOptions) (*store.Request, error) {
	if err := m.lock(); err != nil {
		return nil, err
	}
	defer m.mu.Unlock()
	for {
		var oldest *store.Request
		for _, r := range m.requests {
			if r.Status != store.StatusProcessing || (r.LeaseOwner != "" && r.LeaseUntil.After(o.Now)) {
				continue
			}
			if oldest == nil || newer(oldest, r) {
				oldest = r
			}
		}
		if oldest == nil {
			return nil, nil
		}
		if oldest.Attempts >= o.MaxAttempts {
			oldest.Status = store.StatusFailed
			oldest.Error = slices.Clone(o.Exhausted)
			oldest.Sealed = nil
			oldest.LeaseOwner, oldest.LeaseUntil = "", time.Time{}
			oldest.UpdatedAt, oldest.CompletedAt = o.Now, o.Now
			continue
		}
		oldest.Attempts++
		oldest.LeaseOwner = o.Worker
		oldest.LeaseUntil = o.Now.Add(o.Lease)
		oldest.UpdatedAt = o.Now
		c := clone(oldest)
		return &c, nil
	}
}

func (m *MemStore) leased(id, worker string) (*store.Request, error) {
	r, ok := m.requests[id]
	if !ok || r.Status != store.StatusProcessing || r.LeaseOwner != worker {
		return nil, store.ErrLeaseLost
	}
	return r, nil
}

// Heartbeat implements store.Store.
func (m *MemStore) Heartbeat(ctx context.Context, id, worker string, until time.Time) error {
	if err := m.lock(); err != nil {
		return err
	}
	defer m.mu.Unlock()
	r, err := m.leased(id, worker)
	if err != nil {
		return err
	}
	r.LeaseUntil = until
	return nil
}

func (m *MemStore) end(id, worker, status string, result, problem []byte, now time.Time) error {
	if err := m.lock(); err != nil {
		return err
	}
	defer m.mu.Unlock()
	r, err := m.leased(id, worker)
	if err != nil {
		return err
	}
	r.Status = status
	r.Result, r.Error = slices.Clone(result), slices.Clone(problem)
	r.Sealed = nil
	r.LeaseOwner, r.LeaseUntil = "", time.Time{}
	r.UpdatedAt, r.CompletedAt = now, now
	return nil
}

// Complete implements store.Store.
func (m *MemStore) Complete(ctx context.Context, id, worker string, result []byte, now time.Time) error {
	return m.end(id, worker, store.StatusCompleted, result, nil, now)
}

// Fail implements store.Store.
func (m *MemStore) Fail(ctx context.Context, id, worker string, problem []byte, now time.Time) error {
	return m.end(id, worker, store.StatusFailed, nil, problem, now)
}

// EraseSealedBefore implements store.Store.
func (m *MemStore) EraseSealedBefore(ctx context.Context, t time.Time) (int, error) {
	if err := m.lock(); err != nil {
		return 0, err
	}
	defer m.mu.Unlock()
	n := 0
	for _, r := range m.requests {
		if len(r.Sealed) > 0 && r.CreatedAt.Before(t) {
			r.Sealed = nil
			n++
		}
	}
	return n, nil
}

// Close implements store.Store.
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
