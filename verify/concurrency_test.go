package verify_test

import (
	"context"
	"sync"
	"testing"
	"time"
)

// One Verifier serves many goroutines: bundles, boot evidence and attested
// TLS certificates at once, sharing its cache of verified evidence (run
// with -race in CI).
func TestConcurrentVerification(t *testing.T) {
	f := getFixture(t)
	out := []byte("concurrent")
	raw := f.rawBundle(t, out)
	mpc := f.mpcBundle(t, out)
	boot := f.enclave.MarshalBootEvidence()
	e := tlsEnclave(t, f.now)
	cert, err := e.TLSCertificate(time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	v := mustNew(t, f.policy())
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan string, 64)
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 5 && ctx.Err() == nil; i++ {
				switch (g + i) % 4 {
				case 0:
					if r, err := v.VerifyOutput(raw, out); err != nil || !r.Valid {
						errs <- "raw bundle"
					}
				case 1:
					if r, err := v.Verify(mpc); err != nil || !r.Valid {
						errs <- "mpc bundle"
					}
				case 2:
					if r, err := v.VerifyBoot(boot); err != nil || !r.Valid {
						errs <- "boot evidence"
					}
				case 3:
					if r := v.VerifyCertificate(cert.Leaf); !r.Valid {
						errs <- "certificate"
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Errorf("concurrent verification failed: %s", e)
	}
}
