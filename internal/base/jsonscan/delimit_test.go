package jsonscan_test

import (
	"strings"
	"testing"
	"time"

	"github.com/acds-project/acds/internal/base/jsonscan"
	"github.com/acds-project/acds/internal/testrig/loadtest"
)

// FuzzDelimit: wherever Value accepts a value, Delimit finds the same end,
// and Delimit never panics or reads past the input.
func FuzzDelimit(f *testing.F) {
	for _, s := range []string{
		`{"a":[1,-0.5e+3,true,false,null,"\u00e9\n"]}`, `[]`, `{}`, `{"a":"}"}`, `["]\"]"]`, `{"a":"\\"}`,
		`{"a":"\\\"}"}`, `[[[]]]`, `{"a":{"b":[{}]}} trailing`, `{"a"`, `{"a":"\`, `[`, `]`, `"x"`, `12`, `null`,
		`{"a":"aaaaaaaaaaaaaaaa\"aaaaaaaaaaaaaa}"}`, strings.Repeat("[", 10001) + strings.Repeat("]", 10001),
		strings.Repeat("[", 10000) + strings.Repeat("]", 10000),
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		got, gerr := jsonscan.Delimit(b, 0)
		if got < 0 || got > len(b) {
			t.Fatalf("Delimit(%q) = %d, outside the input", b, got)
		}
		want, err := jsonscan.Value(b, 0, 0)
		if err != nil {
			return // Delimit's answer means nothing here
		}
		if gerr != nil || got != want {
			t.Fatalf("Delimit(%q) = %d, %v; Value = %d", b, got, gerr, want)
		}
	})
}

// TestDelimitFindsTheEnd: the end of a 20 KB Bundle followed by more
// members, and errors for input that ends inside a value.
func TestDelimitFindsTheEnd(t *testing.T) {
	data := loadtest.Bundle20KB(1)
	body := []byte(`{"data":` + string(data) + `,"outputFormat":"fhir_r4"}`)
	if end, err := jsonscan.Delimit(body, 8); err != nil || end != 8+len(data) {
		t.Fatalf("Delimit = %d, %v; want %d", end, err, 8+len(data))
	}
	for _, s := range []string{`{"a":1`, `{"a":"}`, `[[]`, `{"a":"\"}`} {
		if end, err := jsonscan.Delimit([]byte(s), 0); err == nil {
			t.Errorf("Delimit(%q) = %d, no error", s, end)
		}
	}
}

// BenchmarkDelimit times Delimit and Value on a 20 KB Bundle, one after
// the other in each iteration; delimit/value is the ratio of their times.
func BenchmarkDelimit(b *testing.B) {
	data := loadtest.Bundle20KB(1)
	b.SetBytes(int64(len(data)))
	var d, v int64
	for b.Loop() {
		t0 := nanotime()
		if _, err := jsonscan.Delimit(data, 0); err != nil {
			b.Fatal(err)
		}
		t1 := nanotime()
		if _, err := jsonscan.Value(data, 0, 0); err != nil {
			b.Fatal(err)
		}
		d += t1 - t0
		v += nanotime() - t1
	}
	b.ReportMetric(float64(d)/float64(b.N), "delimit-ns/op")
	b.ReportMetric(float64(v)/float64(b.N), "value-ns/op")
	b.ReportMetric(float64(d)/float64(v), "delimit/value")
}

func nanotime() int64 { return time.Now().UnixNano() }
