package server

import (
	"context"
	"math"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/acds-project/acds"
	"github.com/acds-project/acds/store"
)

// queueRefresh is how often the queue length is read from the store; in
// between, the requests this server accepted are added to the last count.
const queueRefresh = 250 * time.Millisecond

// queueRetryAfter is the Retry-After, in seconds, of a request refused
// because the queue is full.
const queueRetryAfter = 5

// queueGauge caches the store's count of pending requests.
type queueGauge struct {
	mu         sync.Mutex
	n          int       // pending at the last count
	added      int       // accepted here since
	at         time.Time // when counted; zero: never
	refreshing bool
}

// admitQueued reports whether one more request may be queued, and counts
// it when so. Past Config.MaxQueue pending requests it answers false, and
// POST answers 503 unavailable with Retry-After instead of accepting work
// the workers cannot reach in time (DESIGN §11). A count that fails admits
// the request: the store's own failure is then answered where it occurs.
func (s *Server) admitQueued(ctx context.Context) bool {
	qs, ok := s.st.Store.(store.QueueStatter)
	if !ok || s.cfg.MaxQueue < 0 {
		return true
	}
	g := &s.queue
	g.mu.Lock()
	stale := g.at.IsZero() || time.Since(g.at) > queueRefresh
	if stale && !g.refreshing {
		g.refreshing = true
		g.mu.Unlock()
		c, cancel := s.st.ctx(ctx)
		st, err := qs.QueueStats(c)
		n := st.Processing
		cancel()
		s.st.health.observe(ctx, err)
		g.mu.Lock()
		g.refreshing = false
		if err == nil {
			g.n, g.added, g.at = n, 0, time.Now()
		}
	}
	defer g.mu.Unlock()
	if g.n+g.added >= s.cfg.MaxQueue {
		return false
	}
	g.added++
	return true
}

// queueFull is the answer to a request refused because the queue is full.
func queueFull() *acds.Problem {
	p := acds.NewProblem(acds.ProblemUnavailable, "the queue of pending requests is full; retry later")
	p.RetryAfter = queueRetryAfter
	return p
}

// clientAddr is the remote IP of r's connection.
func clientAddr(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// FailedTokenBurst is how many unknown or expired bearer tokens one client
// address may present at once before Config.FailedTokenLimit applies.
const FailedTokenBurst = 20

// blocked reports whether key's bucket is empty at now, without taking
// from it, and the whole seconds until it holds one event again.
func (s *limiterSet) blocked(key string, now time.Time) (bool, int) {
	if s == nil {
		return false, 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.m[key]
	if !ok {
		return false, 0
	}
	tokens := e.lim.TokensAt(now)
	if tokens >= 1 {
		return false, 0
	}
	if s.limit <= 0 {
		return true, 60
	}
	return true, max(1, int(math.Ceil((1-tokens)/float64(s.limit))))
}
