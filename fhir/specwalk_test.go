package fhir

import (
	"errors"
	"strings"
	"testing"

	"github.com/acds-project/acds/fhir/r4"
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
