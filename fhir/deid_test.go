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

var fullDate = regexp.MustCompile(`^\d{4}-\d{2}-\d{2}`)

var yearInstant = regexp.MustCompile(`^\d{4}-01-01T00:00:00Z$`)

// identifyingValues collects, from a parsed Bundle, every value that Safe
// Harbor counts as identifying: names, address parts below state, full
// ZIP codes, telecom, identifier values, full dates, narrative, free text
// of notes and extensions, reference displays, attachments and ids.
func identifyingValues(v any, parentKey string, out map[string]string) {
	// A value met more than once keeps its strictest kind, whatever
	// the order of the walk (maps are walked in random order): a date
	// in a text (checked in every output), then the kinds looked for
	// anywhere in the output, then those matched exactly.
	rank := func(kind string) int {
		switch kind {
		case "date in text":
			return 2
		case "reference display", "free text":
			return 0
		}
		return 1
	}
	add := func(kind, s string) {
		if old, seen := out[s]; len(s) >= 4 && (!seen || rank(kind) > rank(old)) {
			out[s] = kind
		}
	}
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			switch k {
			case "name":
				if arr, ok := x.([]any); ok {
					for _, n := range arr {
						if hn, ok := n.(map[string]any); ok {
							for _, f := range []string{"family", "text"} {
								if s, ok := hn[f].(string); ok {
									add("name", s)
								}
							}
							for _, f := range []string{"given", "prefix", "suffix"} {
								if gs, ok := hn[f].([]any); ok {
									for _, g := range gs {
										if s, ok := g.(string); ok {
											add("name", s)
										}
									}
								}
							}
						}
					}
				}
			case "address":
				addrs, _ := x.([]any)
				if m, ok := x.(map[string]any); ok {
					addrs = []any{m}
				}
				for _, a := range addrs {
					if am, ok := a.(map[string]any); ok {
						if ls, ok := am["line"].([]any); ok {
							for _, l := range ls {
								add("address line", l.(string))
							}
						}
						for _, f := range []string{"city", "district", "text"} {
							if s, ok := am[f].(string); ok {
								add("address "+f, s)
							}
						}
						if s, ok := am["postalCode"].(string); ok && len(s) >= 5 {
							add("zip", s)
						}
					}
				}
			case "telecom":
				if arr, ok := x.([]any); ok {
					for _, c := range arr {
						if s, ok := c.(map[string]any)["value"].(string); ok {
							add("telecom", s)
						}
					}
				}
			case "identifier":
				ids, _ := x.([]any)
				if m, ok := x.(map[string]any); ok {
					ids = []any{m}
				}
				for _, id := range ids {
					if s, ok := id.(map[string]any)["value"].(string); ok {
						add("identifier", s)
					}
				}
			case "div":
				if s, ok := x.(string); ok {
					add("narrative", s)
				}
			case "display":
				if _, isRef := v["reference"]; isRef {
					if s, ok := x.(string); ok {
						add("reference display", s)
					}
				}
			case "valueString":
				if s, ok := x.(string); ok {
					add("free text", s)
				}
			case "data":
				if s, ok := x.(string); ok {
					add("attachment", s)
				}
			case "id", "fullUrl":
				if s, ok := x.(string); ok && (parentKey == "resource" || k == "fullUrl") {
					add("id", s)
				}
			}
			if s, ok := x.(string); ok {
				if fullDate.MatchString(s) {
					add("date", s)
				}
				// Every date written inside a string (free text kept as
				// terminology text too: "ROS 5 days - 2013-04-10"); a
				// string that is a date is the case above.
				for _, sp := range textDates(s) {
					if m := s[sp[0]:sp[1]]; m != s && len(m) > 4 {
						add("date in text", m)
					}
				}
			}
			identifyingValues(x, k, out)
		}
	case []any:
		for _, x := range v {
			identifyingValues(x, parentKey, out)
		}
	}
}

// terminologyText collects Coding.display and CodeableConcept.text values.
func terminologyText(v any, out map[string]bool) {
	switch v := v.(type) {
	case map[string]any:
		_, narrative := v["div"]
		_, name := v["family"]
		_, given := v["given"]
		_, line := v["line"]
		_, note := v["authorString"]
		if s, ok := v["text"].(string); ok && !narrative && !name && !given && !line && !note {
			out[s] = true // CodeableConcept.text
		}
		if cs, ok := v["coding"].([]any); ok {
			for _, c := range cs {
				if s, ok := c.(map[string]any)["display"].(string); ok {
					out[s] = true
				}
			}
		}
		if s, ok := v["display"].(string); ok && v["system"] != nil {
			out[s] = true
		}
		for _, x := range v {
			terminologyText(x, out)
		}
	case []any:
		for _, x := range v {
			terminologyText(x, out)
		}
	}
}

var pseudonym = regexp.MustCompile(`^[0-9a-f]{32}$|^https://acds\.invalid/fhir/[A-Za-z]+/[0-9a-f]{32}$|^[A-Za-z]+/[0-9a-f]{32}$`)

// collectStrings gathers every string value of the output except the
// pseudonymous ids, fullUrls and references, whose hex digits could match
// short numbers by chance.
func collectStrings(v any, out map[string]bool) {
	switch v := v.(type) {
	case string:
		if !pseudonym.MatchString(v) {
			out[v] = true
		}
	case map[string]any:
		for _, x := range v {
			collectStrings(x, out)
		}
	case []any:
		for _, x := range v {
			collectStrings(x, out)
		}
	}
}

// leaked reports whether v is an output string, or (5 characters or more)
// occurs inside one.
func leaked(v string, out map[string]bool, exact bool) bool {
	if out[v] {
		return true
	}
	if exact || len(v) < 5 {
		return false
	}
	for s := range out {
		if strings.Contains(s, v) {
			return true
		}
	}
	return false
}

func TestDeidentifySharedBundles(t *testing.T) {
	testDeidentifySharedBundles(t, Process)
}

func testDeidentifySharedBundles(t *testing.T, process func([]byte, Options) (*Output, error)) {
	for _, f := range corpusBundles(t) {
		name := filepath.Base(f)
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		out, err := process(data, testOpts(acds.OutputFHIRR4Deidentified))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		checkOutput(t, name, out)
		var in any
		if err := json.Unmarshal(data, &in); err != nil {
			t.Fatal(err)
		}
		values := map[string]string{}
		identifyingValues(in, "", values)
		// Free text that is also terminology text (a Reference.display
		// repeating the target's code display, the race extension's text)
		// names a concept, not a person.
		terms := map[string]bool{}
		terminologyText(in, terms)
		for v, kind := range values {
			if (kind == "reference display" || kind == "free text") && terms[v] {
				delete(values, v)
			}
		}
		if len(values) < 20 {
			t.Fatalf("%s: only %d identifying values collected; the collector is broken", name, len(values))
		}
		var outTree any
		if err := json.Unmarshal(out.JSON, &outTree); err != nil {
			t.Fatal(err)
		}
		outStrings := map[string]bool{}
		collectStrings(outTree, outStrings)
		// Instants are kept as January 1 of their year, 00:00:00Z: only
		// their year is information, even where an input date falls on
		// January 1.
		for s := range outStrings {
			if yearInstant.MatchString(s) {
				delete(outStrings, s)
			}
		}
		leaks := 0
		for v, kind := range values {
			// Free text is checked as whole values: terminology text may
			// contain a reference display ("Living Will" in "Patient Living Will").
			exact := kind == "reference display" || kind == "free text"
			if leaked(v, outStrings, exact) {
				leaks++
				if leaks < 10 {
					t.Errorf("%s: %s %q appears in the de-identified output", name, kind, v)
				}
			}
		}
		if leaks > 0 {
			t.Errorf("%s: %d of %d identifying values leaked", name, leaks, len(values))
		}
		// References survive de-identification: every one that resolves in
		// the fhir_r4 output is still there (pointing at pseudonyms).
		plain, err := process(data, testOpts(acds.OutputFHIRR4))
		if err != nil {
			t.Fatal(err)
		}
		if a, b := countRefs(t, plain.JSON, true), countRefs(t, out.JSON, false); a != b || a == 0 {
			t.Errorf("%s: %d resolvable references in fhir_r4, %d after de-identification", name, a, b)
		}
		// Pseudonyms are keyed: another key gives other ids.
		other := testOpts(acds.OutputFHIRR4Deidentified)
		other.DeidentKey = bytes.Repeat([]byte{9}, 32)
		out2, err := process(data, other)
		if err != nil {
			t.Fatal(err)
		}
		if out2.Digest == out.Digest {
			t.Errorf("%s: output does not depend on the key", name)
		}
	}
}

func TestDeidentifyRules(t *testing.T) {
	testDeidentifyRules(t, Process)
}

func testDeidentifyRules(t *testing.T, process func([]byte, Options) (*Output, error)) {
	in := `{"resourceType":"Patient","id":"p","text":{"status":"generated","div":"<div xmlns=\"http://www.w3.org/1999/xhtml\">Jane Roe</div>"},
	"identifier":[{"system":"http://hl7.org/fhir/sid/us-ssn","value":"999-12-3456"}],
	"name":[{"family":"Roe","given":["Jane"]}],"telecom":[{"system":"phone","value":"555-0100"}],
	"birthDate":"1921-03-04","address":[{"line":["1 Main St"],"city":"Smalltown","state":"NY","postalCode":"03601-1234","country":"US"},{"state":"MA","postalCode":"02139"}],
	"photo":[{"contentType":"image/png","data":"iVBORw0KGgo="}],
	"extension":[{"url":"http://hl7.org/fhir/StructureDefinition/patient-mothersMaidenName","valueString":"Smith"},
	 {"url":"http://example.org/ip","valueString":"10.1.2.3"}],
	"generalPractitioner":[{"reference":"http://elsewhere.example/Practitioner/77","display":"Dr Who"}]}`
	out, err := process([]byte(in), testOpts(acds.OutputFHIRR4Deidentified))
	if err != nil {
		t.Fatal(err)
	}
	s := string(out.JSON)
	for _, bad := range []string{"999-12-3456", "Roe", "Jane", "555-0100", "1921", "03-04", "Main", "Smalltown", "036", "02139", "iVBOR", "Smith", "10.1.2.3", "Dr Who", "Practitioner/77", `"id":"p"`} {
		if strings.Contains(s, bad) {
			t.Errorf("%q survived: %s", bad, s)
		}
	}
	for _, good := range []string{`"birthDate":"1936"`, `"postalCode":"000"`, `"postalCode":"021"`, `"state":"NY"`, `"system":"http://hl7.org/fhir/sid/us-ssn"`} {
		if !strings.Contains(s, good) {
			t.Errorf("want %s in %s", good, s)
		}
	}
}

// countRefs counts Reference.reference values in a Bundle; with
// internalOnly, references with a scheme (outside the Bundle) are skipped.
func countRefs(t *testing.T, b []byte, internalOnly bool) int {
	t.Helper()
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	n := 0
	var walk func(any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			if r, ok := v["reference"].(string); ok && (!internalOnly || !strings.Contains(r, ":")) {
				n++
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
	walk(v)
	return n
}

// TestDeidentifyKeepsPrimitiveArraysAligned: removing one item of a
// primitive array that has a "_x" companion leaves valid FHIR.
func TestDeidentifyKeepsPrimitiveArraysAligned(t *testing.T) {
	testDeidentifyKeepsPrimitiveArraysAligned(t, Process)
}

func testDeidentifyKeepsPrimitiveArraysAligned(t *testing.T, process func([]byte, Options) (*Output, error)) {
	in := `{"resourceType":"CarePlan","status":"active","intent":"plan","subject":{"reference":"Patient/p"},
	"instantiatesUri":["http://10.0.0.1/protocol","http://example.org/protocol"],
	"_instantiatesUri":[null,{"extension":[{"url":"http://example.org/e","valueCode":"x"}]}]}`
	out, err := process([]byte(in), testOpts(acds.OutputFHIRR4Deidentified))
	if err != nil {
		t.Fatal(err)
	}
	if o := Validate(out.JSON); o.HasErrors() {
		t.Fatalf("invalid output: %v\n%s", o.Issues, out.JSON)
	}
	s := string(out.JSON)
	if strings.Contains(s, "10.0.0.1") || !strings.Contains(s, "http://example.org/protocol") {
		t.Fatalf("unexpected output: %s", s)
	}
}
