package fhir

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"
)

// processOK runs Process and requires a valid output; for FormatR4 it
// also requires that processing the output again returns it unchanged.
func processOK(t *testing.T, in string, format string) *Output {
	t.Helper()
	opts := testOpts(format)
	out, err := Process([]byte(in), opts)
	if err != nil {
		t.Fatalf("%s: %v", format, err)
	}
	if o := Validate(out.JSON); o.HasErrors() {
		t.Fatalf("%s: output does not validate: %v\n%s", format, o.Issues, out.JSON)
	}
	again, err := Process(out.JSON, opts)
	if err != nil {
		t.Fatalf("%s: processing the output again: %v\n%s", format, err, out.JSON)
	}
	if format == FormatR4 && !bytes.Equal(again.JSON, out.JSON) {
		t.Fatalf("%s: not idempotent:\nfirst:  %s\nsecond: %s", format, out.JSON, again.JSON)
	}
	return out
}

// isNoResources reports whether err is the *InvalidError whose one error
// is noResources().
func isNoResources(err error) bool {
	var inv *InvalidError
	if !errors.As(err, &inv) || inv.Outcome.ErrorCount() != 1 {
		return false
	}
	want := noResources()
	for _, is := range inv.Outcome.Issues {
		if is.Severity == want.Severity && is.Code == want.Code && is.Diagnostics == want.Diagnostics {
			return true
		}
	}
	return false
}

// TestRootProvenanceRefused (V4): a bare ACDS Provenance is our own
// output's metadata, not data: Check and Process both refuse it with the
// "no resources to process" error, so Process never produces an output it
// would itself refuse.
func TestRootProvenanceRefused(t *testing.T) {
	in := []byte(`{"resourceType":"Provenance","id":"p","meta":{"tag":[{"system":"urn:acds:tag","code":"provenance"}]},` +
		`"target":[{"reference":"Patient/x"}],"recorded":"2020-01-01T00:00:00Z","agent":[{"who":{"display":"x"}}]}`)
	for _, format := range Formats() {
		_, err := Process(in, testOpts(format))
		if !isNoResources(err) {
			t.Errorf("%s: Process: got %v, want the no-resources error", format, err)
		}
	}
	if err := Check(in, Options{}); !isNoResources(err) {
		t.Errorf("Check: got %v, want the no-resources error", err)
	}
	// A Provenance without our tag is data like any other.
	other := bytes.Replace(in, []byte("urn:acds:tag"), []byte("urn:other:tag"), 1)
	if err := Check(other, Options{}); err != nil {
		t.Errorf("Check of a foreign Provenance: %v", err)
	}
	processOK(t, string(other), FormatR4)
}

// entryByRef returns the output entry resource (as JSON object) named by
// the reference "Type/id".
func entryByRef(t *testing.T, out *Output, ref string) map[string]any {
	t.Helper()
	var b struct {
		Entry []struct {
			Resource map[string]any `json:"resource"`
		} `json:"entry"`
	}
	if err := json.Unmarshal(out.JSON, &b); err != nil {
		t.Fatal(err)
	}
	for _, e := range b.Entry {
		if e.Resource["resourceType"].(string)+"/"+e.Resource["id"].(string) == ref {
			return e.Resource
		}
	}
	t.Fatalf("no entry %s in %s", ref, out.JSON)
	return nil
}

// TestRelativeReferenceResolvesAgainstEntryBase (C1): a relative
// reference in an entry with a RESTful fullUrl resolves against that
// entry's base first (FHIR R4 Bundle, Resolving references in Bundles), so
// b.org's Observation points at b.org's Patient, not at a.org's of the same
// type and id; a relative reference from an entry without a RESTful base
// falls back to the type and id.
func TestRelativeReferenceResolvesAgainstEntryBase(t *testing.T) {
	in := `{"resourceType":"Bundle","type":"collection","entry":[
{"fullUrl":"http://a.org/fhir/Patient/1","resource":{"resourceType":"Patient","id":"1","gender":"male"}},
{"fullUrl":"http://b.org/fhir/Patient/1","resource":{"resourceType":"Patient","id":"1","gender":"female"}},
{"fullUrl":"http://b.org/fhir/Observation/o","resource":{"resourceType":"Observation","id":"o","status":"final","code":{"text":"pregnancy"},"subject":{"reference":"Patient/1/_history/1"}}},
{"fullUrl":"http://a.org/fhir/Observation/p","resource":{"resourceType":"Observation","id":"p","status":"final","code":{"text":"prostate"},"subject":{"reference":"Patient/1/_history/1"}}},
{"fullUrl":"urn:uuid:0c3f3c8e-58a6-4d43-9a59-0b6a3c3e2b11","resource":{"resourceType":"Observation","status":"final","code":{"text":"any"},"subject":{"reference":"Patient/1/_history/1"}}}]}`
	for _, format := range Formats() {
		out := processOK(t, in, format)
		var b struct {
			Entry []struct {
				Resource map[string]any `json:"resource"`
			} `json:"entry"`
		}
		if err := json.Unmarshal(out.JSON, &b); err != nil {
			t.Fatal(err)
		}
		gender := func(obs map[string]any) string {
			ref := obs["subject"].(map[string]any)["reference"].(string)
			return entryByRef(t, out, ref)["gender"].(string)
		}
		// Entries keep their order: a.org Patient, b.org Patient, then the
		// Observations.
		if g := gender(b.Entry[2].Resource); g != "female" {
			t.Errorf("%s: b.org's Observation points at the %s Patient, want b.org's (female)", format, g)
		}
		if g := gender(b.Entry[3].Resource); g != "male" {
			t.Errorf("%s: a.org's Observation points at the %s Patient, want a.org's (male)", format, g)
		}
		if g := gender(b.Entry[4].Resource); g != "male" {
			t.Errorf("%s: the urn:uuid Observation points at the %s Patient, want the first Patient/1 (male)", format, g)
		}
	}
}
