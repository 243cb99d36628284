package server

import "time"

// SetLongPollTiming shortens, for tests, the length of one second of the
// wait parameter and the store re-read interval of long-polling GETs.
func SetLongPollTiming(s *Server, unit, recheck time.Duration) {
	s.waiters.unit.Store(int64(unit))
	s.waiters.recheck.Store(int64(recheck))
}

// LongPollWaiters returns how many long-polling GETs are registered and
// for how many request ids.
func LongPollWaiters(s *Server) (total, ids int) { return s.waiters.size() }

// Long-poll bounds, for tests.
const (
	MaxWaiters         = maxWaiters
	MaxWaitersPerOwner = maxWaitersPerOwner
)
