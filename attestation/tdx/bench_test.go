package tdx

import (
	"testing"
	"time"

	tdxverify "github.com/google/go-tdx-guest/verify"
)

// perOp times n calls of f (outside the benchmark timer) and returns the
// mean duration of one call: the baseline measured in the same run.
func perOp(b *testing.B, n int, f func() error) time.Duration {
	b.Helper()
	b.StopTimer()
	defer b.StartTimer()
	start := time.Now()
	for range n {
		if err := f(); err != nil {
			b.Fatal(err)
		}
	}
	return time.Since(start) / time.Duration(n)
}

// BenchmarkVerify measures Verify of a real quote (no collateral) and, in the
// same run, go-tdx-guest's own verify.RawTdxQuote of the same quote with the
// same roots and clock; it reports ours/theirs as "x-go-tdx-guest".
func BenchmarkVerify(b *testing.B) {
	quote := sprQuote(b)
	roots := IntelRoots()
	opts := Options{Roots: roots, Now: at(pinned)}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Verify(quote, opts); err != nil {
			b.Fatal(err)
		}
	}
	ours := b.Elapsed() / time.Duration(b.N)
	base := perOp(b, b.N, func() error {
		return tdxverify.RawTdxQuote(quote, &tdxverify.Options{TrustedRoots: roots, Now: &tdxverify.TimeSet{PckCertChain: pinned}})
	})
	b.ReportMetric(float64(base.Nanoseconds()), "baseline-ns/op")
	b.ReportMetric(float64(ours)/float64(base), "x-go-tdx-guest")
}

// BenchmarkVerifyCollateral adds the TCB info and QE identity checks and
// reports the cost relative to Verify without collateral, measured in the
// same run.
func BenchmarkVerifyCollateral(b *testing.B) {
	quote := sprQuote(b)
	c := sampleCollateral(b)
	for b.Loop() {
		// The sample collateral's levels do not cover this platform, so
		// Verify ends at the TCB level check, after both signatures.
		if _, err := Verify(quote, Options{Now: at(pinned), Collateral: c}); err == nil {
			b.Fatal("sample collateral unexpectedly matched")
		}
	}
	ours := b.Elapsed() / time.Duration(b.N)
	base := perOp(b, b.N, func() error {
		_, err := Verify(quote, Options{Now: at(pinned)})
		return err
	})
	b.ReportMetric(float64(ours)/float64(base), "x-without-collateral")
}
