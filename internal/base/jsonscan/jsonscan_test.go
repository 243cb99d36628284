package jsonscan_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/acds-project/acds/internal/base/jsonscan"
)

// FuzzValid checks the scanner against json.Valid: a value followed by
// nothing but white space is accepted exactly when json.Valid accepts it,
// and the scan never panics. (It was server's and portal's fuzzing of
// their own scanners; the seeds are both of theirs.)
func FuzzValid(f *testing.F) {
	for _, s := range []string{
		`{"a":[1,-0.5e+3,true,false,null,"\u00e9\n"]}`, `[]`, `{}`, ` "x" `, `01`, `1.`, `1e`, `-`, `"\x"`,
		`"\u12g4"`, "\"\x01\"", `{"a" 1}`, `{"a":1,}`, `[1,]`, `[1 2]`, `tru`, `nul`, `{"a":1}x`, `"\xff"`,
		`{"data":{"resourceType":"Bundle"},"outputFormat":"fhir_r4"}`, `{} {}`, `{,}`, `1e+`, "\xef\xbb\xbf{}",
		strings.Repeat("[", 10001) + strings.Repeat("]", 10001), strings.Repeat("[", 10000) + strings.Repeat("]", 10000),
		`{"a":"\ud800"}`, `"aaaaaaaaaaaaaaaa\"aaaaaaa"`, "\"aaaaaaaa\x1faaaaaaa\"",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if got, want := jsonscan.Valid(b), json.Valid(b); got != want {
			t.Fatalf("Valid(%q) = %v, json.Valid = %v", b, got, want)
		}
		_, err := jsonscan.Value(b, jsonscan.SkipSpace(b, 0), 0)
		var se *jsonscan.SyntaxError
		if err != nil && !errors.As(err, &se) {
			t.Fatalf("%q: error %v is not a *SyntaxError", b, err)
		}
	})
}

// TestWalks: Object hands fn every member with its key unescaped and its
// value's offset, Array every element; both check the syntax around them.
func TestWalks(t *testing.T) {
	b := []byte(` {"a" : [1, {"x":2}] , "\u0062" :"s\n", "a":null} `)
	var keys, values []string
	end, err := jsonscan.Object(b, jsonscan.SkipSpace(b, 0), 0, func(key []byte, i int) (int, error) {
		end, err := jsonscan.Value(b, i, 1)
		keys, values = append(keys, string(key)), append(values, string(b[i:end]))
		return end, err
	})
	if err != nil || jsonscan.SkipSpace(b, end) != len(b) {
		t.Fatalf("Object: end %d of %d, %v", end, len(b), err)
	}
	if strings.Join(keys, ",") != "a,b,a" || strings.Join(values, " ") != `[1, {"x":2}] "s\n" null` {
		t.Fatalf("members %q %q", keys, values)
	}
	var elems []string
	arr := []byte(`[ 1 ,"x",[ ] ]`)
	end, err = jsonscan.Array(arr, 0, 0, func(i int) (int, error) {
		end, err := jsonscan.Value(arr, i, 1)
		elems = append(elems, string(arr[i:end]))
		return end, err
	})
	if err != nil || end != len(arr) || strings.Join(elems, "|") != `1|"x"|[ ]` {
		t.Fatalf("Array: %d %v %q", end, err, elems)
	}

	for _, bad := range []string{`{"a":1`, `{"a":}`, `{"a" 1}`, `[1,`, `{1:2}`, `[`, `x`} {
		_, errO := jsonscan.Object([]byte(bad), 0, 0, func(_ []byte, i int) (int, error) { return jsonscan.Value([]byte(bad), i, 1) })
		_, errA := jsonscan.Array([]byte(bad), 0, 0, func(i int) (int, error) { return jsonscan.Value([]byte(bad), i, 1) })
		var se *jsonscan.SyntaxError
		if !errors.As(errO, &se) || !errors.As(errA, &se) {
			t.Errorf("%q: Object %v, Array %v", bad, errO, errA)
		}
	}
}

func TestDecodeString(t *testing.T) {
	for in, want := range map[string]string{`"abc"`: "abc", `"a\u0062\n"`: "ab\n", "\"a\xffb\"": "a\ufffdb", `null`: "keep", `""`: ""} {
		s := "keep"
		if err := jsonscan.DecodeString([]byte(in), &s); err != nil || s != want {
			t.Errorf("DecodeString(%q) = %q, %v; want %q", in, s, err, want)
		}
	}
	for _, bad := range []string{`1`, `{}`, `[]`, `true`} {
		var s string
		if err := jsonscan.DecodeString([]byte(bad), &s); err == nil {
			t.Errorf("DecodeString(%q) accepted", bad)
		}
	}
}
