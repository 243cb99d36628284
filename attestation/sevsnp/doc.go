// Package sevsnp parses and checks AMD SEV-SNP evidence for ACDS.
//
// Evidence is a deterministic CBOR map carrying the raw 1184-byte
// ATTESTATION_REPORT and the DER VCEK certificate that signed it (and, for the
// simulated profile only, the ASK and ARK of the simulated chain).
//
// The family is split the way go-sev-guest splits itself (abi, client,
// verify, validate), one file per layer here and the device in a package
// of its own:
//
//   - Bytes (evidence.go): [Evidence], [ParseEvidence] and
//     [Evidence.Marshal] check sizes and encoding only, no cryptography.
//   - Device (package attestation/sevsnp/device): the attestation.Backend
//     of a real SEV-SNP guest, which obtains extended reports
//     (configfs-tsm or /dev/sev-guest, through go-sev-guest's client) and
//     derives sealing keys. It is the only code that touches the machine;
//     nothing in this package does.
//   - Cryptographic checks (crypto.go): the VCEK chains to [Roots] (AMD's,
//     embedded in go-sev-guest, or for simulation only the chain the
//     evidence carries) at a given time and signed the report, with
//     go-sev-guest's verify package, never fetching certificates
//     ([ErrChain], [ErrReportSignature]).
//   - Policy (policy.go): [Check] says what an authenticated report must
//     say (report data, measurements, debug, minimum TCB), checked with
//     go-sev-guest's validate package ([ErrReportData], [ErrMeasurement],
//     [ErrPolicy]).
//
// [Verifier] runs them in that order (verify.go): [Verifier.Verify] with a
// Check, or [Verifier.VerifyEvidence], the attestation.EvidenceVerifier
// shape shared with packages tdx and tpm. A Verifier keeps no cache:
// package verify caches verified evidence once for every kind. Nothing here
// touches the network.
package sevsnp
