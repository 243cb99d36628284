package fhir

import (
	"errors"
	"math"
	"slices"
	"strconv"
	"unicode/utf8"
)

// errNumber reports a number that has no canonical form (it overflows a
// float64).
var errNumber = errors.New("number out of range for canonical JSON")

// appendCanonical appends the RFC 8785 (JSON Canonicalization Scheme)
// serialisation of n to buf: object members sorted by the UTF-16 code
// units of their names, no whitespace, strings with the minimal escapes,
// numbers in the ECMAScript shortest round-trip form. Object members are
// sorted in place.
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

// appendNumber writes lit in the ECMAScript Number.prototype.toString form.
func appendNumber(buf []byte, lit string) ([]byte, error) {
	// Fast path: small integers without sign issues are already canonical.
	if len(lit) <= 15 && isPlainInt(lit) {
		return append(buf, lit...), nil
	}
	f, err := strconv.ParseFloat(lit, 64)
	if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
		return nil, errNumber
	}
	return appendES6(buf, f), nil
}

func isPlainInt(s string) bool {
	i := 0
	if s[0] == '-' {
		i = 1
		if len(s) == 1 || s == "-0" {
			return false
		}
	}
	if i < len(s) && s[i] == '0' && len(s) > i+1 {
		return false
	}
	for ; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

func appendES6(buf []byte, f float64) []byte {
	if f == 0 {
		return append(buf, '0')
	}
	if f < 0 {
		buf = append(buf, '-')
		f = -f
	}
	var tmp [32]byte
	e := strconv.AppendFloat(tmp[:0], f, 'e', -1, 64) // d.ddde±xx
	mant := e
	exp := 0
	for j := range e {
		if e[j] == 'e' {
			mant = e[:j]
			exp, _ = strconv.Atoi(string(e[j+1:]))
			break
		}
	}
	digits := make([]byte, 0, len(mant))
	for _, c := range mant {
		if c != '.' {
			digits = append(digits, c)
		}
	}
	k := len(digits)
	n := exp + 1
	switch {
	case k <= n && n <= 21:
		buf = append(buf, digits...)
		for range n - k {
			buf = append(buf, '0')
		}
	case 0 < n && n <= 21:
		buf = append(buf, digits[:n]...)
		buf = append(buf, '.')
		buf = append(buf, digits[n:]...)
	case -6 < n && n <= 0:
		buf = append(buf, '0', '.')
		for range -n {
			buf = append(buf, '0')
		}
		buf = append(buf, digits...)
	default:
		buf = append(buf, digits[0])
		if k > 1 {
			buf = append(buf, '.')
			buf = append(buf, digits[1:]...)
		}
		buf = append(buf, 'e')
		if n-1 >= 0 {
			buf = append(buf, '+')
		}
		buf = strconv.AppendInt(buf, int64(n-1), 10)
	}
	return buf
}
