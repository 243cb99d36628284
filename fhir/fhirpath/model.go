package fhirpath

import (
	"strings"
	"sync/atomic"

	"github.com/acds-project/acds/fhir/r4"
	"github.com/acds-project/acds/fhir/spec"
)

// Node is an element or resource of the FHIR model in a collection.
type Node struct {
	// Value is the r4 value: an r4.Resource, or a pointer to an element
	// (*r4.HumanName, *r4.Date, *r4.PatientContact…). Element ids, a
	// resource's logical id and Extension.url, which the model holds as
	// plain strings, appear as a new *r4.String, *r4.ID or *r4.URI.
	Value any
	// Type is the FHIR type: "Patient", "HumanName", "date", or for a
	// backbone element its definition path ("Patient.contact").
	Type string
	def  *spec.Type
}

func (*Node) isValue() {}

// TypeName returns "FHIR." and the type; backbone elements are
// "FHIR.BackboneElement" (or "FHIR.Element" inside data types).
func (n *Node) TypeName() string {
	if n.def != nil && n.def.Kind == spec.Backbone {
		if r4.IsResourceType(rootOf(n.Type)) {
			return "FHIR.BackboneElement"
		}
		return "FHIR.Element"
	}
	return "FHIR." + n.Type
}

func rootOf(path string) string {
	if i := strings.IndexByte(path, '.'); i >= 0 {
		return path[:i]
	}
	return path
}

// NodeOf wraps a resource as the Node an evaluation starts from.
func NodeOf(r r4.Resource) *Node {
	t := r.ResourceType()
	return &Node{Value: r, Type: t, def: resourceDef(t)}
}

// resourceDefs holds the definition of every resource type, read-only
// after initialisation, in buckets by resourceHash: nested resources are
// met often enough that a map lookup, or a binary search of the tables,
// each time shows.
var resourceDefs = func() *[256][]*spec.Type {
	var m [256][]*spec.Type
	for _, t := range r4.ResourceTypes() {
		h := resourceHash(t)
		m[h] = append(m[h], spec.Lookup(t))
	}
	return &m
}()

func resourceHash(t string) int {
	if t == "" {
		return 0
	}
	return (len(t)*31 + int(t[0])*7 + int(t[len(t)-1])*3 + int(t[len(t)/2])) & 255
}

func resourceDef(t string) *spec.Type {
	for _, d := range resourceDefs[resourceHash(t)] {
		if d != nil && d.Name == t {
			return d
		}
	}
	return spec.Lookup(t)
}

// NewNode wraps an element of the model whose FHIR type is typ (as the spec
// tables name it: "HumanName", "date", "Patient.contact").
func NewNode(x any, typ string) *Node {
	if r, ok := x.(r4.Resource); ok {
		return NodeOf(r)
	}
	return &Node{Value: x, Type: typ, def: spec.Lookup(typ)}
}

// NodeOfType wraps an element of the model whose type definition (from
// package spec) is def: NewNode without the lookup of the type by name.
func NodeOfType(x any, def *spec.Type) *Node {
	if r, ok := x.(r4.Resource); ok {
		return NodeOf(r)
	}
	return &Node{Value: x, Type: def.Name, def: def}
}

// box allocates a Node from the evaluator's blocks, so that navigation does
// not make one allocation per item; with a nil evaluator it allocates the
// Node alone.
func (e *evaluator) box(n Node) *Node {
	if e == nil {
		p := new(Node) // not &n, which would make every n escape
		*p = n
		return p
	}
	if len(e.nodes) == cap(e.nodes) {
		// Blocks grow from 4 to 128 nodes: most evaluations (an
		// invariant on one element) box a few nodes, and a first block of
		// 128 would dominate their cost.
		n := min(max(2*cap(e.nodes), 4), 128)
		e.nodes = make([]Node, 0, n)
	}
	e.nodes = append(e.nodes, n)
	return &e.nodes[len(e.nodes)-1]
}

// navigate2all appends every child of n (besides id and url).
func navigate2all(n *Node, def *spec.Type, out Collection, e *evaluator) Collection {
	var kids []r4.Child
	if e != nil {
		kids = e.kids[:0]
	}
	kids = r4.AppendChildren(kids, n.Value, "", false)
	for _, c := range kids {
		if e != nil && e.skipEmpty && !hasContent(c.Node, 0) {
			continue
		}
		out = append(out, e.box(e.childNode(def, c.Name, c.Node)))
	}
	if e != nil {
		clear(kids)
		e.kids = kids[:0]
	}
	return out
}

// elemCache remembers the elements navigation met by type and name, direct
// mapped: children() and descendants() meet every element name of every
// type they pass, where a binary search of the type's elements each time
// shows.
type elemCache [1024]struct {
	def   *spec.Type
	name  string
	elem  *spec.Element
	typ   *spec.Type // elem's type definition
	plain bool       // elem is not of type Resource: no resource is found under it
}

// childNode is childNode with the evaluator's element cache.
func (e *evaluator) childNode(def *spec.Type, name string, c any) Node {
	if e == nil || def == nil || name == "" {
		if r, ok := c.(r4.Resource); ok {
			return e.resourceNode(r)
		}
		return childNode(def, name, c)
	}
	if e.elems == nil {
		e.elems = new(elemCache)
	}
	h := (def.Index()*61 + len(name)*17 + int(name[0])*5 + int(name[len(name)/2])*3 + int(name[len(name)-1])) & (len(e.elems) - 1)
	ent := &e.elems[h]
	if ent.def != def || ent.name != name {
		ent.def, ent.name, ent.elem, ent.typ, ent.plain = def, name, def.Element(name), nil, false
		if ent.elem != nil {
			ent.typ, ent.plain = ent.elem.TypeDef(), ent.elem.Type != "Resource"
		}
	}
	if ent.plain {
		return Node{Value: c, Type: ent.elem.Type, def: ent.typ}
	}
	if r, ok := c.(r4.Resource); ok {
		return e.resourceNode(r)
	}
	if ent.elem != nil {
		return Node{Value: c, Type: ent.elem.Type, def: ent.typ}
	}
	return childNode(nil, name, c)
}

var elementDef = spec.Lookup("Element")

// childDef returns the type definition whose elements describe n's
// children.
func (n *Node) childDef() *spec.Type {
	if n.def == nil {
		return nil
	}
	if n.def.Kind == spec.Primitive {
		return elementDef
	}
	return n.def
}

// child builds the Node for a child element c found under JSON name.
func childNode(parentDef *spec.Type, name string, c any) Node {
	if r, ok := c.(r4.Resource); ok {
		t := r.ResourceType()
		return Node{Value: r, Type: t, def: resourceDef(t)}
	}
	if parentDef != nil {
		if e := parentDef.Element(name); e != nil {
			return Node{Value: c, Type: e.Type, def: e.TypeDef()}
		}
	}
	if p, ok := c.(r4.Primitive); ok {
		t := p.PrimitiveType()
		return Node{Value: c, Type: t, def: spec.Lookup(t)}
	}
	if _, ok := c.(*r4.Extension); ok {
		return Node{Value: c, Type: "Extension", def: spec.Lookup("Extension")}
	}
	return Node{Value: c, Type: "Element"}
}

// lookup is what navigation needs to know about a name on a type: its
// element (nil for a choice name or an unknown type), whether it is a
// choice element and then its typed elements (valueQuantity…). It is
// immutable once made.
type lookup struct {
	def     *spec.Type
	name    string
	elem    *spec.Element
	elemDef *spec.Type // elem's type definition
	typed1  bool       // elem is of one type, not Resource: its children all have it
	choice  bool
	none    bool            // def has no such element
	typed   []*spec.Element // a choice element's typed elements
}

// newLookup resolves name on def.
func newLookup(def *spec.Type, name string) *lookup {
	l := &lookup{def: def, name: name}
	if def == nil {
		return l
	}
	if l.elem = def.Element(name); l.elem != nil {
		l.elemDef = l.elem.TypeDef()
		l.typed1 = l.elem.Type != "Resource"
		return l
	}
	es := def.Elements
	lo, hi := 0, len(es)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if es[m].Name < name {
			lo = m + 1
		} else {
			hi = m
		}
	}
	suffix := "." + name + "[x]"
	for ; lo < len(es) && strings.HasPrefix(es[lo].Name, name); lo++ {
		if strings.HasSuffix(es[lo].Path, suffix) {
			l.typed = append(l.typed, &es[lo])
		}
	}
	l.choice = len(l.typed) > 0
	l.none = !l.choice
	return l
}

// typedNode returns the Node of a child found under the typed name of a
// choice element.
func (l *lookup) typedNode(name string, x any) Node {
	for _, el := range l.typed {
		if el.Name == name {
			return Node{Value: x, Type: el.Type, def: el.TypeDef()}
		}
	}
	return childNode(l.def, name, x)
}

// stepCache is the inline cache of a path step (an identifier or a
// member access in the expression): the lookups of its name on the input
// types met so far, so that navigation resolves the name once per type and
// step rather than once per item. Expressions are shared between
// goroutines: the entries are immutable and replaced as a whole.
type stepCache struct {
	p atomic.Pointer[[]*lookup]
}

// maxStepTypes bounds the types a step remembers; further types are looked
// up each time.
const maxStepTypes = 16

// get returns the lookup of name on def, from the cache when it holds it.
func (c *stepCache) get(def *spec.Type, name string) *lookup {
	if c == nil {
		return newLookup(def, name)
	}
	old := c.p.Load()
	if old != nil {
		for _, l := range *old {
			if l.def == def {
				return l
			}
		}
	}
	l := newLookup(def, name)
	if old == nil || len(*old) < maxStepTypes {
		var ls []*lookup
		if old != nil {
			ls = append(ls, *old...)
		}
		ls = append(ls, l)
		c.p.CompareAndSwap(old, &ls)
	}
	return l
}

// resourceNode returns the Node of a nested resource.
func (e *evaluator) resourceNode(r r4.Resource) Node {
	t := r.ResourceType()
	return Node{Value: r, Type: t, def: resourceDef(t)}
}

var (
	idDef     = spec.Lookup("id")
	stringDef = spec.Lookup("string")
	uriDef    = spec.Lookup("uri")
)

// navigate appends to out the children of n named name (a choice name
// such as value matches valueQuantity, valueString…). c, when not nil, is
// the inline cache of the step.
func navigate(n *Node, name string, out Collection, e *evaluator, c *stepCache) Collection {
	switch name {
	case "id":
		if r, ok := n.Value.(r4.Resource); ok {
			if id := r.ResourceID(); id != "" {
				return append(out, e.box(Node{Value: e.newID(id), Type: "id", def: idDef}))
			}
			return out
		}
		if idp, _ := r4.ElementOf(n.Value); idp != nil && *idp != "" {
			return append(out, e.box(Node{Value: &r4.String{Value: *idp, Present: true}, Type: "string", def: stringDef}))
		}
		return out
	case "url":
		if x, ok := n.Value.(*r4.Extension); ok {
			if x.URL != "" {
				out = append(out, e.box(Node{Value: &r4.URI{Value: x.URL, Present: true}, Type: "uri", def: uriDef}))
			}
			return out
		}
	}
	def := n.childDef()
	l := c.get(def, name)
	if l.none {
		return out
	}
	var kids []r4.Child
	if e != nil {
		kids = e.kids[:0]
	}
	kids = r4.AppendChildren(kids, n.Value, name, l.choice)
	if len(kids) == 0 {
		return out
	}
	if cap(out)-len(out) < len(kids) {
		if len(out) == 0 && len(kids) <= 8 {
			out = e.coll(len(kids))
		} else {
			out = growColl(out, len(kids))
		}
	}
	for _, k := range kids {
		if e != nil && e.skipEmpty && !hasContent(k.Node, 0) {
			continue
		}
		switch {
		case l.typed1:
			out = append(out, e.box(Node{Value: k.Node, Type: l.elem.Type, def: l.elemDef}))
		case l.choice:
			out = append(out, e.box(l.typedNode(k.Name, k.Node)))
		default:
			out = append(out, e.box(e.childNode(def, k.Name, k.Node)))
		}
	}
	if e != nil {
		clear(kids)
		e.kids = kids[:0]
	}
	return out
}

// growColl returns c with room for n more items, at least doubling.
func growColl(c Collection, n int) Collection {
	out := make(Collection, len(c), max(len(c)+n, 2*cap(c), 4))
	copy(out, c)
	return out
}

// newID returns an r4.ID holding a resource's logical id, from the
// evaluator's blocks.
func (e *evaluator) newID(id string) *r4.ID {
	if e == nil {
		return &r4.ID{Value: id, Present: true}
	}
	if len(e.ids) == cap(e.ids) {
		e.ids = make([]r4.ID, 0, min(max(2*cap(e.ids), 4), 64))
	}
	e.ids = append(e.ids, r4.ID{Value: id, Present: true})
	return &e.ids[len(e.ids)-1]
}

// hasContent reports whether x, a child AppendChildren reported, has
// content the r4 encoder writes: a value, an id or an extension, or a
// child with content. Below depth 64 it answers true.
func hasContent(x any, depth int) bool {
	if _, ok := x.(r4.Resource); ok || depth > 64 {
		return true
	}
	if p, ok := x.(r4.Primitive); ok && p.HasValue() {
		return true
	}
	if id, _ := r4.ElementOf(x); id != nil && *id != "" {
		return true
	}
	var buf [8]r4.Child
	for _, c := range r4.AppendChildren(buf[:0], x, "", false) {
		if hasContent(c.Node, depth+1) {
			return true
		}
	}
	return false
}

// children appends every child of n.
func children(n *Node, out Collection, e *evaluator) Collection {
	out = navigate(n, "id", out, e, nil)
	if _, ok := n.Value.(*r4.Extension); ok {
		out = navigate(n, "url", out, e, nil)
	}
	def := n.childDef()
	return navigate2all(n, def, out, e)
}

// isPrimitiveNode reports whether n is a FHIR primitive.
func (n *Node) primitive() (r4.Primitive, bool) {
	p, ok := n.Value.(r4.Primitive)
	return p, ok
}

// quantityTypes are the FHIR types that are Quantity or specialise it.
var quantityTypes = map[string]bool{"Quantity": true, "Age": true, "Count": true, "Distance": true, "Duration": true, "MoneyQuantity": true, "SimpleQuantity": true}

// toSystem converts a FHIR primitive or Quantity node to its System value;
// other values are returned unchanged. ok is false for a primitive without
// a value.
func toSystem(v Value) (Value, bool) {
	n, isNode := v.(*Node)
	if !isNode {
		return v, true
	}
	if p, ok := n.primitive(); ok {
		if !p.HasValue() {
			return nil, false
		}
		switch x := n.Value.(type) {
		case *r4.Boolean:
			return Boolean(x.Value), true
		case *r4.Integer:
			return Integer(x.Value), true
		case *r4.PositiveInt:
			return Integer(x.Value), true
		case *r4.UnsignedInt:
			return Integer(x.Value), true
		case *r4.Decimal:
			d, ok := parseDecimal(x.Value)
			if !ok {
				return nil, false
			}
			return d, true
		case *r4.Date:
			d, ok := parseDate(x.Value)
			if !ok {
				return nil, false
			}
			return d, true
		case *r4.DateTime:
			return dateTimeValue(x.Value)
		case *r4.Instant:
			return dateTimeValue(x.Value)
		case *r4.Time:
			t, ok := parseTime(x.Value)
			if !ok {
				return nil, false
			}
			return t, true
		}
		return String(p.Text()), true
	}
	if quantityTypes[n.Type] {
		if q, ok := quantityOf(n.Value); ok {
			return q, true
		}
	}
	return v, true
}

// nodeText returns the text of a primitive that toSystem converts to a
// String (isStr false for any other node), and whether it has a value.
func nodeText(n *Node) (text string, isStr, has bool) {
	switch n.Value.(type) {
	case *r4.Boolean, *r4.Integer, *r4.PositiveInt, *r4.UnsignedInt, *r4.Decimal,
		*r4.Date, *r4.DateTime, *r4.Instant, *r4.Time:
		return "", false, false
	}
	p, ok := n.primitive()
	if !ok {
		return "", false, false
	}
	if !p.HasValue() {
		return "", true, false
	}
	return p.Text(), true, true
}

// dateTimeValue converts a FHIR dateTime text: a date alone stays a
// DateTime of date precision.
func dateTimeValue(s string) (Value, bool) {
	dt, ok := parseDateTime(s)
	if !ok {
		return nil, false
	}
	return dt, true
}

// quantityOf reads the r4 Quantity family.
func quantityOf(x any) (Quantity, bool) {
	var value *r4.Decimal
	var unit, code, system *string
	str := func(p interface{ Text() string }, ok bool) *string {
		if !ok {
			return nil
		}
		s := p.Text()
		return &s
	}
	switch q := x.(type) {
	case *r4.Quantity:
		value = q.Value
		unit, code, system = str(q.Unit, q.Unit != nil), str(q.Code, q.Code != nil), str(q.System, q.System != nil)
	case *r4.Age:
		value = q.Value
		unit, code, system = str(q.Unit, q.Unit != nil), str(q.Code, q.Code != nil), str(q.System, q.System != nil)
	case *r4.Count:
		value = q.Value
		unit, code, system = str(q.Unit, q.Unit != nil), str(q.Code, q.Code != nil), str(q.System, q.System != nil)
	case *r4.Distance:
		value = q.Value
		unit, code, system = str(q.Unit, q.Unit != nil), str(q.Code, q.Code != nil), str(q.System, q.System != nil)
	case *r4.Duration:
		value = q.Value
		unit, code, system = str(q.Unit, q.Unit != nil), str(q.Code, q.Code != nil), str(q.System, q.System != nil)
	default:
		return Quantity{}, false
	}
	if value == nil || !value.HasValue() {
		return Quantity{}, false
	}
	d, ok := parseDecimal(value.Value)
	if !ok {
		return Quantity{}, false
	}
	u := ""
	switch {
	case code != nil && (system == nil || *system == ucumSystem):
		u = *code
	case unit != nil:
		u = *unit
	}
	if u == "" {
		u = "1"
	}
	return Quantity{Value: d, Unit: u}, true
}

const ucumSystem = "http://unitsofmeasure.org"

// nodeIs reports whether n is of FHIR type name or a specialisation of it.
func nodeIs(n *Node, name string) bool {
	if n.Type == name {
		return true
	}
	_, isRes := n.Value.(r4.Resource)
	switch name {
	case "Resource":
		return isRes
	case "DomainResource":
		if !isRes {
			return false
		}
		switch n.Type {
		case "Bundle", "Binary", "Parameters":
			return false
		}
		return true
	case "Element":
		return !isRes
	case "BackboneElement":
		return n.def != nil && n.def.Kind == spec.Backbone && r4.IsResourceType(rootOf(n.Type))
	case "Quantity":
		return quantityTypes[n.Type]
	case "string":
		return n.Type == "code" || n.Type == "id" || n.Type == "markdown"
	case "uri":
		return n.Type == "url" || n.Type == "canonical" || n.Type == "oid" || n.Type == "uuid"
	case "integer":
		return n.Type == "unsignedInt" || n.Type == "positiveInt"
	}
	return false
}
