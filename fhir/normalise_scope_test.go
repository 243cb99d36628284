package fhir

import (
	"bytes"
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
