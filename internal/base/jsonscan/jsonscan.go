// Package jsonscan is the one hand-written JSON scanner of ACDS: one-pass,
// allocation-free checks of JSON syntax exactly as encoding/json's scanner
// makes them (UTF-8 aside), and walks over an object's members or an
// array's elements that hand each value's offset to the caller. Two hot
// paths use it where encoding/json would scan a value twice or decode
// what is not needed: the strict decoding of the POST /v1/process body
// (package server) and the reading of FHIR search pages (package portal;
// portal's BenchmarkScanPage compares it with encoding/json).
//
// Every function takes the input b and an offset i and returns the offset
// after what it scanned. Errors are *[SyntaxError] with the offset and
// encoding/json's wording. Nesting deeper than [MaxDepth] is an error, as
// it is for encoding/json. Anything else (what a key means, which types a
// member may have) is the caller's: the walks only say where values are.
//
//	end, err := jsonscan.Object(b, jsonscan.SkipSpace(b, 0), 0, func(key []byte, i int) (int, error) {
//		end, err := jsonscan.Value(b, i, 1)
//		if err == nil && string(key) == "id" {
//			err = jsonscan.DecodeString(b[i:end], &id)
//		}
//		return end, err
//	})
package jsonscan

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"unicode/utf8"
)

// MaxDepth bounds the nesting of arrays and objects, as encoding/json's.
const MaxDepth = 10000

// SyntaxError reports malformed JSON at an offset.
type SyntaxError struct {
	Offset int    // the offset in the input of the byte at fault
	Msg    string // what is wrong, in encoding/json's words
}

func (e *SyntaxError) Error() string { return fmt.Sprintf("%s at byte %d", e.Msg, e.Offset) }

// ErrEnd is the Msg of a SyntaxError for input that ends inside a value.
const ErrEnd = "unexpected end of JSON input"

func syntax(i int, msg string) error { return &SyntaxError{i, msg} }

// IsSpace reports whether c is JSON white space.
func IsSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// SkipSpace returns the offset of the first byte at or after i that is not
// JSON white space (len(b) if none).
func SkipSpace(b []byte, i int) int {
	for i < len(b) && IsSpace(b[i]) {
		i++
	}
	return i
}

// Valid reports whether b is exactly one JSON value with optional
// surrounding white space, as json.Valid does (UTF-8 aside).
func Valid(b []byte) bool {
	end, err := Value(b, SkipSpace(b, 0), 0)
	return err == nil && SkipSpace(b, end) == len(b)
}

// Value returns the end of the JSON value starting at b[i] (no leading
// space), checking it completely. depth is the number of arrays and
// objects around it (0 at the top).
func Value(b []byte, i, depth int) (int, error) {
	if i >= len(b) {
		return i, syntax(i, ErrEnd)
	}
	switch c := b[i]; {
	case c == '{':
		return Object(b, i, depth, nil)
	case c == '[':
		return Array(b, i, depth, nil)
	case c == '"':
		return String(b, i)
	case c == '-' || (c >= '0' && c <= '9'):
		return Number(b, i)
	case c == 't':
		return literal(b, i, "true")
	case c == 'f':
		return literal(b, i, "false")
	case c == 'n':
		return literal(b, i, "null")
	default:
		return i, syntax(i, fmt.Sprintf("invalid character %q looking for beginning of value", c))
	}
}

func literal(b []byte, i int, lit string) (int, error) {
	for k := 0; k < len(lit); k++ {
		if i+k >= len(b) {
			return i + k, syntax(i+k, ErrEnd)
		}
		if b[i+k] != lit[k] {
			return i + k, syntax(i+k, "invalid character in literal")
		}
	}
	return i + len(lit), nil
}

// Number returns the end of the JSON number starting at b[i].
func Number(b []byte, i int) (int, error) {
	digits := func(j int) int {
		for j < len(b) && b[j] >= '0' && b[j] <= '9' {
			j++
		}
		return j
	}
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && b[i] >= '1' && b[i] <= '9':
		i = digits(i + 1)
	case i >= len(b):
		return i, syntax(i, ErrEnd)
	default:
		return i, syntax(i, "invalid character in numeric literal")
	}
	if i < len(b) && b[i] == '.' {
		i++
		if i >= len(b) {
			return i, syntax(i, ErrEnd)
		}
		if b[i] < '0' || b[i] > '9' {
			return i, syntax(i, "invalid character after decimal point in numeric literal")
		}
		i = digits(i)
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if i >= len(b) {
			return i, syntax(i, ErrEnd)
		}
		if b[i] < '0' || b[i] > '9' {
			return i, syntax(i, "invalid character in exponent of numeric literal")
		}
		i = digits(i)
	}
	return i, nil
}

func isHex(c byte) bool {
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')
}

// plain reports whether a JSON string may hold c without a closer look:
// everything but the quote, the backslash and control characters.
func plain(c byte) bool { return c >= 0x20 && c != '"' && c != '\\' }

const (
	lsb = 0x0101010101010101
	msb = 0x8080808080808080
)

// plain8 reports whether all 8 bytes packed in x are plain. Each term
// below is the classic "some byte is zero / below n" test: a byte's flag
// may be wrong only above a byte that is truly flagged, so whether any
// flag is set is exact.
func plain8(x uint64) bool {
	ctl := (x - 0x20*lsb) & ^x
	q := x ^ ('"' * lsb)
	bs := x ^ ('\\' * lsb)
	return ((ctl | (q-lsb)&^q | (bs-lsb)&^bs) & msb) == 0
}

// String returns the end of the JSON string starting at b[i], checking its
// escapes and that it holds no control characters. Runs of plain bytes are
// skipped 8 at a time.
func String(b []byte, i int) (int, error) {
	if i >= len(b) {
		return i, syntax(i, ErrEnd)
	}
	if b[i] != '"' {
		return i, syntax(i, fmt.Sprintf("invalid character %q looking for beginning of string", b[i]))
	}
	i++
	for {
		for i+8 <= len(b) && plain8(binary.LittleEndian.Uint64(b[i:])) {
			i += 8
		}
		for i < len(b) && plain(b[i]) {
			i++
		}
		if i >= len(b) {
			return i, syntax(i, ErrEnd)
		}
		switch c := b[i]; {
		case c == '"':
			return i + 1, nil
		case c == '\\':
			if i+1 >= len(b) {
				return i + 1, syntax(i+1, ErrEnd)
			}
			switch b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				for k := 2; k < 6; k++ {
					if i+k >= len(b) {
						return i + k, syntax(i+k, ErrEnd)
					}
					if !isHex(b[i+k]) {
						return i + k, syntax(i+k, "invalid character in \\u hexadecimal character escape")
					}
				}
				i += 6
			default:
				return i + 1, syntax(i+1, "invalid character in string escape code")
			}
		default: // c < 0x20
			return i, syntax(i, "invalid character in string literal")
		}
	}
}

// Array returns the end of the JSON array starting at b[i], depth arrays
// and objects deep (0 at the top). With fn nil it checks each element;
// otherwise fn gets each element's offset (never at the end of b) and
// returns the offset after it, having checked it (with Value at depth+1,
// or by decoding it).
func Array(b []byte, i, depth int, fn func(i int) (int, error)) (int, error) {
	if i >= len(b) {
		return i, syntax(i, ErrEnd)
	}
	if b[i] != '[' {
		return i, syntax(i, fmt.Sprintf("invalid character %q looking for beginning of array", b[i]))
	}
	if depth++; depth > MaxDepth {
		return i, syntax(i, "exceeded max depth")
	}
	i = SkipSpace(b, i+1)
	if i < len(b) && b[i] == ']' {
		return i + 1, nil
	}
	for {
		var err error
		switch {
		case i >= len(b):
			return i, syntax(i, ErrEnd)
		case fn == nil:
			i, err = Value(b, i, depth)
		default:
			i, err = fn(i)
		}
		if err != nil {
			return i, err
		}
		i = SkipSpace(b, i)
		if i >= len(b) {
			return i, syntax(i, ErrEnd)
		}
		switch b[i] {
		case ',':
			i = SkipSpace(b, i+1)
		case ']':
			return i + 1, nil
		default:
			return i, syntax(i, "invalid character after array element")
		}
	}
}

// Object returns the end of the JSON object starting at b[i], depth arrays
// and objects deep (0 at the top). With fn nil it checks each member;
// otherwise fn gets each member's key, unescaped (valid only during the
// call), and the offset of its value (never at the end of b), and returns
// the offset after the value, having checked it (with Value at depth+1,
// or by decoding it). Keys are not compared with each other: for a
// repeated key, fn sees both.
func Object(b []byte, i, depth int, fn func(key []byte, i int) (int, error)) (int, error) {
	if i >= len(b) {
		return i, syntax(i, ErrEnd)
	}
	if b[i] != '{' {
		return i, syntax(i, fmt.Sprintf("invalid character %q looking for beginning of object", b[i]))
	}
	if depth++; depth > MaxDepth {
		return i, syntax(i, "exceeded max depth")
	}
	i = SkipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		return i + 1, nil
	}
	for {
		if i >= len(b) {
			return i, syntax(i, ErrEnd)
		}
		if b[i] != '"' {
			return i, syntax(i, "invalid character looking for beginning of object key string")
		}
		ks := i
		var err error
		if i, err = String(b, i); err != nil {
			return i, err
		}
		ke := i
		i = SkipSpace(b, i)
		if i >= len(b) {
			return i, syntax(i, ErrEnd)
		}
		if b[i] != ':' {
			return i, syntax(i, "invalid character after object key")
		}
		i = SkipSpace(b, i+1)
		switch {
		case fn == nil:
			i, err = Value(b, i, depth)
		case i >= len(b):
			return i, syntax(i, ErrEnd)
		default:
			key := b[ks+1 : ke-1]
			if bytes.IndexByte(key, '\\') >= 0 {
				var k string
				if err := json.Unmarshal(b[ks:ke], &k); err != nil {
					return ks, syntax(ks, "invalid object key string")
				}
				key = []byte(k)
			}
			i, err = fn(key, i)
		}
		if err != nil {
			return i, err
		}
		i = SkipSpace(b, i)
		if i >= len(b) {
			return i, syntax(i, ErrEnd)
		}
		switch b[i] {
		case ',':
			i = SkipSpace(b, i+1)
		case '}':
			return i + 1, nil
		default:
			return i, syntax(i, "invalid character after object key:value pair")
		}
	}
}

// DecodeString decodes the JSON value v into *s as json.Unmarshal does: a
// string is unescaped (invalid UTF-8 becomes U+FFFD), null leaves *s as it
// is, anything else is an error. A string without escapes in valid UTF-8,
// the common case, costs one copy.
func DecodeString(v []byte, s *string) error {
	if n := len(v); n > 1 && v[0] == '"' && v[n-1] == '"' && bytes.IndexByte(v, '\\') < 0 && utf8.Valid(v[1:n-1]) {
		*s = string(v[1 : n-1])
		return nil
	}
	return json.Unmarshal(v, s)
}
