package verify_test

import (
	"bytes"
	"os"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/acds-project/acds"
	"github.com/acds-project/acds/attestation/disclosure"
	"github.com/acds-project/acds/fhir"
	"github.com/acds-project/acds/internal/testrig/corpus"
)

// BenchmarkVerifyDisclosure measures, in one run, verifying a disclosure
// of three entries of a record (the largest Synthea record of the corpus,
// processed by package fhir) against verifying the full bundle with
// that output (VerifyOutput: the bundle and the output's digest). Both
// verifiers have the enclave's evidence in their cache, as for any output
// after the first. "ratio" is disclosure/full (goal ≤ 1.0), the median
// over the iterations of that iteration's ratio; "ratio-total" the ratio
// of the totals.
func BenchmarkVerifyDisclosure(b *testing.B) {
	f := getFixture(b)
	in, err := os.ReadFile(corpus.Largest(b, corpus.Synthea))
	if err != nil {
		b.Fatal(err)
	}
	out, err := fhir.Process(in, fhir.Options{Format: acds.OutputFHIRR4, Now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)})
	if err != nil {
		b.Fatal(err)
	}
	output := out.JSON
	key := bytes.Repeat([]byte{4}, disclosure.KeySize)
	bundle := f.committed(b, output, key)
	entries, _ := disclosure.Entries(output)
	d, err := disclosure.New(bundle, key, output, []int{1, len(entries) / 2, len(entries) - 2})
	if err != nil {
		b.Fatal(err)
	}
	dj, _ := d.Marshal()
	v := mustNew(b, f.policy())
	if r, err := v.VerifyDisclosure(dj); err != nil || !r.Valid {
		b.Fatalf("disclosure does not verify: %v %v", err, r.Reasons())
	}
	if r, err := v.VerifyOutput(bundle, output); err != nil || !r.Valid {
		b.Fatalf("output does not verify: %v", err)
	}
	// Both run in every iteration, in the CPU time of this goroutine's
	// thread when the platform has it (see threadCPU).
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	_, haveCPU := threadCPU()
	clock := func() time.Duration {
		if haveCPU {
			c, _ := threadCPU()
			return c
		}
		return time.Duration(time.Now().UnixNano())
	}
	var fullT, discT time.Duration
	var ratios []float64
	b.ResetTimer()
	for range b.N {
		t0 := clock()
		r1, _ := v.VerifyOutput(bundle, output)
		t1 := clock()
		r2, _ := v.VerifyDisclosure(dj)
		t2 := clock()
		if !r1.Valid || !r2.Valid {
			b.Fatal("not valid")
		}
		fullT += t1 - t0
		discT += t2 - t1
		if t1 > t0 {
			ratios = append(ratios, float64(t2-t1)/float64(t1-t0))
		}
	}
	b.StopTimer()
	unit := "-cpu-ns"
	if !haveCPU {
		unit = "-wall-ns"
	}
	slices.Sort(ratios)
	median := 0.0
	if len(ratios) > 0 {
		median = ratios[len(ratios)/2]
	}
	b.ReportMetric(float64(len(output)), "output-bytes")
	b.ReportMetric(float64(len(dj)), "disclosure-bytes")
	b.ReportMetric(float64(fullT.Nanoseconds())/float64(b.N), "full"+unit)
	b.ReportMetric(float64(discT.Nanoseconds())/float64(b.N), "disclosure"+unit)
	b.ReportMetric(median, "ratio")
	b.ReportMetric(float64(discT)/float64(fullT), "ratio-total")
}
