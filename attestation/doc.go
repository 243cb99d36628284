// Package attestation is the evidence side of ACDS: it turns a trusted
// execution environment (TEE) into signed, offline-checkable statements about
// the outputs the service produces.
//
// # Model
//
// When the service starts, an [Enclave] makes a fresh ECDSA P-256 signing
// key in memory (and, optionally, a separate P-256 TLS key) and obtains ONE
// hardware quote whose 64-byte report data binds both public keys and a random
// boot nonce (see [BootReportData] for the exact bytes). Every output is then
// signed with the boot key: a COSE_Sign1 (ES256) over deterministic CBOR
// [Claims]. The [Bundle] handed to callers is a deterministic CBOR map that
// carries everything an offline verifier needs: the profile, the evidence
// (SNP report and VCEK certificate, TDX quote, ...), the boot public keys, the
// boot nonce, the signed claims and, for MPC-TLS fetches, the notary
// statements.
//
// Verification lives in package verify; this package only defines the formats,
// the binding and the signing side, and parses untrusted bytes strictly:
// [ParseBundle] enforces size limits, rejects unknown fields, duplicate keys,
// indefinite lengths and any encoding that is not the deterministic one.
//
// # Profiles
//
//   - "sev-snp": AMD SEV-SNP hardware (package attestation/sevsnp).
//   - "sev-snp-sim": a simulated SEV-SNP enclave with a per-installation
//     ARK→ASK→VCEK chain (package attestation/sim). It exercises the same
//     verification code as hardware but proves nothing about hardware, so
//     verifiers reject it unless their policy explicitly allows simulation.
//   - "tdx", "tpm": Intel TDX quotes and TPM quotes (packages attestation/tdx
//     and attestation/tpm).
//
// # Encodings
//
// Bundles, boot evidence and claims use CBOR maps with small integer keys,
// encoded with the Core Deterministic Encoding of RFC 8949 §4.2. Decoders
// re-encode what they parsed and reject the input unless it is byte-for-byte
// identical, so every accepted bundle has exactly one encoding.
package attestation
