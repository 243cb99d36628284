package server

import (
	"context"
	"crypto/subtle"
	"sync"
	"time"
)

// sessionCache remembers recently seen sessions by token hash, so that an
// authenticated request does not read the store every time. Sessions end
// only by expiring, which is checked on every use, so a cached entry is
// never more permissive than the store. Bounded: when full, expired
// entries go, then arbitrary ones.
type sessionCache struct {
	max int
	mu  sync.Mutex
	m   map[string]cachedSession
}

type cachedSession struct {
	hash    []byte
	owner   string
	expires time.Time
}

func newSessionCache(max int) *sessionCache {
	return &sessionCache{max: max, m: make(map[string]cachedSession)}
}

func (c *sessionCache) get(hash []byte, now time.Time) (string, bool) {
	c.mu.Lock()
	e, ok := c.m[string(hash)]
	c.mu.Unlock()
	if !ok || subtle.ConstantTimeCompare(e.hash, hash) != 1 || !now.Before(e.expires) {
		return "", false
	}
	return e.owner, true
}

// has reports whether hash is a cached, unexpired session.
func (c *sessionCache) has(hash []byte, now time.Time) bool {
	_, ok := c.get(hash, now)
	return ok
}

func (c *sessionCache) put(hash []byte, owner string, expires, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.m) >= c.max {
		for k, e := range c.m {
			if !now.Before(e.expires) {
				delete(c.m, k)
			}
		}
		for k := range c.m {
			if len(c.m) < c.max {
				break
			}
			delete(c.m, k)
		}
	}
	c.m[string(hash)] = cachedSession{hash: append([]byte(nil), hash...), owner: owner, expires: expires}
}

// lookupSession returns the owner of a valid, unexpired token hash.
// found is false for unknown or expired tokens; err is a store failure.
func (s *Server) lookupSession(ctx context.Context, hash []byte, now time.Time) (owner string, found bool, err error) {
	if o, ok := s.sessions.get(hash, now); ok {
		return o, true, nil
	}
	sess, err := s.cfg.Store.SessionByTokenHash(ctx, hash)
	if isNotFound(err) {
		return "", false, nil
	}
	if err != nil {
		return "", false, err
	}
	if subtle.ConstantTimeCompare(sess.TokenHash, hash) != 1 || !now.Before(sess.ExpiresAt) {
		return "", false, nil
	}
	o := ownerOfSessionKey(sess.Pseudonym)
	s.sessions.put(hash, o, sess.ExpiresAt, now)
	return o, true, nil
}
