package fhir

import (
	"testing"
	"time"

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

// BenchmarkConstraintPass measures the FHIRPath constraint pass alone on
// the largest Synthea bundle: in one run, validation of the decoded model
// without the pass (timer stopped, timed by hand) and with it (timed);
// constraint-MB/s is the bundle's size over the difference, and
// constraint-share the difference over validation with the pass.
func BenchmarkConstraintPass(b *testing.B) {
	big := largestSynthea(b)
	r, errs := (r4.Options{MaxBytes: DefaultMaxBytes}).Decode(big)
	if r == nil || len(errs) > 0 {
		b.Fatal(errs)
	}
	loadRules()
	b.SetBytes(int64(len(big)))
	b.ReportAllocs()
	var without time.Duration
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		checkConstraints = false
		start := time.Now()
		(&validator{}).validate(r)
		without += time.Since(start)
		checkConstraints = true
		b.StartTimer()
		v := &validator{}
		v.validate(r)
		if v.errors > 0 {
			b.Fatal(v.issues)
		}
	}
	b.StopTimer()
	pass := b.Elapsed() - without
	if pass > 0 {
		b.ReportMetric(float64(len(big))*float64(b.N)/pass.Seconds()/1e6, "constraint-MB/s")
	}
	b.ReportMetric(float64(pass)/float64(b.Elapsed()), "constraint-share")
}
