package spec

import (
	"slices"
	"strings"
	"testing"
)

func TestLookup(t *testing.T) {
	p := Lookup("Patient")
	if p == nil || p.Kind != Resource || p.Abstract {
		t.Fatalf("Patient: %+v", p)
	}
	bd := p.Element("birthDate")
	if bd == nil || bd.Type != "date" || bd.Min != 0 || bd.Max != 1 || bd.Path != "Patient.birthDate" {
		t.Fatalf("Patient.birthDate: %+v", bd)
	}
	g := p.Element("gender")
	if g == nil || g.Strength != Required || g.ValueSet != "http://hl7.org/fhir/ValueSet/administrative-gender" {
		t.Fatalf("Patient.gender: %+v", g)
	}
	if bd.TypeDef() != Lookup("date") || p.Element("name").TypeDef() != Lookup("HumanName") {
		t.Fatal("TypeDef does not match Lookup")
	}
	if c := p.Element("contact"); c == nil || c.Type != "Patient.contact" || c.Max != -1 || c.TypeDef() != Lookup("Patient.contact") {
		t.Fatalf("Patient.contact backbone: %+v", c)
	}
	if p.Element("value") != nil || p.Element("nonsense") != nil {
		t.Fatal("unexpected element")
	}
	if Lookup("NoSuchType") != nil || IsResource("Resource") || IsResource("HumanName") || !IsResource("Bundle") {
		t.Fatal("IsResource/Lookup wrong")
	}
}

func TestChoiceAndTargets(t *testing.T) {
	o := Lookup("Observation")
	q := o.Element("valueQuantity")
	s := o.Element("valueString")
	if q == nil || s == nil || q.Path != "Observation.value[x]" || q.Type != "Quantity" || s.Type != "string" {
		t.Fatalf("choice expansion: %+v %+v", q, s)
	}
	subj := o.Element("subject")
	want := map[string]bool{"Patient": true, "Group": true, "Device": true, "Location": true}
	if subj == nil || len(subj.Targets) != len(want) {
		t.Fatalf("Observation.subject targets: %+v", subj)
	}
	for _, tg := range subj.Targets {
		if !want[tg] {
			t.Fatalf("unexpected target %s", tg)
		}
	}
	// contentReference: Questionnaire.item.item is a Questionnaire.item.
	if it := Lookup("Questionnaire.item").Element("item"); it == nil || it.Type != "Questionnaire.item" {
		t.Fatalf("contentReference: %+v", it)
	}
}

func TestValueSets(t *testing.T) {
	g := LookupValueSet("http://hl7.org/fhir/ValueSet/administrative-gender|4.0.1")
	if g == nil || !g.Contains("", "female") || !g.Contains("http://hl7.org/fhir/administrative-gender", "unknown") || g.Contains("", "woman") {
		t.Fatalf("administrative-gender: %+v", g)
	}
	// Nested concepts are expanded (v3 ActCode-style hierarchies).
	if e := LookupValueSet("http://hl7.org/fhir/ValueSet/encounter-status"); e == nil || !e.Contains("", "finished") {
		t.Fatal("encounter-status")
	}
	// Grammar-based systems are never enumerated.
	if LookupValueSet("http://hl7.org/fhir/ValueSet/ucum-units") != nil {
		t.Fatal("ucum-units must not be a finite expansion")
	}
}

// TestConstraints: the constraint table is sorted, holds the error-level
// and best-practice constraints with their severities, and places a
// profile's own constraint (sqty-1) on the elements naming the profile.
func TestConstraints(t *testing.T) {
	cs := Constraints()
	if len(cs) < 2000 {
		t.Fatalf("only %d constraints", len(cs))
	}
	found := map[string]Constraint{}
	for i, c := range cs {
		if i > 0 && (cs[i-1].Path > c.Path || cs[i-1].Path == c.Path && cs[i-1].Key >= c.Key) {
			t.Fatalf("not sorted at %d: %s %s after %s %s", i, c.Path, c.Key, cs[i-1].Path, cs[i-1].Key)
		}
		if c.Key == "ele-1" || c.Expression == "" {
			t.Errorf("%s at %s: ele-1 or no expression", c.Key, c.Path)
		}
		found[c.Path+" "+c.Key] = c
	}
	if c, ok := found["Organization org-1"]; !ok || !c.Error || c.BestPractice || c.Expression == "" {
		t.Errorf("org-1: %+v", c)
	}
	if c, ok := found["Patient dom-6"]; !ok || !c.BestPractice {
		t.Errorf("dom-6: %+v", c)
	}
	if c, ok := found["Observation.referenceRange.low sqty-1"]; !ok || c.Type != "Quantity" || !c.Error {
		t.Errorf("sqty-1: %+v", c)
	}
}

func TestLookupExtension(t *testing.T) {
	x := LookupExtension("http://hl7.org/fhir/StructureDefinition/patient-birthTime|4.0.1")
	if x == nil || len(x.Contexts) != 1 || x.Contexts[0] != "Patient.birthDate" {
		t.Fatalf("patient-birthTime: %+v", x)
	}
	if LookupExtension("http://example.org/fhir/StructureDefinition/x") != nil {
		t.Error("an unknown extension was found")
	}
}

// TestIndexes: types and elements are numbered densely and uniquely.
func TestIndexes(t *testing.T) {
	seenT := make([]bool, NumTypes())
	seenE := make([]bool, NumElements())
	for i := range types {
		ty := &types[i]
		if ty.Index() != i || seenT[ty.Index()] {
			t.Fatalf("%s: index %d", ty.Name, ty.Index())
		}
		seenT[ty.Index()] = true
		for j := range ty.Elements {
			e := &ty.Elements[j]
			if e.Index() < 0 || e.Index() >= NumElements() || seenE[e.Index()] {
				t.Fatalf("%s: element index %d", e.Path, e.Index())
			}
			seenE[e.Index()] = true
		}
	}
	for i, ok := range seenE {
		if !ok {
			t.Fatalf("no element has index %d", i)
		}
	}
}

// TestElementByName checks Element's index by name against the binary
// search over the sorted elements, for every element of every type, for
// names that are no element's, and for a Type made by hand (searched).
func TestElementByName(t *testing.T) {
	n := 0
	for i := range types {
		ty := &types[i]
		for j := range ty.Elements {
			name := ty.Elements[j].Name
			if got, want := ty.Element(name), ty.searchElement(name); got != want || got == nil {
				t.Fatalf("%s.%s: %p, the search finds %p", ty.Name, name, got, want)
			}
			n++
		}
		for _, name := range []string{"", "nosuch", "valueNosuch", "ID"} {
			if e := ty.Element(name); e != nil {
				t.Fatalf("%s.%q: %s, want none", ty.Name, name, e.Path)
			}
		}
	}
	if n < 1000 {
		t.Fatalf("only %d elements", n)
	}
	copied := *Lookup("Patient")
	copied.index = 0
	if e := copied.Element("birthDate"); e == nil || e.Path != "Patient.birthDate" {
		t.Fatalf("a Type made by hand: %v", e)
	}
	if e := copied.Element("nosuch"); e != nil {
		t.Fatalf("a Type made by hand: %s for nosuch", e.Path)
	}
}

// Lookup finds every type of the tables as itself, and no name that
// differs from one only in case or by a suffix.
func TestLookupFindsEveryType(t *testing.T) {
	for i := range types {
		name := types[i].Name
		if got := Lookup(name); got != &types[i] {
			t.Fatalf("Lookup(%q) = %v, want the table's type %d", name, got, i)
		}
		for _, other := range []string{name + "x", name[:len(name)-1], strings.ToUpper(name) + "_"} {
			if got := Lookup(other); got != nil && got.Name != other {
				t.Fatalf("Lookup(%q) found %q", other, got.Name)
			}
		}
	}
}

// TestPatientCompartment checks the compartment table against the
// definitions' own shape: the types and parameters the specification
// lists, and every path leading through the element tables to a
// Reference that may name a Patient.
func TestPatientCompartment(t *testing.T) {
	all := PatientCompartment()
	if len(all) != 66 {
		t.Fatalf("%d compartment types, want the 66 of R4", len(all))
	}
	for _, want := range []struct {
		typ, param, path string
	}{
		{"Observation", "subject", "subject"}, {"Observation", "performer", "performer"},
		{"Coverage", "beneficiary", "beneficiary"}, {"Coverage", "policy-holder", "policyHolder"},
		{"Encounter", "patient", "subject"}, {"Appointment", "actor", "participant.actor"},
		{"Provenance", "patient", "target"}, {"AuditEvent", "patient", "entity.what"},
		{"ExplanationOfBenefit", "patient", "patient"}, {"Claim", "payee", "payee.party"},
	} {
		ct := PatientCompartmentType(want.typ)
		if ct == nil {
			t.Fatalf("%s is not in the compartment", want.typ)
		}
		found := false
		for _, p := range ct.Params {
			found = found || p.Name == want.param && slices.Contains(p.Paths, want.path)
		}
		if !found {
			t.Errorf("%s: no parameter %s at %s in %+v", want.typ, want.param, want.path, ct.Params)
		}
	}
	for _, outside := range []string{"Practitioner", "Organization", "Location", "Medication", "Device", "Task", "Nonsense", ""} {
		if PatientCompartmentType(outside) != nil {
			t.Errorf("%s is in the compartment", outside)
		}
	}
	for i, ct := range all {
		if i > 0 && all[i-1].Type >= ct.Type {
			t.Fatalf("not sorted at %s", ct.Type)
		}
		if !IsResource(ct.Type) || len(ct.Params) == 0 {
			t.Fatalf("%s: not a resource, or no parameter", ct.Type)
		}
		for _, p := range ct.Params {
			for _, path := range p.Paths {
				typ := Lookup(ct.Type)
				var el *Element
				for _, seg := range strings.Split(path, ".") {
					if typ == nil {
						break
					}
					el = typ.Element(seg)
					if el == nil {
						break
					}
					typ = el.TypeDef()
				}
				if el == nil || el.Type != "Reference" || (el.Targets != nil && !slices.Contains(el.Targets, "Patient")) {
					t.Errorf("%s.%s (%s): not a Reference that may name a Patient: %+v", ct.Type, path, p.Name, el)
				}
			}
		}
	}
}
