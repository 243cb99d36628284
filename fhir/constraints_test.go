package fhir

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/acds-project/acds/fhir/fhirpath"
	"github.com/acds-project/acds/fhir/r4"
	"github.com/acds-project/acds/fhir/spec"
)

// TestConstraintOutcomes: a false or empty constraint is an error naming
// its key and location (a warning when best practice or warning-level); a
// constraint that cannot be evaluated is a warning naming it, never an
// error; one that names elements the type lacks does not apply.
func TestConstraintOutcomes(t *testing.T) {
	cases := []struct {
		name, expr     string
		errorLevel, bp bool
		sev            Severity // "" for no issue
		contains       string
	}{
		{"false", "false", true, false, SeverityError, "tst-1: human"},
		{"empty", "{}", true, false, SeverityError, "tst-1"},
		{"true", "true", true, false, "", ""},
		{"best practice", "false", true, true, SeverityWarning, "tst-1"},
		{"warning level", "false", false, false, SeverityWarning, "tst-1"},
		{"not supported", "htmlChecks()", true, false, SeverityWarning, "tst-1: the constraint could not be evaluated"},
		{"evaluation error", "(1 | 2).single()", true, false, SeverityWarning, "could not be evaluated"},
		{"names absent elements", "valueQuantity.exists()", true, false, "", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := &r4.Patient{}
			v := &validator{res: []*tresCtx{{r: p, typ: "Patient"}}}
			x, err := fhirpath.Parse(c.expr)
			if err != nil {
				t.Fatal(err)
			}
			r := &rule{c: &spec.Constraint{Key: "tst-1", Error: c.errorLevel, BestPractice: c.bp, Human: "human"}, x: x}
			v.evalRule(r, fhirpath.Collection{fhirpath.NodeOf(p)}, []specFrame{{Node: p, Index: -1}})
			if c.sev == "" {
				if len(v.issues) != 0 {
					t.Fatalf("want no issue, got %v", v.issues)
				}
				return
			}
			if len(v.issues) != 1 || v.issues[0].Severity != c.sev || !strings.Contains(v.issues[0].Diagnostics, c.contains) ||
				len(v.issues[0].Expression) != 1 || v.issues[0].Expression[0] != "Patient" {
				t.Fatalf("want one %s containing %q at Patient, got %v", c.sev, c.contains, v.issues)
			}
		})
	}
}

// TestRulesCompileOnceConcurrently: the constraint table compiles once,
// safely from many goroutines, and every error-level constraint the
// validator evaluates compiles.
func TestRulesCompileOnceConcurrently(t *testing.T) {
	var wg sync.WaitGroup
	got := make([]*ruleSet, 8)
	for i := range got {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			got[i] = loadRules()
		}(i)
	}
	wg.Wait()
	placed := map[*rule]bool{}
	for _, rs := range got {
		if rs != got[0] {
			t.Fatal("the rules were compiled more than once")
		}
	}
	for _, set := range [][][]*rule{got[0].byType} {
		for _, rs := range set {
			for _, r := range rs {
				placed[r] = true
				if r.err != nil {
					t.Errorf("%s: %v", r.c.Key, r.err)
				}
			}
		}
	}
	for _, rs := range got[0].byElem {
		for _, r := range rs {
			placed[r] = true
			if r.err != nil {
				t.Errorf("%s: %v", r.c.Key, r.err)
			}
		}
	}
	n, want := len(placed), 0
	for _, c := range spec.Constraints() {
		if !handChecked[c.Key] {
			want++
		}
	}
	if n != want || n < 250 {
		t.Errorf("%d constraints placed on types and elements; want the %d not checked in Go", n, want)
	}
	t.Logf("%d constraints evaluated as FHIRPath; %d of the table's %d rows are checked in Go (dom-*, ext-1 on every extension element…)", n, len(spec.Constraints())-n, len(spec.Constraints()))
}

// TestValidateConcurrently: validations running at once (sharing the
// compiled constraints and the FHIRPath evaluators' pool) give the same
// findings as one at a time.
func TestValidateConcurrently(t *testing.T) {
	inputs := []string{
		`{"resourceType":"Organization","id":"x"}`,
		`{"resourceType":"Appointment","status":"booked","participant":[{"status":"accepted"}]}`,
		`{"resourceType":"Questionnaire","status":"active","item":[{"linkId":"1","type":"group"},{"linkId":"1","type":"display","item":[{"linkId":"2","type":"string"}]}]}`,
		`{"resourceType":"Patient","contained":[{"resourceType":"Organization","id":"o"}],"managingOrganization":{"reference":"#o"}}`,
	}
	want := make([]string, len(inputs))
	for i, in := range inputs {
		want[i] = fmt.Sprint(Validate([]byte(in)).Issues)
		if !strings.Contains(want[i], "error") {
			t.Fatalf("%s: no error found: %s", in, want[i])
		}
	}
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := 0; k < 20; k++ {
				for i, in := range inputs {
					if got := fmt.Sprint(Validate([]byte(in)).Issues); got != want[i] {
						t.Errorf("%s: concurrent validation gave %s, want %s", in, got, want[i])
						return
					}
				}
			}
		}()
	}
	wg.Wait()
}

// TestConstraintBudget: when the constraints' step budget of a validation
// is spent, the remaining constraints are not checked, one warning says
// so, and nothing is reported as an error on their account.
func TestConstraintBudget(t *testing.T) {
	in := []byte(`{"resourceType":"Bundle","type":"collection","entry":[{"fullUrl":"http://x.org/Organization/a","resource":{"resourceType":"Organization","id":"a"}}]}`)
	r, errs := (r4.Options{}).Decode(in)
	if r == nil || len(errs) > 0 {
		t.Fatal(errs)
	}
	v := &validator{size: len(in), budget: new(int)}
	*v.budget = 1
	v.validate(r)
	if v.errors != 0 || !strings.Contains(fmt.Sprint(v.issues), "budget is spent") {
		t.Fatalf("want only the budget warning, got %v", v.issues)
	}
	if n := strings.Count(fmt.Sprint(v.issues), "budget"); n != 1 {
		t.Errorf("the budget warning is reported %d times", n)
	}
	if o := Validate(in); !strings.Contains(fmt.Sprint(o.Issues), "org-1") {
		t.Errorf("with the full budget org-1 is not found: %v", o.Issues)
	}
}
