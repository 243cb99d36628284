package fhirpath

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/acds-project/acds/fhir/r4"
)

// FuzzCompile checks that parsing never panics, that every failure is a
// typed error naming a position inside the expression, and that whatever
// compiles evaluates over a small patient without panicking, within the
// step limit and a short deadline.
func FuzzCompile(f *testing.F) {
	for _, s := range []string{
		"Patient.name.where(use = 'official').given.first()",
		"(1 | 2 | 3).aggregate($this + $total, 0)",
		"@2012-04-15T10:00:00.000+10:00 + 7 days < now()",
		"descendants().ofType(Quantity).where(value > 5 'mg')",
		"'a\\u00e9'.matches('^[a-z]+$') implies {}.empty()",
		"name.select(given | family).distinct().count() > 1 and %resource.id.exists()",
		"extension('http://x').value.as(Coding).code.memberOf('http://hl7.org/fhir/ValueSet/administrative-gender')",
		"/* c */ 1.5.round(2) // d",
		"repeat(children()).count()",
		"((((((((((1))))))))))",
		"`x`.y[0].z(",
	} {
		f.Add(s)
	}
	birth := r4.NewDate("1974-12-25")
	patient := &r4.Patient{ID: "p", BirthDate: birth, Name: []r4.HumanName{{Family: r4.NewString("Chalmers"), Given: []r4.String{*r4.NewString("Peter")}}}}
	input := Collection{NodeOf(patient)}
	f.Fuzz(func(t *testing.T, expr string) {
		x, err := Parse(expr)
		if err != nil {
			var se *SyntaxError
			var ee *EvalError
			switch {
			case errors.As(err, &se):
				if se.Offset < 0 || se.Offset > len(expr) || se.Line < 1 || se.Column < 1 {
					t.Fatalf("syntax error with a bad position: %+v", se)
				}
			case errors.As(err, &ee):
				if !errors.Is(err, ErrSemantic) && !errors.Is(err, ErrLimit) {
					t.Fatalf("compile error of class %v", ee.Class)
				}
			default:
				t.Fatalf("untyped error %T: %v", err, err)
			}
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		env := &Env{Limits: Limits{MaxSteps: 200_000, MaxItems: 10_000}, Now: time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC)}
		out, err := x.Evaluate(ctx, input, env)
		if err != nil {
			var ee *EvalError
			if !errors.As(err, &ee) {
				t.Fatalf("untyped evaluation error %T: %v", err, err)
			}
			return
		}
		if len(out) > 10_000 {
			t.Fatalf("result of %d items beyond the limit", len(out))
		}
		if _, err := MarshalJSON(out); err != nil {
			var ee *EvalError
			if !errors.As(err, &ee) {
				t.Fatalf("untyped encoding error %T: %v", err, err)
			}
		}
	})
}
