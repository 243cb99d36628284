package fhir

import (
	"slices"
	"unicode/utf8"
)

// appendCanonical appends the canonical serialisation of n to buf: RFC 8785
// (JSON Canonicalization Scheme) object member order (sorted by the UTF-16
// code units of their names), no whitespace and strings with the minimal
// escapes, but numbers exactly as written (see appendNumber). Object
// members are sorted in place.
func appendCanonical(buf []byte, n *node) ([]byte, error) {
	switch n.kind {
	case kNull:
		return append(buf, "null"...), nil
	case kBool:
		return append(buf, n.str...), nil
	case kNumber:
		return appendNumber(buf, n.str)
	case kString:
		return appendString(buf, n.str), nil
	case kArray:
		buf = append(buf, '[')
		for i := range n.kids {
			if i > 0 {
				buf = append(buf, ',')
			}
			var err error
			if buf, err = appendCanonical(buf, &n.kids[i].val); err != nil {
				return nil, err
			}
		}
		return append(buf, ']'), nil
	}
	sortMembers(n.kids)
	buf = append(buf, '{')
	for i := range n.kids {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = appendString(buf, n.kids[i].key)
		buf = append(buf, ':')
		var err error
		if buf, err = appendCanonical(buf, &n.kids[i].val); err != nil {
			return nil, err
		}
	}
	return append(buf, '}'), nil
}

func sortMembers(ms []member) {
	sorted := true
	for i := 1; i < len(ms); i++ {
		if compareUTF16(ms[i-1].key, ms[i].key) > 0 {
			sorted = false
			break
		}
	}
	if !sorted {
		slices.SortStableFunc(ms, func(a, b member) int { return compareUTF16(a.key, b.key) })
	}
}

// compareUTF16 orders strings by their UTF-16 code units, as RFC 8785
// requires. UTF-8 byte order equals code point order, which differs from
// UTF-16 order only between supplementary characters and U+E000..U+FFFF.
func compareUTF16(a, b string) int {
	n := min(len(a), len(b))
	i := 0
	for i < n && a[i] == b[i] {
		i++
	}
	if i == n {
		return len(a) - len(b)
	}
	if a[i] < 0x80 && b[i] < 0x80 {
		return int(a[i]) - int(b[i])
	}
	// Back up to the start of the differing rune and compare code units.
	for i > 0 && !utf8.RuneStart(a[i]) {
		i--
	}
	ra, _ := utf8.DecodeRuneInString(a[i:])
	rb, _ := utf8.DecodeRuneInString(b[i:])
	return int(utf16Key(ra)) - int(utf16Key(rb))
}

// utf16Key maps a rune to its first UTF-16 code unit, kept wide enough to
// order BMP characters above surrogates correctly.
func utf16Key(r rune) rune {
	if r >= 0x10000 {
		return 0xD800 + ((r - 0x10000) >> 10)
	}
	return r
}

const hexDigits = "0123456789abcdef"

func appendString(buf []byte, s string) []byte {
	buf = append(buf, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
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
		start = i + 1
	}
	buf = append(buf, s[start:]...)
	return append(buf, '"')
}

// appendNumber writes lit exactly as written. The parser has already
// checked that lit is a JSON number. FHIR gives the written digits of a
// decimal meaning (1.50 records a precision that 1.5 does not), so the
// canonical form keeps them instead of RFC 8785's shortest float64 form,
// which would round away trailing zeros and digits beyond float64
// precision. The output stays deterministic: the same input gives the
// same bytes, and canonicalising the output again changes nothing.
func appendNumber(buf []byte, lit string) ([]byte, error) {
	return append(buf, lit...), nil
}
