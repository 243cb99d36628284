package fhirpath

import (
	"strings"
	"time"

	"github.com/acds-project/acds/fhir/r4"
	"github.com/acds-project/acds/fhir/spec"
)

// TypeInfo is what type() returns: a type's namespace and name
// (System.SimpleTypeInfo or FHIR.ClassInfo). Its namespace and name are
// reachable as .namespace and .name.
type TypeInfo struct {
	Namespace, Name string
}

func (TypeInfo) isValue() {}

// TypeName returns "System.SimpleTypeInfo" or "System.ClassInfo".
func (t TypeInfo) TypeName() string {
	if t.Namespace == "System" {
		return "System.SimpleTypeInfo"
	}
	return "System.ClassInfo"
}

func typeInfoOf(v Value) TypeInfo {
	if n, ok := v.(*Node); ok {
		tn := n.TypeName()
		return TypeInfo{Namespace: "FHIR", Name: strings.TrimPrefix(tn, "FHIR.")}
	}
	return TypeInfo{Namespace: "System", Name: strings.TrimPrefix(v.TypeName(), "System.")}
}

var systemTypes = map[string]bool{
	"Boolean": true, "Integer": true, "Decimal": true, "String": true, "Date": true,
	"DateTime": true, "Time": true, "Quantity": true, "Long": true,
}

// isType reports whether v is of type ts (or a subtype of it).
// The type name has been checked when the expression was compiled.
func isType(v Value, ts typeSpec, at int) (bool, error) {
	switch ts.ns {
	case "System":
		if _, ok := v.(*Node); ok {
			return false, nil
		}
		return v.TypeName() == "System."+ts.name, nil
	case "FHIR":
		n, ok := v.(*Node)
		return ok && nodeIs(n, ts.name), nil
	case "":
		if n, ok := v.(*Node); ok {
			return nodeIs(n, ts.name), nil
		}
		if ts.name == "Long" {
			return false, nil
		}
		return v.TypeName() == "System."+ts.name, nil
	}
	return false, nil
}

// knownType reports whether ts names a type this engine knows.
func knownType(ts typeSpec) bool {
	switch ts.ns {
	case "System":
		return systemTypes[ts.name]
	case "FHIR":
		return spec.Lookup(ts.name) != nil || r4.IsResourceType(ts.name) || fhirAbstract[ts.name]
	case "":
		return systemTypes[ts.name] || spec.Lookup(ts.name) != nil || fhirAbstract[ts.name]
	}
	return false
}

var fhirAbstract = map[string]bool{"Resource": true, "DomainResource": true, "Element": true, "BackboneElement": true}

func dateTimeOf(t time.Time, p Precision) DateTime {
	_, off := t.Zone()
	var tt temporal
	tt.Year, tt.Month, tt.Day = t.Year(), int(t.Month()), t.Day()
	if p >= Hour {
		tt.Hour, tt.Minute, tt.Second = t.Hour(), t.Minute(), t.Second()
		tt.Nanosecond = t.Nanosecond() / 1e6 * 1e6
		tt.fracDigits = 3
		tt.HasZone, tt.ZoneOffset = true, off
	}
	tt.Precision = p
	return DateTime{tt}
}

// asType reports whether v is exactly of type ts, as as() and ofType()
// require of primitives (a code is a string for is(), not for as()).
func asType(v Value, ts typeSpec, at int) (bool, error) {
	if n, ok := v.(*Node); ok && ts.ns != "System" {
		if _, isPrim := n.primitive(); isPrim {
			return n.Type == ts.name, nil
		}
	}
	return isType(v, ts, at)
}

// checkTypeName fails for a FHIR or unqualified type name that names no
// type.
func checkTypeName(ts typeSpec, at int) error {
	if ts.ns == "System" || knownType(ts) {
		return nil
	}
	if ts.ns != "" && ts.ns != "FHIR" {
		return nil
	}
	return evalErr(ErrSemantic, at, "unknown type %s", ts)
}
