package fhirpath

import (
	"github.com/acds-project/acds/fhir/r4"
	"github.com/acds-project/acds/fhir/spec"
)

// check finds what can be known wrong before evaluation: a path that
// starts from a resource type (or an as/ofType cast) and names an element
// that type does not have, such as Encounter.name.
func check(n node) error {
	var err error
	var visit func(n node)
	visit = func(n node) {
		if err != nil || n == nil {
			return
		}
		switch x := n.(type) {
		case *memberNode:
			visit(x.target)
			if err == nil {
				_, err = staticTypes(x)
			}
		case *callNode:
			visit(x.target)
			for _, a := range x.args {
				visit(a)
			}
		case *indexNode:
			visit(x.target)
			visit(x.index)
		case *unaryNode:
			visit(x.x)
		case *binaryNode:
			visit(x.l)
			visit(x.r)
		case *typeOpNode:
			visit(x.x)
		}
	}
	visit(n)
	return err
}

// staticTypes returns the possible types of n's items when they are
// known from the expression alone (nil when not).
func staticTypes(n node) ([]*spec.Type, error) {
	switch x := n.(type) {
	case *identNode:
		if r4.IsResourceType(x.name) {
			return concrete(spec.Lookup(x.name)), nil
		}
	case *typeOpNode:
		if x.op == "as" {
			return castType(x.typ), nil
		}
	case *callNode:
		if (x.name == "as" || x.name == "ofType") && len(x.args) == 1 {
			if ts, err := argType(x, 0); err == nil {
				return castType(ts), nil
			}
		}
	case *indexNode:
		return staticTypes(x.target)
	case *memberNode:
		ts, err := staticTypes(x.target)
		if err != nil || ts == nil {
			return nil, err
		}
		var out []*spec.Type
		for _, t := range ts {
			def := t
			if def.Kind == spec.Primitive {
				def = elementDef
			}
			if x.name == "id" || x.name == "extension" || x.name == "url" && t.Name == "Extension" {
				return nil, nil
			}
			if e := def.Element(x.name); e != nil {
				td := e.TypeDef()
				if td == nil || td.Abstract {
					return nil, nil
				}
				out = append(out, td)
				continue
			}
			if isChoice(def, x.name) {
				return nil, nil
			}
		}
		if len(out) == 0 {
			return nil, evalErr(ErrSemantic, x.at, "%s has no element %q", ts[0].Name, x.name)
		}
		return out, nil
	}
	return nil, nil
}

func castType(ts typeSpec) []*spec.Type {
	if ts.ns == "System" {
		return nil
	}
	return concrete(spec.Lookup(ts.name))
}

func concrete(t *spec.Type) []*spec.Type {
	if t == nil || t.Abstract {
		return nil
	}
	return []*spec.Type{t}
}
