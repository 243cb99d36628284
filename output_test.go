package acds_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf16"

	"github.com/acds-project/acds"
	"github.com/acds-project/acds/fhir"
	"github.com/acds-project/acds/internal/testrig/corpus"
)

// outputOf is the canonical output of a FHIR input, as the enclave makes it.
func outputOf(t *testing.T, in []byte, format string) []byte {
	t.Helper()
	out, err := fhir.Process(in, fhir.Options{Format: format, Source: "raw", Now: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
		Measurement: "ab12", DeidentKey: bytes.Repeat([]byte{7}, 32)})
	if err != nil {
		t.Fatal(err)
	}
	return out.JSON
}

// asciiOnly re-encodes JSON the way Python's json.dumps does by default:
// every non-ASCII character as \uXXXX (surrogate pairs above U+FFFF).
func asciiOnly(b []byte) []byte {
	var out bytes.Buffer
	for _, r := range string(b) {
		if r < 0x80 {
			out.WriteRune(r)
			continue
		}
		for _, u := range utf16.Encode([]rune{r}) {
			fmt.Fprintf(&out, `\u%04x`, u)
		}
	}
	return out.Bytes()
}

// copies are the ways a user may hold an output: each must give back the
// digested bytes.
func copies(t *testing.T, out []byte) map[string][]byte {
	t.Helper()
	indented, err := json.MarshalIndent(json.RawMessage(out), "", "  ") // escapes <, >, & as \u003c…
	if err != nil {
		t.Fatal(err)
	}
	var jq bytes.Buffer
	if err := json.Indent(&jq, out, "", "\t"); err != nil {
		t.Fatal(err)
	}
	return map[string][]byte{
		"as saved":              out,
		"json.MarshalIndent":    indented,
		"jq-style indent, CRLF": bytes.ReplaceAll(jq.Bytes(), []byte("\n"), []byte("\r\n")),
		"ASCII-only escapes":    asciiOnly(indented),
		"with a BOM":            append([]byte("\xef\xbb\xbf"), indented...),
	}
}

// TestOutputBytes: every copy of a real output — pretty-printed,
// re-escaped — gives back the digested bytes, and a changed one does not.
func TestOutputBytes(t *testing.T) {
	in := []byte(`{"resourceType":"Bundle","type":"collection","entry":[{"fullUrl":"urn:uuid:5a8e7f1c-4a4b-4d9e-9c1e-1b2a3c4d5e6f","resource":` +
		`{"resourceType":"Patient","id":"p1","text":{"status":"generated","div":"<div xmlns=\"http://www.w3.org/1999/xhtml\">José &amp; Zoë &lt;3 \u2028 😀</div>"},` +
		`"name":[{"family":"Núñez","given":["José"]}],"gender":"male","birthDate":"1974-12-25"}},` +
		`{"fullUrl":"urn:uuid:6b8e7f1c-4a4b-4d9e-9c1e-1b2a3c4d5e6f","resource":{"resourceType":"Observation","id":"o1","status":"final",` +
		`"code":{"text":"tab\there \"quoted\" back\\slash"},"subject":{"reference":"urn:uuid:5a8e7f1c-4a4b-4d9e-9c1e-1b2a3c4d5e6f"},` +
		`"valueQuantity":{"value":1.50,"unit":"%"}}}]}`)
	for _, format := range []string{acds.OutputFHIRR4, acds.OutputFHIRR4Deidentified} {
		out := outputOf(t, in, format)
		for name, c := range copies(t, out) {
			got, err := acds.OutputBytes(c)
			if err != nil || !bytes.Equal(got, out) {
				t.Errorf("%s, %s: %v\n got %s\nwant %s", format, name, err, got, out)
			}
		}
		// Compacting alone (the server's rule before OutputBytes) would
		// not recover json.MarshalIndent's copy: it escapes < and &.
		var compact bytes.Buffer
		json.Compact(&compact, copies(t, out)["json.MarshalIndent"])
		if format == acds.OutputFHIRR4 && bytes.Equal(compact.Bytes(), out) { // de-identification drops the narrative
			t.Errorf("%s: the fixture has no character json.MarshalIndent escapes", format)
		}
		changed := bytes.Replace(out, []byte(`1.50`), []byte(`1.5`), 1)
		if got, _ := acds.OutputBytes(changed); bytes.Equal(got, out) {
			t.Errorf("%s: a rewritten decimal gives the digested bytes", format)
		}
	}
	for _, junk := range []string{"", "out", `{"a":1`, `{"a":1} {}`, "\xef\xbb\xbf"} {
		if _, err := acds.OutputBytes([]byte(junk)); !errors.Is(err, acds.ErrOutputNotJSON) {
			t.Errorf("%q: %v, want ErrOutputNotJSON", junk, err)
		}
	}
	// Member order, numbers and literals stay as written; only whitespace
	// and escapes change.
	got, err := acds.OutputBytes([]byte("{ \"b\" : [ 1.50 , true, null, -0 ] , \"a\" : \"\\u00e9\\u0001\\/\\u003c\\ud83d\\ude00\" }"))
	if want := "{\"b\":[1.50,true,null,-0],\"a\":\"é\\u0001/<😀\"}"; err != nil || string(got) != want {
		t.Errorf("got %s %v, want %s", got, err, want)
	}
}

// TestOutputBytesSharedData: on real outputs of the corpus's Synthea
// bundles, canonical bytes map to themselves and a pretty-printed copy maps
// back.
func TestOutputBytesSharedData(t *testing.T) {
	for _, f := range corpus.JSON(t, corpus.Synthea) {
		in, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		out := outputOf(t, in, acds.OutputFHIRR4)
		for name, c := range copies(t, out) {
			if got, err := acds.OutputBytes(c); err != nil || !bytes.Equal(got, out) {
				t.Errorf("%s, %s: %v (%d bytes, want %d)", filepath.Base(f), name, err, len(got), len(out))
			}
		}
		if !strings.Contains(string(out), "<div") && !strings.Contains(string(out), "&") {
			t.Logf("%s: no narrative or ampersand", filepath.Base(f))
		}
	}
}
