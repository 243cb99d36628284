package r4_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"unicode/utf16"

	"github.com/acds-project/acds/fhir/r4"
	"github.com/acds-project/acds/internal/testrig/corpus"
)

// referenceCanonical is the test oracle: an independent canonicaliser built
// on encoding/json. It parses data keeping numbers as written
// (json.Number), then writes it with object members sorted by the UTF-16
// code units of their names, no white space, RFC 8785 string escapes and
// numbers as their text, which is what package fhir's appendCanonical does.
func referenceCanonical(data []byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("data after the top-level value")
	}
	var b bytes.Buffer
	refValue(&b, v)
	return b.Bytes(), nil
}

func refValue(b *bytes.Buffer, v any) {
	switch v := v.(type) {
	case nil:
		b.WriteString("null")
	case bool:
		fmt.Fprint(b, v)
	case json.Number:
		b.WriteString(string(v))
	case string:
		refString(b, v)
	case []any:
		b.WriteByte('[')
		for i, x := range v {
			if i > 0 {
				b.WriteByte(',')
			}
			refValue(b, x)
		}
		b.WriteByte(']')
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		sort.Slice(keys, func(i, j int) bool {
			return slices.Compare(utf16.Encode([]rune(keys[i])), utf16.Encode([]rune(keys[j]))) < 0
		})
		b.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				b.WriteByte(',')
			}
			refString(b, k)
			b.WriteByte(':')
			refValue(b, v[k])
		}
		b.WriteByte('}')
	default:
		panic(fmt.Sprintf("unexpected %T", v))
	}
}

// refString escapes as RFC 8785 section 3.2.2.2: the two-character escapes
// for " \ and five controls, \u00xx in lower case for the other controls,
// everything else as itself.
func refString(b *bytes.Buffer, s string) {
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\b':
			b.WriteString(`\b`)
		case '\f':
			b.WriteString(`\f`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		default:
			if r < 0x20 {
				fmt.Fprintf(b, `\u%04x`, r)
			} else {
				b.WriteRune(r)
			}
		}
	}
	b.WriteByte('"')
}

// firstDifference describes where two byte strings first differ.
func firstDifference(got, want []byte) string {
	i := 0
	for i < len(got) && i < len(want) && got[i] == want[i] {
		i++
	}
	lo := max(i-60, 0)
	return fmt.Sprintf("at byte %d (of %d, want %d):\n got …%s…\nwant …%s…", i, len(got), len(want),
		got[lo:min(i+60, len(got))], want[lo:min(i+60, len(want))])
}

// checkCanonical compares MarshalCanonical of the decoded data with the
// oracle, and checks that the canonical bytes decode and re-canonicalise to
// themselves. It returns "" on success.
func checkCanonical(data []byte, r r4.Resource) string {
	got, err := r4.MarshalCanonical(r)
	if err != nil {
		return "MarshalCanonical: " + err.Error()
	}
	want, err := referenceCanonical(data)
	if err != nil {
		return "oracle: " + err.Error()
	}
	if !bytes.Equal(got, want) {
		return "differs from the reference canonical form " + firstDifference(got, want)
	}
	again, err := r4.Unmarshal(got)
	if err != nil {
		return "canonical output does not decode: " + err.Error()
	}
	twice, err := r4.MarshalCanonical(again)
	if err != nil {
		return "re-canonicalising: " + err.Error()
	}
	if !bytes.Equal(twice, got) {
		return "not idempotent " + firstDifference(twice, got)
	}
	return ""
}

// TestCanonicalOfficialExamples checks AppendCanonical against the oracle,
// byte for byte, for every resource file of the hl7.fhir.r4.examples@4.0.1
// package (definition bundles included), and that canonicalisation is
// idempotent.
func TestCanonicalOfficialExamples(t *testing.T) {
	files := jsonFiles(t, filepath.Join(repoRoot(t), ".fhir-defs", "package"))
	n, meta := 0, 0
	var failures []string
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var probe struct {
			ResourceType string `json:"resourceType"`
		}
		if json.Unmarshal(data, &probe) != nil || probe.ResourceType == "" {
			meta++ // package.json and the like: npm/IG metadata, not resources
			continue
		}
		n++
		r, err := r4.Unmarshal(data)
		if err != nil {
			failures = append(failures, fmt.Sprintf("%s: decode: %v", filepath.Base(f), err))
			continue
		}
		if d := checkCanonical(data, r); d != "" {
			failures = append(failures, fmt.Sprintf("%s: %s", filepath.Base(f), d))
		}
	}
	if len(failures) > 0 {
		t.Errorf("%d of %d files:\n%s", len(failures), n, strings.Join(failures, "\n"))
	}
	t.Logf("%d of %d resource files canonicalise byte for byte as the reference (%d non-resource files skipped)", n-len(failures), n, meta)
}

// TestCanonicalSharedData does the same for every JSON file of the corpus
// in testdata/ that r4.Unmarshal decodes (Synthea, Inferno US Core and
// Blue Button bundles, the validator cases that are R4 resources).
func TestCanonicalSharedData(t *testing.T) {
	root := corpus.Root(t)
	var files []string
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(path, ".json") {
			files = append(files, path)
		}
		return err
	})
	if err != nil || len(files) == 0 {
		t.Fatalf("no test data in %s: %v", root, err)
	}
	sort.Strings(files)
	n, skipped := 0, 0
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		r, err := r4.Unmarshal(data)
		if err != nil {
			skipped++
			continue
		}
		n++
		rel, _ := filepath.Rel(root, f)
		if d := checkCanonical(data, r); d != "" {
			t.Errorf("%s: %s", rel, d)
		}
	}
	if n == 0 {
		t.Fatal("no corpus file decodes")
	}
	t.Logf("%d corpus files canonicalise byte for byte as the reference (%d do not decode as R4 and were skipped)", n, skipped)
}

func mustCanonical(t *testing.T, r r4.Resource) string {
	t.Helper()
	b, err := r4.MarshalCanonical(r)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func mustMarshal(t *testing.T, r r4.Resource) string {
	t.Helper()
	b, err := r4.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestCanonicalStringEscaping(t *testing.T) {
	text := "q\" b\\ \b\f\n\r\t \x00\x01\x1f\x7f / é \u2028\u2029 😀 <&>"
	p := &r4.Patient{Name: []r4.HumanName{{Text: r4.NewString(text)}}}
	want := `{"name":[{"text":"q\" b\\ \b\f\n\r\t \u0000\u0001\u001f` + "\x7f / é \u2028\u2029 😀 <&>" + `"}],"resourceType":"Patient"}`
	if got := mustCanonical(t, p); got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	// The oracle agrees, and the text survives a round trip.
	if ref, err := referenceCanonical([]byte(want)); err != nil || string(ref) != want {
		t.Errorf("oracle: %s, %v", ref, err)
	}
	r, err := r4.Unmarshal([]byte(want))
	if err != nil {
		t.Fatal(err)
	}
	if got := r.(*r4.Patient).Name[0].Text.Value; got != text {
		t.Errorf("round trip gave %q", got)
	}
}

func TestCanonicalMemberOrder(t *testing.T) {
	in := `{
	  "resourceType": "Patient",
	  "id": "p1",
	  "meta": {"versionId": "2", "lastUpdated": "2020-01-01T00:00:00Z"},
	  "extension": [{"valueString": "x", "url": "http://e/a"}],
	  "active": true,
	  "_active": {"id": "a1"},
	  "name": [{
	    "use": "official",
	    "family": "Doe",
	    "_family": {"extension": [{"url": "http://e/f", "valueCode": "SP"}]},
	    "given": ["John", null, "Q"],
	    "_given": [null, {"id": "g2"}, {"extension": [{"url": "http://e/g", "valueBoolean": false}], "id": "g3"}]
	  }]
	}`
	want := `{"_active":{"id":"a1"},"active":true,"extension":[{"url":"http://e/a","valueString":"x"}],"id":"p1",` +
		`"meta":{"lastUpdated":"2020-01-01T00:00:00Z","versionId":"2"},` +
		`"name":[{"_family":{"extension":[{"url":"http://e/f","valueCode":"SP"}]},` +
		`"_given":[null,{"id":"g2"},{"extension":[{"url":"http://e/g","valueBoolean":false}],"id":"g3"}],` +
		`"family":"Doe","given":["John",null,"Q"],"use":"official"}],"resourceType":"Patient"}`
	r, err := r4.Unmarshal([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	if got := mustCanonical(t, r); got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	if ref, err := referenceCanonical([]byte(in)); err != nil || string(ref) != want {
		t.Errorf("oracle disagrees: %s, %v", ref, err)
	}
}

func TestCanonicalNestedResources(t *testing.T) {
	b := &r4.Bundle{
		Type: r4.NewCode("collection"),
		Entry: []r4.BundleEntry{
			{FullURL: r4.NewURI("urn:uuid:1"), Resource: &r4.Patient{ID: "p", Active: r4.NewBoolean(false)}},
			{Resource: (*r4.Patient)(nil)}, // a nil resource is left out, and so the empty entry
			{Response: &r4.BundleEntryResponse{Status: r4.NewString("200"),
				Outcome: &r4.OperationOutcome{Issue: []r4.OperationOutcomeIssue{{Severity: r4.NewCode("information"), Code: r4.NewCode("informational")}}}}},
		},
		Total: &r4.UnsignedInt{Value: 0, Present: true},
	}
	want := `{"entry":[{"fullUrl":"urn:uuid:1","resource":{"active":false,"id":"p","resourceType":"Patient"}},` +
		`{"response":{"outcome":{"issue":[{"code":"informational","severity":"information"}],"resourceType":"OperationOutcome"},"status":"200"}}],` +
		`"resourceType":"Bundle","total":0,"type":"collection"}`
	if got := mustCanonical(t, b); got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	p := &r4.Patient{Contained: []r4.Resource{nil, &r4.Observation{Status: r4.NewCode("final"), ValueQuantity: &r4.Quantity{Value: r4.NewDecimal("1.50")}}}}
	want = `{"contained":[{"resourceType":"Observation","status":"final","valueQuantity":{"value":1.50}}],"resourceType":"Patient"}`
	if got := mustCanonical(t, p); got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

// TestEmptyPrimitiveItemsDropped: an item of a repeating primitive with
// neither a value nor an id or extension is left out of both arrays, by the
// canonical encoder and by Marshal alike.
func TestEmptyPrimitiveItemsDropped(t *testing.T) {
	ext := []r4.Extension{{URL: "http://e/x", ValueString: r4.NewString("v")}}
	p := &r4.Patient{Name: []r4.HumanName{{Given: []r4.String{
		{Value: "A", Present: true},
		{},               // nothing: dropped
		{Extension: ext}, // extension only: null in the value array
		{Value: "B", Present: true},
		{Present: false},           // nothing: dropped
		{Value: "", Present: true}, // an empty string given explicitly is a value
	}}}}
	wantCanon := `{"name":[{"_given":[null,{"extension":[{"url":"http://e/x","valueString":"v"}]},null,null],"given":["A",null,"B",""]}],"resourceType":"Patient"}`
	if got := mustCanonical(t, p); got != wantCanon {
		t.Errorf("canonical\n got  %s\nwant %s", got, wantCanon)
	}
	wantMarshal := `{"resourceType":"Patient","name":[{"given":["A",null,"B",""],"_given":[null,{"extension":[{"url":"http://e/x","valueString":"v"}]},null,null]}]}`
	if got := mustMarshal(t, p); got != wantMarshal {
		t.Errorf("Marshal\n got  %s\nwant %s", got, wantMarshal)
	}

	// Clearing values in place removes them.
	in := `{"resourceType":"Patient","name":[{"given":["A","B","C"],"_given":[null,{"id":"b"},null]}]}`
	r, err := r4.Unmarshal([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	given := r.(*r4.Patient).Name[0].Given
	given[0].Clear()
	given[1].Clear()
	if got, want := mustCanonical(t, r), `{"name":[{"_given":[{"id":"b"},null],"given":[null,"C"]}],"resourceType":"Patient"}`; got != want {
		t.Errorf("after Clear, canonical\n got  %s\nwant %s", got, want)
	}
	if got, want := mustMarshal(t, r), `{"resourceType":"Patient","name":[{"given":[null,"C"],"_given":[{"id":"b"},null]}]}`; got != want {
		t.Errorf("after Clear, Marshal\n got  %s\nwant %s", got, want)
	}
	given[2].Clear()
	if got, want := mustCanonical(t, r), `{"name":[{"_given":[{"id":"b"}]}],"resourceType":"Patient"}`; got != want {
		t.Errorf("only an id left, canonical\n got  %s\nwant %s", got, want)
	}
	given[1].ID = ""
	want := `{"resourceType":"Patient"}`
	if got := mustCanonical(t, r); got != want {
		t.Errorf("all cleared, canonical: got %s, want %s", got, want)
	}
	if got := mustMarshal(t, r); got != want {
		t.Errorf("all cleared, Marshal: got %s, want %s", got, want)
	}
	// Both outputs decode.
	for _, s := range []string{wantCanon, wantMarshal} {
		if _, err := r4.Unmarshal([]byte(s)); err != nil {
			t.Errorf("%s: %v", s, err)
		}
	}
}

func TestCanonicalEmptyValuesLeftOut(t *testing.T) {
	p := &r4.Patient{
		Meta:       &r4.Meta{},                                      // empty: left out
		Identifier: []r4.Identifier{{}, {Value: r4.NewString("1")}}, // the empty item is left out
		Telecom:    []r4.ContactPoint{{}},                           // all empty: the array is left out
		BirthDate:  &r4.Date{},                                      // no value, no element
		Gender:     &r4.Code{ID: "g"},                               // element only
		Extension:  []r4.Extension{{URL: "u", ValueInteger: &r4.Integer{Value: 0, Present: true}}},
	}
	want := `{"_gender":{"id":"g"},"extension":[{"url":"u","valueInteger":0}],"identifier":[{"value":"1"}],"resourceType":"Patient"}`
	if got := mustCanonical(t, p); got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

func TestCanonicalErrors(t *testing.T) {
	check := func(r r4.Resource, where, what string) {
		t.Helper()
		out, err := r4.AppendCanonical([]byte("prefix"), r)
		var ee *r4.EncodeError
		if !errors.As(err, &ee) || !errors.Is(err, r4.ErrInvalidValue) {
			t.Fatalf("error %v (%T), want an *EncodeError matching ErrInvalidValue", err, err)
		}
		if !strings.Contains(ee.Reason, where+": ") || !strings.Contains(err.Error(), what) {
			t.Errorf("error %q does not say %q at %q", err, what, where)
		}
		if string(out) != "prefix" {
			t.Errorf("on error the buffer became %q", out)
		}
	}
	obs := &r4.Observation{Status: r4.NewCode("final"), ValueQuantity: &r4.Quantity{Value: &r4.Decimal{Value: "1,5", Present: true}}}
	check(obs, "Observation.valueQuantity.value", `decimal "1,5" is not a JSON number`)

	bundle := &r4.Bundle{Entry: []r4.BundleEntry{
		{Resource: &r4.Patient{ID: "ok"}},
		{Resource: &r4.Patient{Name: []r4.HumanName{{Given: []r4.String{{}, {Value: "x", Present: true}, {Value: "bad\xff", Present: true}}}}}},
	}}
	check(bundle, "Bundle.entry[1].resource.name[0].given[2]", "not valid UTF-8")

	ext := &r4.Patient{Contained: []r4.Resource{&r4.Patient{}, &r4.Patient{BirthDate: &r4.Date{Extension: []r4.Extension{{URL: "u", ValueDecimal: r4.NewDecimal("1.")}}}}}}
	check(ext, "Patient.contained[1].birthDate.extension[0].valueDecimal", `decimal "1." is not a JSON number`)

	id := &r4.Patient{Meta: &r4.Meta{ID: "\xc0"}}
	check(id, "Patient.meta.id", "not valid UTF-8")

	// Marshal is lenient with invalid UTF-8 (it writes U+FFFD) and strict
	// with decimals.
	if got := mustMarshal(t, id); got != `{"resourceType":"Patient","meta":{"id":"`+"\uFFFD"+`"}}` {
		t.Errorf("Marshal: %s", got)
	}
	if _, err := r4.Marshal(obs); !errors.Is(err, r4.ErrInvalidValue) {
		t.Errorf("Marshal of a bad decimal: %v", err)
	}

	if _, err := r4.MarshalCanonical(nil); err == nil {
		t.Error("nil resource: no error")
	}
	if _, err := r4.MarshalCanonical((*r4.Patient)(nil)); err == nil {
		t.Error("nil *Patient: no error")
	}
}

func TestAppendCanonicalAppends(t *testing.T) {
	p := &r4.Patient{ID: "x"}
	out, err := r4.AppendCanonical([]byte("hash-input:"), p)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(out), `hash-input:{"id":"x","resourceType":"Patient"}`; got != want {
		t.Errorf("got %s, want %s", got, want)
	}
}

// TestCanonicalIgnoresInputOrder: two JSON texts with the same content in a
// different member order and spacing give the same canonical bytes.
func TestCanonicalIgnoresInputOrder(t *testing.T) {
	a := `{"resourceType":"Observation","status":"final","code":{"text":"t","coding":[{"system":"s","code":"c"}]},"valueQuantity":{"value":7.0,"unit":"mg"}}`
	b := `{ "valueQuantity" : { "unit" : "mg", "value" : 7.0 }, "code": {"coding": [{"code": "c", "system": "s"}], "text": "t"}, "status": "final", "resourceType": "Observation" }`
	ra, err := r4.Unmarshal([]byte(a))
	if err != nil {
		t.Fatal(err)
	}
	rb, err := r4.Unmarshal([]byte(b))
	if err != nil {
		t.Fatal(err)
	}
	ca, cb := mustCanonical(t, ra), mustCanonical(t, rb)
	if ca != cb {
		t.Errorf("%s\n%s", ca, cb)
	}
	if want := `{"code":{"coding":[{"code":"c","system":"s"}],"text":"t"},"resourceType":"Observation","status":"final","valueQuantity":{"unit":"mg","value":7.0}}`; ca != want {
		t.Errorf("got  %s\nwant %s", ca, want)
	}
}
