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
// # What the package holds
//
//   - Formats and their strict parsers: [Bundle], [BootEvidence], [Claims]
//     ([ParseBundle], [ParseBootEvidence], [ParseClaims]) with size limits,
//     no unknown fields, no duplicate keys, no indefinite lengths and no
//     encoding other than the deterministic one; the error classes and
//     [FieldError]; [Profiles] and [MeasurementSize].
//   - The binding: [BootReportData], the report data that ties the
//     hardware quote to the boot keys and nonce.
//   - The signing side: [Enclave] (the boot keys, the one quote, [Claims]
//     signed per output with [ClaimsSigner], sealing) on a [Backend] that the
//     evidence packages implement.
//   - The claims check: [VerifyClaims] verifies a COSE_Sign1 statement
//     under a boot key and parses its claims. It is the one verification
//     step that needs no TEE knowledge; everything else (evidence, roots,
//     measurements, policy) is package verify's.
//   - The one shape of the evidence kinds: [EvidenceVerifier],
//     [EvidenceOptions] and [VerifiedEvidence], which packages sevsnp, tdx
//     and tpm implement and package verify uses per profile.
//   - Attested TLS certificates: [Enclave.TLSCertificate] (self-signed,
//     carrying the boot evidence in the [OIDBootEvidence] extension) and
//     [BootEvidenceFromCertificate]; and an operator CA, [Issuer]
//     ([ParseIssuer]), that issues such certificates from the enclave's
//     certificate request ([Enclave.TLSCertificateRequest],
//     [Enclave.IssuedTLSCertificate]) without ever replacing the evidence.
//     The CA is here, not in a TLS package, because it checks what only
//     this package defines: that a request is for the key the boot
//     evidence binds and carries that evidence.
//
// # Profiles
//
//   - "sev-snp": AMD SEV-SNP hardware (evidence: package
//     attestation/sevsnp; the backend: attestation/sevsnp/device).
//   - "sev-snp-sim": a simulated SEV-SNP enclave with a per-installation
//     ARK→ASK→VCEK chain (package attestation/sim). It exercises the same
//     verification code as hardware but proves nothing about hardware, so
//     verifiers reject it unless their policy explicitly allows simulation.
//   - "tdx", "tpm": Intel TDX quotes and TPM quotes (packages attestation/tdx
//     and attestation/tpm verify them; attestation/tdx/device and
//     attestation/tpm/device are the backends).
//
// The backends of the three hardware kinds share one shape,
// device.Open(ctx, device.Options) (*device.Backend, error): zero Options
// use the machine's own device, and the fields inject another (a test
// device, a TPM simulator). Verification packages never touch the machine.
//
// # Encodings
//
// Bundles, boot evidence and claims use CBOR maps with small integer keys,
// encoded with the Core Deterministic Encoding of RFC 8949 §4.2. Decoders
// re-encode what they parsed and reject the input unless it is byte-for-byte
// identical, so every accepted bundle has exactly one encoding. No CBOR tags,
// no indefinite lengths, no unknown keys.
//
//	Bundle (≤ MaxBundleSize)            Boot evidence: keys 1-6 only
//	  1 version           uint (1)
//	  2 profile           text ("sev-snp", "sev-snp-sim", "tdx", "tpm")
//	  3 evidence          bytes (profile-specific, see below)
//	  4 signingKey        bytes (DER SubjectPublicKeyInfo, ECDSA P-256)
//	  5 tlsKey            bytes (DER SPKI, P-256; absent without TLS)
//	  6 bootNonce         bytes (32)
//	  7 statement         bytes (COSE_Sign1 ES256 over the claims)
//	  8 notaryStatements  [bytes] (absent for raw sources)
//
//	Claims (COSE payload; protected header {1: -7, 3: ClaimsContentType},
//	no unprotected header, tagged COSE_Sign1)
//	  1 requestId     text
//	  2 outputFormat  text
//	  3 outputDigest  text "sha256:<64 lowercase hex>"
//	  4 source        {1 kind: "raw"|"mpc-tls",
//	                   2 inputDigest: text (raw),
//	                   3 sessions: [{1 statementDigest, 2 requestLine, 3 host}] (mpc-tls)}
//	  5 issuedAt      int (Unix seconds)
//	  6 measurement   bytes
//	  7 notaryKey     bytes (32, Ed25519; optional)
//
//	SEV-SNP evidence (profiles sev-snp and sev-snp-sim; package sevsnp)
//	  1 report  bytes (1184, the raw ATTESTATION_REPORT)
//	  2 vcek    bytes (DER)
//	  3 ask     bytes (DER; sev-snp-sim only)
//	  4 ark     bytes (DER; sev-snp-sim only)
//
// TDX evidence is the raw version 4 quote; TPM evidence is the deterministic
// protobuf of a go-tpm-tools Attestation whose quote's qualifying data is
// the report data. A session's statementDigest is [Digest] of the notary
// statement bytes at the same index of notaryStatements.
package attestation
