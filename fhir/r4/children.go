package r4

// Children calls fn for every direct child of x that has content, in
// definition order, with its JSON member name and, for a repeating element,
// its index (-1 otherwise). x is a Resource or what Walk passes for an
// element (*HumanName, *Date, *PatientContact…); a primitive's children are
// its extensions, a resource's nested resources (contained,
// Bundle.entry.resource…) are children of the element that holds them.
// Element ids, Extension.url and the logical id of a resource are plain
// strings and are not reported (ElementOf, Extension.URL and
// Resource.ResourceID give them). fn returns false to stop early. For any
// other x, or a nil pointer, fn is never called.
//
// Children uses the generated walkers: no reflection.
func Children(x any, fn func(name string, index int, child any) bool) {
	ChildrenNamed(x, "", false, fn)
}

// ChildrenNamed is Children restricted to the children called name; with
// choice, name is a choice element's name and the children are those of
// its typed names (value matches valueQuantity, valueString…). Fields of
// other names are skipped without a call, which makes navigating one name
// cheaper than filtering Children. An empty name means every child.
func ChildrenNamed(x any, name string, choice bool, fn func(name string, index int, child any) bool) {
	wk, ok := x.(walkable)
	if !ok || wk == nil {
		return
	}
	if r, ok := x.(Resource); ok && r.isNil() {
		return
	}
	if e, ok := x.(elementer); ok {
		if id, _ := e.elementParts(); id == nil {
			return // a nil pointer
		}
	}
	stopped := false
	var segs [1]PathSegment
	w := &walker{only: name, choice: choice}
	w.path.segs = segs[:0]
	w.fn = func(p *Path, node any) error {
		if stopped {
			return errStopChildren
		}
		s := p.segs[len(p.segs)-1]
		if !fn(s.Name, s.Index, node) {
			stopped = true
			return errStopChildren
		}
		return SkipChildren
	}
	wk.walk(w)
}

// errStopChildren ends a Children walk early.
var errStopChildren = errorString("r4: stop")

type errorString string

func (e errorString) Error() string { return string(e) }
