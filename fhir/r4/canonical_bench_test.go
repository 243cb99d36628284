package r4_test

import (
	"testing"

	"github.com/acds-project/acds/fhir/r4"
)

// BenchmarkCanonical compares the canonical encoder with Marshal on the
// largest Synthea bundle, decoded once. MB/s is over the bytes written (the
// two outputs have the same length); the buffer is reused, as a caller
// hashing many bundles would. The Fresh variants start from a nil buffer.
func BenchmarkCanonical(b *testing.B) {
	data := largestSynthea(b)
	r, err := r4.Unmarshal(data)
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name  string
		f     func([]byte, r4.Resource) ([]byte, error)
		fresh bool
	}{
		{"Marshal", r4.Append, false},
		{"Canonical", r4.AppendCanonical, false},
		{"MarshalFresh", r4.Append, true},
		{"CanonicalFresh", r4.AppendCanonical, true},
	} {
		b.Run(c.name, func(b *testing.B) {
			out, err := c.f(nil, r)
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(len(out)))
			b.ReportAllocs()
			buf := make([]byte, 0, len(out)+8192) // room for reserve's 4 KiB margin
			for b.Loop() {
				if c.fresh {
					buf = nil
				}
				if buf, err = c.f(buf[:0], r); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
