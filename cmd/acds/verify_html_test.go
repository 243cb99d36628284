package main

import (
	"encoding/json"
	"html"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/acds-project/acds"
)

var pageResponse = regexp.MustCompile(`(?s)<pre id="response">(.*?)</pre>`)

// TestVerifyHTML: --html writes the report page of the same verification
// (its embedded POST /v1/verify object equals --json's) without changing
// the verdict or the exit code.
func TestVerifyHTML(t *testing.T) {
	dir := t.TempDir()
	b := attBundle(t, filepath.Join(dir, "data"))
	bundleFile := filepath.Join(dir, "bundle.cbor")
	os.WriteFile(bundleFile, b, 0o644)
	outFile := filepath.Join(dir, "out")
	os.WriteFile(outFile, []byte("out"), 0o644)
	page := filepath.Join(dir, "report.html")

	for _, c := range []struct {
		name  string
		args  []string
		code  int
		valid bool
	}{
		{"valid", []string{"--allow-simulated", "--output", outFile}, 0, true},
		{"simulation refused", nil, 1, false},
	} {
		os.Remove(page)
		args := append(append([]string{"verify"}, c.args...), "--json", bundleFile)
		code, jsonOut, _ := attRun(t, "", args...)
		hcode, htmlOut, stderr := attRun(t, "", append(args, "--html", page)...)
		if code != c.code || hcode != c.code || htmlOut != jsonOut {
			t.Fatalf("%s: exit %d without --html, %d with (%s); stdout equal: %v", c.name, code, hcode, stderr, htmlOut == jsonOut)
		}
		doc, err := os.ReadFile(page)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		m := pageResponse.FindSubmatch(doc)
		if m == nil {
			t.Fatalf("%s: no response object in the page", c.name)
		}
		var fromPage, fromJSON acds.VerifyResponse
		if err := json.Unmarshal([]byte(html.UnescapeString(string(m[1]))), &fromPage); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal([]byte(jsonOut), &fromJSON); err != nil {
			t.Fatal(err)
		}
		a, _ := json.Marshal(fromPage)
		z, _ := json.Marshal(fromJSON)
		if string(a) != string(z) || fromPage.Valid != c.valid {
			t.Errorf("%s: page says %s, --json %s", c.name, a, z)
		}
		wantVerdict := `data-valid="false">INVALID<`
		if c.valid {
			wantVerdict = `data-valid="true">VALID<`
		}
		if !strings.Contains(string(doc), wantVerdict) {
			t.Errorf("%s: the page's verdict is not %s", c.name, wantVerdict)
		}
	}

	// --html with --server, and an unwritable file, are usage errors.
	if code, _, _ := attRun(t, "", "verify", "--server", "https://127.0.0.1:1", "--html", page); code != 2 {
		t.Errorf("--server --html: exit %d, want 2", code)
	}
	if code, _, stderr := attRun(t, "", "verify", "--allow-simulated", "--html", filepath.Join(dir, "missing", "r.html"), bundleFile); code != 2 || !strings.Contains(stderr, "--html") {
		t.Errorf("unwritable --html: exit %d %q, want 2", code, stderr)
	}
}
