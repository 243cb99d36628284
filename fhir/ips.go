package fhir

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"html"
	"strings"
	"time"

	"github.com/acds-project/acds"
	"github.com/acds-project/acds/fhir/r4"
)

// International Patient Summary (DESIGN §9): acds.OutputFHIRR4IPS is a
// document Bundle built from the normalised record. Its first entry is a
// Composition coded LOINC 60591-5 whose subject is the record's Patient,
// whose author is the enclave (a Device identified by its measurement,
// system MeasurementSystem) and whose date is Options.Now. It has the IPS
// required sections — medication summary (10160-0), allergies and
// intolerances (48765-2), problem list (11450-4), each with an emptyReason
// when the record holds none — and the recommended and optional sections
// the record supports: immunizations (11369-6), results (30954-2), vital
// signs (8716-3), procedures (47519-4), medical devices (46264-8), social
// history (29762-2) and plan of care (18776-5). Each section has a
// generated narrative listing its entries. Every section entry is a
// resource of the record, and the Bundle also holds every resource those
// reference (Medications, Encounters, Practitioners…), so each reference
// resolves inside the document; nothing is invented but the Composition and
// the Device.

// ipsSection is one IPS section and the record resources that go in it.
type ipsSection struct {
	code, display, title string
	required             bool
	takes                func(r *ipsResource) bool
}

var ipsSections = []ipsSection{
	{"10160-0", "History of Medication use Narrative", "Medication Summary", true, typeIn("MedicationStatement", "MedicationRequest", "MedicationAdministration", "MedicationDispense")},
	{"48765-2", "Allergies and adverse reactions Document", "Allergies and Intolerances", true, typeIn("AllergyIntolerance")},
	{"11450-4", "Problem list - Reported", "Problem List", true, typeIn("Condition")},
	{"11369-6", "History of Immunization Narrative", "Immunizations", false, typeIn("Immunization")},
	{"30954-2", "Relevant diagnostic tests/laboratory data Narrative", "Results", false, func(r *ipsResource) bool {
		return r.typ == "DiagnosticReport" || r.typ == "Observation" && r.category("laboratory", "imaging")
	}},
	{"8716-3", "Vital signs", "Vital Signs", false, func(r *ipsResource) bool { return r.typ == "Observation" && r.category("vital-signs") }},
	{"47519-4", "History of Procedures Document", "History of Procedures", false, typeIn("Procedure")},
	{"46264-8", "History of medical device use", "Medical Devices", false, typeIn("DeviceUseStatement")},
	{"29762-2", "Social history Narrative", "Social History", false, func(r *ipsResource) bool { return r.typ == "Observation" && r.category("social-history") }},
	{"18776-5", "Plan of care note", "Plan of Care", false, typeIn("CarePlan")},
}

func typeIn(types ...string) func(r *ipsResource) bool {
	return func(r *ipsResource) bool {
		for _, t := range types {
			if r.typ == t {
				return true
			}
		}
		return false
	}
}

// ipsResource is one entry of the normalised record.
type ipsResource struct {
	typ, id, fullURL string
	raw              json.RawMessage
	fields           map[string]any
}

func (r *ipsResource) ref() string { return r.typ + "/" + r.id }

// category reports whether the resource has an Observation category code
// of codes.
func (r *ipsResource) category(codes ...string) bool {
	cats, _ := r.fields["category"].([]any)
	for _, c := range cats {
		cm, _ := c.(map[string]any)
		cs, _ := cm["coding"].([]any)
		for _, x := range cs {
			xm, _ := x.(map[string]any)
			for _, code := range codes {
				if xm["code"] == code {
					return true
				}
			}
		}
	}
	return false
}

// label is a line of narrative for the resource: what it is and when.
func (r *ipsResource) label() string {
	what := ""
	for _, k := range []string{"code", "medicationCodeableConcept", "vaccineCode", "type", "category"} {
		if s := conceptText(r.fields[k]); s != "" {
			what = s
			break
		}
	}
	if what == "" {
		what = r.typ
	}
	for _, k := range []string{"effectiveDateTime", "onsetDateTime", "occurrenceDateTime", "performedDateTime", "authoredOn", "recordedDate", "issued", "dateAsserted"} {
		if s, ok := r.fields[k].(string); ok && s != "" {
			return what + " (" + s + ")"
		}
	}
	return what
}

func conceptText(v any) string {
	if arr, ok := v.([]any); ok && len(arr) > 0 {
		v = arr[0]
	}
	m, ok := v.(map[string]any)
	if !ok {
		return ""
	}
	if s, ok := m["text"].(string); ok && s != "" {
		return s
	}
	cs, _ := m["coding"].([]any)
	for _, c := range cs {
		cm, _ := c.(map[string]any)
		if s, ok := cm["display"].(string); ok && s != "" {
			return s
		}
		if s, ok := cm["code"].(string); ok && s != "" {
			return s
		}
	}
	return ""
}

// references appends every "reference" string value under v.
func references(v any, out []string) []string {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if s, ok := e.(string); ok && k == "reference" {
				out = append(out, s)
				continue
			}
			out = references(e, out)
		}
	case []any:
		for _, e := range x {
			out = references(e, out)
		}
	}
	return out
}

// ipsProblem is the issue of a valid record (decoded as root) that no
// International Patient Summary can be made from, or nil: one needs the
// Patient it is about, and the record normalize makes of root holds one
// exactly when root is a Patient or a Bundle entry it carries is
// (normalisation keeps every carried entry's type, and drops only exact
// copies). Process and Check decide with it (refused), before
// normalisation, so that a server refuses such a record on arrival.
func ipsProblem(root r4.Resource) *Issue {
	holds := false
	if b, ok := root.(*r4.Bundle); ok {
		for i := range b.Entry {
			if _, ok := b.Entry[i].Resource.(*r4.Patient); ok && carried(&b.Entry[i]) {
				holds = true
				break
			}
		}
	} else {
		_, holds = root.(*r4.Patient)
	}
	if holds {
		return nil
	}
	return &Issue{Severity: SeverityError, Code: "required",
		Diagnostics: "an International Patient Summary needs a Patient: the record holds none", Expression: []string{"Bundle.entry"}}
}

func processIPS(input []byte, opts Options) (*Output, error) {
	ro := opts
	ro.Format = acds.OutputFHIRR4
	rec, err := processRecord(input, ro, acds.OutputFHIRR4, acds.OutputFHIRR4IPS)
	if err != nil {
		return nil, err
	}
	var record struct {
		Entry []struct {
			FullURL  string          `json:"fullUrl"`
			Resource json.RawMessage `json:"resource"`
		} `json:"entry"`
	}
	if err := json.Unmarshal(rec.JSON, &record); err != nil {
		return nil, fmt.Errorf("fhir: reading the normalised record: %w", err)
	}
	var all []*ipsResource
	byRef := map[string]*ipsResource{}
	var patient *ipsResource
	for _, e := range record.Entry {
		r := &ipsResource{fullURL: e.FullURL, raw: e.Resource}
		if err := json.Unmarshal(e.Resource, &r.fields); err != nil {
			return nil, fmt.Errorf("fhir: reading the normalised record: %w", err)
		}
		r.typ, _ = r.fields["resourceType"].(string)
		r.id, _ = r.fields["id"].(string)
		if r.typ == "Provenance" {
			continue // the record's provenance, not clinical content
		}
		all = append(all, r)
		byRef[r.ref()] = r
		if r.typ == "Patient" && patient == nil {
			patient = r
		}
	}
	if patient == nil { // processRecord refused such a record (ipsProblem)
		return nil, fmt.Errorf("fhir: the normalised record lost its Patient")
	}

	// The document's own resources, with ids derived from the record.
	sum := sha256.Sum256([]byte(rec.Digest + "\x00" + opts.Measurement))
	h := hex.EncodeToString(sum[:])
	uuid := h[:8] + "-" + h[8:12] + "-4" + h[13:16] + "-8" + h[17:20] + "-" + h[20:32]
	base := opts.BaseURL
	if base == "" {
		base = DefaultBaseURL
	}
	now := opts.Now
	if now.IsZero() {
		now = time.Now()
	}
	measurement := opts.Measurement
	if measurement == "" {
		measurement = "unmeasured"
	}
	compID, devID := "ips-"+h[:32], "acds-enclave-"+h[32:48]

	include := map[string]bool{patient.ref(): true}
	var sections []string
	for _, s := range ipsSections {
		var members []*ipsResource
		for _, r := range all {
			if s.takes(r) {
				members = append(members, r)
				include[r.ref()] = true
			}
		}
		if len(members) == 0 && !s.required {
			continue
		}
		sections = append(sections, sectionJSON(s, members))
	}
	// Every resource a member references, transitively, so references
	// resolve inside the document.
	queue := make([]string, 0, len(include))
	for ref := range include {
		queue = append(queue, ref)
	}
	for len(queue) > 0 {
		r := byRef[queue[0]]
		queue = queue[1:]
		if r == nil {
			continue
		}
		for _, ref := range references(r.fields, nil) {
			if byRef[ref] != nil && !include[ref] {
				include[ref] = true
				queue = append(queue, ref)
			}
		}
	}

	var b bytes.Buffer
	b.WriteString(`{"resourceType":"Bundle","type":"document","identifier":{"system":"urn:ietf:rfc:3986","value":"urn:uuid:` + uuid + `"},`)
	b.WriteString(`"timestamp":` + jsonString(now.UTC().Format(time.RFC3339)) + `,"entry":[`)
	b.WriteString(`{"fullUrl":` + jsonString(base+"/Composition/"+compID) + `,"resource":{"resourceType":"Composition","id":"` + compID + `",`)
	b.WriteString(`"status":"final","type":{"coding":[{"system":"http://loinc.org","code":"60591-5","display":"Patient summary Document"}]},`)
	b.WriteString(`"subject":{"reference":` + jsonString(patient.ref()) + `},"date":` + jsonString(now.UTC().Format(time.RFC3339)) + `,`)
	b.WriteString(`"author":[{"reference":"Device/` + devID + `"}],"title":"International Patient Summary",`)
	b.WriteString(`"section":[` + strings.Join(sections, ",") + `]}}`)
	b.WriteString(`,{"fullUrl":` + jsonString(patient.fullURL) + `,"resource":`)
	b.Write(patient.raw)
	b.WriteString(`},{"fullUrl":` + jsonString(base+"/Device/"+devID) + `,"resource":{"resourceType":"Device","id":"` + devID + `",`)
	b.WriteString(`"identifier":[{"system":"` + MeasurementSystem + `","value":` + jsonString(measurement) + `}],`)
	b.WriteString(`"deviceName":[{"name":"ACDS enclave","type":"user-friendly-name"}]}}`)
	for _, r := range all {
		if include[r.ref()] && r != patient {
			b.WriteString(`,{"fullUrl":` + jsonString(r.fullURL) + `,"resource":`)
			b.Write(r.raw)
			b.WriteString(`}`)
		}
	}
	b.WriteString(`]}`)

	doc, err := r4.Unmarshal(b.Bytes())
	if err != nil {
		return nil, fmt.Errorf("fhir: building the patient summary: %w", err)
	}
	bundle, _ := doc.(*r4.Bundle) // b is a Bundle; nil fails to encode
	out, spans, err := r4.AppendCanonicalBundle(make([]byte, 0, b.Len()+64), bundle)
	if err != nil {
		return nil, fmt.Errorf("fhir: encoding the patient summary: %w", err)
	}
	if oc := Validate(out); oc.HasErrors() {
		for _, is := range oc.Issues {
			if is.Severity == SeverityError || is.Severity == SeverityFatal {
				return nil, fmt.Errorf("fhir: the patient summary is not valid R4: %s", is)
			}
		}
	}
	d := sha256.Sum256(out)
	return &Output{Format: acds.OutputFHIRR4IPS, JSON: out, Digest: "sha256:" + hex.EncodeToString(d[:]),
		Outcome: rec.Outcome, Resources: len(include) + 2, RecordDigest: rec.Digest, Entries: entrySlices(out, spans)}, nil
}

// sectionJSON is one Composition.section with its narrative.
func sectionJSON(s ipsSection, members []*ipsResource) string {
	var b strings.Builder
	b.WriteString(`{"title":` + jsonString(s.title) + `,"code":{"coding":[{"system":"http://loinc.org","code":"` + s.code + `","display":` + jsonString(s.display) + `}]},`)
	var div strings.Builder
	div.WriteString(`<div xmlns="http://www.w3.org/1999/xhtml">`)
	if len(members) == 0 {
		div.WriteString(`<p>The record holds no information for this section.</p></div>`)
		b.WriteString(`"text":{"status":"generated","div":` + jsonString(div.String()) + `},`)
		b.WriteString(`"emptyReason":{"coding":[{"system":"http://terminology.hl7.org/CodeSystem/list-empty-reason","code":"unavailable","display":"Unavailable"}]}}`)
		return b.String()
	}
	div.WriteString(`<ul>`)
	refs := make([]string, len(members))
	for i, r := range members {
		div.WriteString(`<li>` + html.EscapeString(r.label()) + `</li>`)
		refs[i] = `{"reference":` + jsonString(r.ref()) + `}`
	}
	div.WriteString(`</ul></div>`)
	b.WriteString(`"text":{"status":"generated","div":` + jsonString(div.String()) + `},"entry":[` + strings.Join(refs, ",") + `]}`)
	return b.String()
}

func jsonString(s string) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // a string always encodes
	return strings.TrimSuffix(b.String(), "\n")
}
