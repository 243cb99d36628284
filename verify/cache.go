package verify

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/acds-project/acds/attestation"
)

// DefaultCacheSize is how many verified pieces of evidence a Verifier
// remembers when Policy.CacheSize is zero.
const DefaultCacheSize = 256

// Stats count what a Verifier did with evidence.
type Stats struct {
	// Verified counts evidence verifications (cache misses), whether they
	// passed or not.
	Verified uint64
	// Cached counts evidence checks answered from the cache.
	Cached uint64
}

// Stats returns the counts so far.
func (v *Verifier) Stats() Stats {
	if !v.made() {
		return Stats{}
	}
	return Stats{Verified: v.cache.verified.Load(), Cached: v.cache.cached.Load()}
}

// verified is what checking one piece of boot evidence found; the cache
// keeps only those that passed every check: what a later check of the same
// evidence needs to say so again. boot is shared by every Result made from
// the entry.
type verified struct {
	boot        *attestation.BootEvidence
	measurement []byte
	relaxations []string
	// notBefore and notAfter bound the times at which the evidence's
	// certificates are valid, and so at which the outcome holds; zero
	// values leave that side open (a pinned TPM key has no certificate).
	notBefore, notAfter time.Time
}

func (e *verified) validAt(t time.Time) bool {
	return (e.notBefore.IsZero() || !t.Before(e.notBefore)) && (e.notAfter.IsZero() || !t.After(e.notAfter))
}

// evidenceCache is the one cache of verified evidence on the attested paths
// (bundles, boot evidence, attested TLS): bounded, first in first out, safe
// for concurrent use, and it lets one caller verify a key while the others
// asking for it wait. Only evidence that passed is kept; the policy is fixed
// per Verifier, so a hit needs only the time to be inside the entry's
// window.
type evidenceCache struct {
	size int // ≤ 0: no cache

	mu       sync.Mutex
	m        map[[32]byte]*verified
	order    [][32]byte
	inflight map[[32]byte]chan struct{}

	verified, cached atomic.Uint64
}

func newEvidenceCache(size int) *evidenceCache {
	if size == 0 {
		size = DefaultCacheSize
	}
	return &evidenceCache{size: size, m: map[[32]byte]*verified{}, inflight: map[[32]byte]chan struct{}{}}
}

// do returns the cached outcome for k when it holds at t, else runs check;
// a passing outcome that may be kept (keep) is stored. Concurrent callers
// with the same k wait for the first one and then use its outcome when it
// holds for them.
func (c *evidenceCache) do(k [32]byte, t time.Time, check func() (e *verified, keep bool, f *Failure)) (*verified, *Failure) {
	if c.size <= 0 {
		c.verified.Add(1)
		e, _, f := check()
		return e, f
	}
	for waited := false; ; waited = true {
		c.mu.Lock()
		if e, ok := c.m[k]; ok && e.validAt(t) {
			c.mu.Unlock()
			c.cached.Add(1)
			return e, nil
		}
		done, busy := c.inflight[k]
		if busy && !waited {
			c.mu.Unlock()
			<-done
			continue
		}
		lead := !busy
		if lead {
			done = make(chan struct{})
			c.inflight[k] = done
		}
		c.mu.Unlock()

		c.verified.Add(1)
		e, keep, f := check()
		c.mu.Lock()
		if f == nil && keep {
			c.put(k, e)
		}
		if lead {
			delete(c.inflight, k)
			close(done)
		}
		c.mu.Unlock()
		return e, f
	}
}

// put stores e under k; c.mu is held.
func (c *evidenceCache) put(k [32]byte, e *verified) {
	if _, ok := c.m[k]; !ok {
		if len(c.order) >= c.size {
			delete(c.m, c.order[0])
			c.order = c.order[1:]
		}
		c.order = append(c.order, k)
	}
	c.m[k] = e
}
