package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// TestDeterministicAndCurrent runs the generator and checks that its output
// equals the committed fhir/spec/tables.go, byte for byte: generation is
// deterministic (sorted iteration everywhere) and the tables are current.
func TestDeterministicAndCurrent(t *testing.T) {
	defs := filepath.Join("..", "..", "..", "..", ".fhir-defs", "package")
	if _, err := os.Stat(filepath.Join(defs, "Bundle-types.json")); err != nil {
		t.Skip("FHIR definitions not fetched (scripts/fetch-fhir-defs.sh)")
	}
	dir := t.TempDir()
	a := filepath.Join(dir, "tables.go")
	if err := run(defs, a); err != nil {
		t.Fatal(err)
	}
	ab, _ := os.ReadFile(a)
	committed, err := os.ReadFile(filepath.Join("..", "..", "..", "..", "fhir", "spec", "tables.go"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(ab, committed) {
		t.Fatal("fhir/spec/tables.go is stale: run go generate ./fhir/spec")
	}
}
