package attestation

// Profile names of the kinds of evidence a bundle can carry.
const (
	// ProfileSEVSNP is AMD SEV-SNP hardware evidence: an attestation report
	// signed by the chip's VCEK, verified against AMD's roots.
	ProfileSEVSNP = "sev-snp"
	// ProfileSEVSNPSim is the simulated SEV-SNP enclave: the same report and
	// certificate formats, signed by a per-installation simulated chain. It
	// proves the code path, not hardware.
	ProfileSEVSNPSim = "sev-snp-sim"
	// ProfileTDX is an Intel TDX quote.
	ProfileTDX = "tdx"
	// ProfileTPM is a TPM quote with its event log.
	ProfileTPM = "tpm"
)

// Profiles lists every profile name this module knows, in a stable order.
func Profiles() []string {
	return []string{ProfileSEVSNP, ProfileSEVSNPSim, ProfileTDX, ProfileTPM}
}

// KnownProfile reports whether p is one of [Profiles].
func KnownProfile(p string) bool {
	switch p {
	case ProfileSEVSNP, ProfileSEVSNPSim, ProfileTDX, ProfileTPM:
		return true
	}
	return false
}

// MeasurementSize is the size in bytes of a profile's measurement (its code
// hash): 48 (SHA-384) for sev-snp, sev-snp-sim and tdx, 32 (SHA-256 over
// the selected PCRs) for tpm, 0 for an unknown profile.
func MeasurementSize(p string) int {
	switch p {
	case ProfileSEVSNP, ProfileSEVSNPSim, ProfileTDX:
		return 48
	case ProfileTPM:
		return 32
	}
	return 0
}
