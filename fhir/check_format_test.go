package fhir

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/acds-project/acds"
	"github.com/acds-project/acds/internal/testrig/corpus"
)

// TestCheckKnowsTheFormat: Check refuses, for the format asked, exactly
// what Process refuses, with the same outcome: an International Patient
// Summary of a record without a Patient is refused by both (a Patient
// only contained in another resource is not the record's), while the
// same record is fine for the other formats.
func TestCheckKnowsTheFormat(t *testing.T) {
	const (
		practitioner = `{"resourceType":"Bundle","type":"collection","entry":[{"fullUrl":"urn:uuid:0b5f2b4e-7d1c-4c3a-9a57-2b8f0c1d2e3f","resource":{"resourceType":"Practitioner","id":"pr1","name":[{"family":"Who"}]}}]}`
		contained    = `{"resourceType":"Observation","id":"o1","status":"final","code":{"text":"x"},"subject":{"reference":"#p"},"contained":[{"resourceType":"Patient","id":"p"}]}`
		patient      = `{"resourceType":"Bundle","type":"collection","entry":[{"fullUrl":"urn:uuid:0b5f2b4e-7d1c-4c3a-9a57-2b8f0c1d2e3f","resource":{"resourceType":"Practitioner","id":"pr1"}},{"fullUrl":"urn:uuid:1b5f2b4e-7d1c-4c3a-9a57-2b8f0c1d2e3f","resource":{"resourceType":"Patient","id":"p1"}}]}`
	)
	noPatient := map[string]bool{practitioner: true, contained: true}
	inputs := []string{practitioner, contained, patient, `{"resourceType":"Patient","id":"a"}`,
		`{"resourceType":"Bundle","type":"collection"}`, `{"resourceType":"Patient","birthDate":"x"}`}
	prac := string(corpus.Read(t, corpus.Practitioners))
	inputs = append(inputs, prac)
	noPatient[prac] = true
	const says = "an International Patient Summary needs a Patient: the record holds none"
	for _, in := range inputs {
		for _, format := range []string{"", acds.OutputFHIRR4, acds.OutputFHIRR4IPS, acds.OutputFHIRPath} {
			opts := Options{Format: format, Now: testNow}
			if format == acds.OutputFHIRPath {
				opts.Query = "Patient.count()"
			}
			cerr := Check([]byte(in), Options{Format: format})
			_, perr := Process([]byte(in), opts)
			name := format + " " + in[:min(len(in), 60)]
			if (cerr == nil) != (perr == nil) {
				t.Errorf("%s: Check %v, Process %v", name, cerr, perr)
				continue
			}
			if want := format == acds.OutputFHIRR4IPS && noPatient[in]; (cerr != nil && strings.Contains(cerr.Error(), says)) != want {
				t.Errorf("%s: Check %v, want the no-Patient refusal: %v", name, cerr, want)
			}
			if cerr == nil {
				continue
			}
			var ci, pi *InvalidError
			if !errors.As(cerr, &ci) || !errors.As(perr, &pi) || !reflect.DeepEqual(ci.Outcome.Issues, pi.Outcome.Issues) || ci.NotR4 != pi.NotR4 {
				t.Errorf("%s: Check %v, Process %v: not the same refusal", name, cerr, perr)
			}
		}
	}
}
