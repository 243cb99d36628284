package fhir

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/acds-project/acds"
	"github.com/acds-project/acds/internal/testrig/corpus"
)

var testNow = time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)

func testOpts(format string) Options {
	return Options{Format: format, Source: "portal.example.org", Measurement: "ab12cd34", Now: testNow,
		DeidentKey: bytes.Repeat([]byte{7}, 32)}
}

// checkOutput asserts the structural promises of an output Bundle: valid
// R4, a collection, every reference resolves to an entry, and the last
// entry is the Provenance targeting every other entry.
func checkOutput(t *testing.T, name string, out *Output) map[string]any {
	t.Helper()
	if o := Validate(out.JSON); o.HasErrors() {
		t.Fatalf("%s: output does not validate: %v", name, o.Issues)
	}
	var b map[string]any
	if err := json.Unmarshal(out.JSON, &b); err != nil {
		t.Fatal(err)
	}
	if b["type"] != "collection" {
		t.Fatalf("%s: type %v", name, b["type"])
	}
	entries := b["entry"].([]any)
	have := map[string]bool{}
	for _, e := range entries {
		r := e.(map[string]any)["resource"].(map[string]any)
		key := r["resourceType"].(string) + "/" + r["id"].(string)
		if have[key] {
			t.Errorf("%s: duplicate %s", name, key)
		}
		have[key] = true
	}
	var walk func(any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			if ref, ok := v["reference"].(string); ok && !strings.HasPrefix(ref, "#") {
				if !have[ref] && !strings.Contains(ref, ":") {
					t.Errorf("%s: reference %q does not resolve", name, ref)
				}
				if strings.HasPrefix(ref, "urn:uuid:") {
					t.Errorf("%s: urn:uuid reference %q survived", name, ref)
				}
			}
			for _, x := range v {
				walk(x)
			}
		case []any:
			for _, x := range v {
				walk(x)
			}
		}
	}
	walk(b)
	prov := entries[len(entries)-1].(map[string]any)["resource"].(map[string]any)
	if prov["resourceType"] != "Provenance" || len(prov["target"].([]any)) != len(entries)-1 {
		t.Fatalf("%s: last entry is not a Provenance over every resource", name)
	}
	return b
}

func TestProcessSharedBundles(t *testing.T) {
	testProcessSharedBundles(t, Process)
}

func testProcessSharedBundles(t *testing.T, process func([]byte, Options) (*Output, error)) {
	for _, f := range corpusBundles(t) {
		name := filepath.Base(f)
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		orig := bytes.Clone(data)
		out, err := Process(data, testOpts(acds.OutputFHIRR4))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !bytes.Equal(orig, data) {
			t.Fatalf("%s: Process modified its input", name)
		}
		checkOutput(t, name, out)
		again, err := Process(out.JSON, testOpts(acds.OutputFHIRR4))
		if err != nil {
			t.Fatalf("%s: re-processing: %v", name, err)
		}
		if again.Digest != out.Digest || !bytes.Equal(again.JSON, out.JSON) {
			t.Errorf("%s: normalisation is not idempotent", name)
		}
		twice, _ := Process(data, testOpts(acds.OutputFHIRR4))
		if twice.Digest != out.Digest {
			t.Errorf("%s: output digest is not deterministic", name)
		}
	}
}

func TestProcessRewritesAndDeduplicates(t *testing.T) {
	testProcessRewritesAndDeduplicates(t, Process)
}

func testProcessRewritesAndDeduplicates(t *testing.T, process func([]byte, Options) (*Output, error)) {
	in := `{"resourceType":"Bundle","type":"transaction","entry":[
	 {"fullUrl":"urn:uuid:0b0d2e4a-8a5e-4d55-9d3a-8c1c2b3a4f50","resource":{"resourceType":"Patient","gender":"female"},"request":{"method":"POST","url":"Patient"}},
	 {"fullUrl":"urn:uuid:6c1a7b2e-3f4d-4e5f-8a9b-0c1d2e3f4a5b","resource":{"resourceType":"Observation","status":"final","code":{"text":"x"},"subject":{"reference":"urn:uuid:0b0d2e4a-8a5e-4d55-9d3a-8c1c2b3a4f50"}},"request":{"method":"POST","url":"Observation"}},
	 {"fullUrl":"urn:uuid:6c1a7b2e-3f4d-4e5f-8a9b-0c1d2e3f4a5c","resource":{"resourceType":"Observation","id":"6c1a7b2e-3f4d-4e5f-8a9b-0c1d2e3f4a5b","status":"final","code":{"text":"x"},"subject":{"reference":"Patient/0b0d2e4a-8a5e-4d55-9d3a-8c1c2b3a4f50"}},"request":{"method":"POST","url":"Observation"}}
	]}`
	out, err := Process([]byte(in), testOpts(""))
	if err != nil {
		t.Fatal(err)
	}
	b := checkOutput(t, "rewrite", out)
	if n := len(b["entry"].([]any)); n != 3 {
		t.Fatalf("want Patient, one Observation and Provenance, got %d entries:\n%s", n, out.JSON)
	}
	if !bytes.Contains(out.JSON, []byte(`"reference":"Patient/0b0d2e4a-8a5e-4d55-9d3a-8c1c2b3a4f50"`)) {
		t.Fatalf("reference not rewritten:\n%s", out.JSON)
	}
}

func TestProcessErrors(t *testing.T) {
	testProcessErrors(t, Process)
}

func testProcessErrors(t *testing.T, process func([]byte, Options) (*Output, error)) {
	_, err := Process([]byte(`{"resourceType":"Patient","birthDate":"soon"}`), Options{})
	var ie *InvalidError
	if !errors.As(err, &ie) || !errors.Is(err, ErrInvalid) || errors.Is(err, ErrNotR4) || !ie.Outcome.HasErrors() {
		t.Fatalf("got %v", err)
	}
	_, err = Process([]byte(`{"resourceType":"ProcedureRequest","status":"active"}`), Options{})
	if !errors.Is(err, ErrNotR4) || !errors.Is(err, ErrInvalid) {
		t.Fatalf("STU3 content: got %v", err)
	}
	if _, err = Process([]byte(`{"resourceType":"Patient"}`), Options{Format: "csv"}); !errors.Is(err, ErrUnsupportedFormat) {
		t.Fatalf("got %v", err)
	}
	if _, err = Process([]byte(`{"resourceType":"Patient"}`), Options{Format: acds.OutputFHIRR4Deidentified}); !errors.Is(err, ErrKey) {
		t.Fatalf("got %v", err)
	}
	if _, err = Process([]byte(`{"resourceType":"Patient"}`), Options{MaxBytes: 5}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("oversized: got %v", err)
	}
}

// TestCanonicalJSON: the output is canonical — members in RFC 8785 order,
// no white space, minimal string escapes — and numbers keep their written
// digits, since a FHIR decimal's precision is in them.
func TestCanonicalJSON(t *testing.T) {
	in := []byte("\ufeff { \"status\" : \"final\", \"resourceType\":\"Observation\",\"id\":\"o\",\n" +
		`"code":{"text":"a\u0001\"\\/ \u20ac \ud83d\ude00 \u2028"},` +
		`"component":[{"code":{"text":"c"},"valueQuantity":{"value":1.50}},{"code":{"text":"d"},"valueQuantity":{"value":-0}},` +
		`{"code":{"text":"e"},"valueQuantity":{"value":1e2}},{"code":{"text":"f"},"valueQuantity":{"value":123456789012345678901234}},` +
		`{"code":{"text":"g"},"valueQuantity":{"value":-1.5E-7}}]}`)
	out, err := Process(in, testOpts(acds.OutputFHIRR4))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"fullUrl":"https://acds.invalid/fhir/Observation/o","resource":{"code":{"text":"a\u0001\"\\/ ` + "€ \U0001F600 \u2028" + `"},` +
		`"component":[{"code":{"text":"c"},"valueQuantity":{"value":1.50}},{"code":{"text":"d"},"valueQuantity":{"value":-0}},` +
		`{"code":{"text":"e"},"valueQuantity":{"value":1e2}},{"code":{"text":"f"},"valueQuantity":{"value":123456789012345678901234}},` +
		`{"code":{"text":"g"},"valueQuantity":{"value":-1.5E-7}}],"id":"o","resourceType":"Observation","status":"final"}}`
	if !strings.Contains(string(out.JSON), want) {
		t.Fatalf("output:\n%s\nwant it to contain:\n%s", out.JSON, want)
	}
}

// TestProcessMemory bounds the heap the pipeline needs for the largest
// Synthea bundle of the corpus (0.9 MB): the bytes allocated during Process, an upper
// bound of its peak heap, stay within 4× the input size.
func TestProcessMemory(t *testing.T) {
	files := corpus.JSON(t, corpus.Synthea)
	var big []byte
	for _, f := range files {
		d, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if len(d) > len(big) {
			big = d
		}
	}
	if _, err := Process(big, testOpts(acds.OutputFHIRR4)); err != nil { // warm up
		t.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	out, err := Process(big, testOpts(acds.OutputFHIRR4))
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatal(err)
	}
	alloc := after.TotalAlloc - before.TotalAlloc
	ratio := float64(alloc) / float64(len(big))
	t.Logf("input %d bytes, allocated %d bytes (%.2f×), output %d bytes", len(big), alloc, ratio, len(out.JSON))
	if ratio > 4 {
		t.Errorf("Process allocated %.2f× its input; the budget is 4×", ratio)
	}
}

// TestCheckAgreesWithProcess: Check accepts exactly what Process accepts.
func TestCheckAgreesWithProcess(t *testing.T) {
	testCheckAgreesWithProcess(t, Process)
}

func testCheckAgreesWithProcess(t *testing.T, process func([]byte, Options) (*Output, error)) {
	for _, in := range []string{
		`{"resourceType":"Patient","id":"a"}`,
		`{"resourceType":"Patient","birthDate":"x"}`,
		`{"resourceType":"Bundle","type":"collection"}`,
		`{"resourceType":"Bundle","type":"searchset","entry":[{"resource":{"resourceType":"OperationOutcome","issue":[{"severity":"information","code":"informational"}]},"search":{"mode":"outcome"}}]}`,
		`{"resourceType":"ProcedureRequest"}`,
		`not json`,
	} {
		cerr := Check([]byte(in), Options{})
		_, perr := Process([]byte(in), Options{Now: testNow})
		if (cerr == nil) != (perr == nil) || errors.Is(cerr, ErrNotR4) != errors.Is(perr, ErrNotR4) {
			t.Errorf("%s: Check %v, Process %v", in, cerr, perr)
		}
	}
}

// TestCheckRefusalCarriesWarnings: Check looks for errors only, but the
// outcome of a refusal is Validate's whole outcome, warnings included.
func TestCheckRefusalCarriesWarnings(t *testing.T) {
	// An error (birthDate) and a warning (dom-6: no narrative).
	in := []byte(`{"resourceType":"Patient","id":"a","birthDate":"1970-02-30"}`)
	err := Check(in, Options{})
	var inv *InvalidError
	if !errors.As(err, &inv) {
		t.Fatalf("Check: %v, want an *InvalidError", err)
	}
	want := Validate(in)
	if !reflect.DeepEqual(inv.Outcome.Issues, want.Issues) {
		t.Fatalf("Check's outcome %v, Validate's %v", inv.Outcome.Issues, want.Issues)
	}
	var warned bool
	for _, is := range inv.Outcome.Issues {
		warned = warned || is.Severity == SeverityWarning && strings.Contains(is.Diagnostics, "dom-6")
	}
	if !warned {
		t.Fatalf("the refusal lost the dom-6 warning: %v", inv.Outcome.Issues)
	}
}

// TestProcessKeepsDecimalPrecision: a measured value written with trailing
// zeros keeps them in the output, so no precision is lost in processing.
func TestProcessKeepsDecimalPrecision(t *testing.T) {
	testProcessKeepsDecimalPrecision(t, Process)
}

func testProcessKeepsDecimalPrecision(t *testing.T, process func([]byte, Options) (*Output, error)) {
	in := []byte(`{"resourceType":"Observation","id":"o1","status":"final",` +
		`"code":{"text":"potassium"},"valueQuantity":{"value":4.50,"unit":"mmol/L"}}`)
	out, err := Process(in, Options{Format: acds.OutputFHIRR4, Source: "raw", Measurement: "00", Now: time.Unix(0, 0).UTC()})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(out.JSON, []byte(`"value":4.50`)) {
		t.Fatalf("decimal precision lost: %s", out.JSON)
	}
}

// TestInvalidErrorPutsErrorsFirst: a refused input's outcome lists its
// errors before the warnings that precede them in validation order (a
// Synthea-sized record has hundreds of dom-6 warnings), each kind kept in
// its order.
func TestInvalidErrorPutsErrorsFirst(t *testing.T) {
	var b strings.Builder
	b.WriteString(`{"resourceType":"Bundle","type":"collection","entry":[`)
	for i := range 5 {
		fmt.Fprintf(&b, `{"fullUrl":"urn:uuid:00000000-0000-4000-8000-00000000000%d","resource":{"resourceType":"Patient","id":"p%d"}},`, i, i)
	}
	b.WriteString(`{"resource":{"resourceType":"Patient","id":"bad","birthDate":"yesterday","gender":"sometimes"}}]}`)
	for name, err := range map[string]error{"Check": Check([]byte(b.String()), Options{}), "Process": func() error {
		_, err := Process([]byte(b.String()), testOpts(acds.OutputFHIRR4))
		return err
	}()} {
		var inv *InvalidError
		if !errors.As(err, &inv) {
			t.Fatalf("%s: %v", name, err)
		}
		is := inv.Outcome.Issues
		n := inv.Outcome.ErrorCount()
		if n < 2 || len(is) <= n {
			t.Fatalf("%s: %d errors among %d issues; the test needs errors and warnings", name, n, len(is))
		}
		for i, x := range is {
			if isErr := x.Severity == SeverityError || x.Severity == SeverityFatal; isErr != (i < n) {
				t.Fatalf("%s: issue %d is %s; want the %d errors first: %v", name, i, x.Severity, n, is)
			}
		}
		// Each kind keeps validation's order.
		var errs, warns []Issue
		for _, x := range Validate([]byte(b.String())).Issues {
			if x.Severity == SeverityError || x.Severity == SeverityFatal {
				errs = append(errs, x)
			} else {
				warns = append(warns, x)
			}
		}
		if !reflect.DeepEqual(is[:n], errs) || !reflect.DeepEqual(is[n:], warns) {
			t.Errorf("%s: the errors or the warnings are out of validation's order: %v", name, is)
		}
	}
}
