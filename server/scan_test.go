package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/acds-project/acds"
)

// FuzzScanMatchesEncodingJSON checks the one-pass decoder against
// encoding/json (jsonscan.FuzzValid checks the scanner under it): the
// process-request decoder accepts exactly what a strict encoding/json decode accepts (keys
// matched case-insensitively by encoding/json, and members named twice,
// which both decoding paths refuse, aside), with the same values.
func FuzzScanMatchesEncodingJSON(f *testing.F) {
	for _, s := range []string{
		`{"data":{"resourceType":"Bundle"},"outputFormat":"fhir_r4"}`,
		` {"outputFormat":"fhir_r4_deidentified","data":{"a":[1,2.5e-3,-0,true,false,null,"\u00e9\n"]}} `,
		`{"data":null,"outputFormat":null}`,
		`{"data":1,"data":{"x":{}},"outputFormat":"a","outputFormat":"b"}`,
		`{"Bundle":{},"OUTPUTFORMAT":"x"}`,
		`{"outputFormat":7}`, `{"extra":1}`, `[]`, `"x"`, `{} {}`, `{"a":01}`, `{"a":1.}`, `{"a":"\x"}`,
		`{"a":"` + "\x01" + `"}`, `{"a":[1,]}`, `{,}`, `{"a" 1}`, `-`, `1e+`, `tru`, `nul`, "\xef\xbb\xbf{}",
		strings.Repeat("[", 10001) + strings.Repeat("]", 10001),
		`{"a":"\ud800"}`, `{"a":"` + "\xff" + `"}`, `{"outputFormat":"\u0066hir_r4","data":{}}`, `{"d\u0061ta":{}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var mine acds.ProcessRequest
		p := decodeProcessRequest(b, &mine)
		var theirs acds.ProcessRequest
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		err := dec.Decode(&theirs)
		// Only JSON's own white space may follow (bytes.TrimSpace would
		// also drop \v, \f and Unicode spaces, which JSON refuses).
		if err == nil && len(bytes.TrimLeft(b[dec.InputOffset():], " \t\r\n")) != 0 {
			err = errTrailing
		}
		switch {
		case p == nil && err != nil:
			t.Fatalf("%q: accepted, encoding/json refuses: %v", b, err)
		case p == nil:
			if !bytes.Equal(mine.Data, theirs.Data) || mine.OutputFormat != theirs.OutputFormat {
				t.Fatalf("%q: decoded %+v, encoding/json %+v", b, mine, theirs)
			}
		case err == nil && !caseFolded(b) && string(bytes.Trim(b, " \t\r\n")) != "null" && duplicateMember(b) == "":
			// (A member named twice is refused; encoding/json keeps the
			// last value. readBody refuses it too, after encoding/json.)
			// (encoding/json decodes a top-level null into a struct as a
			// no-op; both end in 400, as the bundle is then missing.)
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
		if k != "data" && k != "outputFormat" && (strings.EqualFold(k, "data") || strings.EqualFold(k, "outputFormat")) {
			return true
		}
	}
	return false
}

// BenchmarkDecodeProcessRequest measures the one-pass decoder on the 16 KB
// body of BenchmarkProcessAccept and, interleaved in the same loop,
// json.Valid on the same bytes (the least a validating pass costs with the
// standard library); x-json.Valid is the decoder's time over json.Valid's
// (ns/op counts both). Run it with
//
//	go test ./server -run '^$' -bench DecodeProcessRequest
func BenchmarkDecodeProcessRequest(b *testing.B) {
	body := benchBody(16 << 10)
	b.SetBytes(int64(len(body)))
	var mine, std time.Duration
	for b.Loop() {
		t0 := time.Now()
		var req acds.ProcessRequest
		if p := decodeProcessRequest(body, &req); p != nil {
			b.Fatal(p)
		}
		t1 := time.Now()
		if !json.Valid(body) {
			b.Fatal("invalid")
		}
		mine, std = mine+t1.Sub(t0), std+time.Since(t1)
	}
	b.ReportMetric(float64(mine.Nanoseconds())/float64(b.N), "decode-ns/op")
	b.ReportMetric(float64(std.Nanoseconds())/float64(b.N), "json.Valid-ns/op")
	b.ReportMetric(float64(mine)/float64(std), "x-json.Valid")
}

// benchBody is a process request of about size bytes (as bundleOfSize in
// the external benchmark).
func benchBody(size int) []byte {
	var sb strings.Builder
	sb.WriteString(`{"outputFormat":"fhir_r4","data":{"resourceType":"Bundle","type":"collection","entry":[`)
	for i := 0; sb.Len() < size-200; i++ {
		if i > 0 {
			sb.WriteByte(',')
		}
		fmt.Fprintf(&sb, `{"fullUrl":"urn:uuid:00000000-0000-4000-8000-%012d","resource":{"resourceType":"Observation","id":"o%d","status":"final","code":{"coding":[{"system":"http://loinc.org","code":"8867-4","display":"Heart rate"}]},"subject":{"reference":"Patient/p1"},"valueQuantity":{"value":%d,"unit":"/min"}}}`, i, i, 60+i%40)
	}
	sb.WriteString(`]}}`)
	return []byte(sb.String())
}
