package fhir_test

import (
	"os"
	"testing"
	"time"

	"github.com/acds-project/acds"
	"github.com/acds-project/acds/fhir"
	"github.com/acds-project/acds/internal/testrig/corpus"
)

// BenchmarkIPS measures, in one run on the largest Synthea record of the
// corpus (0.9 MB), Process to fhir_r4 (the baseline) and to fhir_r4_ips,
// which processes the record and then builds and validates the summary.
// "ratio" is ips/fhir_r4; "ips-ms-per-MB" is per MB of input.
func BenchmarkIPS(b *testing.B) {
	in, err := os.ReadFile(corpus.Largest(b, corpus.Synthea))
	if err != nil {
		b.Fatal(err)
	}
	opts := fhir.Options{Now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	var base, ips time.Duration
	b.SetBytes(int64(len(in)))
	b.ResetTimer()
	for range b.N {
		opts.Format = acds.OutputFHIRR4
		t0 := time.Now()
		if _, err := fhir.Process(in, opts); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		opts.Format = acds.OutputFHIRR4IPS
		if _, err := fhir.Process(in, opts); err != nil {
			b.Fatal(err)
		}
		t2 := time.Now()
		base += t1.Sub(t0)
		ips += t2.Sub(t1)
	}
	mb := float64(len(in)) / (1 << 20)
	b.ReportMetric(float64(base.Milliseconds())/float64(b.N)/mb, "fhir_r4-ms-per-MB")
	b.ReportMetric(float64(ips.Milliseconds())/float64(b.N)/mb, "ips-ms-per-MB")
	b.ReportMetric(float64(ips)/float64(base), "ratio")
}
