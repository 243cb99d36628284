package server

import (
	"bytes"
	"errors"
	"io"
	"net/http/httptest"
	"testing"
	"testing/iotest"
)

// TestReadChunked: readChunked returns exactly the bytes of the body
// whatever length it declares (true, unknown, too small, too large) and
// however the reads split it, and its first buffer never exceeds
// firstChunk, whatever the declared length.
func TestReadChunked(t *testing.T) {
	for _, size := range []int{0, 1, 511, 4095, 4096, 4097, 20 << 10, firstChunk - 1, firstChunk, firstChunk + 1, 300 << 10} {
		body := bytes.Repeat([]byte("0123456789abcdef"), size/16+1)[:size]
		for _, declared := range []int64{int64(size), -1, 0, int64(size) / 2, int64(size) * 2, 32 << 20} {
			for name, rd := range map[string]func() io.Reader{
				"whole":   func() io.Reader { return bytes.NewReader(body) },
				"onebyte": func() io.Reader { return iotest.OneByteReader(bytes.NewReader(body)) },
				"half":    func() io.Reader { return iotest.HalfReader(bytes.NewReader(body)) },
			} {
				got, err := readChunked(rd(), declared, 32<<20)
				if err != nil || !bytes.Equal(got, body) {
					t.Fatalf("size %d declared %d %s: got %d bytes, err %v", size, declared, name, len(got), err)
				}
			}
		}
	}
}

// stopReader reports how large a buffer it was first asked to fill.
type stopReader struct{ first int }

func (s *stopReader) Read(p []byte) (int, error) {
	if s.first == 0 {
		s.first = len(p)
	}
	return 0, errors.New("stop")
}

func TestReadChunkedFirstBufferIsBounded(t *testing.T) {
	for _, tc := range []struct {
		declared, limit int64
		want            int
	}{
		{32 << 20, 32 << 20, firstChunk},
		{20 << 10, 32 << 20, 20<<10 + 1},
		{-1, 32 << 20, minChunk},
		{0, 32 << 20, 1},
		{32 << 20, 100, 101},
	} {
		sr := &stopReader{}
		if _, err := readChunked(sr, tc.declared, tc.limit); err == nil {
			t.Fatal("the read error was lost")
		}
		if sr.first != tc.want {
			t.Errorf("declared %d, limit %d: first buffer %d bytes, want %d", tc.declared, tc.limit, sr.first, tc.want)
		}
	}
}

// BenchmarkReadBody reads a 20 KB body that declares its length, as
// readChunked does and, as the baseline, as bytes.Buffer.ReadFrom does
// (what readLimited did before: 512 bytes, doubled as it filled):
//
//	go test ./server -run '^$' -bench ReadBody -benchmem
func BenchmarkReadBody(b *testing.B) {
	body := bytes.Repeat([]byte("0123456789abcdef"), 20<<10/16)
	b.Run("chunked", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := readChunked(bytes.NewReader(body), int64(len(body)), 32<<20); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("buffer", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var buf bytes.Buffer
			if _, err := buf.ReadFrom(bytes.NewReader(body)); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestCheckJSONContentType: the fast path for exactly application/json
// answers as the parsed path does.
func TestCheckJSONContentType(t *testing.T) {
	for ct, ok := range map[string]bool{
		"":                                  true,
		"application/json":                  true,
		"Application/JSON":                  true,
		"application/json; charset=utf-8":   true,
		"application/fhir+json":             true,
		"application/json;":                 true,
		"application/jsonx":                 false,
		"text/plain":                        false,
		"application/x-www-form-urlencoded": false,
		"application/json; =":               false,
	} {
		r := httptest.NewRequest("POST", "/v1/process", nil)
		if ct != "" {
			r.Header.Set("Content-Type", ct)
		}
		if got := checkJSONContentType(r) == nil; got != ok {
			t.Errorf("Content-Type %q: accepted %v, want %v", ct, got, ok)
		}
	}
}
