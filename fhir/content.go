package fhir

import (
	"bytes"
	"slices"

	"github.com/acds-project/acds/fhir/r4"
)

// canonicalResource returns the canonical JSON of r, as the package doc
// defines it (Canonical output): RFC 8785 member order, minimal string
// escapes, numbers as written.
//
// It is r4.Marshal's output with the object members re-sorted: the r4
// encoder already escapes strings as RFC 8785 prescribes, writes numbers as
// stored and no insignificant whitespace, and its member names are the
// ASCII names of the R4 definitions, so byte order is UTF-16 order. Once
// r4 has its own canonical encoder this becomes a call to it.
func canonicalResource(r r4.Resource) ([]byte, error) {
	b, err := r4.Marshal(r)
	if err != nil {
		return nil, err
	}
	out, _ := resort(make([]byte, 0, len(b)), b, 0)
	return out, nil
}

// resort appends the JSON value at src[i:] to dst with object members
// sorted by name and returns the index after the value. src is compact,
// well-formed JSON as r4.Marshal writes it.
func resort(dst, src []byte, i int) ([]byte, int) {
	switch src[i] {
	case '{':
		type span struct {
			key []byte
			val int
		}
		var ms []span
		j := i + 1
		for src[j] != '}' {
			k := j
			j = skipJSON(src, j)
			ms = append(ms, span{src[k+1 : j-1], j + 1})
			j = skipJSON(src, j+1)
			if src[j] == ',' {
				j++
			}
		}
		slices.SortStableFunc(ms, func(a, b span) int { return bytes.Compare(a.key, b.key) })
		dst = append(dst, '{')
		for n, m := range ms {
			if n > 0 {
				dst = append(dst, ',')
			}
			dst = append(dst, '"')
			dst = append(dst, m.key...)
			dst = append(dst, '"', ':')
			dst, _ = resort(dst, src, m.val)
		}
		return append(dst, '}'), j + 1
	case '[':
		dst = append(dst, '[')
		j := i + 1
		for src[j] != ']' {
			if j > i+1 {
				dst = append(dst, ',')
			}
			dst, j = resort(dst, src, j)
			if src[j] == ',' {
				j++
			}
		}
		return append(dst, ']'), j + 1
	}
	j := skipJSON(src, i)
	return append(dst, src[i:j]...), j
}

// skipJSON returns the index after the compact JSON value at src[i:].
func skipJSON(src []byte, i int) int {
	switch src[i] {
	case '"':
		for j := i + 1; j < len(src); j++ {
			switch src[j] {
			case '\\':
				j++
			case '"':
				return j + 1
			}
		}
		return len(src)
	case '{', '[':
		depth := 0
		for j := i; j < len(src); j++ {
			switch src[j] {
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return j + 1
				}
			case '"':
				j = skipJSON(src, j) - 1
			}
		}
		return len(src)
	}
	j := i
	for j < len(src) && src[j] != ',' && src[j] != '}' && src[j] != ']' {
		j++
	}
	return j
}
