package fhirpath

import (
	"github.com/acds-project/acds/fhir/r4"
	"github.com/acds-project/acds/fhir/spec"
)

// TrueWithout returns a test of elements or resources of the type def
// (x is what NodeOfType takes) that reports, from the expression's text
// alone, that evaluating it with x as its one input item gives true or
// fails, whatever else x holds and whatever the environment: x has none
// of the children that the first steps of some of its paths navigate to,
// and those paths being empty makes the expression true. value.empty()
// or component.code.where(…).empty() (obs-7) is true of an Observation
// without components, for instance. It returns nil when its analysis
// finds no such paths, or def is nil.
//
// The analysis knows or, and, implies, not() and, for a path of
// navigation steps and of where(), select(), ofType(), first(), last(),
// tail() and extension() from the input, empty(), exists() and all()
// (the paths from the input, whose first step is an element name, that
// give nothing when that element is absent). A caller that must know
// whether the expression fails gains nothing: the test does not say.
func (x *Expression) TrueWithout(def *spec.Type) func(x any) bool {
	if def == nil {
		return nil
	}
	names := trueWithout(x.root)
	if len(names) == 0 {
		return nil
	}
	if def.Kind == spec.Primitive {
		def = elementDef // as Node.childDef
	}
	steps := make([]*lookup, len(names))
	for i, name := range names {
		steps[i] = newLookup(def, name)
	}
	return func(x any) bool {
		for _, l := range steps {
			// No buffer: an absent child costs no allocation, and a
			// present one the evaluation the test cannot spare.
			if !l.none && len(r4.AppendChildren(nil, x, l.name, l.choice)) > 0 {
				return false
			}
		}
		return true
	}
}

// trueWithout returns names of children of the input such that, when
// the input (one item) has none of them, n evaluates to true or fails;
// nil when it finds none.
func trueWithout(n node) []string {
	switch n := n.(type) {
	case *binaryNode:
		switch n.op {
		case "or": // true or anything is true, as is anything or true
			if s := trueWithout(n.r); s != nil {
				return s
			}
			return trueWithout(n.l)
		case "and":
			l, r := trueWithout(n.l), trueWithout(n.r)
			if l != nil && r != nil {
				return append(append([]string(nil), l...), r...)
			}
		case "implies": // anything implies true, and false implies anything
			if s := trueWithout(n.r); s != nil {
				return s
			}
			return falseWithout(n.l)
		}
	case *callNode:
		switch {
		case n.name == "empty" && len(n.args) == 0, n.name == "all" && len(n.args) == 1:
			// {}.empty() and {}.all(criteria) are true.
			if name := pathRoot(n.target); name != "" {
				return []string{name}
			}
		case n.name == "not" && len(n.args) == 0 && n.target != nil:
			return falseWithout(n.target)
		}
	}
	return nil
}

// falseWithout is trueWithout for n evaluating to false.
func falseWithout(n node) []string {
	if c, ok := n.(*callNode); ok && c.name == "exists" && len(c.args) <= 1 {
		// {}.exists() and {}.exists(criteria) are false.
		if name := pathRoot(c.target); name != "" {
			return []string{name}
		}
	}
	return nil
}

// pathRoot returns the element name that n, a path from the input of
// steps that give nothing for no items, starts with; "" when n is not
// such a path. The name is an element's (lower case, as type names at the
// start of a path are not), and not id or url, which navigation finds
// outside the children AppendChildren reports.
func pathRoot(n node) string {
	switch n := n.(type) {
	case *identNode:
		if c := n.name; c != "" && c[0] >= 'a' && c[0] <= 'z' && c != "id" && c != "url" {
			return c
		}
	case *memberNode:
		return pathRoot(n.target)
	case *indexNode:
		return pathRoot(n.target)
	case *callNode:
		switch n.name {
		case "where", "select", "ofType", "first", "last", "tail", "extension":
			if n.target != nil {
				return pathRoot(n.target)
			}
		}
	}
	return ""
}
