package fhir

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/acds-project/acds/fhir/r4"
)

// largestSynthea returns the largest Synthea bundle of the corpus.
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

// BenchmarkCheck measures the acceptance check (Check: decode and
// validate, errors only) against json.Valid on the same bytes in the same
// run — the floor of issue 15 item 9, a handler that only checks the body
// is JSON — on a 20 KB Bundle shaped like the load suite's (one Patient,
// Observations) and on the largest Synthea bundle. check/valid is the
// ratio of their times.
func BenchmarkCheck(b *testing.B) {
	inputs := []struct {
		name string
		data []byte
	}{{"20KB", bundle20KB()}, {"synthea", largestSynthea(b)}}
	for _, in := range inputs {
		b.Run(in.name, func(b *testing.B) {
			b.SetBytes(int64(len(in.data)))
			var valid time.Duration
			for b.Loop() {
				start := time.Now()
				if !json.Valid(in.data) {
					b.Fatal("not JSON")
				}
				valid += time.Since(start)
				if err := Check(in.data, Options{}); err != nil {
					b.Fatal(err)
				}
			}
			check := b.Elapsed() - valid
			b.ReportMetric(float64(check.Nanoseconds())/float64(b.N), "check-ns/op")
			b.ReportMetric(float64(valid.Nanoseconds())/float64(b.N), "valid-ns/op")
			b.ReportMetric(float64(check)/float64(valid), "check/valid")
		})
	}
}

// bundle20KB is a Bundle of about 20 KB: a Patient and vital-sign
// Observations, as internal/testrig/loadtest sends.
func bundle20KB() []byte {
	var b strings.Builder
	b.WriteString(`{"resourceType":"Bundle","type":"collection","entry":[{"fullUrl":"urn:uuid:00000000-0000-4000-8000-000000000001","resource":{"resourceType":"Patient","id":"p1","name":[{"family":"Load","given":["Client1"]}],"gender":"female","birthDate":"1970-01-01"}}`)
	for i := 0; b.Len() < 20<<10; i++ {
		fmt.Fprintf(&b, `,{"fullUrl":"urn:uuid:00000000-0000-4000-9000-%012d","resource":{"resourceType":"Observation","id":"o-%d","status":"final","category":[{"coding":[{"system":"http://terminology.hl7.org/CodeSystem/observation-category","code":"vital-signs"}]}],"code":{"coding":[{"system":"http://loinc.org","code":"8867-4","display":"Heart rate"}]},"subject":{"reference":"urn:uuid:00000000-0000-4000-8000-000000000001"},"effectiveDateTime":"2024-03-%02dT10:00:00Z","valueQuantity":{"value":%d,"unit":"/min","system":"http://unitsofmeasure.org","code":"/min"}}}`,
			i, i, i%28+1, 60+i%40)
	}
	b.WriteString("]}")
	return []byte(b.String())
}
