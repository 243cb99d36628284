package fhir

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/acds-project/acds"
	"github.com/acds-project/acds/internal/testrig/corpus"
)

// TestSummarizeLiteral: a small literal input, processed, reads back with
// its counts and the source the options named; a raw submission reads
// back as "raw".
func TestSummarizeLiteral(t *testing.T) {
	in := []byte(`{"resourceType":"Bundle","type":"collection","entry":[
		{"fullUrl":"urn:uuid:11111111-1111-4111-8111-111111111111","resource":{"resourceType":"Patient","id":"p1"}},
		{"fullUrl":"urn:uuid:22222222-2222-4222-8222-222222222222","resource":{"resourceType":"Observation","id":"o1","status":"final","code":{"text":"x"},"subject":{"reference":"urn:uuid:11111111-1111-4111-8111-111111111111"}}},
		{"fullUrl":"urn:uuid:33333333-3333-4333-8333-333333333333","resource":{"resourceType":"Observation","id":"o2","status":"final","code":{"text":"y"},"subject":{"reference":"urn:uuid:11111111-1111-4111-8111-111111111111"}}}]}`)
	out, err := Process(in, testOpts(acds.OutputFHIRR4))
	if err != nil {
		t.Fatal(err)
	}
	s, err := Summarize(out.JSON)
	if err != nil {
		t.Fatal(err)
	}
	if s.Source != "portal.example.org" {
		t.Errorf("source %q", s.Source)
	}
	want := map[string]int{"Patient": 1, "Observation": 2, "Provenance": 1}
	if len(s.Counts) != len(want) || s.Total() != 4 || s.Total() != out.Resources {
		t.Errorf("counts %v, total %d (output has %d)", s.Counts, s.Total(), out.Resources)
	}
	for k, v := range want {
		if s.Counts[k] != v {
			t.Errorf("%s: %d, want %d", k, s.Counts[k], v)
		}
	}
	if got := s.String(); got != "2 Observation, 1 Patient, 1 Provenance" {
		t.Errorf("String() = %q", got)
	}

	o := testOpts(acds.OutputFHIRR4)
	o.Source = ""
	out, err = Process(in, o)
	if err != nil {
		t.Fatal(err)
	}
	if s, err := Summarize(out.JSON); err != nil || s.Source != "raw" {
		t.Errorf("raw submission: source %q, %v", s.Source, err)
	}
}

// TestSummarizeSynthea: a Synthea bundle, processed (plain and
// de-identified), reads back with as many resources as Process reports
// and the source it was given.
func TestSummarizeSynthea(t *testing.T) {
	in := corpus.Read(t, corpus.MaryLind)
	for _, format := range []string{acds.OutputFHIRR4, acds.OutputFHIRR4Deidentified} {
		out, err := Process(in, testOpts(format))
		if err != nil {
			t.Fatal(err)
		}
		s, err := Summarize(out.JSON)
		if err != nil {
			t.Fatalf("%s: %v", format, err)
		}
		if s.Source != "portal.example.org" || s.Total() != out.Resources || s.Counts["Provenance"] != 1 || s.Counts["Patient"] != 1 {
			t.Errorf("%s: source %q, total %d (output has %d), counts %v", format, s.Source, s.Total(), out.Resources, s.Counts)
		}
		// The counts agree with the entries, type by type.
		var b struct {
			Entry []struct {
				Resource struct {
					ResourceType string `json:"resourceType"`
				} `json:"resource"`
			} `json:"entry"`
		}
		if err := json.Unmarshal(out.JSON, &b); err != nil {
			t.Fatal(err)
		}
		counts := map[string]int{}
		for _, e := range b.Entry {
			counts[e.Resource.ResourceType]++
		}
		for k, v := range counts {
			if s.Counts[k] != v {
				t.Errorf("%s: %s counted %d, the output has %d", format, k, s.Counts[k], v)
			}
		}
	}
}

// TestSummarizeNeedsProvenance: an output whose Provenance does not name
// its source, or is not ACDS's, is refused, as is what is not a Bundle.
func TestSummarizeNeedsProvenance(t *testing.T) {
	for name, in := range map[string]string{
		"no Provenance": `{"resourceType":"Bundle","entry":[{"resource":{"resourceType":"Patient"}}]}`,
		"not ours": `{"resourceType":"Bundle","entry":[{"resource":{"resourceType":"Provenance",
			"entity":[{"what":{"identifier":{"system":"urn:acds:source","value":"evil.example"}}}]}}]}`,
		"other system": `{"resourceType":"Bundle","entry":[{"resource":{"resourceType":"Provenance","meta":{"tag":[{"system":"urn:acds:tag","code":"provenance"}]},
			"entity":[{"what":{"identifier":{"system":"urn:other","value":"h"}}}]}}]}`,
	} {
		if _, err := Summarize([]byte(in)); !errors.Is(err, ErrNoProvenance) {
			t.Errorf("%s: %v, want ErrNoProvenance", name, err)
		}
	}
	if _, err := Summarize([]byte(`{`)); err == nil {
		t.Error("invalid JSON was summarised")
	}
	if _, err := Summarize([]byte(`{"resourceType":"Patient"}`)); err == nil {
		t.Error("a Patient was summarised")
	}
}
