package fhir

import (
	"encoding/json"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/acds-project/acds"
	"github.com/acds-project/acds/internal/testrig/corpus"
)

func loadSynthea(b *testing.B) ([][]byte, int64) {
	files := corpus.JSON(b, corpus.Synthea)
	var data [][]byte
	var total int64
	for _, f := range files {
		d, err := os.ReadFile(f)
		if err != nil {
			b.Fatal(err)
		}
		data = append(data, d)
		total += int64(len(d))
	}
	if len(data) == 0 {
		b.Skip("no Synthea bundles")
	}
	return data, total
}

// BenchmarkPipeline measures, in one run, (a) encoding/json.Unmarshal into
// any over every Synthea bundle, the baseline, and (b) the whole pipeline
// on the same bytes: parse, validate, normalise, canonical encode and
// SHA-256. The two alternate file by file (the baseline with the benchmark
// timer stopped, timed by hand), so load on a shared machine affects both
// alike. ns/op and MB/s are the pipeline's; unmarshal-MB/s is
// the baseline's; time-ratio = b/a (goal ≤ 1.0, acceptable ≤ 1.5).
func BenchmarkPipeline(b *testing.B) {
	data, total := loadSynthea(b)
	opts := testOpts(acds.OutputFHIRR4)
	b.SetBytes(total)
	b.ReportAllocs()
	var baseline time.Duration
	b.ResetTimer()
	for range b.N {
		for _, d := range data {
			b.StopTimer()
			runtime.GC() // each side starts from a clean heap and pays for its own garbage
			start := time.Now()
			var v any
			if err := json.Unmarshal(d, &v); err != nil {
				b.Fatal(err)
			}
			baseline += time.Since(start)
			runtime.GC()
			b.StartTimer()
			if _, err := Process(d, opts); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(total)*float64(b.N)/baseline.Seconds()/1e6, "unmarshal-MB/s")
	b.ReportMetric(float64(b.Elapsed())/float64(baseline), "time-ratio")
}

// BenchmarkUnmarshalAny is the baseline alone, for comparison.
func BenchmarkUnmarshalAny(b *testing.B) {
	data, total := loadSynthea(b)
	b.SetBytes(total)
	b.ReportAllocs()
	for range b.N {
		for _, d := range data {
			var v any
			if err := json.Unmarshal(d, &v); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// BenchmarkLargestBundle processes the largest Synthea bundle (about 3 MB)
// and reports bytes allocated per input byte: an upper bound on the peak
// heap the pipeline needs, relative to the input (goal ≤ 4).
func BenchmarkLargestBundle(b *testing.B) {
	data, _ := loadSynthea(b)
	big := data[0]
	for _, d := range data {
		if len(d) > len(big) {
			big = d
		}
	}
	opts := testOpts(acds.OutputFHIRR4)
	b.SetBytes(int64(len(big)))
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if _, err := Process(big, opts); err != nil {
			b.Fatal(err)
		}
	}
}
