package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// TestDeterministicAndCurrent runs the generator twice and checks that the
// outputs are identical and equal to the committed fhir/spec/tables.go.
func TestDeterministicAndCurrent(t *testing.T) {
	defs := filepath.Join("..", "..", "..", ".fhir-defs", "package")
	if _, err := os.Stat(filepath.Join(defs, "Bundle-types.json")); err != nil {
		t.Skip("FHIR definitions not fetched (scripts/fetch-fhir-defs.sh)")
	}
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.go"), filepath.Join(dir, "b.go")
	if err := run(defs, a); err != nil {
		t.Fatal(err)
	}
	if err := run(defs, b); err != nil {
		t.Fatal(err)
	}
	ab, _ := os.ReadFile(a)
	bb, _ := os.ReadFile(b)
	if !bytes.Equal(ab, bb) {
		t.Fatal("two runs produced different output")
	}
	committed, err := os.ReadFile(filepath.Join("..", "..", "..", "fhir", "spec", "tables.go"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(ab, committed) {
		t.Fatal("fhir/spec/tables.go is stale: run go generate ./fhir/spec")
	}
}
