package fhir_test

import (
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/acds-project/acds"
	"github.com/acds-project/acds/fhir"
	"github.com/acds-project/acds/fhir/fhirpath"
)

var queryNow = time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)

func queryInput(t *testing.T) []byte {
	t.Helper()
	in, err := os.ReadFile("testdata/golden/transaction.json")
	if err != nil {
		t.Fatal(err)
	}
	return in
}

func runQuery(t *testing.T, q string, lim fhir.QueryLimits) (*fhir.Output, error) {
	t.Helper()
	return fhir.Process(queryInput(t), fhir.Options{Format: acds.OutputFHIRPath, Query: q, Now: queryNow, QueryLimits: lim})
}

type parameters struct {
	ResourceType string                       `json:"resourceType"`
	Parameter    []map[string]json.RawMessage `json:"parameter"`
}

func TestQueryParameters(t *testing.T) {
	q := "Observation.where(code.coding.code = '8867-4').select(value | effective | status | subject | (value.value > 70))"
	out, err := runQuery(t, q, fhir.QueryLimits{})
	if err != nil {
		t.Fatal(err)
	}
	var p parameters
	if err := json.Unmarshal(out.JSON, &p); err != nil {
		t.Fatal(err)
	}
	want := []string{"valueString", "valueQuantity", "valueDateTime", "valueCode", "valueReference", "valueBoolean"}
	if p.ResourceType != "Parameters" || len(p.Parameter) != len(want) {
		t.Fatalf("output %s", out.JSON)
	}
	for i, member := range want {
		name := "result"
		if i == 0 {
			name = "expression"
		}
		if string(p.Parameter[i]["name"]) != `"`+name+`"` || p.Parameter[i][member] == nil {
			t.Errorf("parameter %d = %v, want %s with %s", i, p.Parameter[i], name, member)
		}
	}
	var expr string
	if json.Unmarshal(p.Parameter[0]["valueString"], &expr); expr != q {
		t.Errorf("expression %q", expr)
	}
	if !strings.Contains(string(out.JSON), `"valueQuantity":{"code":"/min","system":"http://unitsofmeasure.org","unit":"beats/minute","value":72.5}`) {
		t.Errorf("quantity not kept exactly: %s", out.JSON)
	}
	// The output is valid R4, canonical and reproducible; RecordDigest is
	// the fhir_r4 output's.
	if oc := fhir.Validate(out.JSON); oc.HasErrors() {
		t.Fatalf("the Parameters is not valid R4: %v", oc.Issues)
	}
	rec, err := fhir.Process(queryInput(t), fhir.Options{Format: acds.OutputFHIRR4, Now: queryNow})
	if err != nil {
		t.Fatal(err)
	}
	if out.RecordDigest != rec.Digest {
		t.Errorf("record digest %s, want %s", out.RecordDigest, rec.Digest)
	}
	again, _ := runQuery(t, q, fhir.QueryLimits{})
	if again.Digest != out.Digest || out.Format != acds.OutputFHIRPath {
		t.Error("the same query gave another output")
	}
}

func TestQueryBundleAndEmptyResult(t *testing.T) {
	out, err := runQuery(t, "%bundle.entry.count()", fhir.QueryLimits{})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(out.JSON), `{"name":"result","valueInteger":3}`) {
		t.Errorf("%%bundle: %s", out.JSON)
	}
	out, err = runQuery(t, "Condition", fhir.QueryLimits{})
	if err != nil {
		t.Fatal(err)
	}
	var p parameters
	json.Unmarshal(out.JSON, &p)
	if len(p.Parameter) != 1 {
		t.Errorf("empty result: %s", out.JSON)
	}
	out, err = runQuery(t, "Patient", fhir.QueryLimits{})
	if err != nil || !strings.Contains(string(out.JSON), `"name":"result","resource":{`) {
		t.Errorf("resource result: %v %s", err, out.JSON)
	}
}

func TestQueryFailures(t *testing.T) {
	for _, c := range []struct {
		q      string
		lim    fhir.QueryLimits
		limit  bool
		offset int
		class  error
	}{
		{"Observation.where(", fhir.QueryLimits{}, false, 18, fhirpath.ErrSyntax},
		{"", fhir.QueryLimits{}, false, -1, nil},
		{strings.Repeat("a", acds.MaxQueryLen+1), fhir.QueryLimits{}, true, -1, nil},
		{"Observation.code.coding | Patient.name | Patient.identifier", fhir.QueryLimits{MaxResults: 2}, true, -1, nil},
		{"%bundle.descendants().descendants()", fhir.QueryLimits{MaxSteps: 10}, true, -1, fhirpath.ErrLimit},
		{"Observation.subject.resolve().name.given.single()", fhir.QueryLimits{}, false, -1, fhirpath.ErrEvaluation},
		{"Patient.address", fhir.QueryLimits{MaxBytes: 100}, true, -1, nil},
		{"%bundle.entry.first()", fhir.QueryLimits{}, false, -1, nil},           // a backbone element
		{"Patient.identifier.first().type", fhir.QueryLimits{}, false, -1, nil}, // empty: fine
	} {
		_, err := runQuery(t, c.q, c.lim)
		if strings.HasSuffix(c.q, ".type") {
			if err != nil {
				t.Errorf("%q: %v", c.q, err)
			}
			continue
		}
		var qe *fhir.QueryError
		if !errors.As(err, &qe) || !errors.Is(err, fhir.ErrQuery) {
			t.Errorf("%.30q: err = %v, want a QueryError", c.q, err)
			continue
		}
		if qe.Limit != c.limit || (c.offset >= 0 && qe.Offset != c.offset) || (c.class != nil && !errors.Is(err, c.class)) {
			t.Errorf("%.30q: limit %v offset %d (%v), want limit %v offset %d", c.q, qe.Limit, qe.Offset, err, c.limit, c.offset)
		}
	}
}

// TestCompileQueryEnvironment: a query naming an environment variable its
// evaluation does not provide is refused by CompileQuery, as an unknown
// function is, with the error Process gives it; the built-in variables,
// %bundle among them, compile.
func TestCompileQueryEnvironment(t *testing.T) {
	for q, offset := range map[string]int{"%nosuch": 0, "Observation.where(subject.resolve() = %patient)": 38, "nosuchfn()": 0} {
		_, cerr := fhir.CompileQuery(q)
		var qe *fhir.QueryError
		if !errors.As(cerr, &qe) || !errors.Is(cerr, fhirpath.ErrSemantic) {
			t.Errorf("CompileQuery(%q) = %v, want a semantic QueryError", q, cerr)
			continue
		}
		if qe.Offset != offset || qe.Limit {
			t.Errorf("CompileQuery(%q): offset %d limit %v, want offset %d", q, qe.Offset, qe.Limit, offset)
		}
		_, perr := runQuery(t, q, fhir.QueryLimits{})
		if perr == nil || perr.Error() != cerr.Error() {
			t.Errorf("Process(%q) = %v, want CompileQuery's error %v", q, perr, cerr)
		}
	}
	_, err := fhir.CompileQuery("%nosuch")
	if want := "fhir: query: fhirpath: semantic error at offset 0: unknown environment variable %nosuch"; err == nil || err.Error() != want {
		t.Errorf("CompileQuery(%%nosuch) = %v, want %s", err, want)
	}
	for _, q := range []string{"%bundle.entry.count()", "%resource", "%context.count()", "%ucum", "%sct", "%loinc", "%`vs-administrative-gender`"} {
		if _, err := fhir.CompileQuery(q); err != nil {
			t.Errorf("CompileQuery(%q): %v", q, err)
		}
		if _, err := runQuery(t, q, fhir.QueryLimits{}); err != nil {
			t.Errorf("Process(%q): %v", q, err)
		}
	}
}
