package verify_test

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/acds-project/acds"
	"github.com/acds-project/acds/verify"
)

// TestCoverage: a fetched output's signed coverage is in the details and
// the summary; a fetched output without one (a bundle made before
// coverage was signed) still verifies and says that no coverage was
// recorded; a raw submission has none to speak of.
func TestCoverage(t *testing.T) {
	f := getFixture(t)
	v := mustNew(t, f.policy())
	out := []byte("o")
	cov := &acds.Coverage{CapabilityStatement: true, Requests: []acds.CoverageRequest{
		{RequestLine: "GET /fhir/metadata HTTP/1.1", Status: 200, Pages: 1},
		{RequestLine: "GET /fhir/Patient/7 HTTP/1.1", Status: 200, Pages: 1, Entries: 1},
		{RequestLine: "GET /fhir/Observation?subject=Patient/7 HTTP/1.1", Status: 200, Pages: 2, Entries: 120},
	}, Unsupported: []string{"Claim", "Coverage"}}
	res, err := v.VerifyOutput(f.mpcBundleCovered(t, out, cov), out)
	if err != nil || !res.Valid {
		t.Fatalf("%v %v", err, res.Err())
	}
	d := res.Response().Details
	if !reflect.DeepEqual(d.Coverage, cov) || slices.Contains(d.Reasons, verify.NoteNoCoverage) {
		t.Fatalf("details coverage %+v, reasons %q", d.Coverage, d.Reasons)
	}
	if s := res.CoverageSummary(); !strings.Contains(s, "searches of the Patient compartment") || !strings.Contains(s, "3 requests, 121 entries") ||
		!strings.Contains(s, "2 compartment types") {
		t.Errorf("summary %q", s)
	}

	res, err = v.VerifyOutput(f.mpcBundle(t, out), out)
	if err != nil || !res.Valid {
		t.Fatalf("a bundle without coverage: %v %v", err, res.Err())
	}
	if d := res.Response().Details; d.Coverage != nil || !slices.Contains(d.Reasons, verify.NoteNoCoverage) || res.CoverageSummary() != "no coverage recorded" {
		t.Fatalf("without coverage: %+v, summary %q", d, res.CoverageSummary())
	}

	res, err = v.VerifyOutput(f.rawBundle(t, out), out)
	if err != nil || !res.Valid {
		t.Fatalf("raw: %v %v", err, res.Err())
	}
	if d := res.Response().Details; d.Coverage != nil || slices.Contains(d.Reasons, verify.NoteNoCoverage) || res.CoverageSummary() != "" {
		t.Fatalf("raw: %+v", d)
	}
}
