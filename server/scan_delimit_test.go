package server

import (
	"bytes"
	"strings"
	"testing"

	"github.com/acds-project/acds"
	"github.com/acds-project/acds/fhir"
)

// FuzzDelimitedData checks what handleProcess relies on when it leaves the
// syntax of the data to FHIRPipeline's check: decoding with the data only
// delimited refuses nothing the strict decoding accepts and, where both
// accept, decodes the same request; and where only the strict decoding
// refuses (the data is malformed), fhir.Check refuses the data that was
// delimited, so the request is never accepted and the strict problem is
// the answer.
func FuzzDelimitedData(f *testing.F) {
	patient := `{"resourceType":"Patient","id":"p1","name":[{"family":"Doe","given":["Jo"]}],"birthDate":"1970-01-01"}`
	for _, s := range []string{
		`{"data":` + patient + `,"outputFormat":"fhir_r4"}`,
		`{"outputFormat":"fhir_r4","data":` + patient + `}`,
		`{"data":{"resourceType":"Patient","id":"p1",},"outputFormat":"fhir_r4"}`,
		`{"data":{"resourceType":"Patient" "id":"p1"},"outputFormat":"fhir_r4"}`,
		`{"data":{"resourceType":"Patient","id":"p1"],"outputFormat":"fhir_r4"}`,
		`{"data":{"resourceType":"Patient","active":tru},"outputFormat":"fhir_r4"}`,
		`{"data":{"resourceType":"Patient","multipleBirthInteger":01},"outputFormat":"fhir_r4"}`,
		`{"data":{"resourceType":"Patient","multipleBirthInteger":1.},"outputFormat":"fhir_r4"}`,
		`{"data":{"resourceType":"Patient","id":"a\x"},"outputFormat":"fhir_r4"}`,
		`{"data":{"resourceType":"Patient","id":"a` + "\x01" + `"},"outputFormat":"fhir_r4"}`,
		`{"data":{"resourceType":"Patient","id":"\u12g4"},"outputFormat":"fhir_r4"}`,
		`{"data":{"resourceType":"Patient","extension":[{"url":"http://x","valueString":"a"},]},"outputFormat":"fhir_r4"}`,
		`{"data":{"resourceType":"Patient","id":"p1"}},"outputFormat":"fhir_r4"}`,
		`{"data":{"resourceType":"Patient","id":"p1"`, `{"data":{"resourceType":"Patient","id":"p1\`,
		`{"data":[{"resourceType":"Patient"}],"outputFormat":"fhir_r4"}`, `{"data":{},"data":{},"outputFormat":7}`,
		`{"data":{"resourceType":"Patient"},"outputFormat":7}`, `{"data":{"a":1}x,"outputFormat":"fhir_r4"}`,
		`{"data":{"resourceType":"Bundle","type":"collection","entry":[{"fullUrl":"urn:uuid:00000000-0000-4000-8000-000000000001","resource":` + patient + `}]},"outputFormat":"fhir_r4"}`,
		`{"data":` + strings.Repeat("[", 10001) + strings.Repeat("]", 10001) + `}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var strict, delimited acds.ProcessRequest
		sp := decodeProcessRequest(b, &strict)
		dp := decodeProcessRequestWith(b, &delimited, true)
		switch {
		case dp != nil && sp == nil:
			t.Fatalf("%q: refused with the data delimited (%v), accepted strictly", b, dp)
		case dp != nil:
		case sp == nil:
			if !bytes.Equal(strict.Data, delimited.Data) || strict.OutputFormat != delimited.OutputFormat ||
				strict.Query != delimited.Query || strict.CallbackURL != delimited.CallbackURL {
				t.Fatalf("%q: decoded %+v strictly, %+v with the data delimited", b, strict, delimited)
			}
		default:
			if fhir.Check(delimited.Data, fhir.Options{}) == nil {
				t.Fatalf("%q: strictly refused (%v), but fhir.Check accepts the delimited data %q", b, sp, delimited.Data)
			}
		}
	})
}
