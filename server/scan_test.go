package server

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/acds-project/acds"
)

// FuzzScanMatchesEncodingJSON checks the one-pass scanner against
// encoding/json: the same inputs are valid JSON, and the process-request
// decoder accepts exactly what a strict encoding/json decode accepts (keys
// matched case-insensitively by encoding/json aside), with the same values.
func FuzzScanMatchesEncodingJSON(f *testing.F) {
	for _, s := range []string{
		`{"bundle":{"resourceType":"Bundle"},"outputFormat":"fhir_r4"}`,
		` {"outputFormat":"fhir_r4_deidentified","bundle":{"a":[1,2.5e-3,-0,true,false,null,"\u00e9\n"]}} `,
		`{"bundle":null,"outputFormat":null}`,
		`{"bundle":1,"bundle":{"x":{}},"outputFormat":"a","outputFormat":"b"}`,
		`{"Bundle":{},"OUTPUTFORMAT":"x"}`,
		`{"outputFormat":7}`, `{"extra":1}`, `[]`, `"x"`, `{} {}`, `{"a":01}`, `{"a":1.}`, `{"a":"\x"}`,
		`{"a":"` + "\x01" + `"}`, `{"a":[1,]}`, `{,}`, `{"a" 1}`, `-`, `1e+`, `tru`, `nul`, "\xef\xbb\xbf{}",
		strings.Repeat("[", 10001) + strings.Repeat("]", 10001),
		`{"a":"\ud800"}`, `{"a":"` + "\xff" + `"}`, `{"outputFormat":"\u0066hir_r4","bundle":{}}`, `{"bun\u0064le":{}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if got, want := validJSON(b), json.Valid(b); got != want {
			t.Fatalf("validJSON(%q) = %v, json.Valid = %v", b, got, want)
		}
		var mine acds.ProcessRequest
		p := decodeProcessRequest(b, &mine)
		var theirs acds.ProcessRequest
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		err := dec.Decode(&theirs)
		if err == nil && len(bytes.TrimSpace(b[dec.InputOffset():])) != 0 {
			err = errTrailing
		}
		switch {
		case p == nil && err != nil:
			t.Fatalf("%q: accepted, encoding/json refuses: %v", b, err)
		case p == nil:
			if !bytes.Equal(mine.Bundle, theirs.Bundle) || mine.OutputFormat != theirs.OutputFormat {
				t.Fatalf("%q: decoded %+v, encoding/json %+v", b, mine, theirs)
			}
		case err == nil && !caseFolded(b):
			t.Fatalf("%q: refused (%v), encoding/json accepts", b, p)
		}
		if p != nil && p.Type == "" {
			t.Fatalf("%q: problem without type", b)
		}
	})
}

var errTrailing = errTrailingT{}

type errTrailingT struct{}

func (errTrailingT) Error() string { return "trailing data" }

// caseFolded reports whether some top-level key of b is a case variant of a
// known member (which encoding/json accepts and the strict decoder does not).
func caseFolded(b []byte) bool {
	var m map[string]json.RawMessage
	if json.Unmarshal(b, &m) != nil {
		return false
	}
	for k := range m {
		if k != "bundle" && k != "outputFormat" && (strings.EqualFold(k, "bundle") || strings.EqualFold(k, "outputFormat")) {
			return true
		}
	}
	return false
}
