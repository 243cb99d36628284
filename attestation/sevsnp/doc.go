// Package sevsnp produces and checks AMD SEV-SNP evidence for ACDS.
//
// Evidence is a deterministic CBOR map carrying the raw 1184-byte
// ATTESTATION_REPORT and the DER VCEK certificate that signed it (and, for the
// simulated profile only, the ASK and ARK of the simulated chain). A
// [Verifier] checks it offline with github.com/google/go-sev-guest: the
// certificate chain and report signature with verify.SnpAttestation (never
// fetching certificates), then the report's fields with validate.SnpAttestation
// (report data, guest policy, TCB consistency and minimum). Measurements are
// checked against an allow-list. Nothing here touches the network.
//
// [Hardware] is the quote provider inside a real SEV-SNP guest (configfs-tsm or
// /dev/sev-guest); [Open] starts an attestation.Enclave on it.
//
// Layers are kept apart: [ParseEvidence] checks bytes only; the chain and
// signature checks are cryptographic; [Check] holds the policy.
package sevsnp
