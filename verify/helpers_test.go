package verify_test

import (
	"math/big"
	"os"
	"testing"

	"github.com/acds-project/acds/attestation/sevsnp"
	"github.com/acds-project/acds/verify"
)

func bigOne() *big.Int { return big.NewInt(1) }

func milanEvidence(t testing.TB) *sevsnp.Evidence {
	t.Helper()
	report, err := os.ReadFile("../attestation/sevsnp/testdata/milan/report.bin")
	if err != nil {
		t.Fatal(err)
	}
	vcek, err := os.ReadFile("../attestation/sevsnp/testdata/milan/vcek.der")
	if err != nil {
		t.Fatal(err)
	}
	return &sevsnp.Evidence{Report: report, VCEK: vcek}
}

// mustNew is verify.New for a policy the test knows to be well-formed.
func mustNew(t testing.TB, p verify.Policy) *verify.Verifier {
	t.Helper()
	v, err := verify.New(p)
	if err != nil {
		t.Fatal(err)
	}
	return v
}
