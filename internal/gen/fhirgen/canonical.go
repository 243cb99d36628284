package main

import (
	"bytes"
	"fmt"
	"sort"
)

// canonicalMember is one JSON member a struct can write, with the Go
// statement that writes it in the canonical encoder.
type canonicalMember struct {
	name string // JSON member name, the sort key
	stmt string
}

// canonicalMembers returns the members of s in RFC 8785 order: sorted by the
// UTF-16 code units of their names. FHIR member names are ASCII, where UTF-16
// order is byte order, so the order is fixed here once and the generated code
// does no sorting. A primitive's value ("given") and its companion ("_given")
// are two members that sort apart; "resourceType" is an ordinary member.
func canonicalMembers(s *structType) []canonicalMember {
	var ms []canonicalMember
	if s.IsResource {
		ms = append(ms, canonicalMember{"resourceType", fmt.Sprintf("\te.key(`\"resourceType\":%q`)\n", s.GoName)})
	}
	for _, f := range s.Fields {
		key := fmt.Sprintf("`\"%s\":`", f.JSONName)
		switch f.Kind {
		case kindString:
			ms = append(ms, canonicalMember{f.JSONName, fmt.Sprintf("\tcanonicalString(e, %s, x.%s)\n", key, f.GoName)})
		case kindPrimitive:
			ekey := fmt.Sprintf("`\"_%s\":`", f.JSONName)
			if f.Array {
				ms = append(ms,
					canonicalMember{f.JSONName, fmt.Sprintf("\tcanonicalPrimitiveValues(e, %s, x.%s)\n", key, f.GoName)},
					canonicalMember{"_" + f.JSONName, fmt.Sprintf("\tcanonicalPrimitiveElements(e, %s, x.%s)\n", ekey, f.GoName)})
			} else {
				ms = append(ms,
					canonicalMember{f.JSONName, fmt.Sprintf("\tcanonicalPrimitiveValue(e, %s, x.%s)\n", key, f.GoName)},
					canonicalMember{"_" + f.JSONName, fmt.Sprintf("\tcanonicalPrimitiveElement(e, %s, x.%s)\n", ekey, f.GoName)})
			}
		case kindComplex:
			if f.Array {
				ms = append(ms, canonicalMember{f.JSONName, fmt.Sprintf("\tcanonicalObjects(e, %s, x.%s)\n", key, f.GoName)})
			} else {
				ms = append(ms, canonicalMember{f.JSONName, fmt.Sprintf("\tcanonicalObject(e, %s, x.%s)\n", key, f.GoName)})
			}
		case kindResource:
			if f.Array {
				ms = append(ms, canonicalMember{f.JSONName, fmt.Sprintf("\te.canonicalResources(%s, x.%s)\n", key, f.GoName)})
			} else {
				ms = append(ms, canonicalMember{f.JSONName, fmt.Sprintf("\te.canonicalResource(%s, x.%s)\n", key, f.GoName)})
			}
		}
	}
	sort.SliceStable(ms, func(i, j int) bool { return utf16Less(ms[i].name, ms[j].name) })
	return ms
}

// utf16Less orders member names by UTF-16 code units. Every R4 member name
// is ASCII, where that is byte order; writeCanonical refuses anything else.
func utf16Less(a, b string) bool { return a < b }

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

// writeCanonical writes the canonical encoder of s (encodeCanonical).
func writeCanonical(b *bytes.Buffer, s *structType) error {
	ms := canonicalMembers(s)
	for i, m := range ms {
		if !isASCII(m.name) {
			return fmt.Errorf("%s: member name %q is not ASCII", s.FHIRPath, m.name)
		}
		if i > 0 && ms[i-1].name == m.name {
			return fmt.Errorf("%s: member name %q appears twice", s.FHIRPath, m.name)
		}
	}
	fmt.Fprintf(b, "func (x *%s) encodeCanonical(e *encoder) {\n", s.GoName)
	for _, m := range ms {
		b.WriteString(m.stmt)
	}
	b.WriteString("}\n\n")
	return nil
}

// writeCanonicalPrimitive writes the canonical encoder of a primitive's
// companion object ({"extension":[…],"id":…}, in that order).
func writeCanonicalPrimitive(b *bytes.Buffer, p *primitiveType) {
	fmt.Fprintf(b, "func (x *%s) encodeCanonicalElement(e *encoder) { e.canonicalPrimitiveElement(x.ID, x.Extension) }\n\n", p.GoName)
}
