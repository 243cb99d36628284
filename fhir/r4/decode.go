package r4

import (
	"encoding/binary"
	"fmt"
	"math/bits"
	"strconv"
	"unicode/utf8"
	"unsafe"
)

// decoder is a single-pass JSON reader specialised for FHIR: the generated
// decodeMembers methods pull member names and values from it directly, with no
// intermediate tree and no reflection.
type decoder struct {
	data []byte
	// arena holds the bytes of decoded strings, packed: strings are views
	// into it, so decoding does not allocate per string and does not keep
	// the input (with its white space and member names) alive. Bytes below
	// len(arena) are never written again.
	arena     []byte
	chunkSize int
	arenaFree int // room left in the arena's current chunk (counted also when borrowing)
	// borrow: strings that are a part of the input are views of data
	// (Options.Borrow).
	borrow bool
	// model counts the bytes of Go memory decoding has allocated so far:
	// structs, string blocks and every backing array a slice of the model
	// has had, at its full capacity (see grow); maxModel caps it, so that
	// input crafted to expand (a small JSON object that becomes a large
	// struct) cannot exhaust memory, and decoding such input stops once it
	// has allocated about maxModel bytes.
	model, maxModel int
	// slab holds the primitives with a string value not yet handed out
	// (newPrimitive); slabSize is the size of the last slab allocated.
	slab     []textPrimitive
	slabSize int
	// scratch is the buffer strEscaped decodes into, reused for every
	// string with escapes.
	scratch  []byte
	pos      int
	keyPos   int // where the last member name started
	depth    int
	maxDepth int

	// collect is set by Options.Decode: recoverable errors are recorded in
	// errs (at most maxErrors of them) and decoding goes on with the next
	// member or array element. Unmarshal leaves it unset and stops at the
	// first error.
	collect   bool
	maxErrors int
	errs      []*DecodeError
	// badKeys: a member name that is not valid UTF-8 is returned as badKey
	// with its error in keyErr, to be reported as the member's problem
	// (set in collect mode and while looking for a resourceType).
	badKeys bool
	keyErr  error
}

// badKey stands for a member name that is not valid UTF-8 (no decoded name
// can be equal to it).
const badKey = "\xff"

// special8 flags, with its high bit, each of the 8 bytes packed in x
// (little-endian) that strSpecial marks: a control character, a quote, a
// backslash or a byte of a multi-byte UTF-8 sequence. A flag may be
// wrong only in a byte above a truly flagged one (the borrow of a
// subtraction runs upwards), so the lowest flag is exact.
func special8(x uint64) uint64 {
	const lsb, msb = 0x0101010101010101, 0x8080808080808080
	q := x ^ ('"' * lsb)
	bs := x ^ ('\\' * lsb)
	return ((x-0x20*lsb)&^x | (q-lsb)&^q | (bs-lsb)&^bs | x) & msb
}

// strSpecial marks the bytes that end the fast path of string scanning.
var strSpecial = func() (t [256]bool) {
	for i := 0; i < 0x20; i++ {
		t[i] = true
	}
	for i := 0x80; i < 0x100; i++ {
		t[i] = true
	}
	t['"'] = true
	t['\\'] = true
	return t
}()

func (d *decoder) fail(class error, format string, args ...any) *DecodeError {
	return &DecodeError{Offset: d.pos, Reason: fmt.Sprintf(format, args...), Err: class}
}

func (d *decoder) syntax(format string, args ...any) *DecodeError {
	if d.pos >= len(d.data) {
		return d.fail(ErrSyntax, "unexpected end of input")
	}
	return d.fail(ErrSyntax, format, args...)
}

// found names the JSON value that starts at the current position.
func (d *decoder) found() string {
	if d.pos >= len(d.data) {
		return "end of input"
	}
	switch c := d.data[d.pos]; {
	case c == '{':
		return "an object"
	case c == '[':
		return "an array"
	case c == '"':
		return "a string"
	case c == 't' || c == 'f':
		return "a boolean"
	case c == 'n':
		return "null"
	case c == '-' || (c >= '0' && c <= '9'):
		return "a number"
	}
	return fmt.Sprintf("%q", d.data[d.pos])
}

func (d *decoder) wrongType(want string) *DecodeError {
	if d.pos >= len(d.data) {
		return d.fail(ErrSyntax, "unexpected end of input")
	}
	switch c := d.data[d.pos]; c {
	case '{', '[', '"', 't', 'f', 'n', '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		return d.fail(ErrInvalidValue, "expected %s, found %s", want, d.found())
	}
	return d.fail(ErrSyntax, "invalid character %q looking for a value", d.data[d.pos])
}

func (d *decoder) skipWS() {
	// Compact JSON has no white space between tokens: every byte above
	// the space is not white space.
	if d.pos < len(d.data) && d.data[d.pos] > ' ' {
		return
	}
	d.skipSpaces()
}

// skipSpaces is skipWS past its first byte's check.
func (d *decoder) skipSpaces() {
	data, i := d.data, d.pos
	for i < len(data) {
		switch data[i] {
		case ' ':
			// Pretty-printed FHIR is mostly indentation: skip it eight
			// bytes at a time.
			if i+8 <= len(data) && binary.LittleEndian.Uint64(data[i:]) == 0x2020202020202020 {
				i += 8
				continue
			}
			i++
		case '\n', '\r', '\t':
			i++
		default:
			d.pos = i
			return
		}
	}
	d.pos = i
}

// use accounts for n bytes of model memory.
func (d *decoder) use(n int) error {
	d.model += n
	if d.model > d.maxModel {
		return d.limitError()
	}
	return nil
}

func (d *decoder) limitError() *DecodeError {
	return d.fail(ErrLimit, "decoded model would exceed %d bytes of memory", d.maxModel)
}

// grow returns s with one more item, set to the zero value. When s is full
// it moves to a new backing array of twice the capacity, and charges that
// array in full before allocating it. The array it leaves becomes garbage
// but was charged when it was allocated, so the model count covers every
// byte the slices of the model have allocated, abandoned arrays and unused
// capacity included, not just the items they hold. (Doubling keeps that
// total under four times the items' size: the arrays of one slice add up to
// less than twice the last one, which is less than twice the items.) Near
// the limit the new array is only as large as the memory left allows, so a
// long array is refused when its items no longer fit, not when twice them
// no longer fit.
func grow[T any](d *decoder, s []T) ([]T, error) {
	var zero T
	n := len(s)
	if n < cap(s) {
		// The item may hold what a dropped item left.
		s = s[:n+1]
		s[n] = zero
		return s, nil
	}
	size := int(unsafe.Sizeof(zero))
	c := max(2*cap(s), 1)
	if room := (d.maxModel - d.model) / max(size, 1); c > room {
		c = max(room, n+1)
	}
	if err := d.use(c * size); err != nil {
		return s, err
	}
	t := make([]T, n+1, c)
	copy(t, s)
	return t, nil
}

func (d *decoder) enter() error {
	d.depth++
	if d.depth > d.maxDepth {
		return d.fail(ErrLimit, "nesting deeper than %d", d.maxDepth)
	}
	return nil
}

// openObject consumes the '{' of an object value.
func (d *decoder) openObject() error {
	if d.pos >= len(d.data) || d.data[d.pos] != '{' {
		return d.wrongType("an object")
	}
	d.pos++
	return d.enter()
}

// member reads the next member name of the current object and the ':' after
// it, leaving the position at the member's value. It returns more == false at
// the closing '}'. An object without members is an ErrInvalidValue.
func (d *decoder) member(first bool) (key string, more bool, err error) {
	d.skipWS()
	if d.pos >= len(d.data) {
		return "", false, d.syntax("")
	}
	c := d.data[d.pos]
	if first {
		if c == '}' {
			return "", false, d.fail(ErrInvalidValue, "empty object")
		}
	} else {
		if c == '}' {
			d.pos++
			d.depth--
			return "", false, nil
		}
		if c != ',' {
			return "", false, d.syntax("expected ',' or '}' after object member, found %q", c)
		}
		d.pos++
		d.skipWS()
		if d.pos >= len(d.data) {
			return "", false, d.syntax("")
		}
		c = d.data[d.pos]
	}
	if c != '"' {
		return "", false, d.syntax("expected a member name, found %q", c)
	}
	d.keyPos = d.pos
	key, err = d.str()
	if err != nil {
		if de, ok := err.(*DecodeError); !ok || !d.badKeys || de.Err != ErrInvalidValue {
			return "", false, err
		}
		d.pos = d.keyPos
		if d.skipString() != nil {
			return "", false, err
		}
		d.keyErr, key = err, badKey
	}
	d.skipWS()
	if d.pos >= len(d.data) || d.data[d.pos] != ':' {
		if key == badKey {
			// The name's error comes first.
			err, d.keyErr = d.keyErr, nil
			return "", false, err
		}
		return "", false, d.syntax("expected ':' after member name")
	}
	d.pos++
	d.skipWS()
	return key, true, nil
}

// openArray consumes the '[' of an array value.
func (d *decoder) openArray() error {
	if d.pos >= len(d.data) || d.data[d.pos] != '[' {
		return d.wrongType("an array")
	}
	d.pos++
	return d.enter()
}

// element advances to the next array element, returning false at the closing
// ']'. An empty array is an ErrInvalidValue.
func (d *decoder) element(first bool) (bool, error) {
	d.skipWS()
	if d.pos >= len(d.data) {
		return false, d.syntax("")
	}
	c := d.data[d.pos]
	if first {
		if c == ']' {
			return false, d.fail(ErrInvalidValue, "empty array")
		}
		return true, nil
	}
	if c == ']' {
		d.pos++
		d.depth--
		return false, nil
	}
	if c != ',' {
		return false, d.syntax("expected ',' or ']' after array element, found %q", c)
	}
	d.pos++
	d.skipWS()
	return true, nil
}

// null consumes a JSON null if one is at the current position.
func (d *decoder) null() bool {
	if d.pos+4 <= len(d.data) && string(d.data[d.pos:d.pos+4]) == "null" {
		d.pos += 4
		return true
	}
	return false
}

// str reads the JSON string at the current position (which is '"').
func (d *decoder) str() (string, error) {
	data := d.data
	start := d.pos + 1
	i := start
	for i < len(data) {
		// Skip to the first special byte: a word of 8 at a time, the
		// lowest flag of special8 being exact, then byte by byte in the
		// last few.
		if i+8 <= len(data) {
			m := special8(binary.LittleEndian.Uint64(data[i:]))
			if m == 0 {
				i += 8
				continue
			}
			i += bits.TrailingZeros64(m) >> 3
		} else if !strSpecial[data[i]] {
			i++
			continue
		}
		c := data[i]
		switch {
		case c == '"':
			d.pos = i + 1
			s := d.view(data[start:i])
			if d.model > d.maxModel {
				return "", d.limitError()
			}
			return s, nil
		case c == '\\':
			return d.strEscaped(start, i)
		case c < 0x20:
			d.pos = i
			return "", d.fail(ErrSyntax, "control character %#x in string", c)
		default:
			r, size := utf8.DecodeRune(data[i:])
			if r == utf8.RuneError && size == 1 {
				d.pos = i
				return "", d.fail(ErrInvalidValue, "invalid UTF-8 in string")
			}
			i += size
		}
	}
	d.pos = len(data)
	return "", d.syntax("")
}

// strEscaped finishes a string that contains escapes; data[start:i] has been
// scanned already and data[i] is the first backslash. It decodes into
// d.scratch, sized once from the string's JSON text (which is never shorter
// than what it decodes to), and interns the result.
func (d *decoder) strEscaped(start, i int) (string, error) {
	data := d.data
	end := i
	for end < len(data) && data[end] != '"' {
		if data[end] == '\\' {
			end++
		}
		end++
	}
	if n := min(end, len(data)) - start; cap(d.scratch) < n {
		c := max(n, 2*cap(d.scratch))
		if err := d.use(c); err != nil {
			return "", err
		}
		d.scratch = make([]byte, 0, c)
	}
	buf := append(d.scratch[:0], data[start:i]...)
	for i < len(data) {
		c := data[i]
		switch {
		case c == '"':
			d.pos = i + 1
			s := d.intern(buf)
			if d.model > d.maxModel {
				return "", d.limitError()
			}
			return s, nil
		case c == '\\':
			if i+1 >= len(data) {
				d.pos = len(data)
				return "", d.syntax("")
			}
			e := data[i+1]
			i += 2
			switch e {
			case '"', '\\', '/':
				buf = append(buf, e)
			case 'b':
				buf = append(buf, '\b')
			case 'f':
				buf = append(buf, '\f')
			case 'n':
				buf = append(buf, '\n')
			case 'r':
				buf = append(buf, '\r')
			case 't':
				buf = append(buf, '\t')
			case 'u':
				r, ok := hex4(data, i)
				if !ok {
					d.pos = i
					return "", d.fail(ErrSyntax, "invalid \\u escape")
				}
				i += 4
				if r >= 0xD800 && r < 0xDC00 {
					// A high surrogate must be followed by a low one.
					lo, ok := rune(0), false
					if i+6 <= len(data) && data[i] == '\\' && data[i+1] == 'u' {
						lo, ok = hex4(data, i+2)
					}
					if !ok || lo < 0xDC00 || lo >= 0xE000 {
						d.pos = i
						return "", d.fail(ErrInvalidValue, "unpaired UTF-16 surrogate in string")
					}
					i += 6
					r = 0x10000 + (r-0xD800)<<10 + (lo - 0xDC00)
				} else if r >= 0xDC00 && r < 0xE000 {
					d.pos = i
					return "", d.fail(ErrInvalidValue, "unpaired UTF-16 surrogate in string")
				}
				buf = utf8.AppendRune(buf, r)
			default:
				d.pos = i - 1
				return "", d.fail(ErrSyntax, "invalid escape \\%c", e)
			}
		case c < 0x20:
			d.pos = i
			return "", d.fail(ErrSyntax, "control character %#x in string", c)
		case c < utf8.RuneSelf:
			buf = append(buf, c)
			i++
		default:
			r, size := utf8.DecodeRune(data[i:])
			if r == utf8.RuneError && size == 1 {
				d.pos = i
				return "", d.fail(ErrInvalidValue, "invalid UTF-8 in string")
			}
			buf = append(buf, data[i:i+size]...)
			i += size
		}
	}
	d.pos = len(data)
	return "", d.syntax("")
}

func hex4(data []byte, i int) (rune, bool) {
	if i+4 > len(data) {
		return 0, false
	}
	var r rune
	for _, c := range data[i : i+4] {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}

// stringValue reads a JSON string value.
func (d *decoder) stringValue() (string, error) {
	if d.pos >= len(d.data) || d.data[d.pos] != '"' {
		return "", d.wrongType("a string")
	}
	return d.str()
}

// plainString reads a string into a plain Go string field (element ids,
// Extension.url).
func (d *decoder) plainString(dst *string) error {
	if *dst != "" {
		return d.fail(ErrDuplicateProperty, "duplicate property")
	}
	s, err := d.stringValue()
	if err != nil {
		return err
	}
	if s == "" {
		return d.fail(ErrInvalidValue, "empty string")
	}
	*dst = s
	return nil
}

func (d *decoder) boolValue() (bool, error) {
	if d.pos+4 <= len(d.data) && string(d.data[d.pos:d.pos+4]) == "true" {
		d.pos += 4
		return true, nil
	}
	if d.pos+5 <= len(d.data) && string(d.data[d.pos:d.pos+5]) == "false" {
		d.pos += 5
		return false, nil
	}
	return false, d.wrongType("a boolean")
}

// number scans a JSON number and returns its text and whether it is written
// as an integer (no fraction, no exponent).
func (d *decoder) number() (text string, integer bool, err error) {
	data := d.data
	start := d.pos
	i := start
	if i < len(data) && data[i] == '-' {
		i++
	}
	switch {
	case i < len(data) && data[i] == '0':
		i++
	case i < len(data) && data[i] >= '1' && data[i] <= '9':
		for i < len(data) && data[i] >= '0' && data[i] <= '9' {
			i++
		}
	default:
		if i == start {
			return "", false, d.wrongType("a number")
		}
		d.pos = i
		return "", false, d.syntax("invalid number")
	}
	integer = true
	if i < len(data) && data[i] == '.' {
		integer = false
		i++
		digits := i
		for i < len(data) && data[i] >= '0' && data[i] <= '9' {
			i++
		}
		if i == digits {
			d.pos = i
			return "", false, d.syntax("invalid number")
		}
	}
	if i < len(data) && (data[i] == 'e' || data[i] == 'E') {
		integer = false
		i++
		if i < len(data) && (data[i] == '+' || data[i] == '-') {
			i++
		}
		digits := i
		for i < len(data) && data[i] >= '0' && data[i] <= '9' {
			i++
		}
		if i == digits {
			d.pos = i
			return "", false, d.syntax("invalid number")
		}
	}
	d.pos = i
	return d.view(data[start:i]), integer, nil
}

// intern returns b, which decoding reused memory may hold (scratch), as
// a string of its own, stored in the arena.
func (d *decoder) intern(b []byte) string { return d.keep(b, false) }

// view returns b, a part of the input, as a string: stored in the arena,
// or the input's own bytes when the decoder borrows (Options.Borrow).
func (d *decoder) view(b []byte) string { return d.keep(b, d.borrow) }

// keep returns b as a string, b's own bytes when alias is set, and charges
// it to the model as the arena would hold it, whether or not it does: a
// borrowing decoder counts as much memory, and so stops at the same input
// as one that copies.
func (d *decoder) keep(b []byte, alias bool) string {
	n := len(b)
	switch {
	case n == 0:
		return ""
	case n > d.chunkSize/4:
		d.model += n
		if alias {
			return unsafe.String(&b[0], n)
		}
		return string(b)
	}
	if d.arenaFree < n {
		d.model += d.chunkSize
		d.arenaFree = d.chunkSize
		if !d.borrow {
			d.arena = make([]byte, 0, d.chunkSize)
		}
	}
	d.arenaFree -= n
	switch {
	case alias:
		return unsafe.String(&b[0], n)
	case d.borrow:
		return string(b) // no arena when borrowing: decoded escapes are rare
	}
	start := len(d.arena)
	d.arena = append(d.arena, b...)
	return unsafe.String(&d.arena[start], n)
}

func (d *decoder) decimalValue() (string, error) {
	s, _, err := d.number()
	return s, err
}

func (d *decoder) intValue() (int64, error) {
	start := d.pos
	s, integer, err := d.number()
	if err != nil {
		return 0, err
	}
	if !integer {
		d.pos = start
		return 0, d.fail(ErrInvalidValue, "expected an integer, found %s", s)
	}
	neg := s[0] == '-'
	digits := s
	if neg {
		digits = s[1:]
	}
	if len(digits) > 18 {
		d.pos = start
		return 0, d.fail(ErrInvalidValue, "integer %s out of range", s)
	}
	if neg && digits == "0" {
		d.pos = start
		return 0, d.fail(ErrInvalidValue, "integer -0 is not allowed")
	}
	s = digits
	var v int64
	for i := 0; i < len(s); i++ {
		v = v*10 + int64(s[i]-'0')
	}
	if neg {
		v = -v
	}
	return v, nil
}

// skipValue skips any JSON value, checking its syntax and the depth limit.
// It checks only what makes JSON malformed: strings are not checked for valid
// UTF-8 or paired surrogates, so that the only errors it returns are of class
// ErrSyntax or ErrLimit. (Such problems inside a value are reported by the
// decoding of that value, with its path, not by a skip over it.)
func (d *decoder) skipValue() error {
	if d.pos >= len(d.data) {
		return d.syntax("")
	}
	switch c := d.data[d.pos]; {
	case c == '{':
		d.pos++
		if err := d.enter(); err != nil {
			return err
		}
		d.skipWS()
		if d.pos < len(d.data) && d.data[d.pos] == '}' {
			d.pos++
			d.depth--
			return nil
		}
		for first := true; ; first = false {
			more, err := d.skipMember(first)
			if err != nil || !more {
				return err
			}
			if err := d.skipValue(); err != nil {
				return err
			}
		}
	case c == '[':
		d.pos++
		if err := d.enter(); err != nil {
			return err
		}
		d.skipWS()
		if d.pos < len(d.data) && d.data[d.pos] == ']' {
			d.pos++
			d.depth--
			return nil
		}
		for first := true; ; first = false {
			more, err := d.element(first)
			if err != nil || !more {
				return err
			}
			if err := d.skipValue(); err != nil {
				return err
			}
		}
	case c == '"':
		return d.skipString()
	case c == 't' || c == 'f':
		_, err := d.boolValue()
		return err
	case c == 'n':
		if d.null() {
			return nil
		}
		return d.syntax("invalid literal")
	default:
		_, _, err := d.number()
		return err
	}
}

// skipMember is member for skipValue: it reads past the next member name and
// its ':' without decoding the name.
func (d *decoder) skipMember(first bool) (more bool, err error) {
	d.skipWS()
	if d.pos >= len(d.data) {
		return false, d.syntax("")
	}
	c := d.data[d.pos]
	if !first {
		if c == '}' {
			d.pos++
			d.depth--
			return false, nil
		}
		if c != ',' {
			return false, d.syntax("expected ',' or '}' after object member, found %q", c)
		}
		d.pos++
		d.skipWS()
		if d.pos >= len(d.data) {
			return false, d.syntax("")
		}
		c = d.data[d.pos]
	}
	if c != '"' {
		return false, d.syntax("expected a member name, found %q", c)
	}
	if err := d.skipString(); err != nil {
		return false, err
	}
	d.skipWS()
	if d.pos >= len(d.data) || d.data[d.pos] != ':' {
		return false, d.syntax("expected ':' after member name")
	}
	d.pos++
	d.skipWS()
	return true, nil
}

// skipString skips the JSON string at the current position (which is '"'),
// checking its syntax (control characters, escapes) but not its content.
func (d *decoder) skipString() error {
	data := d.data
	for i := d.pos + 1; i < len(data); {
		c := data[i]
		switch {
		case c == '"':
			d.pos = i + 1
			return nil
		case c == '\\':
			if i+1 >= len(data) {
				d.pos = len(data)
				return d.syntax("")
			}
			switch e := data[i+1]; e {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if _, ok := hex4(data, i+2); !ok {
					d.pos = i + 2
					return d.fail(ErrSyntax, "invalid \\u escape")
				}
				i += 6
			default:
				d.pos = i + 1
				return d.fail(ErrSyntax, "invalid escape \\%c", e)
			}
		case c < 0x20:
			d.pos = i
			return d.fail(ErrSyntax, "control character %#x in string", c)
		default:
			i++
		}
	}
	d.pos = len(data)
	return d.syntax("")
}

func (d *decoder) unknownMember(k string) error {
	if k == badKey && d.keyErr != nil {
		err := d.keyErr
		d.keyErr = nil
		return err
	}
	err := d.fail(ErrUnknownProperty, "unknown property %q", k)
	err.Offset = d.keyPos
	if k == "fhir_comments" {
		err.NotR4 = true
		err.Reason += " (DSTU2/STU3 JSON comments)"
	}
	return err
}

// primitiveElement reads the "_name" companion object of a primitive: its id
// and extensions.
func (d *decoder) primitiveElement(id *string, ext *[]Extension) error {
	if *id != "" || len(*ext) > 0 {
		return d.fail(ErrDuplicateProperty, "duplicate property")
	}
	if err := d.openObject(); err != nil {
		return err
	}
	var rec error
	depth := d.depth
	for first := true; ; first = false {
		k, more, err := d.member(first)
		if err != nil || !more {
			if rec != nil {
				return d.join(rec, err)
			}
			return err
		}
		start := d.pos
		switch k {
		case "id":
			err = d.plainString(id)
		case "extension":
			err = decodeObjects(d, ext)
		default:
			err = d.unknownMember(k)
		}
		if err != nil {
			if rec, err = d.recoverMember(rec, err, k, start, depth); err != nil {
				return err
			}
		}
	}
}

// resourceTypeMember checks a "resourceType" member met after the first
// member of a resource whose type is already known.
func (d *decoder) resourceTypeMember(want string) error {
	rt, err := d.stringValue()
	if err != nil {
		return err
	}
	if rt != want {
		return d.fail(ErrInvalidValue, "resourceType %q, want %q", rt, want)
	}
	return nil
}

// resource reads one resource object, dispatching on its resourceType. If
// into is not nil the resource is decoded into it and its type must match.
func (d *decoder) resourceValue(into Resource) (Resource, error) {
	start, depth := d.pos, d.depth
	if err := d.openObject(); err != nil {
		return nil, err
	}
	k, _, err := d.member(true)
	if err != nil {
		return nil, err
	}
	if k == badKey {
		// Perhaps the resourceType: the resource is not decoded.
		return nil, d.unknownMember(k)
	}
	first := true
	var rt string
	if k == "resourceType" {
		if rt, err = d.stringValue(); err != nil {
			return nil, memberError(err, k)
		}
		first = false
	} else {
		// resourceType is not the first member: find it, then decode the
		// object from its start.
		d.pos, d.depth = start, depth
		if rt, err = d.findResourceType(); err != nil {
			return nil, err
		}
		d.pos, d.depth = start, depth
		if err := d.openObject(); err != nil {
			return nil, err
		}
	}
	r := into
	if r == nil {
		r = newResource(rt)
		if r != nil {
			if err := d.use(r.size()); err != nil {
				return nil, err
			}
		}
		if r == nil {
			err := d.fail(ErrNotR4, "resourceType %q is not an R4 resource type", rt)
			if rt == "" {
				err.Err, err.Reason = ErrInvalidValue, "empty resourceType"
			}
			return nil, err
		}
	} else if r.ResourceType() != rt {
		return nil, d.fail(ErrInvalidValue, "resourceType %q, want %q", rt, r.ResourceType())
	}
	if err := r.decodeMembers(d, first); err != nil {
		if err = resourceError(err, rt); kept(err) {
			return r, err
		}
		return nil, err
	}
	return r, nil
}

// findResourceType scans the object at the current position for its
// resourceType member.
func (d *decoder) findResourceType() (string, error) {
	if err := d.openObject(); err != nil {
		return "", err
	}
	rt, found := "", false
	// A member name that is not valid UTF-8 is reported when the resource
	// is decoded, with its path.
	badKeys := d.badKeys
	d.badKeys = true
	defer func() { d.badKeys, d.keyErr = badKeys, nil }()
	for first := true; ; first = false {
		k, more, err := d.member(first)
		if err != nil {
			return "", err
		}
		if !more {
			break
		}
		if k == "resourceType" && !found {
			if rt, err = d.stringValue(); err != nil {
				return "", memberError(err, k)
			}
			found = true
			continue
		}
		if err := d.skipValue(); err != nil {
			return "", err
		}
	}
	if !found {
		return "", d.fail(ErrMissingResourceType, "resource without resourceType")
	}
	return rt, nil
}

// resource reads a single resource member (Bundle.entry.resource).
func (d *decoder) resource(dst *Resource) error {
	if *dst != nil {
		return d.fail(ErrDuplicateProperty, "duplicate property")
	}
	r, err := d.resourceValue(nil)
	if r != nil {
		*dst = r
	}
	return err
}

// resources reads an array of resources (contained).
func (d *decoder) resources(dst *[]Resource) error {
	if len(*dst) > 0 {
		return d.fail(ErrDuplicateProperty, "duplicate property")
	}
	if err := d.openArray(); err != nil {
		return err
	}
	var rec error
	depth, dropped := d.depth, 0
	for first := true; ; first = false {
		more, err := d.element(first)
		if err != nil || !more {
			return d.join(rec, err)
		}
		start := d.pos
		r, err := d.resourceValue(nil)
		if err != nil {
			// A contained resource that could not be decoded at all is
			// left out.
			if rec, err = d.recoverIndex(rec, err, len(*dst)+dropped, start, depth); err != nil {
				return err
			}
			if r == nil {
				dropped++
				continue
			}
		}
		s, err := grow(d, *dst)
		if err != nil {
			return d.join(rec, err)
		}
		s[len(s)-1] = r
		*dst = s
	}
}

// objectCodec is implemented by every generated struct.
type objectCodec interface {
	decodeMembers(d *decoder, first bool) error
	encodeMembers(e *encoder)
	walk(w *walker)
}

// primitiveCodec is implemented by every primitive type.
type primitiveCodec interface {
	decodeValue(d *decoder) error
	decodeElement(d *decoder) error
	hasValue() bool
	hasElement() bool
	encodeValue(e *encoder)
	encodeElement(e *encoder)
	walk(w *walker)
}

func decodeObject[T any, P interface {
	*T
	objectCodec
}](d *decoder, dst **T) error {
	if *dst != nil {
		return d.fail(ErrDuplicateProperty, "duplicate property")
	}
	if err := d.openObject(); err != nil {
		return err
	}
	x := new(T)
	if err := d.use(int(unsafe.Sizeof(*x))); err != nil {
		return err
	}
	if err := P(x).decodeMembers(d, true); err != nil {
		if kept(err) {
			*dst = x
		}
		return err
	}
	*dst = x
	return nil
}

func decodeObjects[T any, P interface {
	*T
	objectCodec
}](d *decoder, dst *[]T) error {
	if len(*dst) > 0 {
		return d.fail(ErrDuplicateProperty, "duplicate property")
	}
	if err := d.openArray(); err != nil {
		return err
	}
	s := *dst
	var rec error
	depth, dropped := d.depth, 0
	for first := true; ; first = false {
		more, err := d.element(first)
		if err != nil {
			*dst = s
			return d.join(rec, err)
		}
		if !more {
			break
		}
		if s, err = grow(d, s); err != nil {
			*dst = s
			return d.join(rec, err)
		}
		start := d.pos
		err = d.openObject()
		if err == nil {
			err = P(&s[len(s)-1]).decodeMembers(d, true)
		}
		if err != nil {
			keep := kept(err)
			if rec, err = d.recoverIndex(rec, err, len(s)-1+dropped, start, depth); err != nil {
				*dst = s
				return err
			}
			if !keep {
				// An element that is not an object at all is left
				// out; the path of later ones keeps the JSON index.
				s = s[:len(s)-1]
				dropped++
			}
		}
	}
	*dst = s
	return rec
}

func decodePrimitiveValue[T any, P interface {
	*T
	primitiveCodec
}](d *decoder, dst **T) error {
	if *dst == nil {
		x, err := newPrimitive[T](d)
		if err != nil {
			return err
		}
		*dst = x
	} else if P(*dst).hasValue() {
		return d.fail(ErrDuplicateProperty, "duplicate property")
	}
	return P(*dst).decodeValue(d)
}

func decodePrimitiveElement[T any, P interface {
	*T
	primitiveCodec
}](d *decoder, dst **T) error {
	if *dst == nil {
		x, err := newPrimitive[T](d)
		if err != nil {
			return err
		}
		*dst = x
	}
	return P(*dst).decodeElement(d)
}

// decodePrimitiveValues reads the value array of a repeating primitive
// ("given"); nulls stand for elements that only have an id or extensions in
// the companion array ("_given").
func decodePrimitiveValues[T any, P interface {
	*T
	primitiveCodec
}](d *decoder, dst *[]T) error {
	return decodePrimitiveArray[T, P](d, dst, false)
}

// decodePrimitiveElements reads the companion array ("_given").
func decodePrimitiveElements[T any, P interface {
	*T
	primitiveCodec
}](d *decoder, dst *[]T) error {
	return decodePrimitiveArray[T, P](d, dst, true)
}

func decodePrimitiveArray[T any, P interface {
	*T
	primitiveCodec
}](d *decoder, dst *[]T, elements bool) error {
	s := *dst
	existing := len(s)
	for i := range s {
		if (elements && P(&s[i]).hasElement()) || (!elements && P(&s[i]).hasValue()) {
			return d.fail(ErrDuplicateProperty, "duplicate property")
		}
	}
	if err := d.openArray(); err != nil {
		return err
	}
	n := 0
	var rec error
	depth := d.depth
	for first := true; ; first = false {
		more, err := d.element(first)
		if err != nil {
			return d.join(rec, err)
		}
		if !more {
			break
		}
		if existing > 0 {
			if n >= existing {
				return d.join(rec, d.fail(ErrInvalidValue, "array and its \"_\" companion differ in length"))
			}
		} else if s, err = grow(d, s); err != nil {
			return d.join(rec, err)
		}
		if !d.null() {
			start := d.pos
			if elements {
				err = P(&s[n]).decodeElement(d)
			} else {
				err = P(&s[n]).decodeValue(d)
			}
			if err != nil {
				// A bad item is left empty, so the value and "_" arrays
				// stay aligned while decoding; encoders leave it out.
				if rec, err = d.recoverIndex(rec, err, n, start, depth); err != nil {
					return err
				}
			}
		}
		n++
	}
	if existing > 0 && n != existing {
		return d.join(rec, d.fail(ErrInvalidValue, "array and its \"_\" companion differ in length"))
	}
	*dst = s
	return rec
}

// Error recovery (Options.Decode). A recovery point is a place that knows
// where the value being decoded started: the member loop of an object and the
// item loop of an array. There an error is recorded (with the path segments
// added so far) and the value is skipped, and decoding goes on with the next
// member or item; the levels around add their path segments when the level
// returns its *recorded marker. In strict mode (Unmarshal) recoverMember and
// recoverIndex only add the path segment and return the error, as before.

// recoverMember handles the error err met while decoding the value of member
// k, which started at start, at nesting depth depth. rec is the marker of
// the enclosing object (nil while it has recorded nothing). It returns the
// object's updated marker, or a non-nil error that ends the object.
func (d *decoder) recoverMember(rec, err error, k string, start, depth int) (error, error) {
	if !d.collect {
		return nil, memberError(err, k)
	}
	if k == badKey {
		// The error is the object's: Unmarshal's path has no member.
		return d.recover(rec, err, start, depth, "")
	}
	if len(k) > 1 && k[0] == '_' {
		k = k[1:]
	}
	return d.recover(rec, err, start, depth, "."+k)
}

// recoverIndex is recoverMember for item i of an array.
func (d *decoder) recoverIndex(rec, err error, i, start, depth int) (error, error) {
	if !d.collect {
		return nil, indexError(err, i)
	}
	return d.recover(rec, err, start, depth, "["+strconv.Itoa(i)+"]")
}

func (d *decoder) recover(rec, err error, start, depth int, seg string) (error, error) {
	m := d.record(err)
	if m.abandoned {
		// The value was not (fully) consumed: skip it from its start.
		d.pos, d.depth = start, depth
		if serr := d.skipValue(); serr != nil {
			d.record(serr)
			m = &recorded{d: d, from: m.from, fatal: true}
		}
	}
	if seg != "" {
		m.addSeg(seg)
	}
	if rec != nil {
		m.from = rec.(*recorded).from
	}
	if m.fatal {
		return nil, m
	}
	if rec == nil {
		rec = &recorded{d: d, from: m.from}
	}
	return rec, nil
}

// record turns err into a marker: a fresh *DecodeError is appended to
// d.errs; its marker is fatal for ErrSyntax and ErrLimit and abandoned
// (the value must be skipped) for the recoverable classes. Once maxErrors
// errors are recorded, a further one is replaced by an ErrLimit error.
func (d *decoder) record(err error) *recorded {
	if m, ok := err.(*recorded); ok {
		return m
	}
	de, ok := err.(*DecodeError)
	if !ok {
		de = &DecodeError{Offset: d.pos, Reason: err.Error(), Err: ErrSyntax}
	}
	m := &recorded{d: d, from: len(d.errs)}
	switch {
	case fatalClass(de.Err):
		m.fatal = true
	case len(d.errs) >= d.maxErrors:
		de = &DecodeError{Offset: de.Offset, Reason: "more than " + strconv.Itoa(d.maxErrors) + " errors; decoding stopped", Err: ErrLimit, segs: de.segs}
		m.fatal = true
	default:
		m.abandoned = true
	}
	d.errs = append(d.errs, de)
	return m
}

// join ends a level that has recorded errors (rec, nil if none) with err
// (nil, a fresh error or a marker): the result is the marker covering all of
// them, or err itself when the level recorded nothing.
func (d *decoder) join(rec, err error) error {
	if rec == nil {
		return err
	}
	if err == nil {
		return rec
	}
	m := d.record(err)
	return &recorded{d: d, from: rec.(*recorded).from, abandoned: m.abandoned, fatal: m.fatal}
}

// kept reports whether err is a marker for a value that was decoded in part
// and is to be kept.
func kept(err error) bool {
	m, ok := err.(*recorded)
	return ok && !m.abandoned && !m.fatal
}
