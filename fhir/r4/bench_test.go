package r4_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/acds-project/acds/fhir/r4"
)

func syntheaBundles(b *testing.B) [][]byte {
	files := jsonFiles(b, filepath.Join(repoRoot(b), "..", "shared", "testdata", "synthea"))
	var out [][]byte
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			b.Fatal(err)
		}
		out = append(out, data)
	}
	return out
}

// BenchmarkSynthea measures, in one run over the same Synthea bundles,
// (a) encoding/json.Unmarshal into any (the baseline) and (b) r4.Unmarshal
// followed by r4.Marshal, and reports both throughputs and their ratio
// (b's time per byte over a's: below 1 means the typed round trip is faster
// than the generic decode alone).
func BenchmarkSynthea(b *testing.B) {
	bundles := syntheaBundles(b)
	total := 0
	for _, d := range bundles {
		total += len(d)
	}
	var baseNs, typedNs float64
	b.Run("encoding-json-any", func(b *testing.B) {
		b.SetBytes(int64(total))
		b.ReportAllocs()
		for b.Loop() {
			for _, d := range bundles {
				var v any
				if err := json.Unmarshal(d, &v); err != nil {
					b.Fatal(err)
				}
			}
		}
		baseNs = float64(b.Elapsed().Nanoseconds()) / float64(b.N)
	})
	b.Run("r4-unmarshal-marshal", func(b *testing.B) {
		b.SetBytes(int64(total))
		b.ReportAllocs()
		var buf []byte
		for b.Loop() {
			for _, d := range bundles {
				r, err := r4.Unmarshal(d)
				if err != nil {
					b.Fatal(err)
				}
				if buf, err = r4.Append(buf[:0], r); err != nil {
					b.Fatal(err)
				}
			}
		}
		typedNs = float64(b.Elapsed().Nanoseconds()) / float64(b.N)
		if baseNs > 0 {
			b.ReportMetric(typedNs/baseNs, "ratio-vs-json-any")
		}
	})
}

// BenchmarkPeakHeap decodes and encodes the largest Synthea bundle and
// reports the heap growth over the live heap before decoding, as a multiple
// of the input size (goal: at most 4).
func BenchmarkPeakHeap(b *testing.B) {
	bundles := syntheaBundles(b)
	largest := bundles[0]
	for _, d := range bundles {
		if len(d) > len(largest) {
			largest = d
		}
	}
	var worst float64
	for b.Loop() {
		x := peakHeapRatio(b, largest)
		worst = max(worst, x)
	}
	b.ReportMetric(worst, "peak-heap/input")
	b.ReportMetric(float64(len(largest)), "input-bytes")
}

// peakHeapRatio returns (heap in use after decode + encode, minus heap in
// use before) / len(data), with garbage collection forced off so that every
// byte allocated on the way is counted: an upper bound on the peak.
func peakHeapRatio(tb testing.TB, data []byte) float64 {
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	r, err := r4.Unmarshal(data)
	if err != nil {
		tb.Fatal(err)
	}
	out, err := r4.Marshal(r)
	if err != nil {
		tb.Fatal(err)
	}
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(r)
	runtime.KeepAlive(out)
	return float64(after.TotalAlloc-before.TotalAlloc) / float64(len(data))
}
