package fhir

import (
	"context"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/acds-project/acds/fhir/fhirpath"
	"github.com/acds-project/acds/fhir/r4"
	"github.com/acds-project/acds/fhir/spec"
)

// The constraints of the R4 definitions (package spec's Constraints table)
// are evaluated as FHIRPath over the typed model during the validation
// walk: each constraint at every element of the type or path it is
// declared on, with %resource the resource holding the element.
//
// A constraint the validator checks by hand (handChecked) is not
// evaluated again. A constraint is met when it evaluates to true; false
// or an empty result fails it, as in the HL7 validator (per-1 on dates of
// different precision is empty, so it fails). An evaluation error never
// makes input invalid: it is a warning naming the constraint, the error
// and the location; an expression that names elements the type does not
// have (a semantic error) does not apply to that element.

// handChecked lists the constraints validate.go checks in Go, with the
// same or a stricter reading (ele-1 is not in the tables).
var handChecked = map[string]bool{
	"dom-2": true, "dom-3": true, "dom-4": true, "dom-5": true, "dom-6": true,
	"bdl-1": true, "bdl-2": true, "bdl-3": true, "bdl-4": true, "bdl-5": true, "bdl-7": true,
	"bdl-8": true, "bdl-9": true, "bdl-10": true, "bdl-11": true, "bdl-12": true, "ref-1": true,
	"ext-1": true, "ras-2": true, "obs-6": true, "qty-3": true, "cpt-2": true, "per-1": true, "att-1": true, "pat-1": true,
	// htmlChecks(), which the FHIRPath engine does not support: the
	// narrative rules are checked on the xhtml value (checkXHTML: a div
	// in the XHTML namespace, no active content, XML entities only). As
	// in the HL7 engine, whose htmlChecks() checks the markup, empty
	// content is not refused (official examples have empty divs).
	"txt-1": true, "txt-2": true,
}

// constraintErrata are R4 constraints whose expressions are wrong as
// published, with the corrected reading the HL7 validator applies (and
// later FHIR versions publish).
var constraintErrata = map[string]string{
	// answer is Boolean names System.Boolean, which a FHIR boolean is not
	// (the FHIRPath suite's testType12); R5 writes "answer is boolean".
	"que-7": "operator = 'exists' implies (answer is boolean)",
}

// checkConstraints turns the FHIRPath constraint pass on; a benchmark
// turns it off to measure the pass alone.
var checkConstraints = true

// constraintLimits bound one constraint evaluation. The R4 constraints
// are small expressions over one element; a bound far above what they
// need keeps hostile input (a huge Bundle under a Bundle-level
// constraint) from costing more than a fixed amount per element.
var constraintLimits = fhirpath.Limits{MaxSteps: 200_000, MaxItems: 100_000}

// constraintBudget is the FHIRPath step budget of one validation's
// constraint pass over size bytes of input: ample for real data (Synthea
// and the official examples use at most one step per byte), and a
// bound on what crafted input can cost in total, since every element can
// make its constraints work up to constraintLimits.
func constraintBudget(size int) int {
	return 10_000_000 + 4*size
}

// rule is a compiled constraint.
type rule struct {
	c   *spec.Constraint
	x   *fhirpath.Expression
	err error // the compile error, when x is nil
	// resolves: the expression calls resolve(), which needs the
	// Bundle's index.
	resolves bool
	// trueWithout holds, for the type of what the rule is placed on
	// (the type it is declared on, or the element's own type,
	// Element.TypeDef; none for an element without one), the test that
	// reports that the rule is met by, or cannot be evaluated
	// on, the element or resource it is given, from the expression and
	// the children absent from it (fhirpath.Expression.TrueWithout): a
	// check for errors only need not evaluate the rule there. Nil when
	// the expression gives no such test.
	trueWithout map[*spec.Type]func(x any) bool
}

// addTrueWithout records r's test of elements of type t, if its
// expression gives one.
func (r *rule) addTrueWithout(t *spec.Type) {
	if r.x == nil || t == nil {
		return
	}
	if tw := r.x.TrueWithout(t); tw != nil {
		if r.trueWithout == nil {
			r.trueWithout = map[*spec.Type]func(x any) bool{}
		}
		r.trueWithout[t] = tw
	}
}

// ruleSet is every rule, by where it is declared: slices indexed by
// spec.Type.Index and spec.Element.Index, which the walk looks up for
// every node.
type ruleSet struct {
	byType [][]*rule // resources, data types, backbone elements
	byElem [][]*rule // other elements
}

var (
	rulesOnce sync.Once
	rules     *ruleSet
)

// loadRules compiles the constraints once, on first use; it is safe for
// concurrent use.
func loadRules() *ruleSet {
	rulesOnce.Do(func() {
		rs := &ruleSet{byType: make([][]*rule, spec.NumTypes()), byElem: make([][]*rule, spec.NumElements())}
		cs := spec.Constraints()
		for i := range cs {
			c := &cs[i]
			if handChecked[c.Key] {
				continue
			}
			r := &rule{c: c}
			expr := c.Expression
			if fixed, ok := constraintErrata[c.Key]; ok {
				expr = fixed
			}
			r.x, r.err = fhirpath.Parse(expr)
			r.resolves = strings.Contains(expr, "resolve(")
			if t := spec.Lookup(c.Path); t != nil {
				r.addTrueWithout(t)
				rs.byType[t.Index()] = append(rs.byType[t.Index()], r)
				continue
			}
			parent, _ := splitLast(c.Path)
			if t := spec.Lookup(parent); t != nil {
				for j := range t.Elements {
					if e := &t.Elements[j]; e.Path == c.Path {
						if e.Type != "Resource" {
							// The walk gives the node the element's
							// type (specWalk); a resource, its own.
							r.addTrueWithout(e.TypeDef())
						}
						rs.byElem[e.Index()] = append(rs.byElem[e.Index()], r)
					}
				}
			}
		}
		rules = rs
	})
	return rules
}

// splitLast splits a path at its last dot.
func splitLast(p string) (string, string) {
	for i := len(p) - 1; i >= 0; i-- {
		if p[i] == '.' {
			return p[:i], p[i+1:]
		}
	}
	return "", p
}

// constraints evaluates the constraints that apply to the walk's current
// node.
func (v *validator) constraints(stack []specFrame) {
	f := &stack[len(stack)-1]
	if v.rules == nil {
		v.rules = loadRules()
	}
	var onType, onElem []*rule
	if f.Type != nil {
		onType = v.rules.byType[f.Type.Index()]
	}
	if f.Elem != nil {
		onElem = v.rules.byElem[f.Elem.Index()]
	}
	if len(onType) == 0 && len(onElem) == 0 {
		return
	}
	var in fhirpath.Collection // made for the first rule evaluated
	for _, set := range [2][]*rule{onType, onElem} {
		for _, r := range set {
			if r.c.Type != "" && (f.Type == nil || f.Type.Name != r.c.Type) {
				continue
			}
			if v.errorsOnly && (!r.c.Error || r.c.BestPractice) {
				continue // it can only warn
			}
			if tw := r.trueWithout[f.Type]; v.errorsOnly && tw != nil && tw(f.Node) {
				// Met, or a warning at most, whatever the node's other
				// content: see decodeAndCheck.
				continue
			}
			if in == nil {
				if res, ok := f.Node.(r4.Resource); ok {
					in = fhirpath.Collection{fhirpath.NodeOf(res)}
				} else if f.Type != nil {
					in = fhirpath.Collection{fhirpath.NodeOfType(f.Node, f.Type)}
				} else {
					return
				}
			}
			v.evalRule(r, in, stack)
		}
	}
}

// evalRule evaluates one rule on in (the node on top of stack) and
// reports a failure at the node's location.
func (v *validator) evalRule(r *rule, in fhirpath.Collection, stack []specFrame) {
	c := r.c
	sev := SeverityError
	if !c.Error || c.BestPractice {
		sev = SeverityWarning
	}
	err := r.err
	var out fhirpath.Collection
	if err == nil {
		env := v.env()
		if rc := v.res[len(v.res)-1]; r.resolves && env.BundleIndex == nil && rc.index != nil {
			// One index per Bundle, made for the first rule that
			// resolves references, so that resolve() in the
			// constraints of N entries costs N, not N².
			bc := rc.index
			if bc.index == nil {
				bc.index = fhirpath.NewBundleIndex(env.Bundle)
			}
			env.BundleIndex = bc.index
		}
		out, err = r.x.Evaluate(context.Background(), in, env)
	}
	if v.budget != nil && *v.budget <= 0 && errors.Is(err, fhirpath.ErrLimit) {
		if !v.budgetSpent {
			v.budgetSpent = true
			v.add(SeverityWarning, "too-costly", pathOf(stack), "the constraints' evaluation budget is spent: %s and the constraints after it were not checked", c.Key)
		}
		return
	}
	if errors.Is(err, fhirpath.ErrSemantic) {
		// The expression names elements the element's type does not
		// have (ras-1 on a decimal probability[x], written for the
		// Range): it does not apply here. The HL7 engine reads such
		// names as empty, to the same effect.
		return
	}
	if err != nil {
		code := "processing"
		if errors.Is(err, fhirpath.ErrNotSupported) {
			code = "not-supported"
		}
		v.add(SeverityWarning, code, pathOf(stack), "%s: the constraint could not be evaluated, so it was not checked: %v", c.Key, err)
		return
	}
	if len(out) == 1 && out[0] != fhirpath.Boolean(false) {
		return
	}
	if len(out) > 1 {
		return // not a boolean; a constraint that is wrong as written
	}
	v.add(sev, "invariant", pathOf(stack), "%s: %s", c.Key, c.Human)
}

// env returns the FHIRPath environment of the current resource.
func (v *validator) env() *fhirpath.Env {
	rc := v.res[len(v.res)-1]
	if rc.env == nil {
		if v.now.IsZero() {
			v.now = time.Now()
		}
		if v.budget == nil {
			v.budget = new(int)
			*v.budget = constraintBudget(v.size)
		}
		lim := constraintLimits
		lim.Budget = v.budget
		rc.envVal = fhirpath.Env{Resource: rc.r, Now: v.now, Limits: lim}
		rc.env = &rc.envVal
		for i := len(v.res) - 1; i >= 0; i-- {
			if !v.res[i].isContained {
				rc.env.RootResource = v.res[i].r
				break
			}
		}
		for i := len(v.res) - 1; i >= 0; i-- {
			if b, ok := v.res[i].r.(*r4.Bundle); ok {
				rc.env.Bundle = b
				rc.index = v.res[i].ownBundle
				break
			}
		}
	}
	return rc.env
}
