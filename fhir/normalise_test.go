package fhir

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/acds-project/acds"
	"github.com/acds-project/acds/fhir/r4"
	"github.com/acds-project/acds/internal/testrig/corpus"
)

// TestNormalizeIdempotent: normalising the encoded output of
// normalize again gives the same bytes (acds.OutputFHIRR4), on every shared bundle
// and official example the pipeline accepts.
func TestNormalizeIdempotent(t *testing.T) {
	n := 0
	for _, f := range processInputs(t) {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if Check(data, Options{}) != nil {
			continue
		}
		name := filepath.Base(f)
		first := normalizeBytes(t, name, data, testOpts(acds.OutputFHIRR4))
		if first == nil {
			continue
		}
		second := normalizeBytes(t, name, first, testOpts(acds.OutputFHIRR4))
		if !bytes.Equal(first, second) {
			t.Errorf("%s: normalising the output again changed it:\nfirst:  %.400s\nsecond: %.400s", name, first, second)
		}
		n++
	}
	if n == 0 {
		t.Skip("no inputs accepted")
	}
	t.Logf("%d inputs normalised twice", n)
}

// normalizeBytes is r4.Unmarshal, normalize and r4.Marshal; nil when the
// input has no resources to process.
func normalizeBytes(t *testing.T, name string, data []byte, opts Options) []byte {
	t.Helper()
	root, err := r4.Unmarshal(data)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	b, count, err := normalize(root, opts, opts.Format)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if count < 2 {
		return nil
	}
	out, err := r4.Marshal(b)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return out
}

func TestNormalizeNil(t *testing.T) {
	if _, _, err := normalize(nil, testOpts(acds.OutputFHIRR4), acds.OutputFHIRR4); !errors.Is(err, errNoRoot) {
		t.Fatalf("got %v, want errNoRoot", err)
	}
}

// TestNormalizeSingleResource: a resource that is not a Bundle
// becomes the one entry of the output, with its id and a Provenance.
func TestNormalizeSingleResource(t *testing.T) {
	root, err := r4.Unmarshal([]byte(`{"resourceType":"Patient","id":"p1","gender":"male"}`))
	if err != nil {
		t.Fatal(err)
	}
	opts := testOpts(acds.OutputFHIRR4)
	opts.BaseURL = "https://x.example/base/"
	b, n, err := normalize(root, opts, acds.OutputFHIRR4)
	if err != nil {
		t.Fatal(err)
	}
	if n != 2 || len(b.Entry) != 2 || b.Type.Value != "collection" {
		t.Fatalf("got %d entries", n)
	}
	if got := b.Entry[0].FullURL.Value; got != "https://x.example/base/Patient/p1" {
		t.Errorf("fullUrl %q", got)
	}
	prov, ok := b.Entry[1].Resource.(*r4.Provenance)
	if !ok || !isOurProvenance(prov) || len(prov.Target) != 1 || prov.Target[0].Reference.Value != "Patient/p1" {
		t.Fatalf("last entry is not our Provenance over Patient/p1: %#v", b.Entry[1].Resource)
	}
	if prov.Recorded.Value != "2026-11-21T12:00:00.000Z" || prov.Agent[0].Who.Identifier.Value.Value != "ab12cd34" ||
		prov.Entity[0].What.Identifier.Value.Value != "portal.example.org" {
		t.Errorf("provenance details: %v %v %v", prov.Recorded.Value, prov.Agent[0].Who.Identifier.Value.Value, prov.Entity[0].What.Identifier.Value.Value)
	}
}

// deidentify runs the typed pipeline in the de-identified format and
// returns the output JSON.
func deidentify(t *testing.T, in string) string {
	t.Helper()
	out, err := Process([]byte(in), testOpts(acds.OutputFHIRR4Deidentified))
	if err != nil {
		t.Fatal(err)
	}
	if o := Validate(out.JSON); o.HasErrors() {
		t.Fatalf("invalid output: %v\n%s", o.Issues, out.JSON)
	}
	return string(out.JSON)
}

// TestDeidentifyExtensionsEverywhere: extensions are de-identified
// wherever they are, including on the address parts that are kept and on
// repeating primitives, and an extension whose url holds an IP address is
// removed.
func TestDeidentifyExtensionsEverywhere(t *testing.T) {
	s := deidentify(t, `{"resourceType":"Patient","id":"p",
	 "address":[{"state":"MA","_state":{"id":"s1","extension":[{"url":"http://example.org/town","valueString":"Smalltown"},{"url":"http://example.org/code","valueCoding":{"system":"http://example.org/cs","code":"k1"}}]},"country":"US"}],
	 "extension":[{"url":"http://10.0.0.9/ext","valueCoding":{"system":"http://example.org/cs","code":"k2"}},{"url":"http://example.org/ok","valueCoding":{"system":"http://example.org/cs","code":"k3"}}]}`)
	for _, bad := range []string{"Smalltown", "10.0.0.9", "k2", `"s1"`} {
		if strings.Contains(s, bad) {
			t.Errorf("%q survived: %s", bad, s)
		}
	}
	for _, good := range []string{`"state":"MA"`, `"code":"k1"`, `"code":"k3"`} {
		if !strings.Contains(s, good) {
			t.Errorf("want %s in %s", good, s)
		}
	}
}

// TestDeidentifyMasksRequired: required elements that are removed
// become the data-absent-reason extension, singly and in repeating
// elements (which keep one masked item, as Composition.author here), so
// the output stays valid.
func TestDeidentifyMasksRequired(t *testing.T) {
	s := deidentify(t, `{"resourceType":"Bundle","type":"collection","entry":[
	 {"fullUrl":"urn:uuid:3c2d3e4f-5a6b-4c7d-8e9f-0a1b2c3d4e5f","resource":{"resourceType":"Composition","status":"final","type":{"text":"note"},"date":"2020-03-04",
	  "author":[{"display":"Dr Y"},{"display":"Dr Z"}],"title":"Letter about Jane"}},
	 {"fullUrl":"urn:uuid:4c2d3e4f-5a6b-4c7d-8e9f-0a1b2c3d4e5f","resource":{"resourceType":"DocumentReference","status":"current",
	  "content":[{"attachment":{"contentType":"text/plain","data":"aGVsbG8="}},{"attachment":{"url":"http://x.example/doc"}}]}}]}`)
	masked := `{"extension":[{"url":"` + darURL + `","valueCode":"masked"}]}`
	for _, good := range []string{`"_title":` + masked, `"author":[` + masked + `]`, `"content":[{"attachment":` + masked + `},{"attachment":` + masked + `}]`, `"date":"2020"`} {
		if !strings.Contains(s, good) {
			t.Errorf("want %s in %s", good, s)
		}
	}
	for _, bad := range []string{"Jane", "Dr Y", "Dr Z", "aGVsbG8=", "x.example"} {
		if strings.Contains(s, bad) {
			t.Errorf("%q survived: %s", bad, s)
		}
	}
}

func TestElementOf(t *testing.T) {
	h := &r4.HumanName{ID: "n1", Extension: []r4.Extension{{URL: "u"}}}
	id, ext := r4.ElementOf(h)
	if id == nil || *id != "n1" || ext == nil || len(*ext) != 1 {
		t.Fatalf("HumanName: %v %v", id, ext)
	}
	*id, *ext = "", nil
	if h.ID != "" || h.Extension != nil {
		t.Fatal("ElementOf does not point into the element")
	}
	c := &r4.PatientContact{ID: "c"}
	if id, _ := r4.ElementOf(c); id == nil || *id != "c" {
		t.Fatal("backbone element")
	}
	d := &r4.Date{ID: "d", Value: "2020"}
	if id, ext := r4.ElementOf(d); id == nil || *id != "d" || ext == nil {
		t.Fatal("primitive")
	}
	var nilName *r4.HumanName
	for _, x := range []any{&r4.Patient{ID: "p"}, nilName, (*r4.String)(nil), 3, "s", nil, &struct{ ID string }{}} {
		if id, ext := r4.ElementOf(x); id != nil || ext != nil {
			t.Errorf("ElementOf(%T) = %v, %v; want nils", x, id, ext)
		}
	}
}

// TestRewritesOnlyReferences: only Reference.reference is rewritten.
// A uri element that happens to be named reference (DetectedIssue.reference,
// the authority for the issue) is a web address, not a reference, and
// keeps its value even when it equals an entry's fullUrl.
func TestRewritesOnlyReferences(t *testing.T) {
	in := `{"resourceType":"Bundle","type":"collection","entry":[
	 {"fullUrl":"http://s.example/fhir/Patient/a","resource":{"resourceType":"Patient","id":"a"}},
	 {"fullUrl":"http://s.example/fhir/DetectedIssue/d","resource":{"resourceType":"DetectedIssue","id":"d","status":"final",
	  "patient":{"reference":"http://s.example/fhir/Patient/a"},"reference":"http://s.example/fhir/Patient/a"}}]}`
	out, err := Process([]byte(in), testOpts(acds.OutputFHIRR4))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"patient":{"reference":"Patient/a"}`, `"reference":"http://s.example/fhir/Patient/a"`} {
		if !strings.Contains(string(out.JSON), want) {
			t.Errorf("want %s in %s", want, out.JSON)
		}
	}
}

// processInputs lists the corpus bundles and validator cases, the golden
// inputs and the official examples (when fetched) that tests run through
// the pipeline.
func processInputs(t *testing.T) []string {
	files := corpus.JSON(t, corpus.Synthea, corpus.Inferno, corpus.ValidatorCases)
	golden, _ := filepath.Glob(filepath.Join("testdata", "golden", "*.json"))
	for _, g := range golden {
		if !strings.Contains(filepath.Base(g), ".out.") {
			files = append(files, g)
		}
	}
	examples, _ := filepath.Glob(filepath.Join("..", ".fhir-defs", "package", "*.json"))
	for _, f := range examples {
		if base := filepath.Base(f); !conformance(base) && !strings.HasPrefix(base, "Bundle-") && base != "package.json" && !strings.HasPrefix(base, ".") {
			files = append(files, f)
		}
	}
	if len(files) == 0 {
		t.Skip("no inputs")
	}
	return files
}
