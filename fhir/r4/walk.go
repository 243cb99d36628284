package r4

import (
	"errors"
	"strconv"
	"strings"
)

// SkipChildren, returned by a WalkFunc, makes Walk skip the children of the
// element just visited and carry on with its siblings.
var SkipChildren = errors.New("r4: skip children")

// WalkFunc is called by Walk for every element. node is a pointer to the
// element (for example *HumanName, *Reference, *String, *Date) or, for the
// root and for contained and entry resources, the Resource itself, so a
// WalkFunc can change elements in place through it. path is only valid
// during the call; copy it with String or Segments if needed later.
type WalkFunc func(path *Path, node any) error

// Walk visits r and every element inside it, depth-first in definition
// order: complex elements, primitives (with their extensions) and nested
// resources (contained, Bundle.entry.resource, Parameters.parameter.resource,
// Bundle.entry.response.outcome). Element ids and Extension.url, which are
// plain strings, are not visited on their own.
//
// If fn returns SkipChildren the element's children are skipped; any other
// error stops the walk and is returned.
func Walk(r Resource, fn WalkFunc) error {
	return walk(r, &walker{fn: fn})
}

// WalkIDFunc is the function WalkIDs calls for each node: as a WalkFunc,
// also given the node's id, its element id or, for a resource, its
// logical id ("" when it has none).
type WalkIDFunc func(path *Path, node any, id string) error

// WalkIDs is Walk for a caller that wants each node's id too: it visits
// the same nodes in the same order, and spares fn asking each node for
// its id through an interface (ElementOf, Resource.ResourceID).
func WalkIDs(r Resource, fn WalkIDFunc) error {
	return walk(r, &walker{fnID: fn})
}

// walk is Walk and WalkIDs with w's callback.
func walk(r Resource, w *walker) error {
	if r == nil || r.isNil() {
		return nil
	}
	w.path.Root = r.ResourceType()
	w.path.segs = make([]PathSegment, 0, 16)
	err := w.call(r)
	if err == nil {
		r.walk(w)
		err = w.err
	} else if err == SkipChildren {
		err = nil
	}
	return err
}

// Path is the FHIRPath-style location of an element during Walk, such as
// Patient.name[0].given[1]. Names are JSON member names, so a choice element
// appears as valueQuantity.
type Path struct {
	// Root is the resource type of the resource Walk started at.
	Root string
	segs []PathSegment
}

// PathSegment is one step of a Path.
type PathSegment struct {
	// Name is the JSON member name.
	Name string
	// Index is the position in a repeating element, or -1.
	Index int
}

// Segments returns the steps after Root. The slice is reused by Walk: copy it
// to keep it.
func (p *Path) Segments() []PathSegment { return p.segs }

// Len returns the number of steps after Root.
func (p *Path) Len() int { return len(p.segs) }

// String renders the path, for example "Bundle.entry[3].resource.name[0]".
func (p *Path) String() string {
	var b strings.Builder
	b.WriteString(p.Root)
	for _, s := range p.segs {
		b.WriteByte('.')
		b.WriteString(s.Name)
		if s.Index >= 0 {
			b.WriteByte('[')
			b.WriteString(strconv.Itoa(s.Index))
			b.WriteByte(']')
		}
	}
	return b.String()
}

type walker struct {
	fn WalkFunc
	// fnID, when set, is called instead of fn (WalkIDs).
	fnID WalkIDFunc
	path Path
	err  error
	// only, when set, restricts the walk to the children of that JSON
	// name (and with choice, to the choice element's typed names such as
	// valueQuantity for value): see ChildrenNamed.
	only   string
	choice bool
	// collecting makes visit append each child to collected instead of
	// calling fn and descending: see AppendChildren.
	collecting bool
	collected  []Child
}

// wants reports whether the walk visits members called name.
func (w *walker) wants(name string) bool {
	if w.only == "" {
		return true
	}
	if len(name) == len(w.only) {
		return name == w.only
	}
	n := len(w.only)
	return w.choice && len(name) > n && name[n] >= 'A' && name[n] <= 'Z' && name[:n] == w.only
}

// walkable is a node of the model: its children are walked with walk,
// and walkID is its id (the element id, or a resource's logical id).
type walkable interface {
	walk(w *walker)
	walkID() string
	refs(r *refWalker)
}

// call calls the walk's callback for v at the current path.
func (w *walker) call(v walkable) error {
	if w.fnID != nil {
		return w.fnID(&w.path, v, v.walkID())
	}
	return w.fn(&w.path, v)
}

func (w *walker) visit(name string, i int, v walkable) {
	if w.collecting {
		w.collected = append(w.collected, Child{Name: name, Index: i, Node: v})
		return
	}
	w.path.segs = append(w.path.segs, PathSegment{Name: name, Index: i})
	err := w.call(v)
	switch {
	case err == nil:
		v.walk(w)
	case err != SkipChildren:
		w.err = err
	}
	w.path.segs = w.path.segs[:len(w.path.segs)-1]
}

func (w *walker) resource(name string, r Resource) {
	if r == nil || r.isNil() || w.err != nil || !w.wants(name) {
		return
	}
	w.visit(name, -1, r)
}

func (w *walker) resources(name string, rs []Resource) {
	if len(rs) == 0 || !w.wants(name) {
		return
	}
	for i, r := range rs {
		if w.err != nil {
			return
		}
		if r != nil && !r.isNil() {
			w.visit(name, i, r)
		}
	}
}

func walkOne[T any, P interface {
	*T
	walkable
}](w *walker, name string, x P) {
	if x == nil || w.err != nil || !w.wants(name) {
		return
	}
	w.visit(name, -1, x)
}

func walkMany[T any, P interface {
	*T
	walkable
}](w *walker, name string, s []T) {
	if len(s) == 0 || !w.wants(name) {
		return
	}
	for i := range s {
		if w.err != nil {
			return
		}
		w.visit(name, i, P(&s[i]))
	}
}

// References calls fn for every Reference in r, nested resources included,
// with its path: the reflection-free way to resolve or rewrite references.
// fn may change the Reference in place. An error from fn stops the walk and
// is returned.
func References(r Resource, fn func(path *Path, ref *Reference) error) error {
	return Walk(r, func(path *Path, node any) error {
		if ref, ok := node.(*Reference); ok {
			return fn(path, ref)
		}
		return nil
	})
}

// EachReference calls fn for every Reference in r, in the order Walk
// visits them, and is much cheaper than References: it keeps no path and
// enters a primitive only for its extensions. With nested false it stays
// in r's own scope: r's contained resources are visited, but not the
// other resources nested in it (a Bundle's entries and its response
// outcomes, a Parameters' resources), each of which is a scope of its
// own. fn may change the Reference in place.
func EachReference(r Resource, nested bool, fn func(ref *Reference)) {
	if r == nil || r.isNil() {
		return
	}
	r.refs(&refWalker{fn: fn, nested: nested})
}

// refWalker is the state of EachReference.
type refWalker struct {
	fn     func(*Reference)
	nested bool // enter nested resources other than contained ones
}

func (r *refWalker) resource(x Resource) {
	if x != nil && !x.isNil() {
		x.refs(r)
	}
}

func (r *refWalker) resources(xs []Resource) {
	for _, x := range xs {
		r.resource(x)
	}
}

func refsOne[T any, P interface {
	*T
	walkable
}](r *refWalker, x P) {
	if x != nil {
		x.refs(r)
	}
}

func refsMany[T any, P interface {
	*T
	walkable
}](r *refWalker, s []T) {
	for i := range s {
		P(&s[i]).refs(r)
	}
}
