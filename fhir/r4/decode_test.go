package r4_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/acds-project/acds/fhir/r4"
)

func mustDecode(t *testing.T, s string) r4.Resource {
	t.Helper()
	r, err := r4.Unmarshal([]byte(s))
	if err != nil {
		t.Fatalf("Unmarshal: %v", err)
	}
	return r
}

func mustEncode(t *testing.T, r r4.Resource) string {
	t.Helper()
	out, err := r4.Marshal(r)
	if err != nil {
		t.Fatalf("Marshal: %v", err)
	}
	return string(out)
}

func TestPrimitiveExtensionsAndNullAlignedArrays(t *testing.T) {
	const in = `{"resourceType":"Patient","name":[{"given":["Ann",null,"Bo"],"_given":[null,{"id":"g1","extension":[{"url":"http://x/y","valueString":"initial"}]},{"extension":[{"url":"http://x/z","valueBoolean":false}]}]}],` +
		`"birthDate":"1970-01-02","_birthDate":{"extension":[{"url":"http://hl7.org/fhir/StructureDefinition/patient-birthTime","valueDateTime":"1970-01-02T03:04:05Z"}]},` +
		`"_gender":{"extension":[{"url":"http://hl7.org/fhir/StructureDefinition/data-absent-reason","valueCode":"unknown"}]},` +
		`"multipleBirthInteger":0,"deceasedBoolean":false}`
	p := mustDecode(t, in).(*r4.Patient)
	given := p.Name[0].Given
	if len(given) != 3 || given[0].Value != "Ann" || given[1].Present || given[1].ID != "g1" || given[2].Value != "Bo" {
		t.Fatalf("given decoded wrongly: %+v", given)
	}
	if got := given[2].Extension[0].ValueBoolean; got == nil || got.Value || !got.Present {
		t.Fatalf("valueBoolean false not kept: %+v", got)
	}
	if p.BirthDate.Value != "1970-01-02" || p.BirthDate.Extension[0].ValueDateTime.Value != "1970-01-02T03:04:05Z" {
		t.Fatalf("birthDate: %+v", p.BirthDate)
	}
	if p.Gender == nil || p.Gender.Present || len(p.Gender.Extension) != 1 {
		t.Fatalf("_gender without gender: %+v", p.Gender)
	}
	if p.MultipleBirthInteger.Value != 0 || !p.MultipleBirthInteger.Present {
		t.Fatalf("multipleBirthInteger 0 lost")
	}
	// The encoder writes definition order: the expected text is the input
	// reordered.
	const want = `{"resourceType":"Patient","name":[{"given":["Ann",null,"Bo"],"_given":[null,{"id":"g1","extension":[{"url":"http://x/y","valueString":"initial"}]},{"extension":[{"url":"http://x/z","valueBoolean":false}]}]}],` +
		`"_gender":{"extension":[{"url":"http://hl7.org/fhir/StructureDefinition/data-absent-reason","valueCode":"unknown"}]},` +
		`"birthDate":"1970-01-02","_birthDate":{"extension":[{"url":"http://hl7.org/fhir/StructureDefinition/patient-birthTime","valueDateTime":"1970-01-02T03:04:05Z"}]},` +
		`"deceasedBoolean":false,"multipleBirthInteger":0}`
	if got := mustEncode(t, p); got != want {
		t.Fatalf("encode:\n got %s\nwant %s", got, want)
	}
}

func TestDecimalsKeepTheirDigits(t *testing.T) {
	const in = `{"resourceType":"Observation","status":"final","code":{"text":"x"},"valueQuantity":{"value":1.50,"unit":"mg"},"component":[{"code":{"text":"a"},"valueQuantity":{"value":-0.000e+10}},{"code":{"text":"b"},"valueQuantity":{"value":12345678901234567890.1234567890}}]}`
	o := mustDecode(t, in).(*r4.Observation)
	if o.ValueQuantity.Value.Value != "1.50" {
		t.Fatalf("decimal text %q", o.ValueQuantity.Value.Value)
	}
	out := mustEncode(t, o)
	for _, lit := range []string{`"value":1.50`, `"value":-0.000e+10`, `"value":12345678901234567890.1234567890`} {
		if !strings.Contains(out, lit) {
			t.Errorf("output lacks %s: %s", lit, out)
		}
	}
	o.ValueQuantity.Value = &r4.Decimal{Value: "1,5"}
	if _, err := r4.Marshal(o); !errors.Is(err, r4.ErrInvalidValue) {
		t.Fatalf("malformed decimal encoded, err = %v", err)
	}
}

func TestContainedAndNestedResources(t *testing.T) {
	const in = `{"resourceType":"Bundle","type":"collection","entry":[` +
		`{"fullUrl":"urn:uuid:1","resource":{"id":"p1","resourceType":"Patient","contained":[{"resourceType":"Organization","id":"o","name":"Org"}],"managingOrganization":{"reference":"#o"}}},` +
		`{"resource":{"resourceType":"Parameters","parameter":[{"name":"r","resource":{"resourceType":"Basic","code":{"text":"c"}}}]}}]}`
	b := mustDecode(t, in).(*r4.Bundle)
	p := b.Entry[0].Resource.(*r4.Patient)
	if p.ID != "p1" || p.Contained[0].(*r4.Organization).Name.Value != "Org" {
		t.Fatalf("contained: %+v", p)
	}
	if _, ok := b.Entry[1].Resource.(*r4.Parameters).Parameter[0].Resource.(*r4.Basic); !ok {
		t.Fatalf("Parameters.parameter.resource not decoded")
	}
	out := mustEncode(t, b)
	if !strings.Contains(out, `"resource":{"resourceType":"Patient","id":"p1","contained":[{"resourceType":"Organization","id":"o","name":"Org"}]`) {
		t.Fatalf("resourceType not first or contained lost: %s", out)
	}
}

func TestDecodeErrors(t *testing.T) {
	deep := `{"resourceType":"Basic","extension":[` + strings.Repeat(`{"url":"u","extension":[`, 60) + `{"url":"u","valueString":"x"}` + strings.Repeat(`]}`, 60) + `]}`
	tests := []struct {
		name, in string
		class    error
		path     string
	}{
		{"unknown property", `{"resourceType":"Patient","name":[{"family":"X","nickname":"Y"}]}`, r4.ErrUnknownProperty, "Patient.name[0].nickname"},
		{"unknown in bundle entry", `{"resourceType":"Bundle","type":"collection","entry":[{},{"resource":{"resourceType":"Patient","foo":1}}]}`, r4.ErrInvalidValue, "Bundle.entry[0]"},
		{"unknown in entry resource", `{"resourceType":"Bundle","type":"collection","entry":[{"fullUrl":"x"},{"resource":{"resourceType":"Patient","foo":1}}]}`, r4.ErrUnknownProperty, "Bundle.entry[1].resource.foo"},
		{"unknown in primitive companion", `{"resourceType":"Patient","_birthDate":{"value":"x"}}`, r4.ErrUnknownProperty, "Patient.birthDate.value"},
		{"wrong JSON type", `{"resourceType":"Patient","active":"true"}`, r4.ErrInvalidValue, "Patient.active"},
		{"string for object", `{"resourceType":"Patient","name":["x"]}`, r4.ErrInvalidValue, "Patient.name[0]"},
		{"non-integer", `{"resourceType":"Patient","multipleBirthInteger":1.5}`, r4.ErrInvalidValue, "Patient.multipleBirthInteger"},
		{"integer overflow", `{"resourceType":"Patient","multipleBirthInteger":12345678901234567890}`, r4.ErrInvalidValue, "Patient.multipleBirthInteger"},
		{"null single", `{"resourceType":"Patient","gender":null}`, r4.ErrInvalidValue, "Patient.gender"},
		{"empty object", `{"resourceType":"Patient","meta":{}}`, r4.ErrInvalidValue, "Patient.meta"},
		{"empty array", `{"resourceType":"Patient","name":[]}`, r4.ErrInvalidValue, "Patient.name"},
		{"duplicate", `{"resourceType":"Patient","gender":"male","gender":"female"}`, r4.ErrDuplicateProperty, "Patient.gender"},
		{"misaligned companion", `{"resourceType":"Patient","name":[{"given":["a","b"],"_given":[null]}]}`, r4.ErrInvalidValue, "Patient.name[0].given"},
		{"no resourceType", `{"id":"x"}`, r4.ErrMissingResourceType, ""},
		{"unknown resourceType", `{"resourceType":"MedicationOrder","id":"x"}`, r4.ErrNotR4, ""},
		{"unknown nested resourceType", `{"resourceType":"Bundle","type":"collection","entry":[{"resource":{"resourceType":"ProcedureRequest"}}]}`, r4.ErrNotR4, "Bundle.entry[0].resource"},
		{"resourceType mismatch", `{"resourceType":"Patient","resourceType":"Basic"}`, r4.ErrInvalidValue, "Patient.resourceType"},
		{"trailing data", `{"resourceType":"Patient"} {}`, r4.ErrSyntax, ""},
		{"truncated", `{"resourceType":"Patient","name":[{"family":"X"`, r4.ErrSyntax, "Patient.name[0]"},
		{"bad escape", `{"resourceType":"Patient","gender":"\q"}`, r4.ErrSyntax, "Patient.gender"},
		{"lone surrogate", `{"resourceType":"Patient","gender":"\ud800"}`, r4.ErrInvalidValue, "Patient.gender"},
		{"invalid UTF-8", "{\"resourceType\":\"Patient\",\"gender\":\"\xff\"}", r4.ErrInvalidValue, "Patient.gender"},
		{"control character", "{\"resourceType\":\"Patient\",\"gender\":\"a\nb\"}", r4.ErrSyntax, "Patient.gender"},
		{"not an object", `[1,2]`, r4.ErrInvalidValue, ""},
		{"too deep", deep, r4.ErrLimit, ""},
		{"STU3 clinicalStatus", `{"resourceType":"Condition","clinicalStatus":"active","subject":{"reference":"Patient/1"}}`, r4.ErrNotR4, "Condition.clinicalStatus"},
		{"DSTU2 Condition.patient", `{"resourceType":"Bundle","type":"collection","entry":[{"resource":{"resourceType":"Condition","patient":{"reference":"Patient/1"}}}]}`, r4.ErrNotR4, "Bundle.entry[0].resource.patient"},
		{"fhir_comments", `{"resourceType":"Patient","fhir_comments":["x"]}`, r4.ErrNotR4, "Patient.fhir_comments"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := r4.Unmarshal([]byte(tt.in))
			if !errors.Is(err, tt.class) {
				t.Fatalf("err = %v, want class %v", err, tt.class)
			}
			var de *r4.DecodeError
			if !errors.As(err, &de) {
				t.Fatalf("err %T is not a *DecodeError", err)
			}
			if tt.path != "" && de.Path != tt.path {
				t.Fatalf("path = %q, want %q (%v)", de.Path, tt.path, err)
			}
			if de.Offset < 0 || de.Offset > len(tt.in) {
				t.Fatalf("offset %d outside input", de.Offset)
			}
		})
	}
}

func TestNotR4DoesNotMatchOrdinaryErrors(t *testing.T) {
	_, err := r4.Unmarshal([]byte(`{"resourceType":"Patient","nickname":"x"}`))
	if !errors.Is(err, r4.ErrUnknownProperty) || errors.Is(err, r4.ErrNotR4) {
		t.Fatalf("err = %v", err)
	}
}

func TestLimits(t *testing.T) {
	in := []byte(`{"resourceType":"Patient","name":[{"family":"X"}]}`)
	if _, err := (r4.Options{MaxBytes: 10}).Unmarshal(in); !errors.Is(err, r4.ErrLimit) {
		t.Fatalf("size limit: %v", err)
	}
	if _, err := (r4.Options{MaxDepth: 2}).Unmarshal(in); !errors.Is(err, r4.ErrLimit) {
		t.Fatalf("depth limit: %v", err)
	}
	if _, err := (r4.Options{MaxDepth: 3}).Unmarshal(in); err != nil {
		t.Fatalf("depth 3: %v", err)
	}
}

func TestResourceTypeNotFirst(t *testing.T) {
	r := mustDecode(t, `{"id":"a","gender":"male","resourceType":"Patient","name":[{"family":"Z"}]}`)
	if got := mustEncode(t, r); got != `{"resourceType":"Patient","id":"a","name":[{"family":"Z"}],"gender":"male"}` {
		t.Fatalf("got %s", got)
	}
}

func TestEncodingJSONInterop(t *testing.T) {
	var p r4.Patient
	if err := json.Unmarshal([]byte(`{"resourceType":"Patient","id":"x","active":true}`), &p); err != nil {
		t.Fatal(err)
	}
	if p.ID != "x" || !p.Active.Value {
		t.Fatalf("got %+v", p)
	}
	if err := json.Unmarshal([]byte(`{"resourceType":"Basic"}`), &p); !errors.Is(err, r4.ErrInvalidValue) {
		t.Fatalf("wrong resourceType accepted: %v", err)
	}
	wrapper := struct {
		R *r4.Patient     `json:"r"`
		C *r4.HumanName   `json:"c"`
		Q []r4.Identifier `json:"q"`
	}{R: &r4.Patient{ID: "y"}, C: &r4.HumanName{Family: r4.NewString("F")}, Q: []r4.Identifier{{Value: r4.NewString("1")}}}
	out, err := json.Marshal(wrapper)
	if err != nil {
		t.Fatal(err)
	}
	if string(out) != `{"r":{"resourceType":"Patient","id":"y"},"c":{"family":"F"},"q":[{"value":"1"}]}` {
		t.Fatalf("got %s", out)
	}
	var h r4.HumanName
	err = json.Unmarshal([]byte(`{"family":"F","x":1}`), &h)
	var de *r4.DecodeError
	if !errors.As(err, &de) || de.Path != "HumanName.x" {
		t.Fatalf("data type decode error: %v", err)
	}
}

func TestEncoderEscapingAndEmptyValues(t *testing.T) {
	p := &r4.Patient{
		ID:      "e",
		Meta:    &r4.Meta{},                                                           // empty: omitted
		Name:    []r4.HumanName{{}, {Text: r4.NewString("a\"b\\c\n\x01\u2028é\xff")}}, // first is empty: omitted
		Telecom: []r4.ContactPoint{{}},                                                // all empty: omitted
		Active:  &r4.Boolean{},                                                        // no value: omitted
	}
	got := mustEncode(t, p)
	want := `{"resourceType":"Patient","id":"e","name":[{"text":"a\"b\\c\n\u0001` + "\u2028é\uFFFD" + `"}]}`
	if got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
	if !json.Valid([]byte(got)) {
		t.Fatal("output is not valid JSON")
	}
}

func TestNewAndResourceTypes(t *testing.T) {
	types := r4.ResourceTypes()
	if len(types) < 140 {
		t.Fatalf("only %d resource types", len(types))
	}
	for _, rt := range types {
		r, err := r4.New(rt)
		if err != nil || r.ResourceType() != rt {
			t.Fatalf("New(%q) = %v, %v", rt, r, err)
		}
		r.SetResourceID("id1")
		if r.ResourceID() != "id1" {
			t.Fatalf("%s: SetResourceID", rt)
		}
		if got := mustEncode(t, r); got != `{"resourceType":"`+rt+`","id":"id1"}` {
			t.Fatalf("%s: %s", rt, got)
		}
	}
	for _, old := range []string{"MedicationOrder", "ProcedureRequest", "DataElement", "Conformance", "patient", ""} {
		if _, err := r4.New(old); !errors.Is(err, r4.ErrNotR4) {
			t.Errorf("New(%q): %v", old, err)
		}
		if r4.IsResourceType(old) {
			t.Errorf("IsResourceType(%q)", old)
		}
	}
	if len(r4.DataTypes()) < 35 {
		t.Fatalf("data types: %v", r4.DataTypes())
	}
}

func TestCompanionBeforeValueAndNestedResourceTypeLast(t *testing.T) {
	const in = `{"resourceType":"Bundle","type":"collection","entry":[{"resource":{"name":[{"_given":[{"id":"a"},null],"given":[null,"B"]}],"contained":[{"id":"c","name":"N","resourceType":"Organization"}],"resourceType":"Patient"}}]}`
	b := mustDecode(t, in).(*r4.Bundle)
	p := b.Entry[0].Resource.(*r4.Patient)
	if g := p.Name[0].Given; len(g) != 2 || g[0].ID != "a" || g[0].Present || g[1].Value != "B" {
		t.Fatalf("given: %+v", g)
	}
	want := `{"resourceType":"Bundle","type":"collection","entry":[{"resource":{"resourceType":"Patient","contained":[{"resourceType":"Organization","id":"c","name":"N"}],"name":[{"given":[null,"B"],"_given":[{"id":"a"},null]}]}}]}`
	if got := mustEncode(t, b); got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
	// The depth limit still holds when resourceType comes last.
	if _, err := (r4.Options{MaxDepth: 7}).Unmarshal([]byte(in)); !errors.Is(err, r4.ErrLimit) {
		t.Fatalf("depth: %v", err)
	}
	if _, err := (r4.Options{MaxDepth: 8}).Unmarshal([]byte(in)); err != nil {
		t.Fatalf("depth 8: %v", err)
	}
}

func TestNilAndNull(t *testing.T) {
	if _, err := r4.Marshal((*r4.Patient)(nil)); err == nil {
		t.Fatal("Marshal of a nil *Patient succeeded")
	}
	if _, err := r4.Marshal(nil); err == nil {
		t.Fatal("Marshal(nil) succeeded")
	}
	b := &r4.Bundle{Type: r4.NewCode("collection"), Entry: []r4.BundleEntry{{Resource: (*r4.Patient)(nil)}}}
	p := &r4.Patient{Contained: []r4.Resource{nil, (*r4.Basic)(nil)}}
	if got := mustEncode(t, b); got != `{"resourceType":"Bundle","type":"collection"}` {
		t.Fatalf("nil entry resource: %s", got)
	}
	if got := mustEncode(t, p); got != `{"resourceType":"Patient"}` {
		t.Fatalf("nil contained: %s", got)
	}
	if err := r4.Walk(p, func(*r4.Path, any) error { return nil }); err != nil {
		t.Fatal(err)
	}
	var w struct {
		P *r4.Patient   `json:"p"`
		H r4.HumanName  `json:"h"`
		O *r4.HumanName `json:"o"`
	}
	if err := json.Unmarshal([]byte(`{"p":null,"h":null,"o":null}`), &w); err != nil {
		t.Fatalf("null members: %v", err)
	}
	out, err := json.Marshal(&w) // addressable, so H's pointer method is used
	if err != nil || string(out) != `{"p":null,"h":{},"o":null}` {
		t.Fatalf("got %s, %v", out, err)
	}
}

// TestModelMemoryLimit: a small JSON object can decode into a much larger
// struct; the default limit stops input built to expand that way, while the
// official examples (at most about 10 times their compact size) decode.
func TestModelMemoryLimit(t *testing.T) {
	in := `{"resourceType":"Basic","code":{"text":"x"},"extension":[` + strings.Repeat(`{"url":"a"},`, 50000) + `{"url":"a"}]}`
	_, err := r4.Unmarshal([]byte(in))
	if !errors.Is(err, r4.ErrLimit) {
		t.Fatalf("expanding input: %v", err)
	}
	if _, err := (r4.Options{MaxModelBytes: 1 << 30}).Unmarshal([]byte(in)); err != nil {
		t.Fatalf("with a larger limit: %v", err)
	}
	if _, err := (r4.Options{MaxModelBytes: 100}).Unmarshal([]byte(`{"resourceType":"Patient","name":[{"family":"X"}]}`)); !errors.Is(err, r4.ErrLimit) {
		t.Fatalf("tiny limit: %v", err)
	}
}

// TestByteOrderMark: a leading UTF-8 byte order mark is ignored, as RFC
// 8259 allows; anywhere else it is not white space.
func TestByteOrderMark(t *testing.T) {
	r, err := r4.Unmarshal([]byte("\ufeff{\"resourceType\":\"Patient\",\"id\":\"a\"}"))
	if err != nil || r.ResourceID() != "a" {
		t.Fatalf("got %v, %v", r, err)
	}
	if r, errs := (r4.Options{}).Decode([]byte("\ufeff{\"resourceType\":\"Patient\"}")); r == nil || len(errs) != 0 {
		t.Fatalf("Decode: %v, %v", r, errs)
	}
	if _, err := r4.Unmarshal([]byte("{\"resourceType\":\"Patient\"}\ufeff")); !errors.Is(err, r4.ErrSyntax) {
		t.Fatalf("trailing BOM: %v", err)
	}
}
