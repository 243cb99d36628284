package acds

import (
	"bytes"
	"encoding/json"
	"errors"
	"unicode/utf8"
)

// ErrOutputNotJSON is returned by [OutputBytes] for bytes that are not one
// JSON value: they cannot be an ACDS output, which is always JSON.
var ErrOutputNotJSON = errors.New("acds: output is not JSON")

// OutputBytes returns the bytes an output's OutputDigest is computed over,
// from a copy of that output as a user may hold it: saved byte for byte,
// or pretty-printed by a tool that also escapes differently (jq, an
// editor, json.MarshalIndent writing < and & as \u003c and \u0026,
// Python writing é as \u00e9).
//
// An output is canonical JSON: no insignificant whitespace, strings with
// the minimal escapes, numbers as written (package fhir, Canonical
// output). Compacting (removing the whitespace between tokens, as
// json.Compact does) therefore recovers it from a pretty-printed copy, and
// OutputBytes also writes every string with the minimal escapes (\" \\ \b
// \f \n \r \t, other control characters as \u00xx, everything else as
// itself), so a copy that only escapes differently gives it back too.
// Member order, numbers and literals are kept exactly as written:
// canonical bytes map to themselves, and a copy whose content changed
// (a value, a number rewritten as 1.5 for 1.50, members reordered) gives
// other bytes, whose digest does not match.
//
// This is the one rule every verifier of an output applies: POST
// /v1/verify, verify.(*Verifier).VerifyOutput (and with it `acds verify
// --output`) and examples/civerify. The error is ErrOutputNotJSON when raw
// is not a single JSON value (a leading UTF-8 byte order mark is ignored).
func OutputBytes(raw []byte) ([]byte, error) {
	raw = bytes.TrimPrefix(raw, []byte("\xef\xbb\xbf"))
	if !json.Valid(raw) {
		return nil, ErrOutputNotJSON
	}
	c := canonicalizer{in: raw}
	c.space()
	out, err := c.value(make([]byte, 0, len(raw)))
	if err != nil {
		return nil, err
	}
	return out, nil
}

// canonicalizer re-encodes JSON that json.Valid accepted, without
// whitespace and with minimal string escapes.
type canonicalizer struct {
	in []byte
	i  int
}

func (c *canonicalizer) space() {
	for c.i < len(c.in) {
		switch c.in[c.i] {
		case ' ', '\t', '\n', '\r':
			c.i++
		default:
			return
		}
	}
}

// value appends the canonical form of the value at c.i.
func (c *canonicalizer) value(out []byte) ([]byte, error) {
	switch c.in[c.i] {
	case '{':
		return c.object(out)
	case '[':
		c.i++
		out = append(out, '[')
		for n := 0; ; n++ {
			c.space()
			if c.in[c.i] == ']' {
				c.i++
				return append(out, ']'), nil
			}
			if n > 0 {
				c.i++ // ','
				c.space()
				out = append(out, ',')
			}
			var err error
			if out, err = c.value(out); err != nil {
				return nil, err
			}
		}
	case '"':
		s, err := c.str()
		if err != nil {
			return nil, err
		}
		return appendString(out, s), nil
	default: // number, true, false, null: as written
		start := c.i
		for c.i < len(c.in) {
			switch c.in[c.i] {
			case ',', '}', ']', ' ', '\t', '\n', '\r':
				return append(out, c.in[start:c.i]...), nil
			}
			c.i++
		}
		return append(out, c.in[start:]...), nil
	}
}

func (c *canonicalizer) object(out []byte) ([]byte, error) {
	c.i++ // '{'
	out = append(out, '{')
	for n := 0; ; n++ {
		c.space()
		if c.in[c.i] == '}' {
			c.i++
			return append(out, '}'), nil
		}
		if n > 0 {
			c.i++ // ','
			c.space()
			out = append(out, ',')
		}
		name, err := c.str()
		if err != nil {
			return nil, err
		}
		out = appendString(out, name)
		c.space()
		c.i++ // ':'
		c.space()
		out = append(out, ':')
		if out, err = c.value(out); err != nil {
			return nil, err
		}
	}
}

// str decodes the string at c.i.
func (c *canonicalizer) str() (string, error) {
	start := c.i
	c.i++ // opening quote
	escaped := false
	for c.in[c.i] != '"' {
		if c.in[c.i] == '\\' {
			escaped = true
			c.i++ // the escaped character; \uXXXX's digits are plain
		}
		c.i++
	}
	c.i++ // closing quote
	lit := c.in[start:c.i]
	if !escaped && utf8.Valid(lit) {
		return string(lit[1 : len(lit)-1]), nil
	}
	var s string
	if err := json.Unmarshal(lit, &s); err != nil {
		return "", ErrOutputNotJSON
	}
	return s, nil
}

// appendString appends s with the minimal escapes of canonical JSON.
func appendString(out []byte, s string) []byte {
	const hexDigits = "0123456789abcdef"
	out = append(out, '"')
	for k := 0; k < len(s); k++ {
		b := s[k]
		switch {
		case b == '"', b == '\\':
			out = append(out, '\\', b)
		case b == '\b':
			out = append(out, '\\', 'b')
		case b == '\f':
			out = append(out, '\\', 'f')
		case b == '\n':
			out = append(out, '\\', 'n')
		case b == '\r':
			out = append(out, '\\', 'r')
		case b == '\t':
			out = append(out, '\\', 't')
		case b < 0x20:
			out = append(out, '\\', 'u', '0', '0', hexDigits[b>>4], hexDigits[b&0xf])
		default:
			out = append(out, b)
		}
	}
	return append(out, '"')
}
