package r4_test

import (
	"fmt"

	"github.com/acds-project/acds/fhir/r4"
)

func Example() {
	data := []byte(`{
	  "resourceType": "Patient",
	  "id": "p1",
	  "name": [{"family": "Chalmers", "given": ["Peter", "James"]}],
	  "birthDate": "1974-12-25",
	  "_birthDate": {"extension": [{"url": "http://hl7.org/fhir/StructureDefinition/patient-birthTime", "valueDateTime": "1974-12-25T14:35:45-05:00"}]},
	  "managingOrganization": {"reference": "Organization/1"}
	}`)
	r, err := r4.Unmarshal(data)
	if err != nil {
		fmt.Println(err)
		return
	}
	p := r.(*r4.Patient)
	fmt.Println(p.Name[0].Given[1].Value, p.BirthDate.Value, p.BirthDate.Extension[0].ValueDateTime.Value)

	// Rewrite every reference, wherever it is.
	_ = r4.Walk(p, func(path *r4.Path, node any) error {
		if ref, ok := node.(*r4.Reference); ok {
			fmt.Println(path, ref.Reference.Value)
			ref.Reference.Value = "Organization/2"
		}
		return nil
	})
	out, _ := r4.Marshal(p)
	fmt.Println(string(out))
	// Output:
	// James 1974-12-25 1974-12-25T14:35:45-05:00
	// Patient.managingOrganization Organization/1
	// {"resourceType":"Patient","id":"p1","name":[{"family":"Chalmers","given":["Peter","James"]}],"birthDate":"1974-12-25","_birthDate":{"extension":[{"url":"http://hl7.org/fhir/StructureDefinition/patient-birthTime","valueDateTime":"1974-12-25T14:35:45-05:00"}]},"managingOrganization":{"reference":"Organization/2"}}
}

func ExampleUnmarshal_errors() {
	_, err := r4.Unmarshal([]byte(`{"resourceType":"Patient","name":[{"family":"X","nickname":"Y"}]}`))
	fmt.Println(err)
	_, err = r4.Unmarshal([]byte(`{"resourceType":"MedicationOrder"}`))
	fmt.Println(err)
	// Output:
	// fhir r4: Patient.name[0].nickname: unknown property "nickname" (offset 48)
	// fhir r4: resourceType "MedicationOrder" is not an R4 resource type (offset 33)
}

// ExampleWalk blanks every date to its year, whatever resource it is in, in
// the manner of HIPAA Safe Harbor de-identification.
func ExampleWalk() {
	r, err := r4.Unmarshal([]byte(`{"resourceType":"Bundle","type":"collection","entry":[
	  {"resource":{"resourceType":"Patient","birthDate":"1974-12-25"}},
	  {"resource":{"resourceType":"Encounter","status":"finished","class":{"code":"AMB"},"period":{"start":"2020-03-04T10:00:00Z"}}}]}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	_ = r4.Walk(r, func(path *r4.Path, node any) error {
		if p, ok := node.(r4.Primitive); ok && p.HasValue() {
			switch p.PrimitiveType() {
			case "date", "dateTime", "instant":
				fmt.Println(path, p.Text())
				return p.SetText(p.Text()[:4])
			}
		}
		return nil
	})
	out, _ := r4.Marshal(r)
	fmt.Println(string(out))
	// Output:
	// Bundle.entry[0].resource.birthDate 1974-12-25
	// Bundle.entry[1].resource.period.start 2020-03-04T10:00:00Z
	// {"resourceType":"Bundle","type":"collection","entry":[{"resource":{"resourceType":"Patient","birthDate":"1974"}},{"resource":{"resourceType":"Encounter","status":"finished","class":{"code":"AMB"},"period":{"start":"2020"}}}]}
}
