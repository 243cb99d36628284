package demoportal

import (
	"bytes"
	"strings"
	"testing"

	"github.com/acds-project/acds/fhir"
)

// collection wraps a record's resources in a collection Bundle, as
// $everything would return them.
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

// TestEveryDemoPatientValidates checks every patient of the default demo
// population (`acds portal` with no flags) against our own FHIR
// validation, and the spread of sizes.
func TestEveryDemoPatientValidates(t *testing.T) {
	d, err := New(Options{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(d.records) != 25 {
		t.Fatalf("%d patients, want the default 25", len(d.records))
	}
	smallest, largest := 1<<62, 0
	types := map[string]bool{}
	for _, rec := range d.records {
		out := fhir.Validate(collection(rec))
		for _, is := range out.Issues {
			if is.Severity == fhir.SeverityError || is.Severity == fhir.SeverityFatal {
				t.Errorf("%s: %s", rec.ID, is)
				break
			}
		}
		smallest, largest = min(smallest, rec.Bytes), max(largest, rec.Bytes)
		for _, r := range rec.Resources {
			types[r.Type] = true
		}
	}
	if smallest > 20<<10 || largest < 4<<20 {
		t.Errorf("sizes from %d to %d bytes; want a few KB to several MB", smallest, largest)
	}
	for _, typ := range []string{"Patient", "Encounter", "Condition", "Observation", "MedicationRequest", "Immunization", "AllergyIntolerance", "Procedure"} {
		if !types[typ] {
			t.Errorf("no %s in the demo population", typ)
		}
	}
	if b := d.records[3].Bytes; b < 800<<10 || b > 1300<<10 {
		t.Errorf("patient 4 is %d bytes; the benchmark wants about 1 MB", b)
	}
	// The terminologies are the ones named.
	all := string(collection(d.records[2]))
	for _, sys := range []string{systemSNOMED, systemLOINC, systemRxNorm, systemCVX} {
		if !strings.Contains(all, sys) {
			t.Errorf("no %s codes", sys)
		}
	}
}

func TestDemoIsDeterministic(t *testing.T) {
	a, b, c := generate(5, 2), generate(5, 2), generate(6, 2)
	if !bytes.Equal(collection(a), collection(b)) {
		t.Error("the same seed gave different records")
	}
	if bytes.Equal(collection(a), collection(c)) {
		t.Error("different seeds gave the same record")
	}
}
