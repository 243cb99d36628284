package r4_test

import (
	"testing"
	"time"

	"github.com/acds-project/acds/fhir/r4"
)

// BenchmarkCanonical compares the canonical encoder with Marshal on the
// largest Synthea bundle, decoded once. MB/s is over the bytes written (the
// two outputs have the same length); the output buffer is reused, as a
// caller hashing many bundles would.
func BenchmarkCanonical(b *testing.B) {
	r, size := largestSyntheaDecoded(b)
	for _, c := range []struct {
		name string
		f    func([]byte, r4.Resource) ([]byte, error)
	}{
		{"Marshal", r4.Append},
		{"Canonical", r4.AppendCanonical},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(size))
			b.ReportAllocs()
			buf := make([]byte, 0, size+8192) // room for reserve's 4 KiB margin
			var err error
			for b.Loop() {
				if buf, err = c.f(buf[:0], r); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkCanonicalVsMarshal runs Marshal and the canonical encoder in
// turn within every iteration, timing each, so that load on a shared machine
// affects both alike. It reports both throughputs and canonical/marshal, the
// time ratio.
func BenchmarkCanonicalVsMarshal(b *testing.B) {
	r, size := largestSyntheaDecoded(b)
	buf := make([]byte, 0, size+8192)
	var tm, tc time.Duration
	var err error
	for b.Loop() {
		start := time.Now()
		if buf, err = r4.Append(buf[:0], r); err != nil {
			b.Fatal(err)
		}
		mid := time.Now()
		if buf, err = r4.AppendCanonical(buf[:0], r); err != nil {
			b.Fatal(err)
		}
		tc += time.Since(mid)
		tm += mid.Sub(start)
	}
	n := float64(size) * float64(b.N) / 1e6
	b.ReportMetric(n/tm.Seconds(), "marshal-MB/s")
	b.ReportMetric(n/tc.Seconds(), "canonical-MB/s")
	b.ReportMetric(float64(tc)/float64(tm), "canonical/marshal")
}

func largestSyntheaDecoded(b *testing.B) (r4.Resource, int) {
	r, err := r4.Unmarshal(largestSynthea(b))
	if err != nil {
		b.Fatal(err)
	}
	out, err := r4.Marshal(r)
	if err != nil {
		b.Fatal(err)
	}
	return r, len(out)
}
