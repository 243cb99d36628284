package verify_test

import (
	"strings"
	"testing"

	"github.com/acds-project/acds/attestation"
	"github.com/acds-project/acds/verify"
)

func TestParseMeasurements(t *testing.T) {
	sha384, sha256 := strings.Repeat("ab", 48), strings.Repeat("cd", 32)
	ms, err := verify.ParseMeasurements(sha384, sha256)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{attestation.ProfileSEVSNP, attestation.ProfileSEVSNPSim, attestation.ProfileTDX} {
		if len(ms[p]) != 1 || len(ms[p][0]) != 48 {
			t.Errorf("%s: %x", p, ms[p])
		}
	}
	if len(ms[attestation.ProfileTPM]) != 1 || len(ms[attestation.ProfileTPM][0]) != 32 {
		t.Errorf("tpm: %x", ms[attestation.ProfileTPM])
	}
	for _, bad := range []string{"", "xy", strings.Repeat("ab", 47), strings.Repeat("ab", 49)} {
		if _, err := verify.ParseMeasurements(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
