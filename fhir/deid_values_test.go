package fhir

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/acds-project/acds"
)

// deidValues de-identifies in, checks that the output is valid R4 and
// returns the output JSON.
func deidValues(t *testing.T, in string) string {
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

// collection wraps resources (JSON objects with resourceType and id) into
// a collection Bundle whose fullUrls are http://example.org/fhir/Type/id.
func collection(t *testing.T, resources ...string) string {
	t.Helper()
	var b strings.Builder
	b.WriteString(`{"resourceType":"Bundle","type":"collection","entry":[`)
	for i, r := range resources {
		var h struct{ ResourceType, ID string }
		if err := json.Unmarshal([]byte(r), &h); err != nil {
			t.Fatalf("%v: %s", err, r)
		}
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`{"fullUrl":"http://example.org/fhir/` + h.ResourceType + "/" + h.ID + `","resource":` + r + "}")
	}
	b.WriteString("]}")
	return b.String()
}

// wantGoneKept reports every bad string found in s and every good string
// missing from it.
func wantGoneKept(t *testing.T, s string, bad, good []string) {
	t.Helper()
	for _, b := range bad {
		if strings.Contains(s, b) {
			t.Errorf("%q survived: %s", b, s)
		}
	}
	for _, g := range good {
		if !strings.Contains(s, g) {
			t.Errorf("want %s in %s", g, s)
		}
	}
}

// TestDeidentifyURIValues: URIs that may be the individual's own address
// (an answer's valueUri, a parameter's valueUri, Device.url, a policy
// URI) are removed; URIs that name terminology or definitions are kept.
func TestDeidentifyURIValues(t *testing.T) {
	s := deidValues(t, collection(t,
		`{"resourceType":"QuestionnaireResponse","id":"qr","status":"completed",
	  "questionnaire":"http://example.org/Questionnaire/phq9",
	  "item":[{"linkId":"1","definition":"http://example.org/Questionnaire/phq9#1","answer":[{"valueUri":"mailto:john.smith@example.org"}]},
	   {"linkId":"2","answer":[{"valueCoding":{"system":"http://loinc.org","code":"LA6568-5"}}]}]}`,
		`{"resourceType":"Parameters","id":"pa","parameter":[{"name":"a","valueUri":"tel:+1-617-555-0101"},{"name":"b","valueUrl":"http://jsmith.example.org/home"},{"name":"c","valueCanonical":"http://jsmith.example.org/Questionnaire/q"}]}`,
		`{"resourceType":"Device","id":"d","url":"http://johnsmith-pacemaker.example.org/",
	  "meta":{"profile":["http://hl7.org/fhir/StructureDefinition/Device"]},
	  "udiCarrier":[{"issuer":"http://hl7.org/fhir/NamingSystem/gs1-di","deviceIdentifier":"0123"}],
	  "type":{"coding":[{"system":"http://snomed.info/sct","code":"14106009"}]}}`,
		`{"resourceType":"Observation","id":"o","status":"final","code":{"coding":[{"system":"http://loinc.org","code":"8302-2"}]},
	  "valueQuantity":{"value":180,"unit":"cm","system":"http://unitsofmeasure.org","code":"cm"},
	  "subject":{"reference":"Patient/p","type":"Patient"}}`,
		`{"resourceType":"Patient","id":"p"}`,
		`{"resourceType":"CarePlan","id":"cp","status":"active","intent":"plan","subject":{"reference":"Patient/p"},
	  "instantiatesCanonical":["http://example.org/PlanDefinition/diabetes"],"instantiatesUri":["http://example.org/protocol/7"]}`,
		`{"resourceType":"Consent","id":"c","status":"active","scope":{"coding":[{"system":"http://terminology.hl7.org/CodeSystem/consentscope","code":"patient-privacy"}]},
	  "category":[{"coding":[{"system":"http://loinc.org","code":"59284-0"}]}],
	  "policy":[{"uri":"http://jsmith.example.org/my-consent-terms"}]}`,
		`{"resourceType":"DocumentManifest","id":"dm","status":"current","content":[{"reference":"Patient/p"}],"source":"urn:oid:1.3.6.1.4.1.21367.2009.1.2.1"}`))
	wantGoneKept(t, s,
		[]string{"mailto:", "john.smith", "tel:", "617-555-0101", "jsmith", "johnsmith", "1.3.6.1.4.1.21367"},
		[]string{`"questionnaire":"http://example.org/Questionnaire/phq9"`, `"definition":"http://example.org/Questionnaire/phq9#1"`,
			`"system":"http://loinc.org"`, `"system":"http://unitsofmeasure.org"`, `"system":"http://snomed.info/sct"`,
			`"profile":["http://hl7.org/fhir/StructureDefinition/Device"]`, `"issuer":"http://hl7.org/fhir/NamingSystem/gs1-di"`,
			`"type":"Patient"`, `"instantiatesCanonical":["http://example.org/PlanDefinition/diabetes"]`,
			`"instantiatesUri":["http://example.org/protocol/7"]`})
}

// TestDeidentifyDefinitionalURIs: the URIs of a definitional resource
// (its canonical url, value set bindings, item definitions) name
// artefacts and are kept; its implicitRules and an extension's URI value
// are still removed.
func TestDeidentifyDefinitionalURIs(t *testing.T) {
	s := deidValues(t, `{"resourceType":"Questionnaire","id":"q","status":"active",
	 "url":"http://example.org/Questionnaire/phq9","implicitRules":"http://jsmith.example.org/rules",
	 "extension":[{"url":"http://example.org/author","valueUri":"mailto:jsmith@example.org"}],
	 "item":[{"linkId":"1","type":"choice","definition":"http://example.org/StructureDefinition/x#y","answerValueSet":"http://example.org/ValueSet/yn"}]}`)
	wantGoneKept(t, s,
		[]string{"jsmith"},
		[]string{`"url":"http://example.org/Questionnaire/phq9"`, `"definition":"http://example.org/StructureDefinition/x#y"`,
			`"answerValueSet":"http://example.org/ValueSet/yn"`})
}

// TestDeidentifyOpenValues: the primitive values of extensions with
// arbitrary urls, of Parameters and of Task inputs may be identifiers and
// are removed; terminology (Coding, CodeableConcept), quantities,
// booleans and the codes of known extensions bound to value sets stay.
func TestDeidentifyOpenValues(t *testing.T) {
	s := deidValues(t, `{"resourceType":"Patient","id":"p1","extension":[
	 {"url":"http://example.org/ssn","valueCode":"123-45-6789"},{"url":"http://example.org/mrn","valueId":"MRN-0044551"},
	 {"url":"http://example.org/n","valueInteger":123456789},{"url":"http://example.org/d","valueDecimal":987654.321},
	 {"url":"http://example.org/o","valueOid":"urn:oid:1.2.3.4.5.6789"},{"url":"http://example.org/u","valueUuid":"urn:uuid:4c6f8a2e-0d43-4b5e-9f7a-1d2e3f405162"},
	 {"url":"http://example.org/pi","valuePositiveInt":55501},{"url":"http://example.org/ui","valueUnsignedInt":55502},
	 {"url":"http://example.org/t","valueTime":"13:14:15"},{"url":"http://example.org/md","valueMarkdown":"Jane **Roe**"},
	 {"url":"http://example.org/flag","valueBoolean":true},
	 {"url":"http://example.org/cc","valueCodeableConcept":{"coding":[{"system":"http://snomed.info/sct","code":"160245001"}]}},
	 {"url":"http://example.org/q","valueQuantity":{"value":72.5,"unit":"kg","system":"http://unitsofmeasure.org","code":"kg"}},
	 {"url":"http://hl7.org/fhir/us/core/StructureDefinition/us-core-birthsex","valueCode":"F"},
	 {"url":"http://hl7.org/fhir/us/core/StructureDefinition/us-core-race","extension":[
	  {"url":"ombCategory","valueCoding":{"system":"urn:oid:2.16.840.1.113883.6.238","code":"2106-3","display":"White"}},
	  {"url":"text","valueString":"White"}]}],
	 "gender":"female","_gender":{"extension":[{"url":"http://example.org/g","valueCode":"G-77123"}]},
	 "_birthDate":{"extension":[{"url":"http://hl7.org/fhir/StructureDefinition/data-absent-reason","valueCode":"unknown"}]}}`)
	wantGoneKept(t, s,
		[]string{"123-45-6789", "MRN-0044551", "123456789", "987654.321", "1.2.3.4.5.6789", "4c6f8a2e", "55501", "55502", "13:14:15", "Roe", "G-77123",
			"http://example.org/ssn", "http://example.org/n"},
		[]string{`{"url":"http://example.org/flag","valueBoolean":true}`, `"code":"160245001"`, `"value":72.5`,
			`{"url":"http://hl7.org/fhir/us/core/StructureDefinition/us-core-birthsex","valueCode":"F"}`, `"code":"2106-3"`,
			`"valueCode":"unknown"`})

	// A known extension keeps only the codes of its value set.
	s = deidValues(t, `{"resourceType":"Patient","id":"p2","extension":[{"url":"http://hl7.org/fhir/us/core/StructureDefinition/us-core-birthsex","valueCode":"123-45-6789"}]}`)
	wantGoneKept(t, s, []string{"123-45-6789", "us-core-birthsex"}, nil)

	s = deidValues(t, collection(t,
		`{"resourceType":"Parameters","id":"pa","parameter":[{"name":"a","valueInteger":123456789},{"name":"b","valueCode":"MRN-0044551"},
	  {"name":"c","valueString":"Jane Roe"},{"name":"d","valueBoolean":false},{"name":"e","valueCoding":{"system":"http://loinc.org","code":"8302-2"}}]}`,
		`{"resourceType":"Task","id":"t","status":"requested","intent":"order",
	  "input":[{"type":{"text":"mrn"},"valueId":"MRN-0044551"},{"type":{"text":"n"},"valueDecimal":123456789.5}],
	  "output":[{"type":{"text":"ok"},"valueBoolean":true}]}`))
	wantGoneKept(t, s, []string{"123456789", "MRN-0044551", "Jane Roe"},
		[]string{`"valueBoolean":false`, `"code":"8302-2"`, `"valueBoolean":true`})
}

// TestDeidentifyMaskedSurvivesAgain: de-identifying an output again keeps
// the data-absent-reason codes it carries (an extension code from a value
// set), so the second output is valid too and identical.
func TestDeidentifyMaskedSurvivesAgain(t *testing.T) {
	in := `{"resourceType":"QuestionnaireResponse","id":"qr","status":"completed","item":[{"linkId":"free text 1","answer":[{"valueUri":"mailto:a@b.example"}]}]}`
	opts := testOpts(acds.OutputFHIRR4Deidentified)
	out, err := Process([]byte(in), opts)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(out.JSON), `"valueCode":"masked"`) {
		t.Fatalf("expected a masked element: %s", out.JSON)
	}
	again, err := Process(out.JSON, opts)
	if err != nil {
		t.Fatal(err)
	}
	if o := Validate(again.JSON); o.HasErrors() {
		t.Fatalf("invalid output: %v\n%s", o.Issues, again.JSON)
	}
	if !strings.Contains(string(again.JSON), `"valueCode":"masked"`) {
		t.Errorf("masked code lost: %s", again.JSON)
	}
}

// TestDeidentifyGeocodes: Location.position and the geolocation
// extension (on any Address, its one allowed context) are removed.
func TestDeidentifyGeocodes(t *testing.T) {
	geo := `{"url":"http://hl7.org/fhir/StructureDefinition/geolocation","extension":[{"url":"latitude","valueDecimal":42.3601234},{"url":"longitude","valueDecimal":-71.0589876}]}`
	s := deidValues(t, collection(t,
		`{"resourceType":"Location","id":"l","position":{"latitude":42.4711111,"longitude":-71.3322222,"altitude":17.5},
	  "address":{"state":"MA","postalCode":"01851","extension":[`+geo+`]}}`,
		`{"resourceType":"Patient","id":"p","address":[{"state":"MA","extension":[`+geo+`]}],"gender":"male"}`))
	wantGoneKept(t, s, []string{"42.36", "71.05", "42.47", "71.33", "17.5", "position", "geolocation"},
		[]string{`"state":"MA"`, `"gender":"male"`})
}

// TestDeidentifyDICOMUIDs: DICOM UIDs become keyed pseudonyms that are
// still valid ids, the same UID giving the same pseudonym.
func TestDeidentifyDICOMUIDs(t *testing.T) {
	in := `{"resourceType":"ImagingStudy","id":"is","status":"available","subject":{"reference":"Patient/p"},
	 "series":[{"uid":"1.2.840.99999999.1.32695277.1559319188055","modality":{"system":"http://dicom.nema.org/resources/ontology/DCM","code":"DX"},
	  "instance":[{"uid":"1.2.840.99999999.1.1.50311580.1559319188055","sopClass":{"system":"urn:ietf:rfc:3986","code":"urn:oid:1.2.840.10008.5.1.4.1.1.1.1"}},
	   {"uid":"1.2.840.99999999.1.32695277.1559319188055","sopClass":{"system":"urn:ietf:rfc:3986","code":"urn:oid:1.2.840.10008.5.1.4.1.1.1.1"}}]}]}`
	s := deidValues(t, collection(t,
		in,
		`{"resourceType":"Patient","id":"p"}`))
	if strings.Contains(s, "99999999") {
		t.Fatalf("a DICOM UID survived: %s", s)
	}
	var b struct {
		Entry []struct {
			Resource struct {
				Series []struct {
					UID      string `json:"uid"`
					Instance []struct {
						UID string `json:"uid"`
					} `json:"instance"`
				} `json:"series"`
			} `json:"resource"`
		} `json:"entry"`
	}
	if err := json.Unmarshal([]byte(s), &b); err != nil {
		t.Fatal(err)
	}
	ser := b.Entry[0].Resource.Series
	if len(ser) != 1 || len(ser[0].Instance) != 2 {
		t.Fatalf("series or instances lost: %s", s)
	}
	valid := regexp.MustCompile(`^[A-Za-z0-9\-.]{1,64}$`)
	for _, u := range []string{ser[0].UID, ser[0].Instance[0].UID, ser[0].Instance[1].UID} {
		if !valid.MatchString(u) {
			t.Errorf("uid %q is not a valid id", u)
		}
	}
	if ser[0].UID != ser[0].Instance[1].UID || ser[0].UID == ser[0].Instance[0].UID {
		t.Errorf("pseudonyms do not follow the UIDs: %q %q %q", ser[0].UID, ser[0].Instance[0].UID, ser[0].Instance[1].UID)
	}
}

// TestDeidentifyIPInSystemAndState: an Identifier.system, Address.state or
// Address.country holding an IP address is removed.
func TestDeidentifyIPInSystemAndState(t *testing.T) {
	s := deidValues(t, `{"resourceType":"Patient","id":"p1","identifier":[{"system":"http://10.1.2.3/mrn","value":"1"},{"system":"http://hospital.example.org/mrn","value":"2"}],
	 "address":[{"state":"MA 192.168.7.7","postalCode":"02139"},{"state":"MA","country":"US [fe80::1]:443"}]}`)
	wantGoneKept(t, s, []string{"10.1.2.3", "192.168", "fe80"},
		[]string{`"system":"http://hospital.example.org/mrn"`, `"postalCode":"021"`, `"state":"MA"`})
}

// TestDeidentifyMetaAndRules: meta.source and implicitRules are removed,
// meta.versionId becomes a keyed pseudonym; meta.profile and security
// labels stay.
func TestDeidentifyMetaAndRules(t *testing.T) {
	s := deidValues(t, `{"resourceType":"Patient","id":"p","implicitRules":"http://jsmith.example.org/rules",
	 "meta":{"versionId":"jsmith","source":"http://jsmith-laptop.example.org/#x","profile":["http://hl7.org/fhir/us/core/StructureDefinition/us-core-patient"],
	  "security":[{"system":"http://terminology.hl7.org/CodeSystem/v3-Confidentiality","code":"R"}]}}`)
	wantGoneKept(t, s, []string{"jsmith", "implicitRules"},
		[]string{`"versionId":"` + versionPseudonym(testOpts("").DeidentKey, "jsmith") + `"`, `"profile":["http://hl7.org/fhir/us/core/StructureDefinition/us-core-patient"]`, `"code":"R"`})
}

func TestHasIP(t *testing.T) {
	for _, c := range []struct {
		s  string
		ip bool
	}{
		{"10.1.2.3", true},
		{"host 192.168.0.1 here", true},
		{"10.1.2.3:8080", true},
		{"http://10.1.2.3:8080/x", true},
		{"http://10.1.2.3/", true},
		{"255.255.255.255.", true},
		{"010.001.002.003", true},
		{"::ffff:10.1.2.3", true},
		{"ip:2001:db8::1", true},
		{"ip:fe80::1", true},
		{"tcp:fe80::1", true},
		{"urn:ip:2001:db8::7", true},
		{"fd::1", true},
		{"http://fd::1/x", true},
		{"host ip:2001:db8::1", true},
		{"at 10:11:12 today", false},
		{"ratio 1:2:3", false},
		{"::FFFF:10.1.2.3", true},
		{"2001:db8::1", true},
		{"2001:0db8:0000:0000:0000:ff00:0042:8329", true},
		{"fe80::1%eth0", true},
		{"[fe80::1]:443", true},
		{"http://[2001:db8::7]/path", true},
		{"fe80::1", true},
		{"1.2.3", false},
		{"version 1.2.3", false},
		{"256.1.2.3", false},
		{"1.2.3.4.5", false},
		{"urn:oid:2.16.840.1.113883.6.96", false},
		{"urn:oid:1.2.840.99999999.1.32695277.1559319188055", false},
		{"1.2.840.10008.5.1.4.1.1.1.1", false},
		{"2019-05-31", false},
		{"2019-05-31T10:11:12+02:00", false},
		{"10:11:12", false},
		{"10:11:12.345", false},
		{"3.14159", false},
		{"http://hl7.org/fhir/StructureDefinition/geolocation", false},
		{"urn:uuid:4c6f8a2e-0d43-4b5e-9f7a-1d2e3f405162", false},
		{"", false},
	} {
		if got := hasIP(c.s); got != c.ip {
			t.Errorf("hasIP(%q) = %v, want %v", c.s, got, c.ip)
		}
	}
}

// valueLeaks collects, from a parsed input Bundle, the values of the kinds
// this file's rules remove: DICOM UIDs, URIs that are not terminology
// (valueUri/valueUrl, Device.url, Endpoint.address, meta.source,
// implicitRules), meta.versionId, and coordinates (Location.position and
// the geolocation extension).
func valueLeaks(v any, resourceType string, out map[string]string) {
	switch v := v.(type) {
	case map[string]any:
		if rt, ok := v["resourceType"].(string); ok {
			resourceType = rt
		}
		str := func(k string) string { s, _ := v[k].(string); return s }
		if s := str("uid"); s != "" {
			out[s] = "uid"
		}
		for _, k := range []string{"valueUri", "valueUrl", "implicitRules"} {
			if s := str(k); s != "" {
				out[s] = k
			}
		}
		if s := str("url"); s != "" && resourceType == "Device" && v["resourceType"] != nil {
			out[s] = "Device.url"
		}
		if s := str("address"); s != "" && resourceType == "Endpoint" {
			out[s] = "Endpoint.address"
		}
		if m, ok := v["meta"].(map[string]any); ok {
			for _, k := range []string{"source", "versionId"} {
				if s, ok := m[k].(string); ok && len(s) >= 4 {
					out[s] = "meta." + k
				}
			}
		}
		if p, ok := v["position"].(map[string]any); ok && resourceType == "Location" {
			for _, k := range []string{"latitude", "longitude", "altitude"} {
				if n, ok := p[k].(json.Number); ok {
					out[n.String()] = "position"
				}
			}
		}
		if v["url"] == geolocationURL {
			exts, _ := v["extension"].([]any)
			for _, e := range exts {
				if n, ok := e.(map[string]any)["valueDecimal"].(json.Number); ok {
					out[n.String()] = "geolocation"
				}
			}
		}
		for _, x := range v {
			valueLeaks(x, resourceType, out)
		}
	case []any:
		for _, x := range v {
			valueLeaks(x, resourceType, out)
		}
	}
}

// outputAtoms gathers every string and number (as written) of a parsed
// output.
func outputAtoms(v any, out map[string]bool) {
	switch v := v.(type) {
	case string:
		out[v] = true
	case json.Number:
		out[v.String()] = true
	case map[string]any:
		for _, x := range v {
			outputAtoms(x, out)
		}
	case []any:
		for _, x := range v {
			outputAtoms(x, out)
		}
	}
}

func decodeNumbers(t *testing.T, b []byte) any {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

// TestDeidentifySharedBundlesValues extends the shared-bundle leak test to
// DICOM UIDs, free URIs and coordinates: none of them may appear in the
// de-identified output, whole or inside a string.
func TestDeidentifySharedBundlesValues(t *testing.T) {
	kinds := map[string]int{}
	// The corpus's Synthea patients hold no ImagingStudy; the official
	// example does, with DICOM uids.
	files := append(corpusBundles(t), filepath.Join("testdata", "examples", "ImagingStudy-example-xr.json"))
	for _, f := range files {
		name := filepath.Base(f)
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		out, err := Process(data, testOpts(acds.OutputFHIRR4Deidentified))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		checkOutput(t, name, out)
		values := map[string]string{}
		valueLeaks(decodeNumbers(t, data), "", values)
		atoms := map[string]bool{}
		outputAtoms(decodeNumbers(t, out.JSON), atoms)
		for v, kind := range values {
			kinds[kind]++
			if leaked(v, atoms, kind == "position" || kind == "geolocation") {
				t.Errorf("%s: %s %q appears in the de-identified output", name, kind, v)
			}
		}
	}
	// The collector must have found what the data is known to hold.
	for _, k := range []string{"uid", "position", "geolocation", "Endpoint.address"} {
		if kinds[k] == 0 {
			t.Errorf("no %s values collected from the corpus; the collector is broken (%v)", k, kinds)
		}
	}
	t.Logf("values checked by kind: %v", kinds)
}
