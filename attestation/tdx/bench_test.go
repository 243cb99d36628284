package tdx

import (
	"testing"
	"time"

	tdxverify "github.com/google/go-tdx-guest/verify"
)

// BenchmarkVerify measures Verify of a real quote (no collateral) and,
// interleaved in the same loop so that load on the machine affects both
// alike, go-tdx-guest's own verify.RawTdxQuote of the same quote with the
// same roots and clock. ns/op covers both; "verify-ns/op" and
// "baseline-ns/op" split it, and "x-go-tdx-guest" is their ratio.
func BenchmarkVerify(b *testing.B) {
	quote := sprQuote(b)
	roots := IntelRoots()
	opts := Options{Roots: roots, Now: at(pinned)}
	var ours, base time.Duration
	for b.Loop() {
		t0 := time.Now()
		if _, err := Verify(quote, opts); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		if err := tdxverify.RawTdxQuote(quote, &tdxverify.Options{TrustedRoots: roots, Now: &tdxverify.TimeSet{PckCertChain: pinned}}); err != nil {
			b.Fatal(err)
		}
		ours += t1.Sub(t0)
		base += time.Since(t1)
	}
	b.ReportMetric(float64(ours.Nanoseconds())/float64(b.N), "verify-ns/op")
	b.ReportMetric(float64(base.Nanoseconds())/float64(b.N), "baseline-ns/op")
	b.ReportMetric(float64(ours)/float64(base), "x-go-tdx-guest")
}

// BenchmarkVerifyCollateral measures Verify with Intel's sample collateral
// (TCB info and QE identity signatures and matching) interleaved with Verify
// without collateral, and reports the ratio as "x-without-collateral".
func BenchmarkVerifyCollateral(b *testing.B) {
	quote := sprQuote(b)
	c := sampleCollateral(b)
	var with, without time.Duration
	for b.Loop() {
		t0 := time.Now()
		// The sample collateral's levels do not cover this platform, so
		// Verify ends at the TCB level check, after both signatures.
		if _, err := Verify(quote, Options{Now: at(pinned), Collateral: c}); err == nil {
			b.Fatal("sample collateral unexpectedly matched")
		}
		t1 := time.Now()
		if _, err := Verify(quote, Options{Now: at(pinned)}); err != nil {
			b.Fatal(err)
		}
		with += t1.Sub(t0)
		without += time.Since(t1)
	}
	b.ReportMetric(float64(with.Nanoseconds())/float64(b.N), "with-collateral-ns/op")
	b.ReportMetric(float64(with)/float64(without), "x-without-collateral")
}
