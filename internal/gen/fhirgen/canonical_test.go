package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestCanonicalMembersOrder(t *testing.T) {
	s := &structType{GoName: "Thing", FHIRPath: "Thing", IsResource: true, Fields: []*field{
		{GoName: "ID", JSONName: "id", Kind: kindString},
		{GoName: "Extension", JSONName: "extension", Kind: kindComplex, GoType: "Extension", Array: true},
		{GoName: "Given", JSONName: "given", Kind: kindPrimitive, GoType: "String", Array: true},
		{GoName: "Family", JSONName: "family", Kind: kindPrimitive, GoType: "String"},
		{GoName: "ValueQuantity", JSONName: "valueQuantity", Kind: kindComplex, GoType: "Quantity"},
		{GoName: "Contained", JSONName: "contained", Kind: kindResource, Array: true},
		{GoName: "Z", JSONName: "Z", Kind: kindString},
	}}
	var names []string
	for _, m := range canonicalMembers(s) {
		names = append(names, m.name)
	}
	// Upper case < "_" < lower case, and "resourceType" takes its place.
	want := "Z _family _given contained extension family given id resourceType valueQuantity"
	if got := strings.Join(names, " "); got != want {
		t.Fatalf("order %s\nwant  %s", got, want)
	}
	var b bytes.Buffer
	if err := writeCanonical(&b, s); err != nil {
		t.Fatal(err)
	}
	for _, stmt := range []string{
		"canonicalPrimitiveElement(e, `\"_family\":`, x.Family)",
		"canonicalPrimitiveElements(e, `\"_given\":`, x.Given)",
		"e.canonicalResources(`\"contained\":`, x.Contained)",
		"canonicalObjects(e, `\"extension\":`, x.Extension)",
		"canonicalPrimitiveValue(e, `\"family\":`, x.Family)",
		"canonicalPrimitiveValues(e, `\"given\":`, x.Given)",
		"canonicalString(e, `\"id\":`, x.ID)",
		"e.key(`\"resourceType\":\"Thing\"`)",
		"canonicalObject(e, `\"valueQuantity\":`, x.ValueQuantity)",
	} {
		if !strings.Contains(b.String(), stmt) {
			t.Errorf("generated code lacks %s:\n%s", stmt, b.String())
		}
	}
}

func TestWriteCanonicalRefusesBadNames(t *testing.T) {
	for _, fields := range [][]*field{
		{{GoName: "A", JSONName: "ä", Kind: kindString}},
		{{GoName: "A", JSONName: "a", Kind: kindString}, {GoName: "B", JSONName: "a", Kind: kindString}},
	} {
		s := &structType{GoName: "T", FHIRPath: "T", Fields: fields}
		if err := writeCanonical(new(bytes.Buffer), s); err == nil {
			t.Errorf("%s: no error", fields[0].JSONName)
		}
	}
}
