package jsonscan

import (
	"encoding/binary"
	"math/bits"
)

// Delimit returns the end of the array or object starting at b[i] without
// checking its syntax: it follows strings (and their escapes) and the
// nesting of brackets, nothing else, in about half the time Value takes.
// On well-formed JSON it returns what Value returns. On malformed JSON
// its answer means nothing (an error, or an end Value would not give), so
// a caller must check the bytes it delimits by other means before relying
// on them — a strict decoder of the value, say, with Value to report the
// syntax error where that decoder refuses them. A value that is not an
// array or object is scanned with Value.
func Delimit(b []byte, i int) (int, error) {
	if i >= len(b) || (b[i] != '{' && b[i] != '[') {
		return Value(b, i, 0)
	}
	depth := 0
	for i < len(b) {
		switch b[i] {
		case '"':
			i++
			for {
				// The first quote or backslash: found in 8-byte words,
				// whose lowest flagged byte is exact (see
				// quoteOrBackslash8), then byte by byte in the last few.
				for i+8 <= len(b) {
					m := quoteOrBackslash8(binary.LittleEndian.Uint64(b[i:]))
					if m != 0 {
						i += bits.TrailingZeros64(m) / 8
						goto special
					}
					i += 8
				}
				for i < len(b) && b[i] != '"' && b[i] != '\\' {
					i++
				}
				if i >= len(b) {
					return i, syntax(i, ErrEnd)
				}
			special:
				if b[i] == '"' {
					i++
					break
				}
				if i+1 >= len(b) {
					return len(b), syntax(len(b), ErrEnd)
				}
				i += 2 // a backslash and the byte it escapes
			}
		case '{', '[':
			depth++
			if depth > MaxDepth {
				return i, syntax(i, "exceeded max depth")
			}
			i++
		case '}', ']':
			depth--
			i++
			if depth == 0 {
				return i, nil
			}
		default:
			i++
		}
	}
	return i, syntax(i, ErrEnd)
}

// quoteOrBackslash8 flags, with its high bit, each of the 8 bytes packed
// in x (little-endian) that is a quote or a backslash. A flag may be
// wrong only in a byte above a truly flagged one (the borrow of the
// subtraction runs upwards), so whether any is flagged, and the lowest
// flag, are exact.
func quoteOrBackslash8(x uint64) uint64 {
	q := x ^ ('"' * lsb)
	bs := x ^ ('\\' * lsb)
	return ((q-lsb)&^q | (bs-lsb)&^bs) & msb
}
