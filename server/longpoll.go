package server

import (
	"context"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/acds-project/acds"
	"github.com/acds-project/acds/store"
)

// Long-polling: GET /v1/requests/{id}?wait=N holds the answer while the
// request is processing, for at most N seconds. A waiter is the handler's
// own goroutine: it sleeps on a channel of the waiters set, which this
// server's workers close when they stop working on the request (ended,
// abandoned or lease lost), so an in-process completion answers at once.
// Requests that another replica works on are seen by re-reading the store
// every recheck interval; requests a local worker holds are not re-read
// (the worker's end wakes the waiter).

const (
	// maxWaitSeconds is the largest accepted wait parameter.
	maxWaitSeconds = 30
	// maxWaiters bounds the requests held at once by one Server; more
	// are answered at once with the current record.
	maxWaiters = 10_000
	// maxWaitersPerOwner bounds the requests one pseudonym holds at once.
	maxWaitersPerOwner = 32
	// defaultRecheck is how often a waiter re-reads the store for a
	// request no local worker holds.
	defaultRecheck = 200 * time.Millisecond
)

// waitEntry is the wake-up channel of the waiters of one request id. The
// channel is closed (and the entry dropped from the set) when a local
// worker stops working on the request.
type waitEntry struct {
	ch      chan struct{}
	waiters int
}

// waiters is the notifier of one Server: who waits for which request, and
// which requests this server's workers are running.
type waiters struct {
	mu       sync.Mutex
	byID     map[string]*waitEntry
	perOwner map[string]int
	total    int
	running  map[string]int

	// unit is the length of one "second" of the wait parameter and
	// recheck the store re-read interval, in nanoseconds; tests shorten
	// them.
	unit    atomic.Int64
	recheck atomic.Int64
}

func newWaiters() *waiters {
	w := &waiters{byID: map[string]*waitEntry{}, perOwner: map[string]int{}, running: map[string]int{}}
	w.unit.Store(int64(time.Second))
	w.recheck.Store(int64(defaultRecheck))
	return w
}

// subscribe registers a waiter for id on behalf of owner. It returns the
// channel closed when a local worker stops working on id and a release
// function to call exactly once, or ok false when the bounds are reached.
func (w *waiters) subscribe(id, owner string) (ch <-chan struct{}, release func(), ok bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.total >= maxWaiters || w.perOwner[owner] >= maxWaitersPerOwner {
		return nil, nil, false
	}
	e := w.byID[id]
	if e == nil {
		e = &waitEntry{ch: make(chan struct{})}
		w.byID[id] = e
	}
	e.waiters++
	w.total++
	w.perOwner[owner]++
	return e.ch, func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		e.waiters--
		if e.waiters == 0 && w.byID[id] == e {
			delete(w.byID, id)
		}
		w.total--
		if w.perOwner[owner]--; w.perOwner[owner] <= 0 {
			delete(w.perOwner, owner)
		}
	}, true
}

// started records that a local worker runs id.
func (w *waiters) started(id string) {
	w.mu.Lock()
	w.running[id]++
	w.mu.Unlock()
}

// stopped records that a local worker no longer runs id, after its
// outcome (if any) is in the store, and wakes the waiters of id.
func (w *waiters) stopped(id string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.running[id]--; w.running[id] <= 0 {
		delete(w.running, id)
	}
	if e := w.byID[id]; e != nil {
		close(e.ch)
		delete(w.byID, id)
	}
}

// runningHere reports whether a local worker runs id.
func (w *waiters) runningHere(id string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.running[id] > 0
}

// size returns the number of registered waiters and of ids with waiters.
func (w *waiters) size() (total, ids int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.total, len(w.byID)
}

// parseWait reads the query of GET /v1/requests/{id}: only wait, an
// integer from 1 to maxWaitSeconds, is known. It returns 0 when absent.
func parseWait(q url.Values) (int, *acds.Problem) {
	for k := range q {
		if k == "" {
			return 0, fieldProblem("query", "a query parameter without a name; known: wait")
		}
		if k != "wait" {
			return 0, fieldProblem(k, "unknown query parameter; known: wait")
		}
	}
	vs, ok := q["wait"]
	if !ok {
		return 0, nil
	}
	n, err := strconv.Atoi(vs[0])
	if len(vs) != 1 || err != nil || n < 1 || n > maxWaitSeconds {
		return 0, fieldProblem("wait", "must be one integer from 1 to "+strconv.Itoa(maxWaitSeconds)+" (seconds)")
	}
	return n, nil
}

// longPoll reads the owner's request id and, while it is processing,
// waits for at most seconds until it no longer is; it returns the request
// as last read from the store. It returns early, after a last read, when
// the server is closing, and without one (with ctx's error) when ctx ends.
// When the waiter bounds are reached it returns the first read at once.
// Other errors are the store's (ErrNotFound when the request does not
// exist, belongs to another owner or was deleted meanwhile).
func (s *Server) longPoll(ctx context.Context, owner, id string, seconds int) (store.Request, error) {
	deadline := time.NewTimer(time.Duration(seconds) * time.Duration(s.waiters.unit.Load()))
	defer deadline.Stop()
	recheck := time.NewTicker(time.Duration(s.waiters.recheck.Load()))
	defer recheck.Stop()
	for {
		// Subscribe before reading, so that an end between the read and
		// the sleep still wakes this waiter.
		ch, release, ok := s.waiters.subscribe(id, owner)
		req, err := s.cfg.Store.GetRequest(ctx, owner, id)
		if !ok || err != nil || req.Status != acds.StatusProcessing || s.claimCtx.Err() != nil {
			if ok {
				release()
			}
			return req, err
		}
		// The answer needs none of the input (up to MaxProcessBody) or
		// the sealed credentials: do not hold them while waiting.
		req.Input, req.Sealed = nil, nil
		last, woken := false, false
		for !woken {
			select {
			case <-ch:
				woken = true
			case <-recheck.C:
				woken = !s.waiters.runningHere(id)
			case <-deadline.C:
				woken, last = true, true
			case <-s.claimCtx.Done():
				woken, last = true, true
			case <-ctx.Done():
				release()
				return req, ctx.Err()
			}
		}
		release()
		if last {
			return s.cfg.Store.GetRequest(ctx, owner, id)
		}
	}
}
