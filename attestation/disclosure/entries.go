package disclosure

import (
	"bytes"
	"fmt"
)

// Entries returns the entries of an output Bundle: the elements of its
// top-level "entry" array, each as the exact bytes it has in output, in
// order. output must be compact JSON (what package fhir writes; a copy
// passes through acds.OutputBytes first) holding one object; a Bundle
// without entries has none. The bytes are slices of output.
//
// It scans the bytes once without building values (the commitment of a
// large record costs about as much as hashing it), and fails on anything
// that is not compact JSON of that shape with ErrMalformed; it does not
// check that strings or numbers inside an entry are well formed, which
// output digests and the leaf hashes cover byte for byte.
func Entries(output []byte) ([][]byte, error) {
	s := scanner{b: output}
	if !s.next('{') {
		return nil, s.err("want a JSON object")
	}
	var entries [][]byte
	seen := false
	if s.peek() == '}' {
		s.i++
		return nil, s.end()
	}
	for {
		key, ok := s.str()
		if !ok {
			return nil, s.err("want a member name")
		}
		if !s.next(':') {
			return nil, s.err("want ':'")
		}
		if string(key) == `"entry"` {
			if seen {
				return nil, s.err(`duplicate member "entry"`)
			}
			seen = true
			if !s.next('[') {
				return nil, s.err(`"entry" is not an array`)
			}
			if s.peek() == ']' {
				s.i++
			} else {
				for {
					start := s.i
					if s.peek() != '{' {
						return nil, s.err("an entry is not an object")
					}
					if !s.value() {
						return nil, s.err("malformed entry")
					}
					entries = append(entries, output[start:s.i])
					if s.next(',') {
						continue
					}
					if !s.next(']') {
						return nil, s.err("want ',' or ']' in \"entry\"")
					}
					break
				}
			}
		} else if !s.value() {
			return nil, s.err("malformed value")
		}
		if s.next(',') {
			continue
		}
		if !s.next('}') {
			return nil, s.err("want ',' or '}'")
		}
		return entries, s.end()
	}
}

type scanner struct {
	b []byte
	i int
}

func (s *scanner) err(what string) error {
	return fmt.Errorf("%w: output at byte %d: %s", ErrMalformed, s.i, what)
}

func (s *scanner) end() error {
	if s.i != len(s.b) {
		return s.err("trailing bytes after the object")
	}
	return nil
}

func (s *scanner) peek() byte {
	if s.i < len(s.b) {
		return s.b[s.i]
	}
	return 0
}

func (s *scanner) next(c byte) bool {
	if s.i < len(s.b) && s.b[s.i] == c {
		s.i++
		return true
	}
	return false
}

// str consumes a string and returns it with its quotes.
func (s *scanner) str() ([]byte, bool) {
	start := s.i
	if !s.next('"') {
		return nil, false
	}
	for {
		j := bytes.IndexByte(s.b[s.i:], '"')
		if j < 0 {
			return nil, false
		}
		s.i += j + 1
		// The quote ends the string unless an odd number of backslashes
		// precede it.
		n := 0
		for k := s.i - 2; k > start && s.b[k] == '\\'; k-- {
			n++
		}
		if n%2 == 0 {
			return s.b[start:s.i], true
		}
	}
}

// maxDepth bounds nesting, as the FHIR decoder does.
const maxDepth = 128

// value consumes one compact JSON value. It checks the structure
// (brackets, strings, separators), not the lexical form of literals.
func (s *scanner) value() bool {
	var stack [maxDepth]byte // the open containers' closing brackets
	depth := 0
	for {
		// A value must come here.
		switch c := s.peek(); c {
		case '"':
			if _, ok := s.str(); !ok {
				return false
			}
		case '{', '[':
			if depth == maxDepth {
				return false
			}
			s.i++
			closer := byte('}')
			if c == '[' {
				closer = ']'
			}
			if s.next(closer) {
				break // empty container: a complete value
			}
			stack[depth] = closer
			depth++
			if c == '{' {
				if _, ok := s.str(); !ok || !s.next(':') {
					return false
				}
			}
			continue
		default:
			// A literal: number, true, false, null.
			start := s.i
			for s.i < len(s.b) && literalByte(s.b[s.i]) {
				s.i++
			}
			if s.i == start {
				return false
			}
		}
		// After a value: close containers, or a separator and the next one.
		for {
			if depth == 0 {
				return true
			}
			if s.next(stack[depth-1]) {
				depth--
				continue
			}
			if !s.next(',') {
				return false
			}
			if stack[depth-1] == '}' {
				if _, ok := s.str(); !ok || !s.next(':') {
					return false
				}
			}
			break
		}
	}
}

func literalByte(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c == '-' || c == '+' || c == '.' || c == 'E'
}
