// Package spec holds compact tables of the FHIR R4 (4.0.1) definitions:
// every element of every resource and data type, the codes of every value
// set bound with strength required or extensible, every constraint
// (invariant) of the resources and data types with its FHIRPath
// expression, the contexts of the core extensions, and the Patient
// compartment (its types and the search parameters that put a resource
// in it).
//
// The tables are generated from the official definitions by
// internal/gen/fhirgen/spec and committed; CI regenerates them and fails when
// they differ. The fhir package's validator is their main user.
//
// Backbone elements (Patient.contact, Bundle.entry, Timing.repeat…) are
// types of their own, named by their definition path. Choice elements are
// expanded: Observation.value[x] appears as valueQuantity, valueString…,
// each with one type and the same Path.
package spec

//go:generate sh -c "cd ../.. && ./scripts/fetch-fhir-defs.sh && go run ./internal/gen/fhirgen/spec -defs .fhir-defs/package -out fhir/spec/tables.go"

import (
	"sort"
	"strings"
	"sync"
)

// Kind says what sort of type a Type is.
type Kind uint8

// The kinds of type.
const (
	Primitive Kind = iota + 1 // a primitive data type such as date or code
	Complex                   // a complex data type such as HumanName
	Resource                  // a resource such as Patient
	Backbone                  // an element with children defined inline, such as Patient.contact
)

// Strength is a binding strength. NoBinding is the zero value.
type Strength uint8

// The binding strengths, weakest first.
const (
	NoBinding Strength = iota
	Example
	Preferred
	Extensible
	Required
)

// Type is one resource, data type or backbone element.
type Type struct {
	Name       string    // "Patient", "HumanName", "date", "Patient.contact"
	Kind       Kind      // what sort of type
	Abstract   bool      // true for Resource, DomainResource, Element, BackboneElement…
	Invariants []string  // keys of the invariants on this type that the fhir package checks
	Required   []string  // paths of the elements with a minimum cardinality above 0, sorted
	Elements   []Element // sorted by Name; nil for primitives
	index      int       // position in the tables (see Index)
}

// Element is one JSON property of a type. A choice element contributes one
// Element per allowed type, all sharing Path.
type Element struct {
	Name     string   // JSON property name: "birthDate", "valueQuantity"
	Path     string   // definition path: "Patient.birthDate", "Observation.value[x]"
	Type     string   // type code ("date", "HumanName") or backbone type name ("Patient.contact")
	Min      int      // minimum cardinality
	Max      int      // maximum cardinality; -1 means unbounded
	Strength Strength // binding strength; NoBinding when unbound
	ValueSet string   // canonical URL of the bound value set, without version
	Targets  []string // resource types a Reference may point to; nil means any
	typeIdx  int      // index of Type in the tables, -1 when not defined there
	index    int      // position among all elements (see Index), generated
}

// numElements is the number of elements of all types.
var numElements = func() int {
	n := 0
	for i := range types {
		types[i].index = i
		n += len(types[i].Elements)
	}
	return n
}()

// NumTypes is the number of types in the tables: Type.Index is below it.
func NumTypes() int { return len(types) }

// NumElements is the number of elements of all types: Element.Index is
// below it.
func NumElements() int { return numElements }

// Index returns the type's position in the tables, from 0 to NumTypes()-1,
// for tables indexed by type.
func (t *Type) Index() int { return t.index }

// Index returns the element's position among the elements of all types,
// from 0 to NumElements()-1, for tables indexed by element.
func (e *Element) Index() int { return e.index }

// TypeDef returns the definition of the element's type (a resource, data
// type or backbone type), or nil when the tables hold none.
func (e *Element) TypeDef() *Type {
	if e.typeIdx < 0 || e.typeIdx >= len(types) {
		return nil
	}
	return &types[e.typeIdx]
}

// Code is one member of a value set.
type Code struct {
	System string
	Code   string
}

// ValueSet is the expansion of a value set used by a required or
// extensible binding.
type ValueSet struct {
	URL   string
	Codes []Code // sorted by Code, then System
}

// Lookup returns the type with the given name, or nil.
func Lookup(name string) *Type {
	if i, ok := typeIndex()[name]; ok {
		return &types[i]
	}
	return nil
}

// typeIndex maps each type's name to its position in the tables: a
// validation looks up the type of every resource it meets, and a map
// costs less than a binary search over string comparisons. It is built
// on first use.
var typeIndex = sync.OnceValue(func() map[string]int32 {
	m := make(map[string]int32, len(types))
	for i := range types {
		if _, dup := m[types[i].Name]; !dup { // the first, as a search finds
			m[types[i].Name] = int32(i)
		}
	}
	return m
})

// Element returns the element of t with the given JSON property name, or nil.
func (t *Type) Element(name string) *Element {
	if t.index >= 0 && t.index < len(types) && t == &types[t.index] {
		if i, ok := elementIndex()[t.index][name]; ok {
			return &t.Elements[i]
		}
		return nil
	}
	return t.searchElement(name)
}

// elementIndex maps, for each type of the tables, an element's name to its
// position in Elements: a lookup by name is made for every node a
// validation walks, and a map costs less than a binary search over
// string comparisons. It is built on first use.
var elementIndex = sync.OnceValue(func() []map[string]int32 {
	idx := make([]map[string]int32, len(types))
	for i := range types {
		if es := types[i].Elements; len(es) > 0 {
			m := make(map[string]int32, len(es))
			for j := range es {
				if _, dup := m[es[j].Name]; !dup { // the first, as the search finds
					m[es[j].Name] = int32(j)
				}
			}
			idx[i] = m
		}
	}
	return idx
})

// searchElement is Element for a Type that is not one of the tables'
// (made by hand): a binary search over Elements, which are sorted by
// name.
func (t *Type) searchElement(name string) *Element {
	es := t.Elements
	lo, hi := 0, len(es)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if es[m].Name < name {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if lo < len(es) && es[lo].Name == name {
		return &es[lo]
	}
	return nil
}

// IsResource reports whether name is a concrete (non-abstract) resource type.
func IsResource(name string) bool {
	t := Lookup(name)
	return t != nil && t.Kind == Resource && !t.Abstract
}

// LookupValueSet returns the expansion of the value set with the given
// canonical URL (a version suffix "|4.0.1" is ignored), or nil when the
// value set is not one this package expands (it may be unbounded, such as
// all UCUM units or all languages, or need a terminology server).
func LookupValueSet(url string) *ValueSet {
	for i := 0; i < len(url); i++ {
		if url[i] == '|' {
			url = url[:i]
			break
		}
	}
	i := sort.Search(len(valueSets), func(i int) bool { return valueSets[i].URL >= url })
	if i < len(valueSets) && valueSets[i].URL == url {
		return &valueSets[i]
	}
	return nil
}

// Contains reports whether the value set holds code; an empty system
// matches any system (a code element's system is implicit).
func (v *ValueSet) Contains(system, code string) bool {
	cs := v.Codes
	i := sort.Search(len(cs), func(i int) bool { return cs[i].Code >= code })
	for ; i < len(cs) && cs[i].Code == code; i++ {
		if system == "" || cs[i].System == system {
			return true
		}
	}
	return false
}

// Constraint is one invariant of the R4 definitions (ele-1 aside, which
// holds on every element).
type Constraint struct {
	Key  string // "org-1"
	Path string // the element it is declared on: "Organization", "Patient.contact", "Quantity", "Observation.referenceRange.low"
	// Type, when set, limits the constraint to the element's values of
	// that type: it comes from a profile of the type (sqty-1 of
	// SimpleQuantity) that the element names.
	Type         string
	Error        bool // severity error; false means warning
	BestPractice bool // marked best practice (reported as a warning whatever its severity)
	Human        string
	Expression   string // FHIRPath, evaluated with the element as input
}

// Constraints returns every constraint of the tables, sorted by Path and
// then Key. The slice is shared: callers must not modify it.
func Constraints() []Constraint { return constraints[:] }

// ExtensionDef is where a core R4 extension may be used.
type ExtensionDef struct {
	URL string
	// Contexts are the element contexts ("Patient", "HumanName",
	// "Element", "Questionnaire.item"); a context of another kind is
	// written "kind:expression" ("fhirpath:…", "extension:url").
	Contexts []string
}

// LookupExtension returns the definition of a core R4 extension by its
// URL (a version suffix "|4.0.1" is ignored), or nil.
func LookupExtension(url string) *ExtensionDef {
	if i := strings.IndexByte(url, '|'); i >= 0 {
		url = url[:i]
	}
	i := sort.Search(len(extensionDefs), func(i int) bool { return extensionDefs[i].URL >= url })
	if i < len(extensionDefs) && extensionDefs[i].URL == url {
		return &extensionDefs[i]
	}
	return nil
}

// CompartmentType is a resource type of the R4 Patient compartment
// (CompartmentDefinition-patient): a resource of it is in a patient's
// compartment when a reference at one of its Params' paths names that
// patient. Membership is the union over Params.
type CompartmentType struct {
	Type   string             // "Observation"
	Params []CompartmentParam // in the definition's order
}

// CompartmentParam is one search parameter that puts a resource in the
// Patient compartment, as a search `Name=Patient/{id}` finds it.
type CompartmentParam struct {
	Name string // the parameter's code: "patient", "subject", "beneficiary"
	// Paths are where the references it searches are, from the resource
	// and without its type: "subject", "participant.actor". Each leads
	// through elements and backbone elements to a Reference; a
	// restriction to references to a Patient (".where(resolve() is
	// Patient)") is left out, so a reader checks the target type itself.
	Paths []string
}

// PatientCompartment returns the types of the Patient compartment,
// sorted by Type. The slice is shared: callers must not modify it.
func PatientCompartment() []CompartmentType { return patientCompartment[:] }

// PatientCompartmentType returns the compartment entry of the resource
// type typ, or nil when resources of typ are never in a patient's
// compartment (Practitioner, Organization, Medication, Location…).
func PatientCompartmentType(typ string) *CompartmentType {
	i := sort.Search(len(patientCompartment), func(i int) bool { return patientCompartment[i].Type >= typ })
	if i < len(patientCompartment) && patientCompartment[i].Type == typ {
		return &patientCompartment[i]
	}
	return nil
}
