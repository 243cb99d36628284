package r4

import (
	"fmt"
	"strconv"
	"unicode/utf8"
)

// encoder appends FHIR JSON to buf. The generated encodeMembers methods write
// members in definition order (Marshal), the encodeCanonical methods in
// RFC 8785 order (AppendCanonical); empty objects and arrays are never
// written.
// Strings are escaped as RFC 8785 (JCS) prescribes, so the output can be
// canonicalised by reordering members alone.
type encoder struct {
	buf []byte
	err error // the first invalid value met (for example a malformed decimal)
	// canonical is set by AppendCanonical: invalid UTF-8 is an error
	// instead of being replaced, and steps records where the error is.
	canonical bool
	steps     []pathStep
	// entries, when set, receives the byte ranges of the items of the
	// next "entry" array written, and is then cleared: see
	// AppendCanonicalBundle.
	entries *[]Span
}

const hexDigits = "0123456789abcdef"

// key writes a member name (given with its quotes and colon), preceded by a
// comma unless it is the first member of the object.
func (e *encoder) key(k string) {
	if e.buf[len(e.buf)-1] != '{' {
		e.buf = append(e.buf, ',')
	}
	e.buf = append(e.buf, k...)
}

func (e *encoder) raw(s string) { e.buf = append(e.buf, s...) }

// reserve makes room before each object is written, doubling the buffer
// when less than 4 KiB is free. Doubling keeps the memory allocated on the
// way to the final size below twice that size (append alone grows large
// slices by a quarter, allocating about five times the final size).
func (e *encoder) reserve() {
	if cap(e.buf)-len(e.buf) >= 4096 {
		return
	}
	nb := make([]byte, len(e.buf), 2*cap(e.buf)+4096)
	copy(nb, e.buf)
	e.buf = nb
}

func (e *encoder) plainString(k, v string) {
	if v == "" {
		return
	}
	e.key(k)
	e.str(v)
}

// str writes s as a JSON string with the RFC 8785 escapes. Invalid UTF-8 is
// replaced by U+FFFD, so the output is always valid JSON; the canonical
// encoder reports it as an error instead, since the replacement would make
// different values hash alike.
func (e *encoder) str(s string) {
	buf := append(e.buf, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			buf = append(buf, s[start:i]...)
			switch c {
			case '"', '\\':
				buf = append(buf, '\\', c)
			case '\b':
				buf = append(buf, '\\', 'b')
			case '\f':
				buf = append(buf, '\\', 'f')
			case '\n':
				buf = append(buf, '\\', 'n')
			case '\r':
				buf = append(buf, '\\', 'r')
			case '\t':
				buf = append(buf, '\\', 't')
			default:
				buf = append(buf, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			if e.canonical && e.err == nil {
				e.err = fmt.Errorf("%w: string is not valid UTF-8", ErrInvalidValue)
			}
			buf = append(buf, s[start:i]...)
			buf = append(buf, "\uFFFD"...)
			i++
			start = i
			continue
		}
		i += size
	}
	buf = append(buf, s[start:]...)
	e.buf = append(buf, '"')
}

func (e *encoder) boolean(v bool) {
	if v {
		e.buf = append(e.buf, "true"...)
	} else {
		e.buf = append(e.buf, "false"...)
	}
}

func (e *encoder) integer(v int64) { e.buf = strconv.AppendInt(e.buf, v, 10) }

// decimal writes the decimal text as written; text that is not a JSON number
// is an error (the value is written as 0 to keep the output well-formed).
func (e *encoder) decimal(s string) {
	if !validNumber(s) {
		if e.err == nil {
			e.err = fmt.Errorf("%w: decimal %q is not a JSON number", ErrInvalidValue, s)
		}
		s = "0"
	}
	e.buf = append(e.buf, s...)
}

// validNumber reports whether s is a JSON number (the grammar the decoder
// accepts). It does not allocate: it runs for every decimal encoded.
func validNumber(s string) bool {
	i := 0
	if i < len(s) && s[i] == '-' {
		i++
	}
	switch {
	case i < len(s) && s[i] == '0':
		i++
	case i < len(s) && s[i] >= '1' && s[i] <= '9':
		i = skipDigits(s, i)
	default:
		return false
	}
	if i < len(s) && s[i] == '.' {
		j := skipDigits(s, i+1)
		if j == i+1 {
			return false
		}
		i = j
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		j := skipDigits(s, i)
		if j == i {
			return false
		}
		i = j
	}
	return i == len(s)
}

func skipDigits(s string, i int) int {
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	return i
}

func (e *encoder) primitiveElement(id string, ext []Extension) {
	e.buf = append(e.buf, '{')
	e.plainString(`"id":`, id)
	encodeObjects(e, `"extension":`, ext)
	e.buf = append(e.buf, '}')
}

func (e *encoder) resource(k string, r Resource) {
	if r == nil || r.isNil() {
		return
	}
	e.reserve()
	e.key(k)
	e.buf = append(e.buf, '{')
	r.encodeMembers(e)
	e.buf = append(e.buf, '}')
}

func (e *encoder) resources(k string, rs []Resource) {
	n := 0
	for _, r := range rs {
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
		r.encodeMembers(e)
		e.buf = append(e.buf, '}')
	}
	if n > 0 {
		e.buf = append(e.buf, ']')
	}
}

func encodeObject[T any, P interface {
	*T
	objectCodec
}](e *encoder, k string, x P) {
	if x == nil {
		return
	}
	e.reserve()
	mark := len(e.buf)
	e.key(k)
	e.buf = append(e.buf, '{')
	x.encodeMembers(e)
	if e.buf[len(e.buf)-1] == '{' {
		e.buf = e.buf[:mark]
		return
	}
	e.buf = append(e.buf, '}')
}

func encodeObjects[T any, P interface {
	*T
	objectCodec
}](e *encoder, k string, s []T) {
	if len(s) == 0 {
		return
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
		e.buf = append(e.buf, '{')
		P(&s[i]).encodeMembers(e)
		if e.buf[len(e.buf)-1] == '{' {
			e.buf = e.buf[:elem]
			continue
		}
		e.buf = append(e.buf, '}')
	}
	if e.buf[len(e.buf)-1] == '[' {
		e.buf = e.buf[:mark]
		return
	}
	e.buf = append(e.buf, ']')
}

// encodePrimitive writes a primitive member and its "_" companion when it
// has an id or extensions.
func encodePrimitive[T any, P interface {
	*T
	primitiveCodec
}](e *encoder, k, ek string, x P) {
	if x == nil {
		return
	}
	if x.hasValue() {
		e.key(k)
		x.encodeValue(e)
	}
	if x.hasElement() {
		e.companion(ek, func() bool { x.encodeElement(e); return true })
	}
}

// companion writes the member ek, a primitive's "_" companion object, with
// element, which reports false on an encoding error. A companion that
// encodes empty (only empty extensions, as a partial decoding leaves) is
// taken back: Marshal and AppendCanonical write nothing for it.
func (e *encoder) companion(ek string, element func() bool) {
	mark := len(e.buf)
	e.key(ek)
	if element() && e.buf[len(e.buf)-1] == '}' && e.buf[len(e.buf)-2] == '{' {
		e.buf = e.buf[:mark]
	}
}

// companionArray writes the member ek, the "_" companion array of a
// repeating primitive of n items, aligned with its value array: item i's
// element (written by element, which reports false on an encoding error,
// ending the array there), null for an item with a value and no element,
// nothing for an item with neither (has tells which). An element that
// encodes empty (only empty extensions) is null too, and a companion of
// nulls alone is taken back.
func (e *encoder) companionArray(ek string, n int, has func(i int) (value, element bool), element func(i int) bool) {
	mark := len(e.buf)
	e.key(ek)
	e.buf = append(e.buf, '[')
	items, written := 0, false
	for i := range n {
		v, el := has(i)
		if !el && !v {
			continue
		}
		if items > 0 {
			e.buf = append(e.buf, ',')
		}
		items++
		if el {
			item := len(e.buf)
			if !element(i) {
				return
			}
			if len(e.buf)-item > 2 {
				written = true
				continue
			}
			e.buf = e.buf[:item]
		}
		e.buf = append(e.buf, "null"...)
	}
	if !written {
		e.buf = e.buf[:mark]
		return
	}
	e.buf = append(e.buf, ']')
}

// encodePrimitives writes a repeating primitive: the value array with null
// for items that have only an id or extensions, and the companion array
// aligned with it. An item with neither a value nor an id or extension is
// left out of both (null in both arrays is not valid FHIR), so clearing a
// primitive in place removes it.
func encodePrimitives[T any, P interface {
	*T
	primitiveCodec
}](e *encoder, k, ek string, s []T) {
	var values, elements bool
	for i := range s {
		values = values || P(&s[i]).hasValue()
		elements = elements || P(&s[i]).hasElement()
	}
	if values {
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
			if v {
				p.encodeValue(e)
			} else {
				e.buf = append(e.buf, "null"...)
			}
		}
		e.buf = append(e.buf, ']')
	}
	if elements {
		e.companionArray(ek, len(s), func(i int) (bool, bool) {
			p := P(&s[i])
			return p.hasValue(), p.hasElement()
		}, func(i int) bool { P(&s[i]).encodeElement(e); return true })
	}
}
