package server

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/acds-project/acds/store"
)

// deadlineStore is the Server's view of Config.Store: every call runs
// under Config.StoreTimeout, so that a database that stops answering (a
// black-holed link, a hung disk) turns into an error the handlers answer
// with 503 unavailable and Retry-After, instead of holding the request
// until TCP gives up. Each outcome is noted in health, which GET
// /v1/health reports.
type deadlineStore struct {
	store.Store
	timeout time.Duration
	health  *storeHealth
}

// storeHealth is what the server last learned about its store.
type storeHealth struct {
	now func() time.Time

	mu     sync.Mutex
	seen   time.Time // when the last outcome was observed
	down   bool      // the last outcome was a failure of the store
	probes sync.Mutex
}

// observe notes the outcome err of a call made with the caller's context
// parent. Answers that come from the database (not found, conflict,
// invalid, lease lost, full) show it reachable; a call the caller abandoned
// shows nothing.
func (h *storeHealth) observe(parent context.Context, err error) {
	var down bool
	switch {
	case err == nil, errors.Is(err, store.ErrNotFound), errors.Is(err, store.ErrConflict),
		errors.Is(err, store.ErrInvalid), errors.Is(err, store.ErrLeaseLost),
		errors.Is(err, store.ErrFull): // a full disk refuses writes, not deletions
		down = false
	case parent.Err() != nil:
		return
	default:
		down = true
	}
	h.mu.Lock()
	h.seen, h.down = h.now(), down
	h.mu.Unlock()
}

// state returns the last outcome and when it was observed.
func (h *storeHealth) state() (down bool, seen time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.down, h.seen
}

// healthFresh is how long an observed outcome stands for the store's
// health before GET /v1/health probes it again.
const healthFresh = time.Second

// probeHash is the token hash the health probe looks up: no token hashes
// to it (it would take a SHA-256 preimage of zero), so the lookup answers
// "not found" from a reachable store.
var probeHash = make([]byte, 32)

// storeDown reports whether the store is failing: by the outcome of the
// calls of the last second, or else by a probe (one lookup under the
// store deadline; concurrent health requests share it).
func (s *Server) storeDown(ctx context.Context) bool {
	h := s.st.health
	down, seen := h.state()
	if !seen.IsZero() && h.now().Sub(seen) < healthFresh {
		return down
	}
	if !h.probes.TryLock() {
		return down // another request is probing; report the last outcome
	}
	defer h.probes.Unlock()
	_, err := s.cfg.Store.SessionByTokenHash(ctx, probeHash)
	if ctx.Err() != nil {
		return down
	}
	return err != nil && !errors.Is(err, store.ErrNotFound)
}

func (d *deadlineStore) ctx(parent context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(parent, d.timeout)
}

func (d *deadlineStore) CreateSession(ctx context.Context, s store.Session) error {
	c, cancel := d.ctx(ctx)
	defer cancel()
	err := d.Store.CreateSession(c, s)
	d.health.observe(ctx, err)
	return err
}

func (d *deadlineStore) SessionByTokenHash(ctx context.Context, tokenHash []byte) (store.Session, error) {
	c, cancel := d.ctx(ctx)
	defer cancel()
	s, err := d.Store.SessionByTokenHash(c, tokenHash)
	d.health.observe(ctx, err)
	return s, err
}

func (d *deadlineStore) SetPassphrase(ctx context.Context, pseudonym, encodedHash string) error {
	c, cancel := d.ctx(ctx)
	defer cancel()
	err := d.Store.SetPassphrase(c, pseudonym, encodedHash)
	d.health.observe(ctx, err)
	return err
}

func (d *deadlineStore) Passphrase(ctx context.Context, pseudonym string) (string, error) {
	c, cancel := d.ctx(ctx)
	defer cancel()
	p, err := d.Store.Passphrase(c, pseudonym)
	d.health.observe(ctx, err)
	return p, err
}

func (d *deadlineStore) DeleteExpiredSessions(ctx context.Context, now time.Time) (int, error) {
	c, cancel := d.ctx(ctx)
	defer cancel()
	n, err := d.Store.DeleteExpiredSessions(c, now)
	d.health.observe(ctx, err)
	return n, err
}

func (d *deadlineStore) CreateRequest(ctx context.Context, r store.Request) error {
	c, cancel := d.ctx(ctx)
	defer cancel()
	err := d.Store.CreateRequest(c, r)
	d.health.observe(ctx, err)
	return err
}

func (d *deadlineStore) GetRequest(ctx context.Context, owner, id string) (store.Request, error) {
	c, cancel := d.ctx(ctx)
	defer cancel()
	r, err := d.Store.GetRequest(c, owner, id)
	d.health.observe(ctx, err)
	return r, err
}

func (d *deadlineStore) ListRequests(ctx context.Context, owner string, p store.Page) ([]store.Request, string, error) {
	c, cancel := d.ctx(ctx)
	defer cancel()
	rs, next, err := d.Store.ListRequests(c, owner, p)
	d.health.observe(ctx, err)
	return rs, next, err
}

func (d *deadlineStore) DeleteRequest(ctx context.Context, owner, id string) error {
	c, cancel := d.ctx(ctx)
	defer cancel()
	err := d.Store.DeleteRequest(c, owner, id)
	d.health.observe(ctx, err)
	return err
}

func (d *deadlineStore) Claim(ctx context.Context, o store.ClaimOptions) (*store.Request, error) {
	c, cancel := d.ctx(ctx)
	defer cancel()
	r, err := d.Store.Claim(c, o)
	d.health.observe(ctx, err)
	return r, err
}

func (d *deadlineStore) Heartbeat(ctx context.Context, id, worker string, until time.Time) error {
	c, cancel := d.ctx(ctx)
	defer cancel()
	err := d.Store.Heartbeat(c, id, worker, until)
	d.health.observe(ctx, err)
	return err
}

func (d *deadlineStore) Release(ctx context.Context, id, worker string) error {
	c, cancel := d.ctx(ctx)
	defer cancel()
	err := d.Store.Release(c, id, worker)
	d.health.observe(ctx, err)
	return err
}

func (d *deadlineStore) Suspects(ctx context.Context, now time.Time, affinity string) (int, error) {
	c, cancel := d.ctx(ctx)
	defer cancel()
	n, err := d.Store.Suspects(c, now, affinity)
	d.health.observe(ctx, err)
	return n, err
}

func (d *deadlineStore) Complete(ctx context.Context, id, worker string, result []byte, now time.Time) error {
	c, cancel := d.ctx(ctx)
	defer cancel()
	err := d.Store.Complete(c, id, worker, result, now)
	d.health.observe(ctx, err)
	return err
}

func (d *deadlineStore) Fail(ctx context.Context, id, worker string, problem []byte, now time.Time) error {
	c, cancel := d.ctx(ctx)
	defer cancel()
	err := d.Store.Fail(c, id, worker, problem, now)
	d.health.observe(ctx, err)
	return err
}

func (d *deadlineStore) EraseSealedBefore(ctx context.Context, t time.Time) (int, error) {
	c, cancel := d.ctx(ctx)
	defer cancel()
	n, err := d.Store.EraseSealedBefore(c, t)
	d.health.observe(ctx, err)
	return n, err
}

func (d *deadlineStore) DeleteSession(ctx context.Context, tokenHash []byte) error {
	c, cancel := d.ctx(ctx)
	defer cancel()
	err := d.Store.DeleteSession(c, tokenHash)
	d.health.observe(ctx, err)
	return err
}

func (d *deadlineStore) DeleteSessionsOf(ctx context.Context, pseudonym string, keep []byte) (int, error) {
	c, cancel := d.ctx(ctx)
	defer cancel()
	n, err := d.Store.DeleteSessionsOf(c, pseudonym, keep)
	d.health.observe(ctx, err)
	return n, err
}

func (d *deadlineStore) EraseEndedBefore(ctx context.Context, t, now time.Time, limit int) (int, error) {
	c, cancel := d.ctx(ctx)
	defer cancel()
	n, err := d.Store.EraseEndedBefore(c, t, now, limit)
	d.health.observe(ctx, err)
	return n, err
}

// deadlineWebhooks is a store.Webhooks under the store deadline, its
// outcomes noted in the store's health like every other store call.
type deadlineWebhooks struct {
	ws store.Webhooks
	d  *deadlineStore
}

func (w deadlineWebhooks) ClaimDelivery(ctx context.Context, now, until time.Time) (*store.Delivery, error) {
	c, cancel := w.d.ctx(ctx)
	defer cancel()
	dl, err := w.ws.ClaimDelivery(c, now, until)
	w.d.health.observe(ctx, err)
	return dl, err
}

func (w deadlineWebhooks) RetryDelivery(ctx context.Context, requestID string, next time.Time, lastError string) error {
	c, cancel := w.d.ctx(ctx)
	defer cancel()
	err := w.ws.RetryDelivery(c, requestID, next, lastError)
	w.d.health.observe(ctx, err)
	return err
}

func (w deadlineWebhooks) EndDelivery(ctx context.Context, requestID string) error {
	c, cancel := w.d.ctx(ctx)
	defer cancel()
	err := w.ws.EndDelivery(c, requestID)
	w.d.health.observe(ctx, err)
	return err
}
