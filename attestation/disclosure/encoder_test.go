package disclosure_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/acds-project/acds"
	"github.com/acds-project/acds/attestation/disclosure"
	"github.com/acds-project/acds/fhir"
	"github.com/acds-project/acds/internal/testrig/corpus"
)

// The server commits to the entries package fhir's encoder reports
// (fhir.Output.Entries); `acds disclose` and the verifier find them with
// Entries. For the commitment to verify, both must be the same bytes: this
// checks it for every Bundle format on every Synthea and Inferno record of
// the repository's corpus and on the record of this package's testdata.
func TestEncoderEntriesAreEntries(t *testing.T) {
	files := append(corpus.JSON(t, corpus.Synthea, corpus.Inferno), "testdata/record.json")
	formats := []string{acds.OutputFHIRR4, acds.OutputFHIRR4Deidentified, acds.OutputFHIRR4IPS}
	checked := 0
	for _, f := range files {
		in, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, format := range formats {
			out, err := fhir.Process(in, fhir.Options{Format: format, Now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC),
				DeidentKey: bytes.Repeat([]byte{3}, 32)})
			if err != nil {
				continue // not every file is a record every format accepts
			}
			name := fmt.Sprintf("%s as %s", filepath.Base(f), format)
			want, err := disclosure.Entries(out.JSON)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if len(out.Entries) != len(want) {
				t.Fatalf("%s: the encoder reports %d entries, the output has %d", name, len(out.Entries), len(want))
			}
			for i := range want {
				if !bytes.Equal(out.Entries[i], want[i]) {
					t.Fatalf("%s: entry %d: the encoder reports %.60q, the output has %.60q", name, i, out.Entries[i], want[i])
				}
			}
			c1, err1 := disclosure.CommitEntries(testKey, out.Entries)
			c2, err2 := disclosure.Commit(testKey, out.JSON)
			if err1 != nil || err2 != nil || c1 != c2 {
				t.Fatalf("%s: CommitEntries and Commit differ: %v %v", name, err1, err2)
			}
			checked++
		}
	}
	if checked == 0 {
		t.Fatal("no output checked")
	}
	t.Logf("%d outputs checked", checked)
}
