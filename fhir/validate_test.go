package fhir

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/acds-project/acds/internal/testrig/corpus"
)

// corpusBundles returns the paths of every Synthea and Inferno bundle the
// repository carries.
func corpusBundles(t testing.TB) []string {
	return corpus.JSON(t, corpus.Synthea, corpus.Inferno)
}

func TestAgreementWithReferenceValidator(t *testing.T) {
	dir := filepath.Dir(corpus.Path(t, corpus.ValidatorIndex))
	raw, err := os.ReadFile(filepath.Join(dir, "index.json"))
	if err != nil {
		t.Fatal(err)
	}
	var cases []struct {
		Name           string  `json:"name"`
		File           string  `json:"file"`
		ExpectedErrors int     `json:"expectedErrors"`
		Errors         [][]any `json:"errors"`
	}
	if err := json.Unmarshal(raw, &cases); err != nil {
		t.Fatal(err)
	}
	agree, sameCount := 0, 0
	var table strings.Builder
	for _, c := range cases {
		data, err := os.ReadFile(filepath.Join(dir, c.File))
		if err != nil {
			t.Fatal(err)
		}
		o := ValidateWith(data, upstreamRunSettings[c.Name])
		if o.ErrorCount() == c.ExpectedErrors {
			sameCount++
		}
		want, got := c.ExpectedErrors > 0, o.HasErrors()
		if want == got {
			agree++
			continue
		}
		var ours []string
		for _, is := range o.Issues {
			if is.Severity == SeverityError || is.Severity == SeverityFatal {
				ours = append(ours, is.String())
			}
		}
		var theirs []string
		for _, e := range c.Errors {
			if s, ok := e[0].(string); ok {
				theirs = append(theirs, s)
			}
		}
		table.WriteString("  " + c.Name + ": reference errors=" + itoa(c.ExpectedErrors) + ", ours=" + itoa(len(ours)) + "\n")
		table.WriteString("    reason: " + disagreementReason[c.Name] + "\n")
		for _, s := range theirs {
			table.WriteString("    reference: " + s + "\n")
		}
		for _, s := range ours {
			table.WriteString("    ours: " + s + "\n")
		}
	}
	pct := 100 * float64(agree) / float64(len(cases))
	t.Logf("agreement with the HL7 reference validator: %d/%d verdicts (%.1f%%), %d/%d error counts\ndisagreements (case, expected, got, why):\n%s",
		agree, len(cases), pct, sameCount, len(cases), table.String())
	if pct < 95 {
		t.Errorf("agreement %.1f%% is below 95%%", pct)
	}
}

// upstreamRunSettings are the run settings FHIR/fhir-test-cases
// (validator/manifest.json) gives the HL7 validator for a case, as our
// options; a case not listed runs with the defaults.
var upstreamRunSettings = map[string]ValidateOptions{
	// "validateContains": "IGNORE"
	"contained-resource-bad-id-ignore": {Contained: ContainedIgnore},
	// "security-checks": true
	"pat-security-bad-string": {SecurityChecks: true},
}

// disagreementReason explains the known disagreements with the reference
// validator, printed in the agreement table.
var disagreementReason = map[string]string{
	"ips-nz-pj":   "the only errors are LOINC display names; checking displays needs the LOINC terminology, which is out of scope (no terminology server in the enclave)",
	"pat-dob-ext": "the reference run refuses extensions it cannot resolve; we accept unknown extensions (Synthea and US Core data carry many), as the reference validator does for the hl7.org test domain",
}

func itoa(i int) string {
	b, _ := json.Marshal(i)
	return string(b)
}

func TestSharedBundlesAreValid(t *testing.T) {
	for _, f := range corpusBundles(t) {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		o := Validate(data)
		for _, is := range o.Issues {
			if is.Severity == SeverityError || is.Severity == SeverityFatal {
				t.Errorf("%s: %s", filepath.Base(f), is)
			}
		}
	}
}

func TestValidateFindings(t *testing.T) {
	cases := []struct {
		name, json, where, contains string
	}{
		{"bad date", `{"resourceType":"Patient","birthDate":"1970-02-30"}`, "Patient.birthDate", "date"},
		{"unknown property", `{"resourceType":"Patient","nickname":"x"}`, "Patient.nickname", "unrecognized"},
		{"array expected", `{"resourceType":"Patient","name":{"family":"X"}}`, "Patient.name", "JSON Array"},
		{"given index", `{"resourceType":"Patient","name":[{"given":["a",3]}]}`, "Patient.name[0].given[1]", "string"},
		{"required code", `{"resourceType":"Patient","gender":"woman"}`, "Patient.gender", "value set"},
		{"cardinality", `{"resourceType":"Observation","status":"final"}`, "Observation", "Observation.code"},
		{"two choices", `{"resourceType":"Observation","status":"final","code":{"text":"x"},"valueString":"a","valueBoolean":true}`, "Observation.valueBoolean", "only one"},
		{"target type", `{"resourceType":"Observation","status":"final","code":{"text":"x"},"subject":{"reference":"Medication/1"}}`, "Observation.subject.reference", "target type"},
		{"instant tz", `{"resourceType":"Observation","status":"final","code":{"text":"x"},"issued":"2020-01-01T10:00:00"}`, "Observation.issued", "timezone"},
		{"empty object", `{"resourceType":"Patient","maritalStatus":{}}`, "Patient.maritalStatus", "ele-1"},
		{"positiveInt", `{"resourceType":"Patient","multipleBirthInteger":1.5}`, "Patient.multipleBirthInteger", "integer"},
		{"id chars", `{"resourceType":"Patient","id":"a_b"}`, "Patient.id", "invalid"},
		{"dom-2", `{"resourceType":"Patient","contained":[{"resourceType":"Patient","id":"x","contained":[{"resourceType":"Basic","code":{"text":"t"}}]}],"link":[{"other":{"reference":"#x"},"type":"seealso"}]}`, "Patient.contained[0]", "dom-2"},
		{"fullUrl mismatch", `{"resourceType":"Bundle","type":"collection","entry":[{"fullUrl":"http://x/Patient/2","resource":{"resourceType":"Patient","id":"1"}}]}`, "Bundle.entry[0].fullUrl", "does not match"},
		{"unresolved uuid", `{"resourceType":"Bundle","type":"transaction","entry":[{"fullUrl":"urn:uuid:2f1a0b0e-9a56-4f25-8d19-2a6f04a5c0b1","resource":{"resourceType":"Observation","status":"final","code":{"text":"x"},"subject":{"reference":"urn:uuid:00000000-0000-4000-8000-000000000000"}},"request":{"method":"POST","url":"Observation"}}]}`, "Bundle.entry[0].resource", "resolve"},
		{"bdl-3", `{"resourceType":"Bundle","type":"transaction","entry":[{"fullUrl":"urn:uuid:2f1a0b0e-9a56-4f25-8d19-2a6f04a5c0b1","resource":{"resourceType":"Basic","code":{"text":"t"}}}]}`, "Bundle.entry[0]", "bdl-3"},
		{"syntax", `{"resourceType":"Patient",}`, "", "JSON"},
		{"qty-3", `{"resourceType":"Observation","status":"final","code":{"text":"x"},"valueQuantity":{"value":1,"code":"mg"}}`, "Observation.valueQuantity", "qty-3"},
		{"cpt-2", `{"resourceType":"Patient","telecom":[{"value":"555"}]}`, "Patient.telecom[0]", "cpt-2"},
		{"per-1", `{"resourceType":"Encounter","status":"finished","class":{"code":"AMB"},"period":{"start":"2020-02-01","end":"2020-01-01"}}`, "Encounter.period", "per-1"},
		{"att-1", `{"resourceType":"Patient","photo":[{"data":"AAAA"}]}`, "Patient.photo[0]", "att-1"},
		{"pat-1", `{"resourceType":"Patient","contact":[{"gender":"male"}]}`, "Patient.contact[0]", "pat-1"},
		{"ext-1", `{"resourceType":"Patient","extension":[{"url":"http://x.org/e","valueString":"a","extension":[{"url":"b","valueString":"c"}]}]}`, "Patient.extension[0]", "ext-1"},
		{"uuid target", `{"resourceType":"Bundle","type":"transaction","entry":[{"fullUrl":"urn:uuid:2f1a0b0e-9a56-4f25-8d19-2a6f04a5c0b1","resource":{"resourceType":"Medication"},"request":{"method":"POST","url":"Medication"}},{"fullUrl":"urn:uuid:2f1a0b0e-9a56-4f25-8d19-2a6f04a5c0b2","resource":{"resourceType":"Observation","status":"final","code":{"text":"x"},"subject":{"reference":"urn:uuid:2f1a0b0e-9a56-4f25-8d19-2a6f04a5c0b1"}},"request":{"method":"POST","url":"Observation"}}]}`, "Bundle.entry[1].resource.subject.reference", "target type"},
		{"obs-6", `{"resourceType":"Observation","status":"final","code":{"text":"x"},"component":[{"code":{"text":"y"},"valueString":"a","dataAbsentReason":{"text":"n/a"}}]}`, "Observation.component[0]", "obs-6"},
		{"not R4", `{"resourceType":"Patient","animal":{"species":{"text":"dog"}}}`, "Patient.animal", "not FHIR R4"},
		// Constraints evaluated as FHIRPath from the generated table.
		{"org-1", `{"resourceType":"Organization","id":"x"}`, "Organization", "org-1"},
		{"cmp-1", `{"resourceType":"Composition","status":"final","type":{"text":"t"},"date":"2020","author":[{"display":"a"}],"title":"t","section":[{"title":"s"}]}`, "Composition.section[0]", "cmp-1"},
		{"app-1", `{"resourceType":"Appointment","status":"booked","participant":[{"status":"accepted"}]}`, "Appointment.participant[0]", "app-1"},
		{"sqty-1 via the SimpleQuantity profile", `{"resourceType":"Observation","status":"final","code":{"text":"x"},"referenceRange":[{"low":{"value":1,"comparator":"<"}}]}`, "Observation.referenceRange[0].low", "sqty-1"},
		{"que-7 as corrected", `{"resourceType":"Questionnaire","status":"active","item":[{"linkId":"1","type":"boolean"},{"linkId":"2","type":"string","enableWhen":[{"question":"1","operator":"exists","answerString":"x"}]}]}`, "Questionnaire.item[1].enableWhen[0]", "que-7"},
		{"per-1 mixed precision", `{"resourceType":"Encounter","status":"finished","class":{"code":"AMB"},"period":{"start":"2020-01","end":"2020-01-15"}}`, "Encounter.period", "per-1"},
		{"xhtml entity", `{"resourceType":"Patient","text":{"status":"generated","div":"<div xmlns=\"http://www.w3.org/1999/xhtml\">ACME&reg;</div>"}}`, "Patient.text.div", "entity"},
		{"bare ampersand", `{"resourceType":"Patient","text":{"status":"generated","div":"<div xmlns=\"http://www.w3.org/1999/xhtml\">A & B</div>"}}`, "Patient.text.div", "&amp;"},
		{"extension context", `{"resourceType":"Patient","extension":[{"url":"http://hl7.org/fhir/StructureDefinition/patient-birthTime","valueDateTime":"2020-01-01T10:00:00Z"}]}`, "Patient.extension[0]", "not allowed to be used here"},
		{"bundle link relation", `{"resourceType":"Bundle","type":"searchset","link":[{"relation":"self","url":"http://x.org/a"},{"relation":"self","url":"http://x.org/b"}]}`, "Bundle.link[1]", "repeated"},
		{"contained id length", `{"resourceType":"Condition","subject":{"reference":"#` + strings.Repeat("a", 65) + `"},"contained":[{"resourceType":"Patient","id":"` + strings.Repeat("a", 65) + `"}]}`, "Condition.contained[0].id", "too long"},
		{"ctm-1 through resolve() in the Bundle", `{"resourceType":"Bundle","type":"collection","entry":[{"fullUrl":"http://x.org/CareTeam/c","resource":{"resourceType":"CareTeam","id":"c","participant":[{"member":{"reference":"Patient/p"},"onBehalfOf":{"reference":"Organization/o"}}]}},{"fullUrl":"http://x.org/Patient/p","resource":{"resourceType":"Patient","id":"p"}},{"fullUrl":"http://x.org/Organization/o","resource":{"resourceType":"Organization","id":"o","name":"x"}}]}`, "Bundle.entry[0].resource.participant[0]", "ctm-1"},
		{"dom-3", `{"resourceType":"Condition","subject":{"reference":"Patient/p"},"contained":[{"resourceType":"Patient","id":"c1"}]}`, "Condition.contained[0]", "dom-3"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			o := Validate([]byte(c.json))
			for _, is := range o.Issues {
				if is.Severity != SeverityError && is.Severity != SeverityFatal {
					continue
				}
				if strings.Contains(is.Diagnostics, c.contains) && (c.where == "" || len(is.Expression) == 1 && is.Expression[0] == c.where) {
					return
				}
			}
			t.Errorf("no error at %q containing %q; got %v", c.where, c.contains, o.Issues)
		})
	}
}

// TestValidateAcceptsConstraintEdgeCases: what the constraints must not
// refuse: a contained resource referenced only from another contained
// one or through a canonical "#id", XML entities and character
// references in narrative, a core extension in its context, a Period of
// different precisions that is certainly ordered, HTML in a string (a
// warning only, as the HL7 validator's default), and a constraint that
// names elements the element's type lacks (ras-1 on a decimal).
func TestValidateAcceptsConstraintEdgeCases(t *testing.T) {
	for _, in := range []string{
		`{"resourceType":"Questionnaire","status":"active","contained":[{"resourceType":"ValueSet","id":"vs","status":"active"},{"resourceType":"Provenance","id":"pv","target":[{"reference":"#"}],"recorded":"2020-01-01T00:00:00Z","agent":[{"who":{"reference":"#org"}}]},{"resourceType":"Organization","id":"org","name":"Acme"}],"item":[{"linkId":"1","type":"choice","answerValueSet":"#vs"}]}`,
		`{"resourceType":"Patient","text":{"status":"generated","div":"<div xmlns=\"http://www.w3.org/1999/xhtml\">A &amp; B &lt;&#174;&#xAE;</div>"}}`,
		`{"resourceType":"Patient","birthDate":"1970","_birthDate":{"extension":[{"url":"http://hl7.org/fhir/StructureDefinition/patient-birthTime","valueDateTime":"1970-01-01T10:00:00Z"}]}}`,
		`{"resourceType":"Encounter","status":"finished","class":{"code":"AMB"},"period":{"start":"2019","end":"2020-01-15"}}`,
		`{"resourceType":"Patient","name":[{"text":"<script>x</script>"}]}`,
		`{"resourceType":"RiskAssessment","status":"final","subject":{"reference":"Patient/p"},"prediction":[{"probabilityDecimal":20}]}`,
	} {
		if o := Validate([]byte(in)); o.HasErrors() {
			t.Errorf("%s: unexpected errors: %v", in, o.Issues)
		}
	}
	o := Validate([]byte(`{"resourceType":"Patient","name":[{"text":"<script>x</script>"}]}`))
	if len(o.Issues) == 0 || !strings.Contains(fmt.Sprint(o.Issues), "HTML") {
		t.Errorf("HTML in a string: no warning: %v", o.Issues)
	}
}

func TestValidateAcceptsGoodResource(t *testing.T) {
	// Text with a "<" that is not markup is fine.
	if o := Validate([]byte(`{"resourceType":"Patient","name":[{"text":"pain <a few days, x<y"}]}`)); o.HasErrors() {
		t.Fatalf("unexpected errors: %v", o.Issues)
	}
	o := Validate([]byte(`{"resourceType":"Patient","id":"p1","text":{"status":"generated","div":"<div xmlns=\"http://www.w3.org/1999/xhtml\">x</div>"},
		"name":[{"family":"Chalmers","given":["Peter",null],"_given":[null,{"extension":[{"url":"http://example.org/x","valueString":"y"}]}]}],
		"gender":"male","birthDate":"1974-12-25","_birthDate":{"extension":[{"url":"http://hl7.org/fhir/StructureDefinition/patient-birthTime","valueDateTime":"1974-12-25T14:35:45-05:00"}]}}`))
	if o.HasErrors() {
		t.Fatalf("unexpected errors: %v", o.Issues)
	}
}

// TestSyntaxErrorIsFatal: malformed JSON is one fatal issue that says
// where, and Process refuses it with an *InvalidError.
func TestSyntaxErrorIsFatal(t *testing.T) {
	in := []byte("{\"resourceType\":\"Patient\",\n\"active\":}")
	o := Validate(in)
	if len(o.Issues) != 1 || o.Issues[0].Severity != SeverityFatal ||
		!strings.Contains(o.Issues[0].Diagnostics, "error parsing JSON") || !strings.Contains(o.Issues[0].Diagnostics, "at byte") {
		t.Fatalf("got %v", o.Issues)
	}
	_, err := Process(in, Options{})
	var ie *InvalidError
	if !errors.As(err, &ie) || !errors.Is(err, ErrInvalid) {
		t.Fatalf("Process: %v", err)
	}
}

// TestManyWarningsStayValid: a large Bundle with a warning per resource is
// still valid, and a Bundle with more errors than are reported is still
// invalid.
func TestIssueCaps(t *testing.T) {
	var b strings.Builder
	b.WriteString(`{"resourceType":"Bundle","type":"collection","entry":[`)
	for i := range 1500 {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`{"fullUrl":"urn:uuid:00000000-0000-4000-8000-` + strings.Repeat("0", 12-len(itoa(i))) + itoa(i) + `","resource":{"resourceType":"Basic","code":{"text":"x"}}}`)
	}
	b.WriteString(`]}`)
	o := Validate([]byte(b.String()))
	if o.HasErrors() || len(o.Issues) > maxWarnings+1 {
		t.Fatalf("warnings only: errors=%d issues=%d", o.ErrorCount(), len(o.Issues))
	}
	bad := strings.ReplaceAll(b.String(), `"code":{"text":"x"}`, `"code":{"text":"x"},"bogus":1`)
	o = Validate([]byte(bad))
	if !o.HasErrors() || o.ErrorCount() > maxErrors+1 {
		t.Fatalf("errors: %d", o.ErrorCount())
	}
}

// TestHostileShapes: inputs built to be slow (many duplicate keys, deep
// nesting) are rejected quickly with typed findings.
func TestHostileShapes(t *testing.T) {
	var b strings.Builder
	b.WriteString(`{"resourceType":"Patient"`)
	for range 200000 {
		b.WriteString(`,"name":[{"family":"x"}]`)
	}
	b.WriteString(`}`)
	if o := Validate([]byte(b.String())); !o.HasErrors() {
		t.Fatal("duplicate keys accepted")
	}
	deep := strings.Repeat(`{"a":`, 10000) + `1` + strings.Repeat(`}`, 10000)
	o := Validate([]byte(deep))
	if !o.HasErrors() || !strings.Contains(o.Issues[0].Diagnostics, "nesting") {
		t.Fatalf("deep nesting: %v", o.Issues)
	}
}

// TestExtensibleBindingWarns: a code outside an extensible value set is a
// warning, not an error, as the HL7 validator reports it.
func TestExtensibleBindingWarns(t *testing.T) {
	o := Validate([]byte(`{"resourceType":"Patient","identifier":[{"type":{"coding":[{"system":"http://example.org/t","code":"X"}]},"value":"1"}]}`))
	if o.HasErrors() {
		t.Fatalf("errors: %v", o.Issues)
	}
	for _, is := range o.Issues {
		if is.Severity == SeverityWarning && strings.Contains(is.Diagnostics, "extensible") && is.Expression[0] == "Patient.identifier[0].type" {
			return
		}
	}
	t.Fatalf("no extensible-binding warning: %v", o.Issues)
}

// TestDecodeAndValidate: the typed pipeline returns the decoded resource
// with every finding, flags other FHIR versions, and reports a member the
// decoder rejected once, not again as missing.
func TestDecodeAndValidate(t *testing.T) {
	o, r, notR4 := decodeAndValidate([]byte(`{"resourceType":"Observation","status":"final","code":5,"foo":1,"bar":2}`), DefaultMaxBytes)
	if r == nil || r.ResourceType() != "Observation" || notR4 {
		t.Fatalf("resource %v, notR4 %v", r, notR4)
	}
	var errs []string
	for _, is := range o.Issues {
		if is.Severity == SeverityError {
			errs = append(errs, is.Expression[0])
		}
	}
	if strings.Join(errs, " ") != "Observation.code Observation.foo Observation.bar" {
		t.Errorf("errors at %v; want code (wrong type, not also missing), foo, bar: %v", errs, o.Issues)
	}

	// Also deeper down, and for a repeating element whose items were all rejected.
	for _, c := range []struct{ json, where string }{
		{`{"resourceType":"Patient","link":[{"other":5,"type":"seealso"}]}`, "Patient.link[0].other"},
		{`{"resourceType":"Bundle","type":"collection","entry":[{"fullUrl":"urn:uuid:2f1a0b0e-9a56-4f25-8d19-2a6f04a5c0b1","resource":{"resourceType":"Observation","status":"final","code":{"text":"x"},"component":[{"code":{"coding":[{"code":5}]}}]}}]}`,
			"Bundle.entry[0].resource.component[0].code.coding[0].code"},
		{`{"resourceType":"Group","type":"person","actual":true,"characteristic":[{"code":{"text":"c"},"valueBoolean":true,"exclude":"no"}]}`, "Group.characteristic[0].exclude"},
	} {
		o, _, _ := decodeAndValidate([]byte(c.json), DefaultMaxBytes)
		if o.ErrorCount() != 1 || o.Issues[0].Expression[0] != c.where {
			t.Errorf("%s: want one error, at %s: %v", c.json, c.where, o.Issues)
		}
	}

	_, r, notR4 = decodeAndValidate([]byte(`{"resourceType":"Bundle","type":"collection","entry":[{"fullUrl":"urn:uuid:2f1a0b0e-9a56-4f25-8d19-2a6f04a5c0b1","resource":{"resourceType":"MedicationOrder"}}]}`), DefaultMaxBytes)
	if r == nil || !notR4 {
		t.Errorf("DSTU2 entry: resource %v, notR4 %v; want the Bundle and true", r, notR4)
	}
	// An STU3 property the decoder does not know as such is recognised
	// once the walk knows the resource type.
	o, r, notR4 = decodeAndValidate([]byte(`{"resourceType":"Bundle","type":"collection","entry":[{"fullUrl":"urn:uuid:2f1a0b0e-9a56-4f25-8d19-2a6f04a5c0b1","resource":{"resourceType":"Observation","status":"final","code":{"text":"x"},"valueAttachment":{"url":"http://x.org/a"}}}]}`), DefaultMaxBytes)
	if r == nil || !notR4 || o.Issues[0].Code != "not-supported" || o.Issues[0].Expression[0] != "Bundle.entry[0].resource.valueAttachment" {
		t.Errorf("STU3 valueAttachment: notR4 %v, %v", notR4, o.Issues)
	}
	o, r, notR4 = decodeAndValidate([]byte(`{"resourceType":"Foo"}`), DefaultMaxBytes)
	if r != nil || notR4 || !o.HasErrors() || !strings.Contains(o.Issues[0].Diagnostics, "unknown resource type") {
		t.Errorf("unknown type: resource %v, notR4 %v, %v", r, notR4, o.Issues)
	}
	o, r, _ = decodeAndValidate([]byte(`{"resourceType":"Patient"}`), 10)
	if r != nil || len(o.Issues) != 1 || o.Issues[0].Severity != SeverityFatal || o.Issues[0].Code != "too-costly" {
		t.Errorf("over the size limit: %v", o.Issues)
	}
	o, r, _ = decodeAndValidate([]byte(`{"resourceType":"Patient",`), DefaultMaxBytes)
	if r != nil || len(o.Issues) != 1 || o.Issues[0].Severity != SeverityFatal || !strings.Contains(o.Issues[0].Diagnostics, "error parsing JSON") {
		t.Errorf("malformed JSON: %v", o.Issues)
	}
}

// TestChecksOnPlainStrings: Extension.url, which the walk does not
// visit, is still checked, and an element with only an id breaks ele-1.
func TestChecksOnPlainStrings(t *testing.T) {
	for _, c := range []struct{ json, where, contains string }{
		{`{"resourceType":"Patient","extension":[{"url":"http://x.org/a b","valueString":"x"}]}`, "Patient.extension[0].url", "whitespace"},
		{`{"resourceType":"Patient","extension":[{"valueString":"x"}]}`, "Patient.extension[0]", "Extension.url"},
		{`{"resourceType":"Patient","maritalStatus":{"id":"m"}}`, "Patient.maritalStatus", "ele-1"},
		{`{"resourceType":"Patient","_birthDate":{"id":"b"}}`, "Patient.birthDate", "ele-1"},
	} {
		o := Validate([]byte(c.json))
		found := false
		for _, is := range o.Issues {
			found = found || is.Severity == SeverityError && len(is.Expression) == 1 && is.Expression[0] == c.where && strings.Contains(is.Diagnostics, c.contains)
		}
		if !found {
			t.Errorf("%s: no error at %s containing %q: %v", c.json, c.where, c.contains, o.Issues)
		}
	}
}

func TestHasResources(t *testing.T) {
	for _, c := range []struct {
		json string
		want bool
	}{
		{`{"resourceType":"Patient"}`, true},
		{`{"resourceType":"Bundle","type":"collection"}`, false},
		{`{"resourceType":"Bundle","type":"searchset","entry":[{"resource":{"resourceType":"OperationOutcome","issue":[{"severity":"error","code":"x"}]},"search":{"mode":"outcome"}}]}`, false},
		{`{"resourceType":"Bundle","type":"collection","entry":[{"resource":{"resourceType":"Provenance","meta":{"tag":[{"system":"urn:acds:tag","code":"provenance"}]}}}]}`, false},
		{`{"resourceType":"Bundle","type":"collection","entry":[{"resource":{"resourceType":"Provenance"}}]}`, true},
	} {
		_, r, _ := decodeAndValidate([]byte(c.json), DefaultMaxBytes)
		if r == nil {
			t.Fatalf("%s did not decode", c.json)
		}
		if got := hasResources(r); got != c.want {
			t.Errorf("%s: hasResources %v, want %v", c.json, got, c.want)
		}
	}
}

func TestFullURLMatches(t *testing.T) {
	for _, c := range []struct {
		fu, typ, id string
		want        bool
	}{
		{"http://x/Patient/1", "Patient", "1", true},
		{"/Patient/1", "Patient", "1", true},
		{"Patient/1", "Patient", "1", false},
		{"http://x/Patient/12", "Patient", "2", false},
		{"http://x/XPatient/1", "Patient", "1", false},
		{"", "Patient", "1", false},
	} {
		if got := fullURLMatches(c.fu, c.typ, c.id); got != c.want {
			t.Errorf("fullURLMatches(%q, %q, %q) = %v", c.fu, c.typ, c.id, got)
		}
	}
}

// TestElementIDs: element ids, which are plain strings in the model, are
// checked as strings wherever they are: on data types, backbone elements,
// extensions and primitives.
func TestElementIDs(t *testing.T) {
	for _, c := range []struct{ json, where string }{
		{`{"resourceType":"Patient","name":[{"id":" ","family":"x"}]}`, "Patient.name[0].id"},
		{`{"resourceType":"Patient","contact":[{"id":"   ","gender":"male"}]}`, "Patient.contact[0].id"},
		{`{"resourceType":"Patient","birthDate":"1970","_birthDate":{"id":"  "}}`, "Patient.birthDate.id"},
		{`{"resourceType":"Patient","extension":[{"id":"\t","url":"http://e.example","valueString":"v"}]}`, "Patient.extension[0].id"},
	} {
		o := Validate([]byte(c.json))
		found := false
		for _, is := range o.Issues {
			found = found || is.Severity == SeverityError && len(is.Expression) == 1 && is.Expression[0] == c.where
		}
		if !found {
			t.Errorf("%s: no error at %s: %v", c.json, c.where, o.Issues)
		}
	}
	if o := Validate([]byte(`{"resourceType":"Patient","name":[{"id":"n1","family":"x"}]}`)); o.HasErrors() {
		t.Errorf("a good element id is refused: %v", o.Issues)
	}
}
