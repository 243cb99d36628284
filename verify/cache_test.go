package verify_test

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acds-project/acds/verify"
)

// Bundles and boot evidence of one enclave share one verification of its
// evidence; a cached outcome is not used at a time outside the window of
// the evidence's certificates; without a cache every check verifies.
func TestEvidenceCache(t *testing.T) {
	f := getFixture(t)
	var now atomic.Int64
	now.Store(f.now.Add(time.Minute).UnixNano())
	p := f.policy()
	p.Now = func() time.Time { return time.Unix(0, now.Load()) }
	v := mustNew(t, p)
	for _, out := range []string{"a", "b", "c"} {
		if res, err := v.Verify(f.rawBundle(t, []byte(out))); err != nil || !res.Valid {
			t.Fatalf("bundle %s: %v %v", out, err, res.Err())
		}
	}
	boot := f.enclave.MarshalBootEvidence()
	if res, err := v.VerifyBoot(boot); err != nil || !res.Valid {
		t.Fatalf("boot: %v %v", err, res.Err())
	}
	if s := v.Stats(); s.Verified != 1 || s.Cached != 3 {
		t.Fatalf("three bundles and the boot evidence of one enclave: %+v, want 1 verified, 3 cached", s)
	}

	// Far past every certificate of the simulated chain: not from the cache.
	now.Store(f.now.AddDate(100, 0, 0).UnixNano())
	res, err := v.VerifyBoot(boot)
	if err != nil || res.Valid || !errors.Is(res.Err(), verify.ErrEvidence) {
		t.Fatalf("boot evidence a century later: %v %v", err, res.Err())
	}
	if s := v.Stats(); s.Verified != 2 {
		t.Fatalf("a century later: %+v, want a second verification", s)
	}

	p.CacheSize = -1
	none := mustNew(t, p)
	now.Store(f.now.Add(time.Minute).UnixNano())
	for range 2 {
		if res, _ := none.VerifyBoot(boot); !res.Valid {
			t.Fatal(res.Err())
		}
	}
	if s := none.Stats(); s.Verified != 2 || s.Cached != 0 {
		t.Fatalf("without a cache: %+v", s)
	}
}
