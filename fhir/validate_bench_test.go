package fhir

import (
	"testing"

	"github.com/acds-project/acds/fhir/r4"
)

// largestSynthea returns the largest shared Synthea bundle.
func largestSynthea(b *testing.B) []byte {
	data, _ := loadSynthea(b)
	big := data[0]
	for _, d := range data {
		if len(d) > len(big) {
			big = d
		}
	}
	return big
}

// BenchmarkValidate measures the pipeline's first stage on the largest
// Synthea bundle: decoding into the typed R4 model (r4.Options.Decode) and
// validating the model. BenchmarkDecode is the decoding alone.
func BenchmarkValidate(b *testing.B) {
	big := largestSynthea(b)
	b.SetBytes(int64(len(big)))
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if o, r, _ := decodeAndValidate(big, DefaultMaxBytes); o.HasErrors() || r == nil {
			b.Fatal(o.Issues)
		}
	}
}

// BenchmarkDecode: r4.Options.Decode alone on the same bundle, the part of
// BenchmarkValidate that any typed pipeline pays.
func BenchmarkDecode(b *testing.B) {
	big := largestSynthea(b)
	b.SetBytes(int64(len(big)))
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if r, errs := (r4.Options{MaxBytes: DefaultMaxBytes}).Decode(big); r == nil || len(errs) > 0 {
			b.Fatal(errs)
		}
	}
}
