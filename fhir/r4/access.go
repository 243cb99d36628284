package r4

import (
	"reflect"
	"sync"
)

// ElementOf gives generic access to what every FHIR element carries besides
// its value or children: its element id and its extensions. x is what Walk
// passes for an element, a pointer to a primitive (*String, *Date…), a data
// type (*HumanName, *Extension…) or a backbone element (*PatientContact…).
// It returns pointers to x's ID and Extension fields, through which a caller
// can read, replace or clear them in place. For anything else (a resource, a
// nil pointer, a value of another package) both are nil.
//
// Primitives are matched by a type switch; data types and backbone elements
// by their field layout, found once per type with reflection and cached.
func ElementOf(x any) (id *string, ext *[]Extension) {
	switch p := x.(type) {
	case *Base64Binary:
		if p != nil {
			return &p.ID, &p.Extension
		}
		return nil, nil
	case *Boolean:
		if p != nil {
			return &p.ID, &p.Extension
		}
		return nil, nil
	case *Canonical:
		if p != nil {
			return &p.ID, &p.Extension
		}
		return nil, nil
	case *Code:
		if p != nil {
			return &p.ID, &p.Extension
		}
		return nil, nil
	case *Date:
		if p != nil {
			return &p.ID, &p.Extension
		}
		return nil, nil
	case *DateTime:
		if p != nil {
			return &p.ID, &p.Extension
		}
		return nil, nil
	case *Decimal:
		if p != nil {
			return &p.ID, &p.Extension
		}
		return nil, nil
	case *ID:
		if p != nil {
			return &p.ID, &p.Extension
		}
		return nil, nil
	case *Instant:
		if p != nil {
			return &p.ID, &p.Extension
		}
		return nil, nil
	case *Integer:
		if p != nil {
			return &p.ID, &p.Extension
		}
		return nil, nil
	case *Markdown:
		if p != nil {
			return &p.ID, &p.Extension
		}
		return nil, nil
	case *OID:
		if p != nil {
			return &p.ID, &p.Extension
		}
		return nil, nil
	case *PositiveInt:
		if p != nil {
			return &p.ID, &p.Extension
		}
		return nil, nil
	case *String:
		if p != nil {
			return &p.ID, &p.Extension
		}
		return nil, nil
	case *Time:
		if p != nil {
			return &p.ID, &p.Extension
		}
		return nil, nil
	case *URI:
		if p != nil {
			return &p.ID, &p.Extension
		}
		return nil, nil
	case *URL:
		if p != nil {
			return &p.ID, &p.Extension
		}
		return nil, nil
	case *UUID:
		if p != nil {
			return &p.ID, &p.Extension
		}
		return nil, nil
	case *UnsignedInt:
		if p != nil {
			return &p.ID, &p.Extension
		}
		return nil, nil
	case *XHTML:
		if p != nil {
			return &p.ID, &p.Extension
		}
		return nil, nil
	case *Extension:
		if p != nil {
			return &p.ID, &p.Extension
		}
		return nil, nil
	case Resource:
		return nil, nil
	}
	v := reflect.ValueOf(x)
	if v.Kind() != reflect.Pointer || v.IsNil() || !isElementLayout(v.Type().Elem()) {
		return nil, nil
	}
	s := v.Elem()
	return s.Field(0).Addr().Interface().(*string), s.Field(1).Addr().Interface().(*[]Extension)
}

// elementLayouts caches, per struct type, whether it is one of this
// package's element types: its first two fields are ID string and
// Extension []Extension, as the generator writes every data type and
// backbone element.
var elementLayouts sync.Map // reflect.Type -> bool

var (
	stringType     = reflect.TypeFor[string]()
	extensionsType = reflect.TypeFor[[]Extension]()
	pkgPath        = reflect.TypeFor[Extension]().PkgPath()
)

func isElementLayout(t reflect.Type) bool {
	if ok, found := elementLayouts.Load(t); found {
		return ok.(bool)
	}
	ok := t.Kind() == reflect.Struct && t.PkgPath() == pkgPath && t.NumField() >= 2 &&
		t.Field(0).Name == "ID" && t.Field(0).Type == stringType &&
		t.Field(1).Name == "Extension" && t.Field(1).Type == extensionsType
	elementLayouts.Store(t, ok)
	return ok
}
