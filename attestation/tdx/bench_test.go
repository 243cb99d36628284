package tdx

import (
	"testing"

	tdxverify "github.com/google/go-tdx-guest/verify"
)

// BenchmarkVerify measures Verify of a real quote (no collateral) and, in the
// same run, go-tdx-guest's own verify.RawTdxQuote on the same quote with the
// same roots and clock, reporting ours/theirs as "x-go-tdx-guest".
func BenchmarkVerify(b *testing.B) {
	quote := sprQuote(b)
	roots := IntelRoots()
	base := testing.Benchmark(func(b *testing.B) {
		for b.Loop() {
			opts := &tdxverify.Options{TrustedRoots: roots, Now: &tdxverify.TimeSet{PckCertChain: pinned}}
			if err := tdxverify.RawTdxQuote(quote, opts); err != nil {
				b.Fatal(err)
			}
		}
	})
	opts := Options{Roots: roots, Now: at(pinned)}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Verify(quote, opts); err != nil {
			b.Fatal(err)
		}
	}
	ours := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
	b.ReportMetric(float64(base.NsPerOp()), "baseline-ns/op")
	b.ReportMetric(ours/float64(base.NsPerOp()), "x-go-tdx-guest")
}

// BenchmarkVerifyCollateral adds the TCB info and QE identity checks.
func BenchmarkVerifyCollateral(b *testing.B) {
	quote := sprQuote(b)
	c := sampleCollateral(b)
	base := testing.Benchmark(func(b *testing.B) {
		for b.Loop() {
			if _, err := Verify(quote, Options{Now: at(pinned)}); err != nil {
				b.Fatal(err)
			}
		}
	})
	for b.Loop() {
		// The sample collateral's levels do not cover this platform, so
		// Verify ends at the TCB level check after both signatures.
		if _, err := Verify(quote, Options{Now: at(pinned), Collateral: c}); err == nil {
			b.Fatal("sample collateral unexpectedly matched")
		}
	}
	ours := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
	b.ReportMetric(ours/float64(base.NsPerOp()), "x-without-collateral")
}
