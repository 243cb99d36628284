package fhir

import (
	"strings"
	"sync/atomic"
	"unsafe"

	"github.com/acds-project/acds/fhir/r4"
	"github.com/acds-project/acds/fhir/spec"
)

// specFrame is one element on the current path of a specWalk: the node
// r4.Walk handed over, with its definition from the spec tables.
type specFrame struct {
	// Node is what r4.Walk passed: an r4.Resource for the root and for
	// nested resources, otherwise a pointer to the element (*r4.HumanName,
	// *r4.String, *r4.PatientContact…).
	Node any
	// Type is the node's type definition: the concrete resource type for
	// resources, else the element's data, primitive or backbone type. Nil
	// when the tables hold none.
	Type *spec.Type
	// Elem is the element of the parent that holds the node; nil for the
	// root resource and when the tables hold none.
	Elem *spec.Element
	// Name and Index are the last step of the node's path (Index -1 when
	// the element does not repeat); Name is "" for the root.
	Name  string
	Index int
	// ID is the node's element id, or a resource's logical id ("" for
	// none), as r4.WalkIDs gives it.
	ID string
	// Choice: Elem is one type of a choice element ("value[x]"), which
	// at most one of its types may fill. Read from the element cache
	// with Elem, sparing a look at the path's bytes for every node.
	Choice bool
	// Present lists the JSON names of the children visited so far, each
	// once, in visiting order. At leave it holds every child that is set
	// (plain-string members such as id and Extension.url excepted, which
	// r4.Walk does not visit). Its storage is reused after leave.
	Present []string
}

// has reports whether a child named name was visited.
func (f *specFrame) has(name string) bool {
	for _, p := range f.Present {
		if p == name {
			return true
		}
	}
	return false
}

// specWalk walks r depth-first like r4.Walk, calling enter for every node
// before its children and leave after them, each with the node's frame and
// the frames of its ancestors (stack[len(stack)-1] is the node itself,
// stack[0] the root). path is r4.Walk's path of the node during enter; it
// is not valid during leave. An error from enter other than
// r4.SkipChildren ends the walk and is returned; leave is still called for
// every frame entered. enter and leave may be nil.
func specWalk(r r4.Resource, enter func(path *r4.Path, stack []specFrame) error, leave func(stack []specFrame)) error {
	var frames []specFrame
	pop := func(to int) {
		for len(frames) > to {
			if leave != nil {
				leave(frames)
			}
			frames = frames[:len(frames)-1]
		}
	}
	err := r4.WalkIDs(r, func(path *r4.Path, node any, id string) error {
		depth := path.Len()
		pop(depth)
		f := specFrame{Node: node, Index: -1, ID: id}
		if len(frames) < cap(frames) {
			// Reuse the Present storage of the frame last popped here.
			f.Present = frames[:len(frames)+1][len(frames)].Present[:0]
		}
		// Only the root and elements of type Resource (contained,
		// Bundle.entry.resource…) hold resources: other nodes are spared
		// the interface assertion.
		holdsResource := true
		if depth > 0 {
			seg := path.Segments()[depth-1]
			f.Name, f.Index = seg.Name, seg.Index
			parent := &frames[depth-1]
			if n := len(parent.Present); n == 0 || parent.Present[n-1] != seg.Name {
				parent.Present = append(parent.Present, seg.Name)
			}
			if pt := parent.Type; pt != nil {
				if pt.Kind == spec.Primitive {
					// A primitive's children are those of Element (id, extension).
					pt = elementType
				}
				f.Elem, f.Choice, holdsResource = elementOf(pt, seg.Name)
				holdsResource = holdsResource || f.Elem == nil
			}
		}
		if holdsResource {
			if res, ok := node.(r4.Resource); ok {
				f.Type = spec.Lookup(res.ResourceType())
			}
		}
		if f.Type == nil && f.Elem != nil {
			f.Type = f.Elem.TypeDef()
		}
		frames = append(frames, f)
		if enter == nil {
			return nil
		}
		return enter(path, frames)
	})
	pop(0)
	return err
}

// elementType is the definition of Element, whose children (id,
// extension) every primitive has.
var elementType = spec.Lookup("Element")

// kinds reports whether the frame's node is a resource and whether it is
// a primitive, from its type definition where there is one (sparing the
// interface assertions, which cost more on the many model types), else
// from the node.
func (f *specFrame) kinds() (isResource, isPrimitive bool) {
	if t := f.Type; t != nil {
		return t.Kind == spec.Resource, t.Kind == spec.Primitive
	}
	_, isResource = f.Node.(r4.Resource)
	_, isPrimitive = f.Node.(r4.Primitive)
	return isResource, isPrimitive
}

// elementOf is pt.Element(name) through a small cache keyed by the
// type and the address of the name's bytes, with two facts about the
// element the walk needs for every node: whether it is one type of a
// choice (its path ends in "[x]") and whether it holds a resource (its
// type is Resource: contained, Bundle.entry.resource…). The cache keeps
// them beside the element, so the walk does not read the element's
// strings. The walk's names are the generated model's constants, so each
// (type, name) pair a validation meets has one address, and the cache
// answers it with two comparisons where the map hashes and compares the
// string. An entry keeps its name alive, so no other string can take that
// address while it is cached; a name built at run time only misses and is
// looked up in the map.
func elementOf(pt *spec.Type, name string) (e *spec.Element, choice, holdsResource bool) {
	slot := &elementCache[elementSlot(pt, name)]
	if c := slot.Load(); c != nil && c.t == pt && len(c.name) == len(name) && unsafe.StringData(c.name) == unsafe.StringData(name) {
		return c.e, c.choice, c.holdsResource
	}
	c := &elementCacheEntry{t: pt, name: name, e: pt.Element(name)}
	if c.e != nil {
		c.choice = strings.HasSuffix(c.e.Path, "[x]")
		c.holdsResource = c.e.Type == "Resource"
	}
	slot.Store(c)
	return c.e, c.choice, c.holdsResource
}

// elementSlot is the cache slot of (pt, name): a multiplicative hash of
// the two addresses.
func elementSlot(pt *spec.Type, name string) uint64 {
	p := uintptr(unsafe.Pointer(unsafe.StringData(name)))
	return uint64((p>>3)^(uintptr(unsafe.Pointer(pt))>>4)) * 0x9e3779b97f4a7c15 >> (64 - elementCacheBits)
}

const elementCacheBits = 12

type elementCacheEntry struct {
	t                     *spec.Type
	name                  string
	e                     *spec.Element
	choice, holdsResource bool
}

var elementCache [1 << elementCacheBits]atomic.Pointer[elementCacheEntry]
