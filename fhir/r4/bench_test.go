package r4_test

import (
	"encoding/json"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/acds-project/acds/fhir/r4"
	"github.com/acds-project/acds/internal/testrig/corpus"
)

func syntheaBundles(b *testing.B) [][]byte {
	files := corpus.JSON(b, corpus.Synthea)
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
// (a) encoding/json.Unmarshal into any, the baseline, and (b) r4.Unmarshal
// followed by r4.Marshal. The two alternate within every iteration (the
// baseline timed by hand with the benchmark timer stopped) so that load on a
// shared machine affects both alike. ns/op and MB/s are (b)'s;
// json-any-MB/s is (a)'s; time-ratio is b/a (goal: at most 1).
func BenchmarkSynthea(b *testing.B) {
	bundles := syntheaBundles(b)
	total := 0
	for _, d := range bundles {
		total += len(d)
	}
	b.SetBytes(int64(total))
	b.ReportAllocs()
	var baseline time.Duration
	var buf []byte
	for b.Loop() {
		b.StopTimer()
		start := time.Now()
		for _, d := range bundles {
			var v any
			if err := json.Unmarshal(d, &v); err != nil {
				b.Fatal(err)
			}
		}
		baseline += time.Since(start)
		b.StartTimer()
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
	b.ReportMetric(float64(total)*float64(b.N)/baseline.Seconds()/1e6, "json-any-MB/s")
	b.ReportMetric(float64(b.Elapsed())/float64(baseline), "time-ratio")
}

// BenchmarkUnmarshal is r4.Unmarshal alone over the Synthea bundles.
func BenchmarkUnmarshal(b *testing.B) {
	bundles := syntheaBundles(b)
	total := 0
	for _, d := range bundles {
		total += len(d)
	}
	b.SetBytes(int64(total))
	b.ReportAllocs()
	for b.Loop() {
		for _, d := range bundles {
			if _, err := r4.Unmarshal(d); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// BenchmarkPeakHeap decodes and encodes the largest Synthea bundle (about
// 3 MB) and reports, relative to its size: the bytes allocated by Unmarshal
// plus Marshal (alloc/input, an upper bound on the peak heap they need, goal
// at most 4), by Unmarshal alone (decode-alloc/input), and the heap the
// decoded model keeps alive (live/input).
func BenchmarkPeakHeap(b *testing.B) {
	largest := largestSynthea(b)
	var u heapUse
	for b.Loop() {
		u = measureHeap(b, largest)
	}
	b.ReportMetric(u.total, "alloc/input")
	b.ReportMetric(u.decode, "decode-alloc/input")
	b.ReportMetric(u.live, "live/input")
	b.ReportMetric(float64(len(largest)), "input-bytes")
}

// TestPeakHeapBound checks the memory goal: decoding and re-encoding the
// largest Synthea bundle allocates at most 4 times its size in total.
func TestPeakHeapBound(t *testing.T) {
	largest := largestSynthea(t)
	u := measureHeap(t, largest)
	t.Logf("input %d bytes: allocated %.2fx (decode %.2fx), live model %.2fx", len(largest), u.total, u.decode, u.live)
	if u.total > 4 {
		t.Fatalf("decode+encode allocated %.2f times the input, want at most 4", u.total)
	}
}

func largestSynthea(tb testing.TB) []byte {
	files := corpus.JSON(tb, corpus.Synthea)
	var largest []byte
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			tb.Fatal(err)
		}
		if len(data) > len(largest) {
			largest = data
		}
	}
	return largest
}

type heapUse struct{ total, decode, live float64 }

// measureHeap reports bytes allocated (runtime.MemStats.TotalAlloc, which
// counts every allocation whether or not it has been collected since) by
// Unmarshal and by Unmarshal+Marshal, and the live heap the decoded model
// holds after a collection, each divided by len(data).
func measureHeap(tb testing.TB, data []byte) heapUse {
	runtime.GC()
	var m0, m1, m2, m3 runtime.MemStats
	runtime.ReadMemStats(&m0)
	r, err := r4.Unmarshal(data)
	if err != nil {
		tb.Fatal(err)
	}
	runtime.ReadMemStats(&m1)
	runtime.GC()
	runtime.ReadMemStats(&m3)
	out, err := r4.Marshal(r)
	if err != nil {
		tb.Fatal(err)
	}
	runtime.ReadMemStats(&m2)
	runtime.KeepAlive(out)
	runtime.KeepAlive(r)
	n := float64(len(data))
	return heapUse{
		total:  float64(m2.TotalAlloc-m0.TotalAlloc) / n,
		decode: float64(m1.TotalAlloc-m0.TotalAlloc) / n,
		live:   (float64(m3.HeapAlloc) - float64(m0.HeapAlloc)) / n,
	}
}
