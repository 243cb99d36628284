package fhir_test

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/acds-project/acds"
	"github.com/acds-project/acds/fhir"
	"github.com/acds-project/acds/internal/testrig/corpus"
)

type ipsDoc struct {
	ResourceType string `json:"resourceType"`
	Type         string `json:"type"`
	Entry        []struct {
		FullURL  string          `json:"fullUrl"`
		Resource json.RawMessage `json:"resource"`
	} `json:"entry"`
}

type ipsComposition struct {
	ResourceType string `json:"resourceType"`
	Type         struct {
		Coding []struct{ System, Code string } `json:"coding"`
	} `json:"type"`
	Subject struct{ Reference string }   `json:"subject"`
	Author  []struct{ Reference string } `json:"author"`
	Date    string                       `json:"date"`
	Section []struct {
		Code struct {
			Coding []struct{ Code string } `json:"coding"`
		} `json:"code"`
		Text        struct{ Div string }         `json:"text"`
		Entry       []struct{ Reference string } `json:"entry"`
		EmptyReason json.RawMessage              `json:"emptyReason"`
	} `json:"section"`
}

type resourceHead struct {
	ResourceType string `json:"resourceType"`
	ID           string `json:"id"`
	Category     []struct {
		Coding []struct{ Code string } `json:"coding"`
	} `json:"category"`
}

func (r resourceHead) ref() string { return r.ResourceType + "/" + r.ID }

func (r resourceHead) hasCategory(c string) bool {
	for _, cat := range r.Category {
		for _, x := range cat.Coding {
			if x.Code == c {
				return true
			}
		}
	}
	return false
}

// expectedSection says which IPS section (LOINC) a record resource belongs
// in, or "".
func expectedSection(r resourceHead) string {
	switch r.ResourceType {
	case "MedicationStatement", "MedicationRequest", "MedicationAdministration", "MedicationDispense":
		return "10160-0"
	case "AllergyIntolerance":
		return "48765-2"
	case "Condition":
		return "11450-4"
	case "Immunization":
		return "11369-6"
	case "DiagnosticReport":
		return "30954-2"
	case "Procedure":
		return "47519-4"
	case "DeviceUseStatement":
		return "46264-8"
	case "CarePlan":
		return "18776-5"
	case "Observation":
		switch {
		case r.hasCategory("laboratory"), r.hasCategory("imaging"):
			return "30954-2"
		case r.hasCategory("vital-signs"):
			return "8716-3"
		case r.hasCategory("social-history"):
			return "29762-2"
		}
	}
	return ""
}

// TestIPSOnSharedRecords builds the IPS of every Synthea and Inferno record
// of the corpus and compares its sections with what the record holds: every
// resource of a section's kinds is in that section, nothing else is, the
// required sections are always there, every reference resolves, and the
// document is valid R4.
func TestIPSOnSharedRecords(t *testing.T) {
	files := corpus.JSON(t, corpus.Synthea, corpus.Inferno)
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			in, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			opts := fhir.Options{Format: acds.OutputFHIRR4, Now: now, Measurement: "abcd"}
			rec, err := fhir.Process(in, opts)
			if err != nil {
				t.Skipf("not a processable record: %v", err)
			}
			opts.Format = acds.OutputFHIRR4IPS
			out, err := fhir.Process(in, opts)
			var recDoc ipsDoc
			json.Unmarshal(rec.JSON, &recDoc)
			want := map[string][]string{} // section -> refs
			patients := 0
			for _, e := range recDoc.Entry {
				var h resourceHead
				json.Unmarshal(e.Resource, &h)
				if s := expectedSection(h); s != "" {
					want[s] = append(want[s], h.ref())
				}
				if h.ResourceType == "Patient" {
					patients++
				}
			}
			if patients == 0 {
				if !errors.Is(err, fhir.ErrInvalid) {
					t.Fatalf("a record without a Patient: err = %v, want ErrInvalid", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if oc := fhir.Validate(out.JSON); oc.HasErrors() {
				t.Fatalf("not valid R4: %v", oc.Issues)
			}
			var doc ipsDoc
			if err := json.Unmarshal(out.JSON, &doc); err != nil || doc.Type != "document" || len(doc.Entry) < 3 {
				t.Fatalf("not a document: %v", err)
			}
			var comp ipsComposition
			json.Unmarshal(doc.Entry[0].Resource, &comp)
			if comp.ResourceType != "Composition" || comp.Type.Coding[0].Code != "60591-5" || comp.Date == "" || len(comp.Author) != 1 {
				t.Fatalf("first entry: %s", doc.Entry[0].Resource)
			}
			inDoc := map[string]resourceHead{}
			for _, e := range doc.Entry {
				var h resourceHead
				json.Unmarshal(e.Resource, &h)
				inDoc[h.ref()] = h
			}
			for _, e := range doc.Entry {
				var v any
				json.Unmarshal(e.Resource, &v)
				for _, ref := range collectRefs(v, nil) {
					if _, ok := inDoc[ref]; !ok {
						t.Errorf("%s references %s, not in the document", e.FullURL, ref)
					}
				}
			}
			if d := inDoc[comp.Author[0].Reference]; d.ResourceType != "Device" || !strings.Contains(string(doc.Entry[2].Resource), `"value":"abcd"`) {
				t.Errorf("author %s is not the enclave's Device", comp.Author[0].Reference)
			}
			if inDoc[comp.Subject.Reference].ResourceType != "Patient" {
				t.Errorf("subject %s", comp.Subject.Reference)
			}
			got := map[string][]string{}
			for _, s := range comp.Section {
				code := s.Code.Coding[0].Code
				if !strings.HasPrefix(s.Text.Div, "<div") {
					t.Errorf("section %s has no narrative", code)
				}
				for _, e := range s.Entry {
					got[code] = append(got[code], e.Reference)
					if _, ok := inDoc[e.Reference]; !ok {
						t.Errorf("section %s entry %s does not resolve", code, e.Reference)
					}
				}
				if len(s.Entry) == 0 && len(s.EmptyReason) == 0 {
					t.Errorf("empty section %s without emptyReason", code)
				}
			}
			for _, req := range []string{"10160-0", "48765-2", "11450-4"} {
				found := false
				for _, s := range comp.Section {
					found = found || s.Code.Coding[0].Code == req
				}
				if !found {
					t.Errorf("required section %s missing", req)
				}
			}
			for code, refs := range want {
				if strings.Join(got[code], ",") != strings.Join(refs, ",") {
					t.Errorf("section %s: %d entries, the record has %d of its kinds", code, len(got[code]), len(refs))
				}
			}
			for code, refs := range got {
				if len(want[code]) != len(refs) {
					t.Errorf("section %s holds %d entries the record does not put there", code, len(refs)-len(want[code]))
				}
			}
		})
	}
}

func collectRefs(v any, out []string) []string {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if s, ok := e.(string); ok && k == "reference" && strings.Count(s, "/") == 1 && !strings.Contains(s, ":") && !strings.HasPrefix(s, "#") {
				out = append(out, s)
				continue
			}
			out = collectRefs(e, out)
		}
	case []any:
		for _, e := range x {
			out = collectRefs(e, out)
		}
	}
	return out
}
