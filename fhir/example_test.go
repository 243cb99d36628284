package fhir_test

import (
	"errors"
	"fmt"
	"time"

	"github.com/acds-project/acds/fhir"
)

func ExampleProcess() {
	input := []byte(`{"resourceType":"Patient","id":"p1","gender":"female","birthDate":"1980-04-01"}`)
	out, err := fhir.Process(input, fhir.Options{
		Source:      "raw",
		Measurement: "c0ffee",
		Now:         time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(out.Format, out.Resources, len(out.Digest))

	_, err = fhir.Process([]byte(`{"resourceType":"Patient","birthDate":"not a date"}`), fhir.Options{})
	var invalid *fhir.InvalidError
	if errors.As(err, &invalid) {
		fmt.Println(invalid.Outcome.Issues[0])
	}
	// Output:
	// fhir_r4 2 71
	// error @ Patient.birthDate: not a valid date format: "not a date"
}

func ExampleValidate() {
	o := fhir.Validate([]byte(`{"resourceType":"Patient","name":[{"given":["Ann",7]}]}`))
	for _, is := range o.Issues {
		fmt.Println(is)
	}
	// Output:
	// error @ Patient.name[0].given[1]: the property must be a JSON string, not a number
	// warning @ Patient: dom-6: a resource should have narrative for robust management
}
