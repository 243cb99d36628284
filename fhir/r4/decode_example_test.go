package r4_test

import (
	"errors"
	"fmt"

	"github.com/acds-project/acds/fhir/r4"
)

// ExampleOptions_Decode reports every structural problem of a document in
// one pass, each with its path, and keeps what is well formed.
func ExampleOptions_Decode() {
	r, errs := r4.Options{}.Decode([]byte(`{"resourceType":"Bundle","type":"collection","entry":[
	  {"resource":{"resourceType":"Patient","name":[{"family":"Chalmers","nickname":"Jim"}],"birthDate":19741225}},
	  {"resource":{"resourceType":"MedicationOrder","id":"m1"}},
	  {"resource":{"resourceType":"Condition","clinicalStatus":"active","subject":{"reference":"Patient/1"}}}]}`))
	for _, e := range errs {
		fmt.Printf("%s: %v (not R4: %v)\n", e.Path, e.Err, errors.Is(e, r4.ErrNotR4))
	}
	out, _ := r4.Marshal(r)
	fmt.Println(string(out))
	// Output:
	// Bundle.entry[0].resource.name[0].nickname: r4: unknown property (not R4: false)
	// Bundle.entry[0].resource.birthDate: r4: invalid value (not R4: false)
	// Bundle.entry[1].resource: r4: not FHIR R4 content (not R4: true)
	// Bundle.entry[2].resource.clinicalStatus: r4: invalid value (not R4: true)
	// {"resourceType":"Bundle","type":"collection","entry":[{"resource":{"resourceType":"Patient","name":[{"family":"Chalmers"}]}},{"resource":{"resourceType":"Condition","subject":{"reference":"Patient/1"}}}]}
}
