package verify

import (
	"bytes"

	"github.com/acds-project/acds/attestation/manifest"
)

// Allowed returns the code hashes v's policy allows for profile (those of
// the manifest and Policy.Measurements), copies in the policy's order, or
// nil when it allows none. A report of a verification shows them next to
// the measurement the evidence reported.
func (v *Verifier) Allowed(profile string) [][]byte {
	if !v.made() {
		return nil
	}
	var out [][]byte
	for _, m := range v.measurements[profile] {
		out = append(out, bytes.Clone(m))
	}
	return out
}

// Manifest returns the reference-value manifest of v's policy, or nil when
// the policy has none. The caller must not modify it.
func (v *Verifier) Manifest() *manifest.Manifest {
	if !v.made() {
		return nil
	}
	return v.p.Manifest
}
