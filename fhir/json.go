package fhir

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// ErrSyntax is the class of errors for input that is not well-formed JSON
// or exceeds a parser limit. The error carries a *SyntaxError.
var ErrSyntax = errors.New("fhir: invalid JSON")

// SyntaxError describes where the JSON input is malformed.
type SyntaxError struct {
	Offset int    // byte offset of the problem
	Line   int    // 1-based line of the problem
	Msg    string // what is wrong
}

// Error describes the problem and its position.
func (e *SyntaxError) Error() string {
	return fmt.Sprintf("invalid JSON at line %d (byte %d): %s", e.Line, e.Offset, e.Msg)
}

// Is makes errors.Is(err, ErrSyntax) true for every *SyntaxError.
func (e *SyntaxError) Is(target error) bool { return target == ErrSyntax }

// kind is the JSON type of a node.
type kind uint8

const (
	kNull kind = iota
	kBool
	kNumber
	kString
	kObject
	kArray
)

func (k kind) String() string {
	return [...]string{"null", "boolean", "number", "string", "object", "array"}[k]
}

// article returns the kind with its indefinite article: "an object".
func (k kind) article() string {
	if k == kObject || k == kArray {
		return "an " + k.String()
	}
	return "a " + k.String()
}

// node is one JSON value. Strings hold their decoded text, numbers their
// literal text, booleans "true" or "false". Objects keep their members in
// input order; arrays keep their elements in member.val with empty keys.
type node struct {
	kind kind
	str  string
	kids []member
}

type member struct {
	key string
	val node
}

// get returns the value of the object member named key, or nil.
func (n *node) get(key string) *node {
	if n == nil || n.kind != kObject {
		return nil
	}
	for i := range n.kids {
		if n.kids[i].key == key {
			return &n.kids[i].val
		}
	}
	return nil
}

// getStr returns the string value of member key, or "".
func (n *node) getStr(key string) string {
	if v := n.get(key); v != nil && v.kind == kString {
		return v.str
	}
	return ""
}

// set replaces the value of member key, or appends the member.
func (n *node) set(key string, v node) {
	for i := range n.kids {
		if n.kids[i].key == key {
			n.kids[i].val = v
			return
		}
	}
	n.kids = append(n.kids[:len(n.kids):len(n.kids)], member{key, v})
}

// del removes member key if present.
func (n *node) del(key string) {
	for i := range n.kids {
		if n.kids[i].key == key {
			kids := make([]member, 0, len(n.kids)-1)
			kids = append(kids, n.kids[:i]...)
			n.kids = append(kids, n.kids[i+1:]...)
			return
		}
	}
}

func strNode(s string) node { return node{kind: kString, str: s} }

func objNode(ms ...member) node { return node{kind: kObject, kids: ms} }

func arrNode(vs ...node) node {
	kids := make([]member, len(vs))
	for i, v := range vs {
		kids[i].val = v
	}
	return node{kind: kArray, kids: kids}
}

// Parser limits.
const (
	maxDepth = 128
)

// parser is a single-pass recursive-descent JSON parser building a node
// tree. Members are allocated from chunked arenas, so a tree of thousands
// of values costs a handful of allocations.
type parser struct {
	s       string
	i       int
	scratch []member
	arena   []member
	depth   int
	ws      int // whitespace bytes skipped between tokens
}

// parseJSON parses data as one JSON value.
func parseJSON(data []byte) (node, error) {
	n, _, err := parseJSONWS(data)
	return n, err
}

// parseJSONWS is parseJSON that also returns the number of insignificant
// whitespace bytes, which sizes the canonical output buffer.
func parseJSONWS(data []byte) (node, int, error) {
	if !utf8.Valid(data) {
		i := 0
		for i < len(data) {
			r, size := utf8.DecodeRune(data[i:])
			if r == utf8.RuneError && size <= 1 {
				break
			}
			i += size
		}
		return node{}, 0, synErr(string(data), i, "invalid UTF-8")
	}
	// One copy of the input backs every string in the tree, so the tree
	// never aliases the caller's bytes (no unsafe, and later changes to
	// data cannot reach it).
	p := &parser{s: string(data)}
	if strings.HasPrefix(p.s, "\ufeff") {
		p.i = 3 // a UTF-8 byte order mark is tolerated, as RFC 8259 allows parsers to
	}
	p.skipWS()
	v, err := p.value()
	if err != nil {
		return node{}, 0, err
	}
	p.skipWS()
	if p.i != len(p.s) {
		return node{}, 0, p.err("unexpected content after the top-level value")
	}
	return v, p.ws, nil
}

func synErr(s string, off int, msg string) error {
	line := 1
	for j := 0; j < off && j < len(s); j++ {
		if s[j] == '\n' {
			line++
		}
	}
	return &SyntaxError{Offset: off, Line: line, Msg: msg}
}

func (p *parser) err(msg string) error { return synErr(p.s, p.i, msg) }

func (p *parser) skipWS() {
	start := p.i
	for p.i < len(p.s) {
		switch p.s[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			p.ws += p.i - start
			return
		}
	}
	p.ws += p.i - start
}

func (p *parser) alloc(n int) []member {
	if n == 0 {
		return nil
	}
	if cap(p.arena)-len(p.arena) < n {
		size := 2048
		if n > size {
			size = n
		}
		p.arena = make([]member, 0, size)
	}
	l := len(p.arena)
	p.arena = p.arena[:l+n]
	return p.arena[l : l+n : l+n]
}

func (p *parser) value() (node, error) {
	if p.i >= len(p.s) {
		return node{}, p.err("unexpected end of input")
	}
	switch c := p.s[p.i]; {
	case c == '{':
		return p.object()
	case c == '[':
		return p.array()
	case c == '"':
		s, err := p.string()
		return node{kind: kString, str: s}, err
	case c == 't':
		return p.literal("true", node{kind: kBool, str: "true"})
	case c == 'f':
		return p.literal("false", node{kind: kBool, str: "false"})
	case c == 'n':
		return p.literal("null", node{kind: kNull})
	case c == '-' || (c >= '0' && c <= '9'):
		return p.number()
	default:
		return node{}, p.err(fmt.Sprintf("unexpected character %q", c))
	}
}

func (p *parser) literal(lit string, v node) (node, error) {
	if len(p.s)-p.i >= len(lit) && p.s[p.i:p.i+len(lit)] == lit {
		p.i += len(lit)
		return v, nil
	}
	return node{}, p.err("invalid literal")
}

func (p *parser) number() (node, error) {
	start := p.i
	s := p.s
	i := p.i
	if s[i] == '-' {
		i++
	}
	if i >= len(s) {
		p.i = i
		return node{}, p.err("truncated number")
	}
	if s[i] == '0' {
		i++
	} else if s[i] >= '1' && s[i] <= '9' {
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
	} else {
		p.i = i
		return node{}, p.err("invalid number")
	}
	if i < len(s) && s[i] == '.' {
		i++
		d := i
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		if i == d {
			p.i = i
			return node{}, p.err("invalid number: no digits after the decimal point")
		}
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		d := i
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		if i == d {
			p.i = i
			return node{}, p.err("invalid number: no digits in the exponent")
		}
	}
	p.i = i
	return node{kind: kNumber, str: s[start:i]}, nil
}

func (p *parser) string() (string, error) {
	p.i++ // opening quote
	start := p.i
	s := p.s
	for i := start; i < len(s); i++ {
		c := s[i]
		if c == '"' {
			p.i = i + 1
			return s[start:i], nil
		}
		if c == '\\' {
			return p.stringSlow(start, i)
		}
		if c < 0x20 {
			p.i = i
			return "", p.err("control character in string")
		}
	}
	p.i = len(s)
	return "", p.err("unterminated string")
}

func (p *parser) stringSlow(start, i int) (string, error) {
	s := p.s
	buf := make([]byte, 0, i-start+16)
	buf = append(buf, s[start:i]...)
	for i < len(s) {
		c := s[i]
		switch {
		case c == '"':
			p.i = i + 1
			return string(buf), nil
		case c < 0x20:
			p.i = i
			return "", p.err("control character in string")
		case c != '\\':
			buf = append(buf, c)
			i++
			continue
		}
		if i+1 >= len(s) {
			break
		}
		e := s[i+1]
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
			r, ok := hex4(s, i)
			if !ok {
				p.i = i
				return "", p.err("invalid \\u escape")
			}
			i += 4
			if utf16.IsSurrogate(r) {
				r2 := rune(-1)
				if i+6 <= len(s) && s[i] == '\\' && s[i+1] == 'u' {
					if x, ok := hex4(s, i+2); ok {
						r2 = x
					}
				}
				if d := utf16.DecodeRune(r, r2); d != utf8.RuneError {
					r = d
					i += 6
				} else {
					r = utf8.RuneError
				}
			}
			buf = utf8.AppendRune(buf, r)
		default:
			p.i = i - 1
			return "", p.err("invalid escape")
		}
	}
	p.i = len(s)
	return "", p.err("unterminated string")
}

func hex4(s string, i int) (rune, bool) {
	if i+4 > len(s) {
		return 0, false
	}
	var r rune
	for _, c := range []byte(s[i : i+4]) {
		r <<= 4
		switch {
		case c >= '0' && c <= '9':
			r |= rune(c - '0')
		case c >= 'a' && c <= 'f':
			r |= rune(c - 'a' + 10)
		case c >= 'A' && c <= 'F':
			r |= rune(c - 'A' + 10)
		default:
			return 0, false
		}
	}
	return r, true
}

func (p *parser) object() (node, error) {
	p.depth++
	if p.depth > maxDepth {
		return node{}, p.err("nesting too deep")
	}
	p.i++
	base := len(p.scratch)
	p.skipWS()
	if p.i < len(p.s) && p.s[p.i] == '}' {
		p.i++
		p.depth--
		return node{kind: kObject}, nil
	}
	for {
		p.skipWS()
		if p.i >= len(p.s) || p.s[p.i] != '"' {
			return node{}, p.err("expected a member name")
		}
		k, err := p.string()
		if err != nil {
			return node{}, err
		}
		p.skipWS()
		if p.i >= len(p.s) || p.s[p.i] != ':' {
			return node{}, p.err("expected ':' after member name")
		}
		p.i++
		p.skipWS()
		v, err := p.value()
		if err != nil {
			return node{}, err
		}
		p.scratch = append(p.scratch, member{k, v})
		p.skipWS()
		if p.i >= len(p.s) {
			return node{}, p.err("unexpected end of input in object")
		}
		if p.s[p.i] == ',' {
			p.i++
			continue
		}
		if p.s[p.i] == '}' {
			p.i++
			break
		}
		return node{}, p.err(fmt.Sprintf("unexpected character %q in object", p.s[p.i]))
	}
	kids := p.alloc(len(p.scratch) - base)
	copy(kids, p.scratch[base:])
	clear(p.scratch[base:])
	p.scratch = p.scratch[:base]
	p.depth--
	return node{kind: kObject, kids: kids}, nil
}

func (p *parser) array() (node, error) {
	p.depth++
	if p.depth > maxDepth {
		return node{}, p.err("nesting too deep")
	}
	p.i++
	base := len(p.scratch)
	p.skipWS()
	if p.i < len(p.s) && p.s[p.i] == ']' {
		p.i++
		p.depth--
		return node{kind: kArray, kids: []member{}}, nil
	}
	for {
		p.skipWS()
		v, err := p.value()
		if err != nil {
			return node{}, err
		}
		p.scratch = append(p.scratch, member{val: v})
		p.skipWS()
		if p.i >= len(p.s) {
			return node{}, p.err("unexpected end of input in array")
		}
		if p.s[p.i] == ',' {
			p.i++
			continue
		}
		if p.s[p.i] == ']' {
			p.i++
			break
		}
		return node{}, p.err(fmt.Sprintf("unexpected character %q in array", p.s[p.i]))
	}
	kids := p.alloc(len(p.scratch) - base)
	copy(kids, p.scratch[base:])
	clear(p.scratch[base:])
	p.scratch = p.scratch[:base]
	p.depth--
	return node{kind: kArray, kids: kids}, nil
}
