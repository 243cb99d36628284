package portal

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// BenchmarkScanPage reads a ~1 MB real Synthea Bundle as a page: scanPage
// (one validating pass and a walk, resources as slices) against decoding
// it with encoding/json into the page's fields (what the connector did
// before), in the same run.
func BenchmarkScanPage(b *testing.B) {
	body, err := os.ReadFile(filepath.Join("..", "..", "shared", "testdata", "synthea", "Reginald_Auer_d46fae79-67eb-4721-a300-238c8eb943eb.json"))
	if err != nil {
		b.Skip("shared test data absent:", err)
	}
	type decoded struct {
		ResourceType string `json:"resourceType"`
		Link         []struct {
			Relation string `json:"relation"`
			URL      string `json:"url"`
		} `json:"link"`
		Entry []struct {
			Resource json.RawMessage `json:"resource"`
			Search   *struct {
				Mode string `json:"mode"`
			} `json:"search"`
		} `json:"entry"`
	}
	var scanned, std time.Duration
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		t0 := time.Now()
		p, err := scanPage(body)
		t1 := time.Now()
		var d decoded
		derr := json.Unmarshal(body, &d)
		t2 := time.Now()
		if err != nil || derr != nil || len(p.entries) != len(d.Entry) || len(p.entries) == 0 {
			b.Fatalf("scanPage %v, encoding/json %v", err, derr)
		}
		scanned += t1.Sub(t0)
		std += t2.Sub(t1)
	}
	b.ReportMetric(float64(scanned.Microseconds())/1e3/float64(b.N), "scan-ms/op")
	b.ReportMetric(float64(std.Microseconds())/1e3/float64(b.N), "encoding-json-ms/op")
	b.ReportMetric(float64(scanned)/float64(std), "ratio")
}
