package mpctls

import (
	"bytes"
	"crypto/ed25519"
	"flag"
	"os"
	"testing"
)

var update = flag.Bool("update", false, "rewrite golden files in testdata")

// TestStatementGolden freezes the statement wire format: statements are
// stored inside attestation bundles and must keep verifying across
// releases. Run with -update only for a deliberate format change (and bump
// StatementVersion).
func TestStatementGolden(t *testing.T) {
	key := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{1}, 32))
	// Without the optional certificate subject (key 16) a statement
	// encodes exactly as before the field existed.
	st := testStatement()
	st.CertSubject = ""
	b, err := st.Sign(key)
	if err != nil {
		t.Fatal(err)
	}
	const golden = "testdata/statement.golden.cbor"
	if *update {
		if err := os.WriteFile(golden, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b, want) {
		t.Fatalf("statement encoding changed:\n got %x\nwant %x", b, want)
	}
	// And the stored bytes still verify.
	if _, err := VerifyStatement(want, []ed25519.PublicKey{key.Public().(ed25519.PublicKey)}, Expect{}); err != nil {
		t.Fatal(err)
	}
}
