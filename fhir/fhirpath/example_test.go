package fhirpath_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/acds-project/acds/fhir/fhirpath"
	"github.com/acds-project/acds/fhir/r4"
)

func Example() {
	obs, err := r4.Unmarshal([]byte(`{"resourceType":"Observation","status":"final",
		"code":{"coding":[{"system":"http://loinc.org","code":"4548-4"}]},
		"effectiveDateTime":"2024-03-01",
		"valueQuantity":{"value":6.1,"unit":"%","system":"http://unitsofmeasure.org","code":"%"}}`))
	if err != nil {
		panic(err)
	}
	x, err := fhirpath.Compile("Observation.where(code.coding.code = '4548-4' and value.ofType(Quantity) > 6 '%').value")
	if err != nil {
		panic(err)
	}
	out, err := x.EvaluateResource(context.Background(), obs, nil)
	if err != nil {
		panic(err)
	}
	js, _ := fhirpath.MarshalJSON(out)
	fmt.Println(string(js))
	// Output: [{"value":6.1,"unit":"%","system":"http://unitsofmeasure.org","code":"%"}]
}

func ExampleCompile_syntaxError() {
	_, err := fhirpath.Compile("name.where(given = 'x'")
	var se *fhirpath.SyntaxError
	if errors.As(err, &se) {
		fmt.Println(se.Line, se.Column, errors.Is(err, fhirpath.ErrSyntax))
	}
	// Output: 1 23 true
}
