package fhirpath

import (
	"context"
	"testing"

	"github.com/acds-project/acds/fhir/r4"
	"github.com/acds-project/acds/fhir/spec"
)

// TestTrueWithout pins what the analysis knows, and that the test it
// gives agrees with evaluation on Observations with and without the
// children it names.
func TestTrueWithout(t *testing.T) {
	obs := spec.Lookup("Observation")
	withComponent := &r4.Observation{Component: []r4.ObservationComponent{{Code: &r4.CodeableConcept{Text: &r4.String{Value: "x", Present: true}}}}}
	bare := &r4.Observation{Status: &r4.Code{Value: "final", Present: true}, ValueString: &r4.String{Value: "v", Present: true}}
	cases := []struct {
		expr string
		// applies: the analysis gives a test; then bareTrue and
		// componentTrue are its answers for bare and withComponent.
		applies, bareTrue, componentTrue bool
	}{
		{"value.empty() or component.code.where(coding.intersect(%resource.code.coding).exists()).empty()", true, true, false}, // obs-7
		{"component.empty()", true, true, false},
		{"component.exists().not()", true, true, false},
		{"component.all(code.exists())", true, true, false},
		{"component.exists() implies value.exists()", true, true, false},
		{"component.first().code.empty() and referenceRange.empty()", true, true, false},
		{"component[0].empty()", true, true, false},
		{"component.where(value.exists()).empty()", true, true, false},
		{"value.empty()", true, false, true}, // bare has a value (valueString)
		// Not known: a path that does not start at an element of the
		// input, a result that is not true for an absent path.
		{"component.exists()", false, false, false},
		{"component.count() = 0", false, false, false},
		{"Observation.component.empty()", false, false, false},
		{"id.empty()", false, false, false},
		{"%resource.component.empty()", false, false, false},
		{"$this.component.empty()", false, false, false},
		{"component.code.empty() xor true", false, false, false},
		{"iif(true, component, {}).empty()", false, false, false},
	}
	for _, c := range cases {
		x, err := Parse(c.expr)
		if err != nil {
			t.Fatalf("%s: %v", c.expr, err)
		}
		test := x.TrueWithout(obs)
		if (test != nil) != c.applies {
			t.Errorf("%s: test given %v, want %v", c.expr, test != nil, c.applies)
			continue
		}
		if test == nil {
			continue
		}
		for _, o := range []struct {
			r    *r4.Observation
			want bool
		}{{bare, c.bareTrue}, {withComponent, c.componentTrue}} {
			if got := test(r4.Resource(o.r)); got != o.want {
				t.Errorf("%s on %+v: %v, want %v", c.expr, o.r, got, o.want)
			}
			if o.want {
				out, err := x.Evaluate(context.Background(), Collection{NodeOf(o.r)}, nil)
				if err == nil && !(len(out) == 1 && out[0] == Boolean(true)) {
					t.Errorf("%s: evaluates to %v where the test says true", c.expr, out)
				}
			}
		}
	}
	if x, _ := Parse("component.empty()"); x.TrueWithout(nil) != nil {
		t.Error("a test for no type")
	}
}
