package server

import (
	"math"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// limiterSet holds one token bucket per key (a token hash or a client
// address). Idle buckets are dropped by sweep; the set never holds more
// than maxKeys buckets (when full, the oldest idle entries go first and a
// new key shares a bucket with nothing: it is admitted by a fresh bucket).
type limiterSet struct {
	limit   rate.Limit
	burst   int
	maxKeys int

	mu sync.Mutex
	m  map[string]*limiterEntry
}

type limiterEntry struct {
	lim  *rate.Limiter
	seen time.Time
}

func newLimiterSet(perSecond float64, burst int) *limiterSet {
	if perSecond < 0 {
		return nil
	}
	if burst < 1 {
		burst = 1
	}
	return &limiterSet{limit: rate.Limit(perSecond), burst: burst, maxKeys: 100_000, m: make(map[string]*limiterEntry)}
}

// allow takes one event for key at now. When the bucket is empty it
// returns false and the whole seconds to wait (at least 1).
func (s *limiterSet) allow(key string, now time.Time) (bool, int) {
	if s == nil {
		return true, 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.m[key]
	if !ok {
		if len(s.m) >= s.maxKeys {
			s.sweepLocked(now, time.Minute)
		}
		e = &limiterEntry{lim: rate.NewLimiter(s.limit, s.burst)}
		s.m[key] = e
	}
	e.seen = now
	r := e.lim.ReserveN(now, 1)
	if !r.OK() {
		return false, 60
	}
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		return false, int(math.Ceil(d.Seconds()))
	}
	return true, 0
}

// sweep drops buckets idle for longer than idle.
func (s *limiterSet) sweep(now time.Time, idle time.Duration) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sweepLocked(now, idle)
}

func (s *limiterSet) sweepLocked(now time.Time, idle time.Duration) {
	for k, e := range s.m {
		if now.Sub(e.seen) > idle {
			delete(s.m, k)
		}
	}
}
