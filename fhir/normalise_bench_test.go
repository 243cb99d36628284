package fhir

import (
	"runtime"
	"testing"
	"time"

	"github.com/acds-project/acds/fhir/r4"
)

// BenchmarkNormalize measures normalisation alone, parse excluded, on the
// largest Synthea bundle in each format: the typed normalize on an
// r4.Unmarshal'd Bundle against the node-based normalizer.run on a
// parseJSON tree of the same bytes, the baseline. Both change their input,
// so every iteration parses afresh; each side is timed by hand around the
// call alone, after a GC, and its allocation measured from MemStats.
// When the node-based code is deleted, the baseline goes with it.
// typed-ms and node-ms are per call, time-ratio = typed/node (below 1 is
// faster); ns/op covers the whole loop, parsing included, and means
// little.
func BenchmarkNormalize(b *testing.B) {
	data, _ := loadSynthea(b)
	big := data[0]
	for _, d := range data {
		if len(d) > len(big) {
			big = d
		}
	}
	for _, format := range Formats() {
		b.Run(format, func(b *testing.B) {
			opts := testOpts(format)
			var typed, node time.Duration
			var typedBytes, nodeBytes uint64
			var m0, m1 runtime.MemStats
			for range b.N {
				tree, err := parseJSON(big)
				if err != nil {
					b.Fatal(err)
				}
				runtime.GC()
				runtime.ReadMemStats(&m0)
				start := time.Now()
				n := &normalizer{opts: opts, format: format}
				if _, _, err := n.run(&tree); err != nil {
					b.Fatal(err)
				}
				node += time.Since(start)
				runtime.ReadMemStats(&m1)
				nodeBytes += m1.TotalAlloc - m0.TotalAlloc

				root, err := r4.Unmarshal(big)
				if err != nil {
					b.Fatal(err)
				}
				runtime.GC()
				runtime.ReadMemStats(&m0)
				start = time.Now()
				if _, _, err := normalize(root, opts, format); err != nil {
					b.Fatal(err)
				}
				typed += time.Since(start)
				runtime.ReadMemStats(&m1)
				typedBytes += m1.TotalAlloc - m0.TotalAlloc
			}
			n := float64(b.N)
			b.ReportMetric(typed.Seconds()*1e3/n, "typed-ms")
			b.ReportMetric(node.Seconds()*1e3/n, "node-ms")
			b.ReportMetric(float64(typed)/float64(node), "time-ratio")
			b.ReportMetric(float64(typedBytes)/n, "typed-B")
			b.ReportMetric(float64(nodeBytes)/n, "node-B")
		})
	}
}
