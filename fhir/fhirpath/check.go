package fhirpath

import (
	"strings"

	"github.com/acds-project/acds/fhir/r4"
	"github.com/acds-project/acds/fhir/spec"
)

// check finds what can be known wrong before evaluation: a path that names
// an element its type does not have (Encounter.name, name.given1 on a
// Patient), or a choice element by its JSON name (valueQuantity where
// FHIRPath says value.ofType(Quantity)). this is the type of the input
// when known (nil otherwise); types come from resource type names at the
// start of a path, as and ofType, and the input.
func check(n node, this []*spec.Type) error {
	_, err := staticTypes(n, this)
	return err
}

// lambdaFuncs evaluate their arguments once per input item, with $this
// the item.
var lambdaFuncs = map[string]bool{"where": true, "select": true, "all": true, "exists": true, "repeat": true, "sort": true, "trace": true, "aggregate": true}

// sameTypeFuncs return items of their input.
var sameTypeFuncs = map[string]bool{
	"where": true, "first": true, "last": true, "tail": true, "skip": true, "take": true,
	"single": true, "distinct": true, "sort": true, "trace": true,
}

// staticTypes checks n and returns the possible types of its items when
// they are known from the expression and the input type (nil when not).
func staticTypes(n node, this []*spec.Type) ([]*spec.Type, error) {
	switch x := n.(type) {
	case *identNode:
		if r4.IsResourceType(x.name) {
			return concrete(spec.Lookup(x.name)), nil
		}
		if fhirAbstract[x.name] {
			return nil, nil // Resource.id, DomainResource.text: any resource
		}
		return memberTypes(this, x.name, x.at)
	case *memberNode:
		ts, err := staticTypes(x.target, this)
		if err != nil {
			return nil, err
		}
		return memberTypes(ts, x.name, x.at)
	case *typeOpNode:
		if _, err := staticTypes(x.x, this); err != nil {
			return nil, err
		}
		if err := checkTypeName(x.typ, x.at); err != nil {
			return nil, err
		}
		if x.op == "as" {
			return castType(x.typ), nil
		}
		return nil, nil
	case *callNode:
		var target []*spec.Type
		if x.target != nil {
			var err error
			if target, err = staticTypes(x.target, this); err != nil {
				return nil, err
			}
		} else {
			target = this
		}
		argThis := this
		if lambdaFuncs[x.name] || x.name == "iif" && x.target != nil {
			argThis = target
		}
		if x.name == "ofType" || x.name == "as" || x.name == "is" {
			ts, err := argType(x, 0)
			if err != nil {
				return nil, err
			}
			if err := checkTypeName(ts, x.args[0].pos()); err != nil {
				return nil, err
			}
			if x.name == "is" {
				return nil, nil
			}
			return castType(ts), nil
		}
		for _, a := range x.args {
			if _, err := staticTypes(a, argThis); err != nil {
				return nil, err
			}
		}
		if sameTypeFuncs[x.name] {
			return target, nil
		}
		return nil, nil
	case *indexNode:
		if _, err := staticTypes(x.index, this); err != nil {
			return nil, err
		}
		return staticTypes(x.target, this)
	case *unaryNode:
		_, err := staticTypes(x.x, this)
		return nil, err
	case *binaryNode:
		l, err := staticTypes(x.l, this)
		if err != nil {
			return nil, err
		}
		r, err := staticTypes(x.r, this)
		if err != nil {
			return nil, err
		}
		if x.op == "|" && l != nil && r != nil {
			return append(append([]*spec.Type(nil), l...), r...), nil
		}
		return nil, nil
	case *varNode:
		if x.name == "$this" {
			return this, nil
		}
	}
	return nil, nil
}

// memberTypes returns the types of the children named name of items of
// types ts, or a semantic error when none of ts has such an element.
func memberTypes(ts []*spec.Type, name string, at int) ([]*spec.Type, error) {
	if ts == nil {
		return nil, nil
	}
	var out []*spec.Type
	for _, t := range ts {
		def := t
		if def.Kind == spec.Primitive {
			def = elementDef
		}
		if name == "id" || name == "extension" || name == "url" && t.Name == "Extension" {
			return nil, nil
		}
		if e := def.Element(name); e != nil {
			if strings.HasSuffix(e.Path, "[x]") {
				base := e.Path[strings.LastIndexByte(e.Path, '.')+1 : len(e.Path)-3]
				return nil, evalErr(ErrSemantic, at, "%s has no element %q: the choice element is %s (use %s.ofType(…))", t.Name, name, base, base)
			}
			td := e.TypeDef()
			if td == nil || td.Abstract {
				return nil, nil
			}
			out = append(out, td)
			continue
		}
		if newLookup(def, name).choice {
			return nil, nil
		}
	}
	if len(out) == 0 {
		return nil, evalErr(ErrSemantic, at, "%s has no element %q", ts[0].Name, name)
	}
	return out, nil
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
