package r4

import (
	"strconv"
	"strings"
)

// AppendCanonical appends the canonical JSON form of r to buf and returns the
// extended buffer. The canonical form is the input of the pipeline's hash:
// the same content always gives the same bytes, whatever order or spacing
// the JSON it was decoded from had.
//
// It is RFC 8785 (JSON Canonicalization Scheme) with FHIR's numbers:
//
//   - the members of every object, nested resources included, are in
//     RFC 8785 order, sorted by the UTF-16 code units of their names.
//     "resourceType" is an ordinary member of that order, and a primitive's
//     value ("given") and its companion ("_given") are two members that sort
//     apart ("_" sorts after the upper-case and before the lower-case
//     letters);
//   - there is no white space between tokens;
//   - strings have the minimal escapes: \" \\ \b \f \n \r \t, the other
//     control characters as \u00xx with lower-case hex digits, and every
//     other character, non-ASCII and U+2028/U+2029 included, as itself;
//   - decimals keep the text they were written with ("1.50" stays 1.50,
//     since FHIR gives the written precision meaning; RFC 8785 would write
//     the shortest float64 form), integers are written in decimal;
//   - empty objects, empty arrays and absent values are never written, and
//     an item of a repeating primitive with neither a value nor an id or
//     extension is left out of both the value array and its "_" array, so
//     clearing a primitive in place (Primitive.Clear) removes it.
//
// The member order is fixed when the code is generated, so encoding does no
// sorting and no reflection. The output is the same as package fhir's own
// canonicalisation of the same JSON content, and decoding it with Unmarshal
// and canonicalising again gives the same bytes.
//
// The only errors are values that cannot be written as JSON: a Decimal whose
// text is not a JSON number and a string that is not valid UTF-8 (neither can
// come from Unmarshal; both can be set by a caller). The error is an
// *EncodeError that matches ErrInvalidValue and names the element, as in
// "Observation.valueQuantity.value: …". On error buf is returned unchanged
// in length.
func AppendCanonical(buf []byte, r Resource) ([]byte, error) {
	if r == nil || r.isNil() {
		return buf, &EncodeError{Reason: "nil resource"}
	}
	e := encoder{buf: buf, canonical: true}
	if e.buf == nil {
		e.buf = make([]byte, 0, 4096)
	}
	e.buf = append(e.buf, '{')
	r.encodeCanonical(&e)
	e.buf = append(e.buf, '}')
	if e.err != nil {
		return buf, &EncodeError{Reason: e.errPath(r.ResourceType()) + ": " + e.err.Error(), Err: e.err}
	}
	return e.buf, nil
}

// MarshalCanonical returns the canonical JSON form of r; it is
// AppendCanonical(nil, r).
func MarshalCanonical(r Resource) ([]byte, error) { return AppendCanonical(nil, r) }

// canonicalCodec is implemented by every generated struct.
type canonicalCodec interface {
	encodeCanonical(e *encoder)
}

// canonicalPrimitive is implemented by every primitive type.
type canonicalPrimitive interface {
	hasValue() bool
	hasElement() bool
	encodeValue(e *encoder)
	encodeCanonicalElement(e *encoder)
}

// pathStep is one step of the location of an encoding error, recorded while
// the encoder unwinds from the failing value.
type pathStep struct {
	key   string // the member as written: `"name":`
	index int    // position in a repeating element, or -1
}

// at records that the error just met lies in member k (at index i, or -1).
// The canonical helpers return as soon as an error is set, so only the
// members enclosing the failing value record a step.
func (e *encoder) at(k string, i int) { e.steps = append(e.steps, pathStep{k, i}) }

// errPath renders the recorded steps below root, for example
// "Patient.name[0].given[1]". Companion members are named without their
// underscore, as in DecodeError.Path.
func (e *encoder) errPath(root string) string {
	var b strings.Builder
	b.WriteString(root)
	for i := len(e.steps) - 1; i >= 0; i-- {
		s := e.steps[i]
		name := s.key[1 : len(s.key)-2] // `"name":` → name
		b.WriteByte('.')
		b.WriteString(strings.TrimPrefix(name, "_"))
		if s.index >= 0 {
			b.WriteByte('[')
			b.WriteString(strconv.Itoa(s.index))
			b.WriteByte(']')
		}
	}
	return b.String()
}

// canonicalString writes a plain string member (element id, Extension.url,
// resource id) unless it is empty.
func canonicalString(e *encoder, k, v string) {
	if v == "" || e.err != nil {
		return
	}
	e.key(k)
	e.str(v)
	if e.err != nil {
		e.at(k, -1)
	}
}

// canonicalPrimitiveValue writes the value member of a primitive.
func canonicalPrimitiveValue[T any, P interface {
	*T
	canonicalPrimitive
}](e *encoder, k string, x P) {
	if x == nil || e.err != nil || !x.hasValue() {
		return
	}
	e.key(k)
	x.encodeValue(e)
	if e.err != nil {
		e.at(k, -1)
	}
}

// canonicalPrimitiveElement writes the "_" companion member of a primitive.
func canonicalPrimitiveElement[T any, P interface {
	*T
	canonicalPrimitive
}](e *encoder, ek string, x P) {
	if x == nil || e.err != nil || !x.hasElement() {
		return
	}
	e.companion(ek, func() bool {
		x.encodeCanonicalElement(e)
		if e.err != nil {
			e.at(ek, -1)
			return false
		}
		return true
	})
}

// canonicalPrimitiveValues writes the value array of a repeating primitive:
// null for an item with only an id or extensions, nothing for an item with
// neither a value nor those.
func canonicalPrimitiveValues[T any, P interface {
	*T
	canonicalPrimitive
}](e *encoder, k string, s []T) {
	if e.err != nil {
		return
	}
	values := false
	for i := range s {
		if P(&s[i]).hasValue() {
			values = true
			break
		}
	}
	if !values {
		return
	}
	e.key(k)
	e.buf = append(e.buf, '[')
	n := 0
	for i := range s {
		p := P(&s[i])
		v := p.hasValue()
		if !v && !p.hasElement() {
			continue
		}
		if n > 0 {
			e.buf = append(e.buf, ',')
		}
		n++
		if !v {
			e.buf = append(e.buf, "null"...)
			continue
		}
		p.encodeValue(e)
		if e.err != nil {
			e.at(k, i)
			return
		}
	}
	e.buf = append(e.buf, ']')
}

// canonicalPrimitiveElements writes the "_" companion array of a repeating
// primitive, aligned with the value array canonicalPrimitiveValues writes.
func canonicalPrimitiveElements[T any, P interface {
	*T
	canonicalPrimitive
}](e *encoder, ek string, s []T) {
	if e.err != nil {
		return
	}
	elements := false
	for i := range s {
		if P(&s[i]).hasElement() {
			elements = true
			break
		}
	}
	if !elements {
		return
	}
	e.companionArray(ek, len(s), func(i int) (bool, bool) {
		p := P(&s[i])
		return p.hasValue(), p.hasElement()
	}, func(i int) bool {
		P(&s[i]).encodeCanonicalElement(e)
		if e.err != nil {
			e.at(ek, i)
			return false
		}
		return true
	})
}

// canonicalPrimitiveElement writes a primitive's companion object.
func (e *encoder) canonicalPrimitiveElement(id string, ext []Extension) {
	e.buf = append(e.buf, '{')
	canonicalObjects(e, `"extension":`, ext)
	canonicalString(e, `"id":`, id)
	e.buf = append(e.buf, '}')
}

// canonicalObject writes a complex element unless it is nil or empty.
func canonicalObject[T any, P interface {
	*T
	canonicalCodec
}](e *encoder, k string, x P) {
	if x == nil || e.err != nil {
		return
	}
	e.reserve()
	mark := len(e.buf)
	e.key(k)
	e.buf = append(e.buf, '{')
	x.encodeCanonical(e)
	if e.err != nil {
		e.at(k, -1)
		return
	}
	if e.buf[len(e.buf)-1] == '{' {
		e.buf = e.buf[:mark]
		return
	}
	e.buf = append(e.buf, '}')
}

// canonicalObjects writes a repeating complex element, leaving out empty
// items, and nothing if all are empty.
func canonicalObjects[T any, P interface {
	*T
	canonicalCodec
}](e *encoder, k string, s []T) {
	if len(s) == 0 || e.err != nil {
		return
	}
	var spans *[]Span
	if e.entries != nil && k == `"entry":` {
		spans, e.entries = e.entries, nil // the first one only: a Bundle's own
	}
	mark := len(e.buf)
	e.key(k)
	e.buf = append(e.buf, '[')
	for i := range s {
		e.reserve()
		elem := len(e.buf)
		if e.buf[elem-1] != '[' {
			e.buf = append(e.buf, ',')
		}
		start := len(e.buf)
		e.buf = append(e.buf, '{')
		P(&s[i]).encodeCanonical(e)
		if e.err != nil {
			e.at(k, i)
			return
		}
		if e.buf[len(e.buf)-1] == '{' {
			e.buf = e.buf[:elem]
			continue
		}
		e.buf = append(e.buf, '}')
		if spans != nil {
			*spans = append(*spans, Span{Start: start, End: len(e.buf)})
		}
	}
	if e.buf[len(e.buf)-1] == '[' {
		e.buf = e.buf[:mark]
		return
	}
	e.buf = append(e.buf, ']')
}

// canonicalResource writes a nested resource (never empty: it has its
// resourceType).
func (e *encoder) canonicalResource(k string, r Resource) {
	if r == nil || r.isNil() || e.err != nil {
		return
	}
	e.reserve()
	e.key(k)
	e.buf = append(e.buf, '{')
	r.encodeCanonical(e)
	if e.err != nil {
		e.at(k, -1)
		return
	}
	e.buf = append(e.buf, '}')
}

// canonicalResources writes repeating nested resources, leaving out nil ones.
func (e *encoder) canonicalResources(k string, rs []Resource) {
	if e.err != nil {
		return
	}
	n := 0
	for i, r := range rs {
		if r == nil || r.isNil() {
			continue
		}
		e.reserve()
		if n == 0 {
			e.key(k)
			e.buf = append(e.buf, '[')
		} else {
			e.buf = append(e.buf, ',')
		}
		n++
		e.buf = append(e.buf, '{')
		r.encodeCanonical(e)
		if e.err != nil {
			e.at(k, i)
			return
		}
		e.buf = append(e.buf, '}')
	}
	if n > 0 {
		e.buf = append(e.buf, ']')
	}
}
