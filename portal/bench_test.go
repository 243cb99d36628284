package portal

import (
	"bytes"
	"encoding/json"
	"os"
	"testing"
	"time"

	"github.com/acds-project/acds/internal/testrig/corpus"
)

// BenchmarkScanPage reads a real Synthea Bundle (0.9 MB) as a page: scanPage
// (one validating pass and a walk, resources as slices) against decoding
// it with encoding/json into the page's fields (what the connector did
// before), in the same run.
func BenchmarkScanPage(b *testing.B) {
	body, err := os.ReadFile(corpus.Largest(b, corpus.Synthea))
	if err != nil {
		b.Fatal(err)
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
	var scanned, std, streamed time.Duration
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		t0 := time.Now()
		p, err := scanPage(body)
		t1 := time.Now()
		var d decoded
		derr := json.Unmarshal(body, &d)
		t2 := time.Now()
		n, serr := streamPage(body)
		t3 := time.Now()
		if err != nil || derr != nil || serr != nil || len(p.entries) != len(d.Entry) || n != len(d.Entry) || len(p.entries) == 0 {
			b.Fatalf("scanPage %v, encoding/json %v, json.Decoder %v", err, derr, serr)
		}
		scanned += t1.Sub(t0)
		std += t2.Sub(t1)
		streamed += t3.Sub(t2)
	}
	b.ReportMetric(float64(scanned.Microseconds())/1e3/float64(b.N), "scan-ms/op")
	b.ReportMetric(float64(std.Microseconds())/1e3/float64(b.N), "encoding-json-ms/op")
	b.ReportMetric(float64(streamed.Microseconds())/1e3/float64(b.N), "json-decoder-ms/op")
	b.ReportMetric(float64(scanned)/float64(std), "ratio")
}

// streamPage is what scanPage would be with encoding/json's streaming
// json.Decoder: tokens down to the entry array, then each entry decoded
// with its resource as a json.RawMessage (a copy) and the resource's
// type and id read from it. It returns the number of entries. It is
// here to measure the library against scanPage in the same run (the
// connector keeps scanPage: see the package notes on scan.go).
func streamPage(body []byte) (int, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return 0, errScan
	}
	n := 0
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			return 0, err
		}
		switch k {
		case "entry":
			if t, err := dec.Token(); err != nil || t != json.Delim('[') {
				return 0, errScan
			}
			for dec.More() {
				var e struct {
					Resource json.RawMessage `json:"resource"`
					Search   *struct {
						Mode string `json:"mode"`
					} `json:"search"`
				}
				if err := dec.Decode(&e); err != nil {
					return 0, err
				}
				var h struct {
					ResourceType string `json:"resourceType"`
					ID           string `json:"id"`
				}
				if err := json.Unmarshal(e.Resource, &h); err != nil {
					return 0, err
				}
				n++
			}
			if _, err := dec.Token(); err != nil {
				return 0, err
			}
		default:
			var v json.RawMessage
			if err := dec.Decode(&v); err != nil {
				return 0, err
			}
		}
	}
	return n, nil
}
