package verify_test

import (
	"errors"
	"os"
	"testing"
	"time"

	"github.com/acds-project/acds/attestation"
	"github.com/acds-project/acds/attestation/tdx"
	"github.com/acds-project/acds/verify"
)

// A bundle carrying a real TDX quote (go-tdx-guest test data) is checked
// offline against Intel's root: the quote verifies, and the bundle is still
// refused because the quote does not bind this bundle's boot keys.
func TestTDXBundleEvidenceChecked(t *testing.T) {
	quote, err := os.ReadFile("../attestation/tdx/testdata/tdx_prod_quote_SPR_E4.dat")
	if err != nil {
		t.Skip("tdx test data not present")
	}
	at := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	ev, err := tdx.Verify(quote, tdx.Options{Now: func() time.Time { return at }})
	if err != nil {
		t.Fatalf("reference quote: %v", err)
	}
	f := getFixture(t)
	parsed, err := attestation.ParseBundle(f.rawBundle(t, []byte("x")))
	if err != nil {
		t.Fatal(err)
	}
	parsed.Boot.Profile = attestation.ProfileTDX
	parsed.Boot.Evidence = quote
	b, err := parsed.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	p := verify.Policy{
		Measurements:     map[string][][]byte{attestation.ProfileTDX: {ev.Measurement}},
		UnsafeAllowDebug: true,
		Now:              func() time.Time { return at },
	}
	res, err := mustNew(t, p).Verify(b)
	if err != nil {
		t.Fatal(err)
	}
	if res.Valid || res.TEEQuoteVerified || !errors.Is(res.Err(), verify.ErrBinding) || errors.Is(res.Err(), verify.ErrEvidence) {
		t.Fatalf("want only a binding failure: %v", res.Err())
	}
	// One byte of the quote changed: the evidence itself fails.
	q := append([]byte(nil), quote...)
	q[200] ^= 1
	parsed.Boot.Evidence = q
	b, _ = parsed.Marshal()
	res, _ = mustNew(t, p).Verify(b)
	if res.Valid || !errors.Is(res.Err(), verify.ErrEvidence) {
		t.Fatalf("tampered quote: %v", res.Err())
	}
}
