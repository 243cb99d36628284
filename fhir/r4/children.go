package r4

import "sync"

// Child is a direct child of an element or resource, as AppendChildren
// reports it.
type Child struct {
	// Name is the JSON member name (valueQuantity for a choice element).
	Name string
	// Index is the position in a repeating element, or -1.
	Index int
	// Node is what Walk would pass for the child: a pointer to the element
	// or a nested Resource.
	Node any
}

// walkers recycles the walkers of AppendChildren, which navigation calls
// once per element: it holds no data between calls.
var walkers = sync.Pool{New: func() any { return new(walker) }}

// AppendChildren appends to dst the direct children of x that have
// content, in definition order, and returns the extended slice. x is a
// Resource or what Walk passes for an element (*HumanName, *Date,
// *PatientContact…); a primitive's children are its extensions. With a
// non-empty name only the children of that JSON name are appended, and
// with choice the typed names of that choice element (value gives
// valueQuantity, valueString…); the other fields are skipped without a
// call. Element ids, Extension.url and the logical id of a resource are
// plain strings and are not reported (ElementOf, Extension.URL and
// Resource.ResourceID give them). For any other x, or a nil pointer, dst is
// returned unchanged.
//
// AppendChildren uses the generated walkers, no reflection, and allocates
// nothing beyond dst's growth.
func AppendChildren(dst []Child, x any, name string, choice bool) []Child {
	// The generated types take a nil receiver: one type assertion
	// serves them all.
	if na, ok := x.(namedAppender); ok {
		if name == "" {
			out, _ := na.appendAll(dst)
			return out
		}
		out, kind := na.appendNamed(dst, name, choice)
		if !choice || kind == choiceName {
			return out
		}
		// With choice and a name that is no choice element, the walker
		// takes every name that continues it with an upper-case letter
		// (service gives servicePeriod, period periodUnit): out is
		// dropped and dst, which it extends, is walked instead.
	}
	wk, ok := x.(walkable)
	if !ok || wk == nil {
		return dst
	}
	if r, ok := x.(Resource); ok && r.isNil() {
		return dst
	}
	if e, ok := x.(elementer); ok {
		if id, _ := e.elementParts(); id == nil {
			return dst // a nil pointer
		}
	}
	return walkChildren(dst, wk, name, choice)
}

// AppendAllChildren is AppendChildren(dst, x, "", false) that also returns
// x's id: the logical id of a resource (as Resource.ResourceID), the
// element id of an element (as ElementOf), "" for a nil pointer. It
// spares a caller that wants both, such as a walk over every element, a
// second look at x's type.
func AppendAllChildren(dst []Child, x any) (out []Child, id string) {
	if na, ok := x.(namedAppender); ok {
		return na.appendAll(dst)
	}
	out = AppendChildren(dst, x, "", false)
	if r, ok := x.(Resource); ok && !r.isNil() {
		return out, r.ResourceID()
	}
	if idp, _ := ElementOf(x); idp != nil {
		return out, *idp
	}
	return out, ""
}

// walkChildren is AppendChildren by the walker restricted to name.
func walkChildren(dst []Child, wk walkable, name string, choice bool) []Child {
	w := walkers.Get().(*walker)
	w.only, w.choice, w.collecting, w.collected = name, choice, true, dst
	wk.walk(w)
	dst = w.collected
	*w = walker{}
	walkers.Put(w)
	return dst
}

// Children calls fn for every direct child of x that has content, in
// definition order, with its JSON member name and, for a repeating element,
// its index (-1 otherwise); fn returns false to stop early. It is
// AppendChildren with a callback.
func Children(x any, fn func(name string, index int, child any) bool) {
	ChildrenNamed(x, "", false, fn)
}

// ChildrenNamed is Children restricted to the children called name (with
// choice, to the typed names of that choice element), as AppendChildren.
func ChildrenNamed(x any, name string, choice bool, fn func(name string, index int, child any) bool) {
	var buf [8]Child
	for _, c := range AppendChildren(buf[:0], x, name, choice) {
		if !fn(c.Name, c.Index, c.Node) {
			return
		}
	}
}

// namedAppender is implemented by the generated types: appendNamed appends
// the children called name (with choice, the typed names of that choice
// element) with a switch on the name, where the walker restricted to the
// name would visit every field to compare its name. kind tells whether
// name is the JSON name of a field, the base name of a choice element or
// neither. appendAll appends every child, as the unrestricted walker, and
// returns the id (the element id, or a resource's logical id).
// Both take a nil receiver, which has no children.
type namedAppender interface {
	appendNamed(dst []Child, name string, choice bool) (out []Child, kind nameKind)
	appendAll(dst []Child) (out []Child, id string)
}

// nameKind is what appendNamed found a name to be.
type nameKind uint8

const (
	unknownName nameKind = iota // no field of the type
	fieldName                   // the JSON name of a field
	choiceName                  // the base name of a choice element (value for value[x])
)

func appendOne[T any, P interface {
	*T
	walkable
}](dst []Child, name string, x P) []Child {
	if x == nil {
		return dst
	}
	return append(dst, Child{Name: name, Index: -1, Node: x})
}

func appendMany[T any, P interface {
	*T
	walkable
}](dst []Child, name string, s []T) []Child {
	for i := range s {
		dst = append(dst, Child{Name: name, Index: i, Node: P(&s[i])})
	}
	return dst
}

func appendResource(dst []Child, name string, r Resource) []Child {
	if r == nil || r.isNil() {
		return dst
	}
	return append(dst, Child{Name: name, Index: -1, Node: r})
}

func appendResources(dst []Child, name string, rs []Resource) []Child {
	for i, r := range rs {
		if r != nil && !r.isNil() {
			dst = append(dst, Child{Name: name, Index: i, Node: r})
		}
	}
	return dst
}
