package portal

import (
	"bytes"
	"testing"

	"github.com/acds-project/acds/fhir"
)

// collection wraps a record's resources in a collection Bundle.
func collection(rec *record) []byte {
	var b bytes.Buffer
	b.WriteString(`{"resourceType":"Bundle","type":"collection","entry":[`)
	for i, r := range rec.Resources {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`{"fullUrl":"https://demo.invalid/fhir/` + r.Type + `/` + r.ID + `","resource":`)
		b.Write(r.JSON)
		b.WriteByte('}')
	}
	b.WriteString(`]}`)
	return b.Bytes()
}

func TestGeneratedPatientsValidate(t *testing.T) {
	sizes := map[int]int{}
	for i := range len(encounterPlan) {
		rec := generate(1, i)
		data := collection(rec)
		sizes[i] = len(data)
		out := fhir.Validate(data)
		if out.HasErrors() {
			for _, is := range out.Issues[:min(10, len(out.Issues))] {
				t.Errorf("patient %d: %s", i, is)
			}
		}
	}
	t.Logf("sizes: %v", sizes)
}
