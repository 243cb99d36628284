package fhir

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"unsafe"

	"github.com/acds-project/acds/fhir/r4"
	"github.com/acds-project/acds/fhir/spec"
	"github.com/acds-project/acds/internal/testrig/corpus"
)

func TestSpecWalk(t *testing.T) {
	r, err := r4.Unmarshal([]byte(`{"resourceType":"Bundle","type":"collection","entry":[
		{"resource":{"resourceType":"Patient","name":[{"family":"Doe","given":["A","B"]}],
		 "birthDate":"1970","_birthDate":{"extension":[{"url":"u","valueString":"x"}]},
		 "contact":[{"gender":"male"}]}},
		{"resource":{"resourceType":"Observation","status":"final","code":{"text":"t"},"valueQuantity":{"value":1.50}}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	var log []string
	var depth int
	err = specWalk(r, func(path *r4.Path, stack []specFrame) error {
		f := &stack[len(stack)-1]
		if len(stack) != path.Len()+1 {
			t.Errorf("%s: stack %d, path length %d", path, len(stack), path.Len())
		}
		depth++
		typ, elem := "-", "-"
		if f.Type != nil {
			typ = f.Type.Name
		}
		if f.Elem != nil {
			elem = f.Elem.Path
		}
		log = append(log, path.String()+" "+typ+" "+elem)
		return nil
	}, func(stack []specFrame) {
		depth--
		f := &stack[len(stack)-1]
		if f.Type != nil && f.Type.Name == "Patient" {
			log = append(log, "leave Patient "+strings.Join(f.Present, ","))
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if depth != 0 {
		t.Errorf("enter and leave unbalanced by %d", depth)
	}
	got := strings.Join(log, "\n") + "\n"
	for _, want := range []string{
		"Bundle Bundle -",
		"Bundle.entry[0] Bundle.entry Bundle.entry",
		"Bundle.entry[0].resource Patient Bundle.entry.resource",
		"Bundle.entry[0].resource.name[0].given[1] string HumanName.given",
		"Bundle.entry[0].resource.birthDate.extension[0] Extension Element.extension",
		"Bundle.entry[0].resource.birthDate.extension[0].valueString string Extension.value[x]",
		"Bundle.entry[0].resource.contact[0] Patient.contact Patient.contact",
		"Bundle.entry[0].resource.contact[0].gender code Patient.contact.gender",
		"leave Patient name,birthDate,contact",
		"Bundle.entry[1].resource.valueQuantity Quantity Observation.value[x]",
		"Bundle.entry[1].resource.valueQuantity.value decimal Quantity.value",
	} {
		if !strings.Contains(got, want+"\n") {
			t.Errorf("missing %q in walk:\n%s", want, got)
		}
	}

	// An error from enter ends the walk, and every entered frame is left.
	stop := errors.New("stop")
	depth = 0
	err = specWalk(r, func(path *r4.Path, stack []specFrame) error {
		depth++
		if path.String() == "Bundle.entry[0].resource.name[0].family" {
			return stop
		}
		return nil
	}, func([]specFrame) { depth-- })
	if err != stop || depth != 0 {
		t.Errorf("err %v, unbalanced by %d; want stop, 0", err, depth)
	}
}

// TestElementOfMatchesElement checks the walk's cached element lookup
// against spec.Type.Element on every node of the Synthea bundles,
// walked by several goroutines at once (the cache is shared), and with
// names that are equal but stored elsewhere, or unknown.
func TestElementOfMatchesElement(t *testing.T) {
	files := corpus.JSON(t, corpus.Synthea)
	var wg sync.WaitGroup
	errs := make(chan string, len(files)*2)
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		r, err := r4.Unmarshal(data)
		if err != nil {
			t.Fatal(err)
		}
		for range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				n := 0
				_ = specWalk(r, func(path *r4.Path, stack []specFrame) error {
					d := len(stack) - 1
					if d == 0 {
						return nil
					}
					pt := stack[d-1].Type
					if pt == nil {
						return nil
					}
					if pt.Kind == spec.Primitive {
						pt = elementType
					}
					name := stack[d].Name
					if want := pt.Element(name); stack[d].Elem != want {
						errs <- fmt.Sprintf("%s: elementOf gave %v, Element %v", path, stack[d].Elem, want)
					}
					if e := stack[d].Elem; e != nil && stack[d].Choice != strings.HasSuffix(e.Path, "[x]") {
						errs <- fmt.Sprintf("%s: Choice %v for the element %s", path, stack[d].Choice, e.Path)
					}
					// The same name in other bytes, and a name no type has.
					copied := string(append([]byte(nil), name...))
					if got, choice, holds := elementOf(pt, copied); got != pt.Element(name) ||
						got != nil && (choice != strings.HasSuffix(got.Path, "[x]") || holds != (got.Type == "Resource")) {
						errs <- fmt.Sprintf("%s: elementOf(copy of %q) = %v, %v, %v", path, name, got, choice, holds)
					}
					if got, _, _ := elementOf(pt, copied+"Nope"); got != nil {
						errs <- fmt.Sprintf("%s: elementOf(%q) = %v, want nil", path, copied+"Nope", got)
					}
					n++
					return nil
				}, nil)
				if n == 0 {
					errs <- "no element walked"
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}

// TestElementOfCollision puts two types that share a name's bytes in the
// same cache slot, one after the other: each must get its own element.
// The table's types never meet in a slot for one name (the hash spreads
// nearby addresses), so copies of them made on the heap are added.
func TestElementOfCollision(t *testing.T) {
	var types []*spec.Type
	for _, n := range []string{"Patient", "Observation", "Bundle", "Coding", "CodeableConcept", "Quantity", "Reference",
		"Identifier", "HumanName", "Address", "Period", "Meta", "Narrative", "Encounter", "Condition", "Procedure",
		"MedicationRequest", "Immunization", "Organization", "Practitioner", "Claim", "ExplanationOfBenefit",
		"DiagnosticReport", "CarePlan", "CareTeam", "Goal", "Location", "Device", "AllergyIntolerance", "Attachment"} {
		if ty := spec.Lookup(n); ty != nil {
			// A copy of the type, elsewhere in memory, with elements of
			// its own: a type that is not one of the tables'.
			cp := *ty
			cp.Elements = slices.Clone(ty.Elements)
			types = append(types, ty, &cp)
		}
	}
	// Names at many addresses: the bytes of one buffer, eight apart.
	const word = "extension"
	buf := []byte(strings.Repeat(word+"\x00\x00\x00\x00\x00\x00\x00", 1<<14))
	for off := 0; off+len(word) <= len(buf); off += 16 {
		name := unsafe.String(&buf[off], len(word))
		seen := map[uint64]*spec.Type{}
		for _, ty := range types {
			s := elementSlot(ty, name)
			other := seen[s]
			if other == nil {
				seen[s] = ty
				continue
			}
			if other.Element(word) == ty.Element(word) {
				t.Fatalf("%s and %s share their extension element", other.Name, ty.Name)
			}
			for _, pt := range []*spec.Type{other, ty, other} {
				if got, want := first(elementOf(pt, name)), pt.Element(word); got != want {
					t.Fatalf("elementOf(%s, %s) = %p, want %p", pt.Name, word, got, want)
				}
			}
			return
		}
	}
	t.Fatal("no two types met in a slot")
}

// first is the element of an elementOf result.
func first(e *spec.Element, _, _ bool) *spec.Element { return e }
