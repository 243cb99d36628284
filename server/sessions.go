package server

import (
	"context"
	"crypto/subtle"
	"sync"
	"time"

	"github.com/acds-project/acds/store"
)

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// sessionCacheTTL bounds how long a cached session is trusted without
// reading the store again. A session revoked through this Server leaves
// its cache at once; one revoked through another replica sharing the
// store stops working here within sessionCacheTTL.
const sessionCacheTTL = 10 * time.Second

// sessionCache remembers recently seen sessions by token hash, so that an
// authenticated request does not read the store every time. An entry
// lasts until the session expires or sessionCacheTTL passes, whichever
// is first, and revocation removes it. Bounded: when full, expired
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

// forget removes the entry of hash.
func (c *sessionCache) forget(hash []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.m, string(hash))
}

// forgetOwner removes every entry of owner except keep's.
func (c *sessionCache) forgetOwner(owner string, keep []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, e := range c.m {
		if e.owner == owner && k != string(keep) {
			delete(c.m, k)
		}
	}
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
	o := store.SessionOwner(sess.Pseudonym)
	s.sessions.put(hash, o, minTime(sess.ExpiresAt, now.Add(sessionCacheTTL)), now)
	return o, true, nil
}
