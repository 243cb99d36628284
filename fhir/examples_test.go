package fhir

import (
	"errors"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/acds-project/acds"
)

// TestOfficialExamples validates the official R4 examples (the npm package
// hl7.fhir.r4.examples, fetched by scripts/fetch-fhir-defs.sh into
// .fhir-defs) and processes each into a fhir_r4 Bundle. The examples are
// valid R4, so every error is a false positive of ours; a few examples are
// known to break the specification's own rules and are listed with the
// reason.
func TestOfficialExamples(t *testing.T) {
	dir := filepath.Join("..", ".fhir-defs", "package")
	files, _ := filepath.Glob(filepath.Join(dir, "*.json"))
	if len(files) == 0 {
		t.Skip("official examples not fetched (scripts/fetch-fhir-defs.sh)")
	}
	failures := map[string][]string{}
	checked, deidFailures := 0, 0
	for _, f := range files {
		base := filepath.Base(f)
		if strings.HasPrefix(base, "Bundle-") && (strings.Contains(base, "valueset") || strings.Contains(base, "dataelements") ||
			strings.Contains(base, "resources") || strings.Contains(base, "types") || strings.Contains(base, "profiles") ||
			strings.Contains(base, "extensions") || strings.Contains(base, "searchParams") || strings.Contains(base, "conceptmaps") ||
			strings.Contains(base, "terminologies")) || base == "package.json" || base == ".index.json" {
			continue // definitions, not examples
		}
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		checked++
		o := Validate(data)
		// Check, which validates for errors only, must reach the same
		// verdict on every example.
		if cerr := Check(data, Options{}); o.HasErrors() != (cerr != nil && !isNoResources(cerr)) {
			t.Errorf("%s: Validate has errors %v, Check says %v", base, o.HasErrors(), cerr)
		}
		for _, is := range o.Issues {
			if is.Severity == SeverityError || is.Severity == SeverityFatal {
				failures[base] = append(failures[base], is.String())
			}
		}
		if o.HasErrors() || conformance(base) {
			continue // processing is for clinical content; definitions are only validated
		}
		out, err := Process(data, testOpts(acds.OutputFHIRR4))
		if err != nil {
			if errors.Is(err, ErrInvalid) && strings.Contains(err.Error(), "no resources") {
				continue
			}
			t.Errorf("%s: %v", base, err)
			continue
		}
		if oo := Validate(out.JSON); oo.HasErrors() {
			t.Errorf("%s: normalised output has errors: %v", base, oo.Issues)
		}
		again, err := Process(out.JSON, testOpts(acds.OutputFHIRR4))
		if err != nil || again.Digest != out.Digest {
			t.Errorf("%s: normalisation not idempotent (%v)", base, err)
		}
		deid, err := Process(data, testOpts(acds.OutputFHIRR4Deidentified))
		if err != nil {
			t.Errorf("%s: de-identifying: %v", base, err)
			continue
		}
		if oo := Validate(deid.JSON); oo.HasErrors() {
			deidFailures++
			if deidFailures < 15 {
				t.Errorf("%s: de-identified output has errors: %v", base, oo.Issues)
			}
		}
	}
	names := make([]string, 0, len(failures))
	for n := range failures {
		names = append(names, n)
	}
	sort.Strings(names)
	var b strings.Builder
	for _, n := range names {
		b.WriteString(n + ":\n")
		for i, s := range failures[n] {
			if i == 3 {
				b.WriteString("    …\n")
				break
			}
			b.WriteString("    " + s + "\n")
		}
	}
	t.Logf("%d of %d official examples have errors:\n%s", len(failures), checked, b.String())
	for _, n := range names {
		if knownErrata[n] == "" && !strings.HasPrefix(n, "SearchParameter-") {
			t.Errorf("%s: unexpected errors on an official example: %v", n, failures[n])
		}
	}
}

// knownErrata are official examples that break R4's own rules; the HL7
// validator reports them too. (Several SearchParameter definitions for
// extensions lack the required base as well.)
var knownErrata = map[string]string{
	"Bundle-10bb101f-a121-4264-a920-67be9cb82c74.json": "fullUrl Patient/pat12 holds Patient/pat2",
	"Bundle-3a0707d3-549e-4467-b8b8-5a2ab3800efe.json": "fullUrl Patient/pat12 holds Patient/pat2",
	"Bundle-lri-example.json":                          "fullUrls lri-gramstainN hold gramstainN",
	"CodeSystem-v2-0550.json":                          "a concept code that is a single space",
	"DeviceMetric-example.json":                        "parent references a DeviceDefinition; R4 allows Device only",
	"DeviceUseStatement-example.json":                  "reasonReference to a Procedure, not an allowed target",
	"ImplementationGuide-fhir.json":                    "no name or status",
	"ig-r4.json":                                       "no name or status",
	"Library-zika-virus-intervention-logic.json":       "urn:oid:X.Y.Z placeholder OIDs",
	"MedicationRequest-medrx0301.json":                 "dispenseRequest.performer references a Practitioner; R4 allows Organization only",
	"Observation-clinical-gender.json":                 "performer references an Encounter",
	"Questionnaire-qs1.json":                           "items without linkId",
	"StructureDefinition-Definition.json":              "sdf-4: a logical model that is not abstract and has no baseDefinition",
	"StructureDefinition-Event.json":                   "sdf-4: a logical model that is not abstract and has no baseDefinition",
	"StructureDefinition-FiveWs.json":                  "sdf-4: a logical model that is not abstract and has no baseDefinition",
	"StructureDefinition-Request.json":                 "sdf-4: a logical model that is not abstract and has no baseDefinition",
}

// conformance reports whether an example file holds a definitional
// (conformance or terminology) resource rather than clinical content.
func conformance(base string) bool {
	for _, p := range []string{"CodeSystem-", "ValueSet-", "SearchParameter-", "StructureDefinition-", "ConceptMap-",
		"OperationDefinition-", "NamingSystem-", "CapabilityStatement-", "CompartmentDefinition-", "ImplementationGuide-",
		"StructureMap-", "TerminologyCapabilities-", "GraphDefinition-", "MessageDefinition-"} {
		if strings.HasPrefix(base, p) {
			return true
		}
	}
	return false
}
