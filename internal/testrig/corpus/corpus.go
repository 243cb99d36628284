// Package corpus finds the real-data test corpora the repository carries in
// its top-level testdata/ folder (Synthea patients, Inferno US Core and
// CARIN bundles, the HL7 validator's cases): where each comes from and its
// licence are in testdata/README.md.
//
// The data is part of the repository, so a test that asks for it and does
// not find it fails rather than skips: a missing file is a broken checkout,
// not an optional extra.
package corpus

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"testing"
)

// The corpora, as folders of testdata/.
const (
	// Synthea holds three synthetic one-patient transaction Bundles and
	// the practitioner Bundle Synthea writes beside them.
	Synthea = "synthea"
	// Inferno holds the Inferno reference server's US Core patient Bundle
	// and its CARIN Blue Button Bundle.
	Inferno = "inferno"
	// ValidatorCases holds inputs of the HL7 reference validator's test
	// cases; index.json gives the validator's verdict on each.
	ValidatorCases = "fhir-validator-cases"
)

// Named files of the corpora, relative to testdata/.
const (
	// Practitioners is Synthea's Bundle of Practitioners (no Patient).
	Practitioners = "synthea/practitionerInformation1559319163815.json"
	// MaryLind is the Synthea patient tests use when they need one
	// medium-sized real record (0.7 MB, 164 entries).
	MaryLind = "synthea/Mary_Lind_ab27d239-7c03-47f1-b3e7-7f16fa50e69a.json"
	// USCore is the Inferno US Core patient Bundle (267 entries).
	USCore = "inferno/uscore_bundle_patient_85.json"
	// CARIN is the Inferno CARIN Blue Button patient Bundle.
	CARIN = "inferno/carin_bundle_patient_888.json"
	// ValidatorIndex lists the validator cases and their verdicts.
	ValidatorIndex = "fhir-validator-cases/index.json"
)

// Root returns the absolute path of the repository's testdata/ folder,
// found by walking up from the working directory (a test's package
// folder) to the module root. It fails the test when there is none.
func Root(tb testing.TB) string {
	tb.Helper()
	root, err := find()
	if err != nil {
		tb.Fatal(err)
	}
	return root
}

func find() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("corpus: %w", err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			td := filepath.Join(dir, "testdata")
			if _, err := os.Stat(filepath.Join(td, "README.md")); err != nil {
				return "", fmt.Errorf("corpus: the module at %s carries no testdata/README.md: %w", dir, err)
			}
			return td, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("corpus: no go.mod above the working directory")
		}
		dir = parent
	}
}

// Path returns the absolute path of testdata/rel, failing the test if it
// does not exist.
func Path(tb testing.TB, rel string) string {
	tb.Helper()
	p := filepath.Join(Root(tb), filepath.FromSlash(rel))
	if _, err := os.Stat(p); err != nil {
		tb.Fatalf("corpus: %v", err)
	}
	return p
}

// Read returns the bytes of testdata/rel, failing the test if it cannot be
// read.
func Read(tb testing.TB, rel string) []byte {
	tb.Helper()
	b, err := os.ReadFile(Path(tb, rel))
	if err != nil {
		tb.Fatalf("corpus: %v", err)
	}
	return b
}

// JSON returns the sorted absolute paths of the .json files of the given
// corpora (Synthea, Inferno, ValidatorCases), failing the test if any of
// them holds none.
func JSON(tb testing.TB, corpora ...string) []string {
	tb.Helper()
	var files []string
	for _, c := range corpora {
		m, err := filepath.Glob(filepath.Join(Root(tb), c, "*.json"))
		if err != nil {
			tb.Fatalf("corpus: %v", err)
		}
		if len(m) == 0 {
			tb.Fatalf("corpus: testdata/%s holds no JSON file", c)
		}
		sort.Strings(m)
		files = append(files, m...)
	}
	return files
}

// Patients returns the sorted paths of the Synthea patient Bundles (the
// Synthea corpus without its practitioner Bundle).
func Patients(tb testing.TB) []string {
	tb.Helper()
	prac := Path(tb, Practitioners)
	var out []string
	for _, f := range JSON(tb, Synthea) {
		if f != prac {
			out = append(out, f)
		}
	}
	return out
}

// Largest returns the path of the largest file of the given corpus.
func Largest(tb testing.TB, corpus string) string {
	tb.Helper()
	var best string
	var size int64 = -1
	for _, f := range JSON(tb, corpus) {
		fi, err := os.Stat(f)
		if err != nil {
			tb.Fatalf("corpus: %v", err)
		}
		if fi.Size() > size {
			best, size = f, fi.Size()
		}
	}
	return best
}
