package fhir

import (
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/acds-project/acds"
	"github.com/acds-project/acds/internal/testrig/corpus"
)

// deidCorpus returns the official examples (without the conformance and
// terminology resources, which are only validated) and the shared Synthea
// and Inferno bundles.
func deidCorpus(t *testing.T) []string {
	files, _ := filepath.Glob(filepath.Join("..", ".fhir-defs", "package", "*.json"))
	if len(files) == 0 {
		t.Skip("official examples not fetched (scripts/fetch-fhir-defs.sh)")
	}
	var out []string
	for _, f := range files {
		base := filepath.Base(f)
		if base == "package.json" || strings.HasPrefix(base, ".") || strings.HasPrefix(base, "Bundle-") && (strings.Contains(base, "valueset") ||
			strings.Contains(base, "dataelements") || strings.Contains(base, "resources") || strings.Contains(base, "types") ||
			strings.Contains(base, "profiles") || strings.Contains(base, "extensions") || strings.Contains(base, "searchParams") ||
			strings.Contains(base, "conceptmaps") || strings.Contains(base, "terminologies")) || conformance(base) {
			continue // definitions (conformance and terminology resources), not examples
		}
		out = append(out, f)
	}
	return append(out, corpus.JSON(t, corpus.Synthea, corpus.Inferno)...)
}

// errorKeys returns the error findings of out's validation, by what they
// say (the constraint key and text, without the location, which differs
// between the two outputs), as a multiset.
func errorKeys(t *testing.T, json []byte) map[string]int {
	m := map[string]int{}
	for _, is := range Validate(json).Issues {
		if is.Severity == SeverityError || is.Severity == SeverityFatal {
			m[is.Diagnostics]++
		}
	}
	return m
}

// newErrors counts the findings of deid that plain lacks.
func newErrors(plain, deid map[string]int) (int, []string) {
	n := 0
	var what []string
	for k, c := range deid {
		if c > plain[k] {
			n += c - plain[k]
			what = append(what, k)
		}
	}
	return n, what
}

// TestDeidentifyKeepsConstraints de-identifies every official example and
// every shared bundle that is valid R4 and asserts that the output fails
// no constraint (nor any other check) that the plain output of the same
// input meets. It also counts what de-identification without the repair
// would break, for the log.
func TestDeidentifyKeepsConstraints(t *testing.T) {
	files := deidCorpus(t)
	processed, after, before, brokenFiles, textDatesSeen := 0, 0, 0, 0, 0
	byKey := map[string]int{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		plain, err := Process(data, testOpts(acds.OutputFHIRR4))
		if err != nil {
			continue // invalid input, or nothing to process
		}
		processed++
		pk := errorKeys(t, plain.JSON)
		deid, err := Process(data, testOpts(acds.OutputFHIRR4Deidentified))
		if err != nil {
			t.Errorf("%s: de-identifying: %v", filepath.Base(f), err)
			continue
		}
		// No date written in the input's text survives (free text kept as
		// terminology text included: "ROS 5 days - 2013-04-10").
		var in, outTree any
		if err := json.Unmarshal(data, &in); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(deid.JSON, &outTree); err != nil {
			t.Fatal(err)
		}
		values, outStrings := map[string]string{}, map[string]bool{}
		identifyingValues(in, "", values)
		collectStrings(outTree, outStrings)
		for s := range outStrings {
			if yearInstant.MatchString(s) {
				delete(outStrings, s) // instants keep January 1 of their year
			}
		}
		for v, kind := range values {
			if kind != "date in text" {
				continue
			}
			textDatesSeen++
			if leaked(v, outStrings, false) {
				t.Errorf("%s: the date %q written in a text survives de-identification", filepath.Base(f), v)
			}
		}
		if n, what := newErrors(pk, errorKeys(t, deid.JSON)); n > 0 {
			after += n
			t.Errorf("%s: de-identification broke %d checks: %v", filepath.Base(f), n, what)
		}
		repairConstraints = false
		unrepaired, err := Process(data, testOpts(acds.OutputFHIRR4Deidentified))
		repairConstraints = true
		if err != nil {
			t.Fatal(err)
		}
		if n, what := newErrors(pk, errorKeys(t, unrepaired.JSON)); n > 0 {
			before += n
			brokenFiles++
			for _, w := range what {
				k, _, _ := strings.Cut(w, ":")
				byKey[k]++
			}
		}
	}
	var keys []string
	for k, n := range byKey {
		keys = append(keys, k+" "+itoa(n))
	}
	sort.Strings(keys)
	t.Logf("de-identified %d inputs: without the repair %d new failures in %d outputs (%s); with it %d; %d dates written in texts, none kept",
		processed, before, brokenFiles, strings.Join(keys, ", "), after, textDatesSeen)
	if textDatesSeen == 0 {
		t.Error("no date found in any text: the collector is broken")
	}
}
