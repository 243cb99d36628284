package r4_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/acds-project/acds/fhir/r4"
)

// codings returns an Observation with n codings of three string-valued
// primitives each (system, code, display).
func codings(n int) []byte {
	var b strings.Builder
	b.WriteString(`{"resourceType":"Observation","status":"final","code":{"coding":[`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"system":"http://loinc.org","code":"%d-4","display":"item %d"}`, i, i)
	}
	b.WriteString(`]}}`)
	return []byte(b.String())
}

// The primitives with a string value come from slabs, not an allocation
// each: decoding 300 codings (900 such primitives) allocates far fewer
// than 900 times (it allocated 917 times when each had its own).
func TestTextPrimitivesShareAllocations(t *testing.T) {
	data := codings(300)
	allocs := testing.AllocsPerRun(5, func() {
		if r, errs := (r4.Options{}).Decode(data); r == nil || len(errs) > 0 {
			t.Fatal(errs)
		}
	})
	if allocs > 150 {
		t.Errorf("decoding 900 text primitives allocated %.0f times, want at most 150", allocs)
	}
}

// Primitives handed out from one slab are distinct: each holds its own
// value, and changing one changes no other.
func TestSlabPrimitivesAreDistinct(t *testing.T) {
	r, errs := (r4.Options{}).Decode(codings(40))
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	obs := r.(*r4.Observation)
	seen := map[*r4.String]bool{}
	for i, c := range obs.Code.Coding {
		if c.Code.Value != fmt.Sprintf("%d-4", i) || c.Display.Value != fmt.Sprintf("item %d", i) || c.System.Value != "http://loinc.org" {
			t.Fatalf("coding %d: %s %s %s", i, c.System.Value, c.Code.Value, c.Display.Value)
		}
		if seen[c.Display] {
			t.Fatalf("coding %d shares its display", i)
		}
		seen[c.Display] = true
	}
	obs.Code.Coding[0].Display.Value = "changed"
	obs.Code.Coding[0].Code.Extension = append(obs.Code.Coding[0].Code.Extension, r4.Extension{URL: "http://example.org/x"})
	for i, c := range obs.Code.Coding[1:] {
		if c.Display.Value != fmt.Sprintf("item %d", i+1) || len(c.Code.Extension) != 0 || len(c.System.Extension) != 0 {
			t.Fatalf("changing coding 0 changed coding %d: %+v", i+1, c)
		}
	}
}
