package acds_test

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/acds-project/acds"
)

func ExampleProblem() {
	// A problem document as the server sends it.
	body := []byte(`{"type":"urn:acds:problem:unsupported-output-format","title":"Unsupported output format","status":422,
		"detail":"outputFormat \"pdf\" is not supported; supported: fhir_r4, fhir_r4_deidentified",
		"errors":[{"field":"outputFormat","message":"must be one of fhir_r4, fhir_r4_deidentified"}]}`)
	var p acds.Problem
	if err := json.Unmarshal(body, &p); err != nil {
		panic(err)
	}
	var err error = fmt.Errorf("submit: %w", &p)

	var got *acds.Problem
	if errors.As(err, &got) {
		fmt.Println(got.Code(), got.Status, got.Errors[0].Field)
	}
	fmt.Println(errors.Is(err, acds.NewProblem(acds.ProblemUnsupportedOutputFormat, "")))
	// Output:
	// unsupported-output-format 422 outputFormat
	// true
}
