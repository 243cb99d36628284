package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

func TestGoFieldName(t *testing.T) {
	for in, want := range map[string]string{
		"id": "ID", "url": "URL", "fullUrl": "FullURL", "valueUri": "ValueURI", "valueUuid": "ValueUUID",
		"valueOid": "ValueOID", "identifier": "Identifier", "valueId": "ValueID", "birthDate": "BirthDate",
		"udiDeviceIdentifier": "UdiDeviceIdentifier", "deceasedBoolean": "DeceasedBoolean",
	} {
		if got := goFieldName(in); got != want {
			t.Errorf("goFieldName(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestStructNameForPath(t *testing.T) {
	if got := structNameForPath("CapabilityStatement.rest.resource.searchParam"); got != "CapabilityStatementRestResourceSearchParam" {
		t.Fatal(got)
	}
}

func TestFirstSentence(t *testing.T) {
	for in, want := range map[string]string{
		"A date (e.g. a birth date). More text.": "A date (e.g. a birth date).",
		"  Spaces\n  collapse.  ":                "Spaces collapse.",
	} {
		if got := firstSentence(in); got != want {
			t.Errorf("firstSentence(%q) = %q, want %q", in, got, want)
		}
	}
}

func defsDir(t *testing.T) string {
	dir := filepath.Join("..", "..", "..", ".fhir-defs", "package")
	if _, err := os.Stat(filepath.Join(dir, "Bundle-types.json")); err != nil {
		t.Skip("FHIR definitions not fetched (scripts/fetch-fhir-defs.sh)")
	}
	return dir
}

// TestGeneratedCodeIsCurrent regenerates the model in memory and compares it
// with the files committed in fhir/r4.
func TestGeneratedCodeIsCurrent(t *testing.T) {
	files, err := generate(defsDir(t))
	if err != nil {
		t.Fatal(err)
	}
	committed, _ := filepath.Glob(filepath.Join("..", "..", "..", "fhir", "r4", "zz_*_gen.go"))
	if len(committed) != len(files) {
		t.Errorf("%d generated files, %d committed", len(files), len(committed))
	}
	for name, src := range files {
		old, err := os.ReadFile(filepath.Join("..", "..", "..", "fhir", "r4", name))
		if err != nil || !bytes.Equal(old, src) {
			t.Errorf("%s differs from the committed file: run go generate ./fhir/r4/...", name)
		}
	}
}

func TestModelShape(t *testing.T) {
	sds, err := loadDefinitions(defsDir(t))
	if err != nil {
		t.Fatal(err)
	}
	m, err := buildModel(sds)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Resources) != 146 || len(m.Primitives) != 20 {
		t.Fatalf("%d resources, %d primitives", len(m.Resources), len(m.Primitives))
	}
	fields := map[string]*field{}
	for _, f := range m.byName["Patient"].Fields {
		fields[f.JSONName] = f
	}
	if f := fields["deceasedDateTime"]; f == nil || f.Choice != "deceased" || f.Kind != kindPrimitive || f.GoType != "DateTime" {
		t.Fatalf("Patient.deceased[x]: %+v", f)
	}
	if f := fields["contained"]; f == nil || f.Kind != kindResource || !f.Array {
		t.Fatalf("Patient.contained: %+v", f)
	}
	if f := fields["id"]; f == nil || f.Kind != kindString {
		t.Fatalf("Patient.id: %+v", f)
	}
	var link *field
	for _, f := range m.byName["BundleEntry"].Fields {
		if f.JSONName == "link" {
			link = f
		}
	}
	if link == nil || link.GoType != "BundleLink" || !link.Array {
		t.Fatalf("Bundle.entry.link (content reference): %+v", link)
	}
}
