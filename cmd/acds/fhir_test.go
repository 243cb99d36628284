package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/acds-project/acds/fhir"
	"github.com/acds-project/acds/internal/testrig/corpus"
)

func runFHIRTest(t *testing.T, stdin string, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(context.Background(), append([]string{"fhir"}, args...), env{
		stdin: strings.NewReader(stdin), stdout: &out, stderr: &errb,
		getenv: func(string) string { return "" },
	})
	return code, out.String(), errb.String()
}

func writeFHIRFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

const goodPatient = `{"resourceType":"Patient","id":"p1","name":[{"family":"Roe","given":["Jane"]}],"gender":"female","birthDate":"1980-04-01"}`

func TestFHIRValidateExitCodes(t *testing.T) {
	good := writeFHIRFile(t, "good.json", goodPatient)
	bad := writeFHIRFile(t, "bad.json", `{"resourceType":"Patient","birthDate":"someday"}`)

	if code, out, _ := runFHIRTest(t, "", "validate", good); code != 0 || !strings.Contains(out, "valid FHIR R4") {
		t.Fatalf("good: exit %d, %s", code, out)
	}
	code, out, _ := runFHIRTest(t, "", "validate", good, bad)
	if code != 1 || !strings.Contains(out, "Patient.birthDate") {
		t.Fatalf("bad: exit %d, %s", code, out)
	}
	if code, _, _ := runFHIRTest(t, "", "validate", filepath.Join(t.TempDir(), "missing.json")); code != 2 {
		t.Fatalf("missing file: exit %d", code)
	}
	if code, _, _ := runFHIRTest(t, "", "validate"); code != 2 {
		t.Fatalf("no files: exit %d", code)
	}
	if code, _, _ := runFHIRTest(t, "", "validate", "--bogus", good); code != 2 {
		t.Fatalf("bad flag: exit %d", code)
	}
	if code, _, _ := runFHIRTest(t, goodPatient, "validate", "-"); code != 0 {
		t.Fatalf("stdin: exit %d", code)
	}
}

func TestFHIRValidateJSON(t *testing.T) {
	bad := writeFHIRFile(t, "bad.json", `{"resourceType":"Patient","birthDate":"someday"}`)
	code, out, _ := runFHIRTest(t, "", "validate", bad, "--json")
	if code != 1 {
		t.Fatalf("exit %d", code)
	}
	var res []struct {
		File    string `json:"file"`
		Valid   bool   `json:"valid"`
		Outcome struct {
			ResourceType string `json:"resourceType"`
			Issue        []struct {
				Severity   string   `json:"severity"`
				Expression []string `json:"expression"`
			} `json:"issue"`
		} `json:"outcome"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if len(res) != 1 || res[0].Valid || res[0].Outcome.ResourceType != "OperationOutcome" || res[0].Outcome.Issue[0].Expression[0] != "Patient.birthDate" {
		t.Fatalf("unexpected JSON: %s", out)
	}
}

func TestFHIRFmt(t *testing.T) {
	good := writeFHIRFile(t, "good.json", goodPatient)
	code, out, errs := runFHIRTest(t, "", "fmt", good)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var b map[string]any
	if err := json.Unmarshal([]byte(out), &b); err != nil || b["type"] != "collection" {
		t.Fatalf("not a collection Bundle: %v %s", err, out)
	}
	if !strings.Contains(out, `"family":"Roe"`) {
		t.Fatalf("data missing: %s", out)
	}

	key := writeFHIRFile(t, "key", strings.Repeat("k", 32))
	code, d1, _ := runFHIRTest(t, "", "fmt", "--deidentify", "--key-file", key, good)
	if code != 0 || strings.Contains(d1, "Roe") || strings.Contains(d1, "1980-04-01") {
		t.Fatalf("deidentify: exit %d: %s", code, d1)
	}
	// Same key, same pseudonyms.
	_, d2, _ := runFHIRTest(t, "", "fmt", good, "--deidentify", "--key-file", key)
	if pseudo(d1) != pseudo(d2) {
		t.Fatalf("pseudonyms differ with the same key")
	}
	// No key file: a random per-run key, and the tool says so.
	code, d3, errs := runFHIRTest(t, "", "fmt", "--deidentify", good)
	if code != 0 || !strings.Contains(errs, "random per-run key") || pseudo(d3) == pseudo(d1) {
		t.Fatalf("random key: exit %d, %s", code, errs)
	}

	short := writeFHIRFile(t, "short", "tiny")
	if code, _, _ := runFHIRTest(t, "", "fmt", "--deidentify", "--key-file", short, good); code != 2 {
		t.Fatalf("short key: exit %d", code)
	}
	bad := writeFHIRFile(t, "bad.json", `{"resourceType":"Patient","birthDate":"someday"}`)
	if code, _, errs := runFHIRTest(t, "", "fmt", bad); code != 1 || !strings.Contains(errs, "Patient.birthDate") {
		t.Fatalf("invalid: exit %d %s", code, errs)
	}
	if code, _, _ := runFHIRTest(t, "", "fmt"); code != 2 {
		t.Fatalf("usage: exit %d", code)
	}
	if code, _, _ := runFHIRTest(t, "", "nonsense"); code != 2 {
		t.Fatalf("unknown subcommand: exit %d", code)
	}
}

// pseudo extracts the Patient's pseudonymous id from fmt output.
func pseudo(out string) string {
	var b struct {
		Entry []struct {
			Resource struct {
				ResourceType string `json:"resourceType"`
				ID           string `json:"id"`
			} `json:"resource"`
		} `json:"entry"`
	}
	json.Unmarshal([]byte(out), &b)
	for _, e := range b.Entry {
		if e.Resource.ResourceType == "Patient" {
			return e.Resource.ID
		}
	}
	return ""
}

// TestFHIRValidateReportsEveryFile: an unreadable file is one error line
// and the files after it are still validated (it used to stop there);
// the exit code is 2 (unreadable input) after all were reported, 1 when
// the only trouble is an invalid file.
func TestFHIRValidateReportsEveryFile(t *testing.T) {
	good := writeFHIRFile(t, "good.json", goodPatient)
	bad := writeFHIRFile(t, "bad.json", `{"resourceType":"Patient","birthDate":"someday"}`)
	missing := filepath.Join(t.TempDir(), "missing.json")
	code, out, _ := runFHIRTest(t, "", "validate", good, missing, bad)
	if code != 2 {
		t.Errorf("exit %d, want 2 (an unreadable file)", code)
	}
	for _, want := range []string{good + ": valid FHIR R4: 0 errors, ", missing + ": error: cannot read", bad + ": invalid: 1 error, ", "Patient.birthDate"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	code, out, _ = runFHIRTest(t, "", "validate", "--json", missing, good)
	var res []struct {
		File    string          `json:"file"`
		Valid   bool            `json:"valid"`
		Error   string          `json:"error"`
		Outcome json.RawMessage `json:"outcome"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil || code != 2 || len(res) != 2 ||
		res[0].Valid || !strings.Contains(res[0].Error, "cannot read") || string(res[0].Outcome) != "null" || !res[1].Valid {
		t.Fatalf("--json: exit %d %v\n%s", code, err, out)
	}
	if code, _, _ := runFHIRTest(t, "", "validate", good, bad); code != 1 {
		t.Fatalf("good and bad: exit %d, want 1", code)
	}
}

// TestFHIRValidateErrorsOnly: Synthea's bundles are valid but carry a
// dom-6 warning (no narrative) per resource — hundreds of lines for the
// four the repository carries. --errors-only leaves them out and each file
// still gets its one-line summary with the counts.
func TestFHIRValidateErrorsOnly(t *testing.T) {
	files := corpus.JSON(t, corpus.Synthea)
	code, all, _ := runFHIRTest(t, "", append([]string{"validate"}, files...)...)
	if code != 0 || strings.Count(all, "dom-6") < 500 {
		t.Fatalf("without --errors-only: exit %d, %d dom-6 lines", code, strings.Count(all, "dom-6"))
	}
	// A file past the validator's warning cap says so instead of a count.
	if !strings.Contains(all, fmt.Sprintf("0 errors, %d+ warnings (only the first %d are reported)", fhir.MaxWarnings, fhir.MaxWarnings)) {
		t.Errorf("no summary says the warnings were capped:\n%s", all[max(0, len(all)-2000):])
	}
	bad := writeFHIRFile(t, "bad.json", `{"resourceType":"Patient","birthDate":"someday"}`)
	code, out, _ := runFHIRTest(t, "", append([]string{"validate", "--errors-only", bad}, files...)...)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != 1 || strings.Contains(out, "warning @") || len(lines) != len(files)+2 {
		t.Fatalf("--errors-only: exit %d, %d lines:\n%s", code, len(lines), out)
	}
	if !strings.HasPrefix(lines[0], bad+": error @ Patient.birthDate") {
		t.Errorf("the error is not reported: %q", lines[0])
	}
	for i, f := range files {
		if l := lines[i+2]; !strings.HasPrefix(l, f+": valid FHIR R4: 0 errors, ") || !strings.Contains(l, " warnings") {
			t.Errorf("summary of %s: %q", f, l)
		}
	}
}

// TestFHIRValidateRunSettings: --security-checks makes HTML in a string an
// error (exit 1), a warning without it (exit 0); --contained ignore leaves
// a contained resource's bad id and contents unreported, --contained check
// (the default) reports them; a mode other than check or ignore is a
// usage error that says which modes there are.
func TestFHIRValidateRunSettings(t *testing.T) {
	html := writeFHIRFile(t, "html.json", `{"resourceType":"Patient","name":[{"text":"Standard <script>somescript</script>"}]}`)
	if code, out, _ := runFHIRTest(t, "", "validate", html); code != 0 || !strings.Contains(out, "warning") {
		t.Errorf("HTML, defaults: exit %d, want 0 and a warning:\n%s", code, out)
	}
	code, out, _ := runFHIRTest(t, "", "validate", "--security-checks", html)
	if code != 1 || !strings.Contains(out, "Patient.name[0].text") || !strings.Contains(out, "security reasons") {
		t.Errorf("HTML, --security-checks: exit %d, want 1 and the error at Patient.name[0].text:\n%s", code, out)
	}

	long := strings.Repeat("a", 65)
	contained := writeFHIRFile(t, "contained.json", `{"resourceType":"Condition","subject":{"reference":"#`+long+`"},
		"contained":[{"resourceType":"Patient","id":"`+long+`","birthDate":"never"}]}`)
	for _, args := range [][]string{{contained}, {"--contained", "check", contained}, {contained, "--contained=check"}} {
		code, out, _ := runFHIRTest(t, "", append([]string{"validate"}, args...)...)
		if code != 1 || !strings.Contains(out, "Condition.contained[0].id") || !strings.Contains(out, "Condition.contained[0].birthDate") {
			t.Errorf("contained, %v: exit %d, want 1 and the contained resource's errors:\n%s", args, code, out)
		}
	}
	code, out, _ = runFHIRTest(t, "", "validate", "--contained", "ignore", contained)
	if code != 0 || strings.Contains(out, "Condition.contained") {
		t.Errorf("contained, --contained ignore: exit %d, want 0 and nothing about it:\n%s", code, out)
	}

	code, _, errs := runFHIRTest(t, "", "validate", "--contained", "skip", contained)
	if code != 2 || !strings.Contains(errs, "want check or ignore") || !strings.Contains(errs, "usage: acds fhir validate") {
		t.Errorf("--contained skip: exit %d, want 2 and a usage error naming the modes:\n%s", code, errs)
	}
}
