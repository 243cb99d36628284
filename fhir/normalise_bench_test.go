package fhir

import (
	"testing"

	"github.com/acds-project/acds"
	"github.com/acds-project/acds/fhir/r4"
)

// BenchmarkNormalize measures the pipeline's middle stage alone on the
// largest Synthea bundle, in each format: normalize (and de-identification)
// of an r4-decoded Bundle, decoding excluded. normalize changes its input,
// so every iteration decodes afresh with the timer stopped.
func BenchmarkNormalize(b *testing.B) {
	big := largestSynthea(b)
	for _, format := range acds.OutputFormats() {
		b.Run(format, func(b *testing.B) {
			opts := testOpts(format)
			b.SetBytes(int64(len(big)))
			b.ReportAllocs()
			for range b.N {
				b.StopTimer()
				root, err := r4.Unmarshal(big)
				if err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				if _, _, err := normalize(root, opts, format); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkCanonical measures the last stage: the canonical encoding of
// the normalised output Bundle of the largest Synthea bundle.
func BenchmarkCanonical(b *testing.B) {
	big := largestSynthea(b)
	root, err := r4.Unmarshal(big)
	if err != nil {
		b.Fatal(err)
	}
	out, _, err := normalize(root, testOpts(acds.OutputFHIRR4), acds.OutputFHIRR4)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(big)))
	b.ReportAllocs()
	b.ResetTimer()
	var buf []byte
	for range b.N {
		if buf, err = r4.AppendCanonical(buf[:0], out); err != nil {
			b.Fatal(err)
		}
	}
}
