package disclosure_test

import (
	"bytes"
	"crypto/sha256"
	"os"
	"testing"
	"time"

	"github.com/acds-project/acds"
	"github.com/acds-project/acds/attestation/disclosure"
	"github.com/acds-project/acds/fhir"
)

// benchOutput is a normalised record of about 1 MB: the shared Synthea
// record Vida Schultz (2.2 MB of input, about 1 MB of output) processed by package fhir, or,
// when the shared test data is absent, a synthetic output of 4000 entries.
func benchOutput(b *testing.B) []byte {
	b.Helper()
	in, err := os.ReadFile("/work/shared/testdata/synthea/Vida_Schultz_440ffe72-a553-4ade-9f76-55a6bbd208a9.json")
	if err == nil {
		out, err := fhir.Process(in, fhir.Options{Format: acds.OutputFHIRR4, Now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)})
		if err != nil {
			b.Fatal(err)
		}
		return out.JSON
	}
	return output(4000)
}

// BenchmarkCommit measures, in one run and on the same ~1 MB output:
// SHA-256 of the output bytes (the digest the claims already carry, the
// baseline); Commit, which splits the output into its entries and builds
// the commitment (one salt and one leaf per entry, the tree); and
// CommitEntries, the commitment alone from entries already split.
// "ratio" is commit/sha256 (goal ≤ 1.5), "ratio-presplit" is
// CommitEntries/sha256.
func BenchmarkCommit(b *testing.B) {
	out := benchOutput(b)
	key := bytes.Repeat([]byte{1}, 32)
	entries, err := disclosure.Entries(out)
	if err != nil {
		b.Fatal(err)
	}
	var shaNs, commitNs, presplitNs time.Duration
	b.SetBytes(int64(len(out)))
	b.ResetTimer()
	for range b.N {
		t0 := time.Now()
		sum := sha256.Sum256(out)
		t1 := time.Now()
		c, err := disclosure.Commit(key, out)
		t2 := time.Now()
		c2, err2 := disclosure.CommitEntries(key, entries)
		t3 := time.Now()
		if err != nil || err2 != nil || c.Root == sum || c2 != c {
			b.Fatal(err, err2)
		}
		shaNs += t1.Sub(t0)
		commitNs += t2.Sub(t1)
		presplitNs += t3.Sub(t2)
	}
	b.ReportMetric(float64(len(entries)), "entries")
	b.ReportMetric(float64(shaNs.Nanoseconds())/float64(b.N), "sha256-ns")
	b.ReportMetric(float64(commitNs.Nanoseconds())/float64(b.N), "commit-ns")
	b.ReportMetric(float64(commitNs)/float64(shaNs), "ratio")
	b.ReportMetric(float64(presplitNs)/float64(shaNs), "ratio-presplit")
}
