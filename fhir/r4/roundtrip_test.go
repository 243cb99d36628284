package r4_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/acds-project/acds/fhir/r4"
	"github.com/acds-project/acds/internal/testrig/corpus"
)

var allExamples = flag.Bool("r4.all", false, "also round-trip the definition bundles over 4 MB (about 100 MB whose resources are also shipped as single files); CI sets it")

// repoRoot finds the module root (the folder holding go.mod).
func repoRoot(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("go.mod not found")
		}
		dir = parent
	}
}

// jsonFiles lists the .json files in dir, or skips the test if dir is absent.
func jsonFiles(t testing.TB, dir string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Skipf("no JSON files in %s (fetch them with scripts/fetch-fhir-defs.sh)", dir)
	}
	sort.Strings(files)
	return files
}

// generic parses JSON keeping numbers as their literal text.
func generic(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	return v, nil
}

// diff returns the first difference between two generic JSON values, or "".
func diff(path string, a, b any) string {
	switch av := a.(type) {
	case map[string]any:
		bv, ok := b.(map[string]any)
		if !ok {
			return fmt.Sprintf("%s: object became %T", path, b)
		}
		keys := make([]string, 0, len(av))
		for k := range av {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			w, ok := bv[k]
			if !ok {
				return fmt.Sprintf("%s.%s: lost", path, k)
			}
			if d := diff(path+"."+k, av[k], w); d != "" {
				return d
			}
		}
		for k := range bv {
			if _, ok := av[k]; !ok {
				return fmt.Sprintf("%s.%s: added", path, k)
			}
		}
		return ""
	case []any:
		bv, ok := b.([]any)
		if !ok {
			return fmt.Sprintf("%s: array became %T", path, b)
		}
		if len(av) != len(bv) {
			return fmt.Sprintf("%s: length %d became %d", path, len(av), len(bv))
		}
		for i := range av {
			if d := diff(fmt.Sprintf("%s[%d]", path, i), av[i], bv[i]); d != "" {
				return d
			}
		}
		return ""
	default:
		if !reflect.DeepEqual(a, b) {
			return fmt.Sprintf("%s: %v became %v", path, a, b)
		}
		return ""
	}
}

// roundTrip decodes data, re-encodes it and compares the two semantically.
func roundTrip(data []byte) string {
	want, err := generic(data)
	if err != nil {
		return "input is not JSON: " + err.Error()
	}
	r, err := r4.Unmarshal(data)
	if err != nil {
		return "decode: " + err.Error()
	}
	out, err := r4.Marshal(r)
	if err != nil {
		return "encode: " + err.Error()
	}
	got, err := generic(out)
	if err != nil {
		return "output is not JSON: " + err.Error()
	}
	if !bytes.HasPrefix(out, []byte(`{"resourceType":`)) {
		return "output does not start with resourceType"
	}
	return diff(r.ResourceType(), want, got)
}

func checkRoundTrips(t *testing.T, files []string, skip func(data []byte) bool) {
	t.Helper()
	var failures []string
	n, big := 0, 0
	for _, f := range files {
		if fi, err := os.Stat(f); err == nil && fi.Size() > 4<<20 && !*allExamples && skip != nil {
			big++
			continue
		}
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if skip != nil && skip(data) {
			continue
		}
		n++
		if d := roundTrip(data); d != "" {
			failures = append(failures, fmt.Sprintf("%-60s %s", filepath.Base(f), d))
		}
	}
	if len(failures) > 0 {
		t.Errorf("%d of %d files do not round-trip:\n%s", len(failures), n, strings.Join(failures, "\n"))
	}
	t.Logf("%d of %d files round-trip", n-len(failures), n)
	if big > 0 {
		t.Logf("%d definition bundles over 4 MB left out; run with -r4.all to include them", big)
	}
}

// TestRoundTripOfficialExamples decodes and re-encodes every resource in
// the hl7.fhir.r4.examples@4.0.1 package, definitions bundles included.
func TestRoundTripOfficialExamples(t *testing.T) {
	files := jsonFiles(t, filepath.Join(repoRoot(t), ".fhir-defs", "package"))
	checkRoundTrips(t, files, func(data []byte) bool {
		// package.json and ig-r4.json are npm/IG metadata, not resources.
		var probe struct {
			ResourceType string `json:"resourceType"`
		}
		return json.Unmarshal(data, &probe) != nil || probe.ResourceType == ""
	})
}

// TestRoundTripSharedBundles round-trips the Synthea and Inferno bundles.
func TestRoundTripSharedBundles(t *testing.T) {
	for _, dir := range []string{corpus.Synthea, corpus.Inferno} {
		t.Run(dir, func(t *testing.T) {
			files := corpus.JSON(t, dir)
			checkRoundTrips(t, files, nil)
		})
	}
}

// TestValidatorCasesDecode checks decoding against the HL7 reference
// validator's verdicts (the corpus's fhir-validator-cases): every case
// it finds free of errors decodes and round-trips, and a decode failure only
// happens on a case where it reports errors.
func TestValidatorCasesDecode(t *testing.T) {
	raw := corpus.Read(t, corpus.ValidatorIndex)
	dir := filepath.Dir(corpus.Path(t, corpus.ValidatorIndex))
	var cases []struct {
		File           string `json:"file"`
		ExpectedErrors int    `json:"expectedErrors"`
	}
	if err := json.Unmarshal(raw, &cases); err != nil {
		t.Fatal(err)
	}
	failed := 0
	for _, c := range cases {
		data, err := os.ReadFile(filepath.Join(dir, c.File))
		if err != nil {
			t.Fatal(err)
		}
		_, err = r4.Unmarshal(data)
		switch {
		case err != nil && c.ExpectedErrors == 0:
			t.Errorf("%s: the reference validator accepts it, decode fails: %v", c.File, err)
		case err != nil:
			failed++
			t.Logf("%s: rejected (reference validator: %d errors): %v", c.File, c.ExpectedErrors, err)
		case c.ExpectedErrors == 0:
			if d := roundTrip(data); d != "" {
				t.Errorf("%s: %s", c.File, d)
			}
		}
	}
	t.Logf("%d cases, %d rejected by decoding", len(cases), failed)
}
