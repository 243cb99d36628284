package fhirpath

import (
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/acds-project/acds/fhir/r4"
)

// The official FHIRPath suite for R4 runs over the JSON forms of its
// inputs among the official R4 examples; both are in testdata/r4suite
// (see its README).

type suiteXML struct {
	Groups []struct {
		Name  string    `xml:"name,attr"`
		Tests []testXML `xml:"test"`
	} `xml:"group"`
}

type testXML struct {
	Name       string `xml:"name,attr"`
	InputFile  string `xml:"inputfile,attr"`
	Predicate  string `xml:"predicate,attr"`
	Expression struct {
		Text    string `xml:",chardata"`
		Invalid string `xml:"invalid,attr"`
	} `xml:"expression"`
	Outputs []struct {
		Type string `xml:"type,attr"`
		Text string `xml:",chardata"`
	} `xml:"output"`
}

// repoRoot finds the directory holding go.mod.
func repoRoot(t testing.TB) string {
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
			t.Skip("go.mod not found")
		}
		dir = parent
	}
}

// inputAliases maps the suite's input file names to the examples' ids
// where the two differ.
var inputAliases = map[string]string{
	"questionnaire-example":        "Questionnaire-3141",
	"explanationofbenefit-example": "ExplanationOfBenefit-EB3500",
}

// exampleFiles indexes the examples by lower-case file name without .json.
func exampleFiles(dir string) (map[string]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	m := map[string]string{}
	for _, e := range ents {
		if n := e.Name(); strings.HasSuffix(n, ".json") {
			m[strings.ToLower(strings.TrimSuffix(n, ".json"))] = filepath.Join(dir, n)
		}
	}
	return m, nil
}

type suiteResult struct {
	name, group, expr, reason string
	skipped                   bool
}

func TestConformance(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "r4suite", "tests-fhir-r4.xml"))
	if err != nil {
		t.Fatal(err)
	}
	examples, err := exampleFiles(filepath.Join("testdata", "r4suite", "input"))
	if err != nil {
		t.Fatal(err)
	}
	var suite suiteXML
	if err := xml.Unmarshal(data, &suite); err != nil {
		t.Fatal(err)
	}
	inputs := map[string]r4.Resource{}
	var results []suiteResult
	passed, run, skipped := 0, 0, 0
	for _, g := range suite.Groups {
		for _, tc := range g.Tests {
			res := suiteResult{name: tc.Name, group: g.Name, expr: strings.TrimSpace(tc.Expression.Text)}
			var input Collection
			if tc.InputFile != "" {
				r, reason := loadInput(examples, inputs, tc.InputFile)
				if reason != "" {
					res.skipped, res.reason = true, reason
					skipped++
					results = append(results, res)
					continue
				}
				input = Collection{NodeOf(r)}
			}
			run++
			res.reason = runSuiteTest(tc, input)
			if res.reason == "" {
				passed++
				continue
			}
			results = append(results, res)
		}
	}
	sort.SliceStable(results, func(i, j int) bool { return results[i].skipped && !results[j].skipped })
	for _, r := range results {
		kind := "FAIL"
		if r.skipped {
			kind = "SKIP"
		}
		t.Logf("%s %s/%s: %s\n\t%s", kind, r.group, r.name, r.reason, r.expr)
	}
	byGroup := map[string]int{}
	for _, r := range results {
		if !r.skipped {
			byGroup[r.group]++
		}
	}
	var groups []string
	for g, n := range byGroup {
		groups = append(groups, fmt.Sprintf("%s %d", g, n))
	}
	sort.Strings(groups)
	if len(groups) > 0 {
		t.Logf("failing by group: %s", strings.Join(groups, ", "))
	}
	pct := 0.0
	if run > 0 {
		pct = 100 * float64(passed) / float64(run)
	}
	t.Logf("fhirpath conformance: %d passed / %d with JSON input (%.1f%%), %d skipped", passed, run, pct, skipped)
	if pct < minConformance {
		t.Errorf("conformance %.1f%% is below the floor of %.1f%%", pct, minConformance)
	}
}

// minConformance is the score under which the test fails: a regression
// guard, raised as the engine improves.
const minConformance = 98.0

func loadInput(examples map[string]string, cache map[string]r4.Resource, file string) (r4.Resource, string) {
	if r, ok := cache[file]; ok {
		return r, ""
	}
	base := strings.ToLower(strings.TrimSuffix(strings.TrimSuffix(file, ".xml"), ".json"))
	if a, ok := inputAliases[base]; ok {
		base = strings.ToLower(a)
	}
	path, ok := examples[base]
	if !ok {
		return nil, fmt.Sprintf("input %s has no JSON form among the R4 examples", file)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err.Error()
	}
	r, err := r4.Unmarshal(data)
	if err != nil {
		return nil, fmt.Sprintf("input %s does not decode: %v", file, err)
	}
	cache[file] = r
	return r, ""
}

// runSuiteTest returns "" when the test passes, else why not.
func runSuiteTest(tc testXML, input Collection) (reason string) {
	defer func() {
		if p := recover(); p != nil {
			reason = fmt.Sprintf("panic: %v", p)
		}
	}()
	expr := strings.TrimSpace(tc.Expression.Text)
	x, err := Parse(expr)
	var out Collection
	if err == nil {
		out, err = x.Evaluate(context.Background(), input, nil)
	}
	if tc.Expression.Invalid != "" {
		if err == nil {
			return fmt.Sprintf("expected a %s error, got %s", tc.Expression.Invalid, showResult(out))
		}
		return ""
	}
	if err != nil {
		var se *SyntaxError
		if errors.As(err, &se) {
			return "syntax error: " + err.Error()
		}
		return "error: " + err.Error()
	}
	if tc.Predicate == "true" {
		out = Collection{Boolean(len(out) > 0)}
	}
	if len(out) != len(tc.Outputs) {
		return fmt.Sprintf("expected %d items %s, got %s", len(tc.Outputs), showExpected(tc), showResult(out))
	}
	for i, o := range tc.Outputs {
		typ, text := suiteForm(out[i])
		if o.Type != "" && o.Type != typ || !sameText(typ, strings.TrimSpace(o.Text), text) {
			return fmt.Sprintf("item %d: expected %s %q, got %s %q", i, o.Type, strings.TrimSpace(o.Text), typ, text)
		}
	}
	return ""
}

func sameText(typ, want, got string) bool {
	if want == got {
		return true
	}
	if typ == "decimal" {
		a, ok1 := parseDecimal(want)
		b, ok2 := parseDecimal(got)
		return ok1 && ok2 && a.cmp(b) == 0
	}
	return false
}

func showExpected(tc testXML) string {
	var parts []string
	for _, o := range tc.Outputs {
		parts = append(parts, o.Type+" "+strings.TrimSpace(o.Text))
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

func showResult(c Collection) string {
	var parts []string
	for _, v := range c {
		typ, text := suiteForm(v)
		parts = append(parts, typ+" "+text)
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// suiteForm gives a value's type and text as the suite writes them.
func suiteForm(v Value) (string, string) {
	switch x := v.(type) {
	case Boolean:
		return "boolean", fmt.Sprint(bool(x))
	case Integer:
		return "integer", fmt.Sprint(int64(x))
	case Decimal:
		return "decimal", x.String()
	case String:
		return "string", string(x)
	case Date:
		return "date", "@" + x.String()
	case DateTime:
		return "dateTime", "@" + x.String()
	case Time:
		return "time", "@T" + x.String()
	case Quantity:
		return "Quantity", x.Value.String() + " '" + x.Unit + "'"
	case *Node:
		if p, ok := x.Value.(r4.Primitive); ok {
			switch x.Type {
			case "date", "dateTime", "instant":
				return x.Type, "@" + p.Text()
			case "time":
				return x.Type, "@T" + p.Text()
			}
			return x.Type, p.Text()
		}
		return x.Type, ""
	case TypeInfo:
		return "TypeInfo", x.Namespace + "." + x.Name
	}
	return fmt.Sprintf("%T", v), ""
}
