package fhir

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/acds-project/acds"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/golden")

// TestGolden pins the exact output bytes (and so the digests that
// attestations sign) for a small transaction Bundle, in both formats. Run
// `go test ./fhir -run Golden -update` after an intended change and review
// the diff.
func TestGolden(t *testing.T) {
	testGolden(t, Process)
}

func testGolden(t *testing.T, process func([]byte, Options) (*Output, error)) {
	inputs, _ := filepath.Glob(filepath.Join("testdata", "golden", "*.json"))
	n := 0
	for _, in := range inputs {
		if strings.Contains(filepath.Base(in), ".out.") {
			continue
		}
		data, err := os.ReadFile(in)
		if err != nil {
			t.Fatal(err)
		}
		for _, format := range acds.OutputFormats() {
			n++
			out, err := process(data, testOpts(format))
			if err != nil {
				t.Fatalf("%s: %v", in, err)
			}
			got := append(append([]byte(out.Digest), '\n'), out.JSON...)
			golden := strings.TrimSuffix(in, ".json") + ".out." + format + ".json"
			if *update {
				if err := os.WriteFile(golden, got, 0o644); err != nil {
					t.Fatal(err)
				}
				continue
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("%s differs from %s:\ngot:  %s\nwant: %s", in, golden, got, want)
			}
		}
	}
	if n == 0 {
		t.Fatal("no golden inputs")
	}
}
