package r4

import "unsafe"

// textPrimitive is the layout the primitive types with a string value
// share (String, Code, URI, DateTime and the others listed in newPrimitive).
type textPrimitive = struct {
	ID        string
	Extension []Extension
	Value     string
	Present   bool
}

// Each type newPrimitive takes from the slab must have textPrimitive's
// layout: these conversions compile only while it does.
var _ = [...]textPrimitive{
	textPrimitive(Base64Binary{}), textPrimitive(Canonical{}), textPrimitive(Code{}),
	textPrimitive(Date{}), textPrimitive(DateTime{}), textPrimitive(Decimal{}),
	textPrimitive(ID{}), textPrimitive(Instant{}), textPrimitive(Markdown{}),
	textPrimitive(OID{}), textPrimitive(String{}), textPrimitive(Time{}),
	textPrimitive(URI{}), textPrimitive(URL{}), textPrimitive(UUID{}), textPrimitive(XHTML{}),
}

// Slab sizes: a decoder's first slab holds minSlab primitives, each
// next one twice as many, up to maxSlab.
const (
	minSlab = 8
	maxSlab = 128
)

// newPrimitive returns a new zero primitive of type T for the model,
// charged to it. The primitives with a string value, most of a
// decoded model, come from slabs the decoder allocates a block at a
// time, each charged in full when it is allocated (as grow charges a
// slice's whole array): one allocation for many, where new(T) each cost
// one of their own. The others are allocated alone.
func newPrimitive[T any](d *decoder) (*T, error) {
	switch any((*T)(nil)).(type) {
	case *String, *Code, *URI, *DateTime, *Date, *Instant, *Decimal, *ID, *Canonical,
		*URL, *Markdown, *UUID, *OID, *Time, *Base64Binary, *XHTML:
		p, err := d.textPrimitive()
		// T's underlying type is textPrimitive (the conversions above),
		// so the two share one layout.
		return (*T)(unsafe.Pointer(p)), err
	}
	x := new(T)
	return x, d.use(int(unsafe.Sizeof(*x)))
}

// textPrimitive returns the next free primitive of the decoder's slab,
// allocating a new slab when it is used up.
func (d *decoder) textPrimitive() (*textPrimitive, error) {
	if len(d.slab) == 0 {
		n := min(max(2*d.slabSize, minSlab), maxSlab)
		size := int(unsafe.Sizeof(textPrimitive{}))
		if room := (d.maxModel - d.model) / size; n > room {
			n = max(room, 1)
		}
		if err := d.use(n * size); err != nil {
			return nil, err
		}
		d.slab, d.slabSize = make([]textPrimitive, n), n
	}
	p := &d.slab[0]
	d.slab = d.slab[1:]
	return p, nil
}
