package corpus

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestNamedFiles: every file the package names is in the corpus and is a
// JSON document.
func TestNamedFiles(t *testing.T) {
	for _, rel := range []string{Practitioners, MaryLind, USCore, CARIN, ValidatorIndex} {
		if !json.Valid(Read(t, rel)) {
			t.Errorf("%s is not JSON", rel)
		}
	}
	if n := len(Patients(t)); n != 3 {
		t.Errorf("%d Synthea patients, want 3", n)
	}
	if got := filepath.Base(Largest(t, Synthea)); !strings.HasPrefix(got, "Stan_Steuber_") {
		t.Errorf("largest Synthea bundle %s", got)
	}
}

// TestEveryFolderHasItsLicence: each folder of testdata/ carries its
// licence and has a row in the README saying where it comes from, and
// every case index.json lists is there.
func TestEveryFolderHasItsLicence(t *testing.T) {
	root := Root(t)
	readme := string(Read(t, "README.md"))
	ents, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	folders := 0
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		folders++
		if _, err := os.Stat(filepath.Join(root, e.Name(), "LICENSE")); err != nil {
			t.Errorf("testdata/%s has no LICENSE", e.Name())
		}
		if !strings.Contains(readme, "| `"+e.Name()+"/` |") {
			t.Errorf("the README has no row for testdata/%s", e.Name())
		}
	}
	if folders != 3 {
		t.Errorf("%d folders in testdata, want 3", folders)
	}
	var cases []struct {
		File string `json:"file"`
	}
	if err := json.Unmarshal(Read(t, ValidatorIndex), &cases); err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		Path(t, ValidatorCases+"/"+c.File)
	}
	if len(cases) != 40 {
		t.Errorf("%d validator cases, want 40", len(cases))
	}
}

// TestNoModuleNoCorpus: outside a module that carries the corpus, finding
// it is an error (which fails the test that asked), not an empty result.
func TestNoModuleNoCorpus(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	if got, err := find(); err == nil {
		t.Fatalf("found %s outside any module", got)
	}
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module example.com/x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := find(); err == nil || !strings.Contains(err.Error(), "testdata/README.md") {
		t.Fatalf("a module without the corpus: %q, %v", got, err)
	}
}
