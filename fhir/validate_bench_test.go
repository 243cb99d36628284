package fhir

import (
	"runtime"
	"testing"
	"time"
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

// BenchmarkValidateTyped: Validate as it now runs, decoding into the typed
// R4 model and validating that, on the largest Synthea bundle. Compare
// BenchmarkValidateRawTree.
func BenchmarkValidateTyped(b *testing.B) {
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

// BenchmarkValidateRawTree: the raw JSON tree validator (validateBytes) on
// the same input. TEMPORARY: delete with the raw-tree validator.
func BenchmarkValidateRawTree(b *testing.B) {
	big := largestSynthea(b)
	b.SetBytes(int64(len(big)))
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if o, n := validateBytes(big, DefaultMaxBytes); o.HasErrors() || n == nil {
			b.Fatal(o.Issues)
		}
	}
}

// BenchmarkValidateTypedVsRawTree runs both validators on the largest
// Synthea bundle in alternation, each from a clean heap, so a busy machine
// slows both alike: typed-ms and raw-ms are the mean times per validation,
// ratio is typed/raw (aim: <= 1). TEMPORARY: delete with the raw-tree
// validator.
func BenchmarkValidateTypedVsRawTree(b *testing.B) {
	big := largestSynthea(b)
	var typed, raw time.Duration
	b.ResetTimer()
	for range b.N {
		runtime.GC()
		start := time.Now()
		if o, r, _ := decodeAndValidate(big, DefaultMaxBytes); o.HasErrors() || r == nil {
			b.Fatal(o.Issues)
		}
		typed += time.Since(start)
		runtime.GC()
		start = time.Now()
		if o, n := validateBytes(big, DefaultMaxBytes); o.HasErrors() || n == nil {
			b.Fatal(o.Issues)
		}
		raw += time.Since(start)
	}
	b.StopTimer()
	b.ReportMetric(float64(typed.Microseconds())/1e3/float64(b.N), "typed-ms")
	b.ReportMetric(float64(raw.Microseconds())/1e3/float64(b.N), "raw-ms")
	b.ReportMetric(float64(typed)/float64(raw), "ratio")
	b.ReportMetric(0, "ns/op")
}
