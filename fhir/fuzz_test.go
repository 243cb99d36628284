package fhir

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/acds-project/acds"
	"github.com/acds-project/acds/internal/testrig/corpus"
)

// fuzzSeedStrings are the hand-written fuzz seeds.
func fuzzSeedStrings() []string {
	return []string{
		`{"resourceType":"Patient","id":"p","name":[{"given":["a",null],"_given":[null,{"extension":[{"url":"u","valueString":"x"}]}]}]}`,
		`{"resourceType":"Bundle","type":"transaction","entry":[{"fullUrl":"urn:uuid:0b0d2e4a-8a5e-4d55-9d3a-8c1c2b3a4f50","resource":{"resourceType":"Patient"},"request":{"method":"POST","url":"Patient"}},{"fullUrl":"urn:uuid:6c1a7b2e-3f4d-4e5f-8a9b-0c1d2e3f4a5b","resource":{"resourceType":"Observation","status":"final","code":{"text":"x"},"subject":{"reference":"urn:uuid:0b0d2e4a-8a5e-4d55-9d3a-8c1c2b3a4f50"}},"request":{"method":"POST","url":"Observation"}}]}`,
		`{"resourceType":"Observation","status":"final","code":{"text":"x"},"valueQuantity":{"value":1.50e3},"effectiveDateTime":"2020-02-29T23:59:60+14:00"}`,
		`{"resourceType":"Patient","contained":[{"resourceType":"Organization","id":"o"}],"managingOrganization":{"reference":"#o"}}`,
		`{"resourceType":"Patient","birthDate":"1900","address":[{"postalCode":"03601"}],"text":{"status":"generated","div":"<div xmlns=\"http://www.w3.org/1999/xhtml\">x</div>"}}`,
		`["not", "a", "resource"]`, `{"a":"\ud800"}`, `{"resourceType":"Patient",,}`, "", "{", `{"resourceType":"Bundle","type":"document","entry":[]}`,
	}
}

func addFuzzSeeds(f *testing.F) {
	for _, s := range fuzzSeedStrings() {
		f.Add([]byte(s))
	}
	// The reference validator's cases are small and varied: good seeds.
	files := corpus.JSON(f, corpus.ValidatorCases)
	for _, p := range files {
		if b, err := os.ReadFile(p); err == nil && len(b) < 16<<10 && filepath.Base(p) != "index.json" {
			f.Add(b)
		}
	}
}

// FuzzValidate: Validate never panics, and every finding has a severity.
func FuzzValidate(f *testing.F) {
	addFuzzSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		o := Validate(data)
		for _, is := range o.Issues {
			if is.Severity == "" || is.Code == "" {
				t.Fatalf("issue without severity or code: %+v", is)
			}
		}
	})
}

// FuzzProcess: Process never panics; Check accepts exactly what Process
// accepts; when Process accepts input, its output is valid FHIR R4 and
// processing the output again changes nothing.
func FuzzProcess(f *testing.F) {
	addFuzzSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		checkErr := Check(data, Options{})
		for _, format := range acds.OutputFormats() {
			opts := testOpts(format)
			out, err := Process(data, opts)
			if (err == nil) != (checkErr == nil) {
				t.Fatalf("Check says %v but Process says %v", checkErr, err)
			}
			if err != nil {
				continue
			}
			if o := Validate(out.JSON); o.HasErrors() {
				t.Fatalf("%s output does not validate: %v\ninput: %s\noutput: %s", format, o.Issues, data, out.JSON)
			}
			if format != acds.OutputFHIRR4 {
				continue
			}
			again, err := Process(out.JSON, opts)
			if err != nil {
				t.Fatalf("re-processing failed: %v\noutput: %s", err, out.JSON)
			}
			if !bytes.Equal(again.JSON, out.JSON) {
				t.Fatalf("not idempotent:\n%s\n%s", out.JSON, again.JSON)
			}
		}
	})
}
