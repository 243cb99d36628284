// Package verify checks ACDS attestation bundles offline: given the bundle
// bytes and a [Policy], it says whether the output is what a genuine enclave
// running a published code hash produced, and why not when it is not.
//
//	v, err := verify.New(verify.Policy{Manifest: m}) // err: a contradictory or empty policy
//	res, err := v.Verify(bundle)                     // err: not a bundle at all
//	if !res.Valid { fmt.Println(res.Reasons()) }
//
// # What is checked
//
//   - TEE evidence (TEEQuoteVerified): the hardware evidence verifies against
//     the vendor roots (AMD for sev-snp, Intel for tdx; embedded defaults)
//     with certificates valid at the claims' issue time, the guest is not
//     debuggable unless the policy allows it, the TCB meets the minimum; the
//     report data is [attestation.BootReportData] of the bundle's boot keys
//     and nonce; and the boot signing key signed the claims (COSE_Sign1
//     ES256). The simulated profile "sev-snp-sim" never passes unless
//     Policy.UnsafeAllowSimulation is set, and the result says so.
//   - Code hash (EnclaveHashMatch): the authenticated measurement is one the
//     policy (or its manifest) lists for the profile, and equals the
//     measurement in the claims.
//   - MPC-TLS (MPCTLSVerified, mpc-tls sources only): every notary statement
//     the claims name is in the bundle (digest match), signed by a trusted
//     notary key, for the claimed host (SNI), and within the claims' issue
//     time window. For a raw submission it is false and does not apply.
//   - Freshness (Policy.MaxAge) and, with [Verifier.VerifyOutput], that the
//     output's digest is the attested one; with [Verifier.VerifyDisclosure],
//     that the disclosed entries are under the signed commitment (see
//     Selective disclosure).
//
// Evidence per profile, each through the one shape of the evidence kinds
// (attestation.EvidenceVerifier): "sev-snp" (package attestation/sevsnp:
// AMD roots embedded in go-sev-guest, validated with go-sev-guest's validate
// package), "sev-snp-sim" (the same code with the simulated root as trust
// anchor), "tdx" (package attestation/tdx, Intel root embedded; TCB
// evaluated when the policy supplies collateral) and "tpm" (package
// attestation/tpm: the AK pinned or certified by the policy, the quote's
// qualifying data is the report data, the measurement a hash over the
// policy's PCRs; no TPM anchor means no tpm bundle verifies).
//
// # Policies
//
// [New] refuses a policy that could never accept a bundle or says two
// things at once (no measurement at all, simulated roots without
// simulation, pinned and carried simulated roots together, a notary key of
// the wrong size, ...) with a *[PolicyError] naming the field. Every switch
// that weakens verification is named Unsafe… (UnsafeAllowSimulation,
// UnsafeTrustBundleSimulatedRoot, UnsafeTrustClaimedNotaryKey,
// UnsafeAllowDebug) and, when it applies to a bundle, is listed in
// Result.Relaxations and so in the "relaxation: …" lines of Reasons (the
// details.reasons of POST /v1/verify).
//
// Valid is true only when every check that applies passed. Result.Failures
// lists each failed check with a typed error (errors.Is with the Err*
// values), Result.Relaxations each weakening the policy applied.
//
// # Bundle versions and version 2 claims
//
// Bundles of format version 2 (attestation.BundleVersion) and version 1
// both verify; any other version is malformed (attestation.ErrUnsupportedVersion,
// an error from Verify), and a verifier built before version 2 refuses
// version 2 bundles as malformed too ("version 2, want 1"). Result.BundleVersion reports the version.
// Version 2 claims may carry an entry commitment (Claims.Entries: the
// RFC 6962 root over the output's salted entries and their count, for the
// fhir_r4, fhir_r4_deidentified and fhir_r4_ips formats) and an attested
// query (Claims.Query: the FHIRPath expression and the digest of the
// normalised record it ran on, for the fhirpath format) and, for a fetched
// output, its coverage (Claims.Coverage, an acds.Coverage: whether
// $everything was used, every FHIR request with its status, pages and
// entries, the compartment types the portal does not search); a version 1
// bundle whose claims carry any of them fails CheckStructure. All appear
// in the details of [Result.Response] (entries, query, coverage), as in
// POST /v1/verify and `acds verify --json`; [Result.CoverageSummary] says
// it in a line. A fetched output whose claims record no coverage (made
// before coverage was signed) still verifies, with NoteNoCoverage among
// its Reasons.
//
// # Selective disclosure
//
// [Verifier.VerifyDisclosure] checks a disclosure (what `acds disclose`
// writes: chosen entries of an attested output with their salts and audit
// paths, and the attestation bundle): the bundle exactly as Verify does,
// then every disclosed entry against the signed entry commitment (check
// CheckDisclosure, class ErrDisclosure, wrapping the class of package
// attestation/disclosure that says why: a changed entry or wrong salt or
// proof, an entry out of order, disclosed twice or beyond the committed
// count, or a different entry count). Result.Disclosed lists the entries
// shown (index and "Type/id"); Valid says nothing about the entries not
// shown, which the disclosure does not reveal and which cannot be
// confirmed by guessing, since each leaf is salted. A bundle without an
// entry commitment (version 1, or another format) fails CheckDisclosure.
//
// # Attested TLS
//
// [Verifier.VerifyCertificate] and [Verifier.VerifyConnection] check a
// server certificate that carries boot evidence in the
// attestation.OIDBootEvidence extension: the evidence must verify as with
// [Verifier.VerifyBoot] and the certificate's key must be the TLS key the
// evidence binds. Set VerifyConnection on a tls.Config (with
// InsecureSkipVerify: the evidence replaces the CA) and a client refuses,
// before sending a byte, any server that is not an attested enclave under
// the policy, including plain TLS servers and TLS-terminating proxies.
//
// # One cache
//
// A Verifier keeps the one cache of verified evidence on these paths
// (bundles, boot evidence, attested TLS; package sevsnp and client/attested
// keep none): keyed by SHA-256 of the boot evidence's deterministic
// encoding (profile, evidence, boot keys and nonce: the bytes an
// attested-TLS certificate carries), so a later connection skips even
// parsing them; bounded (Policy.CacheSize), safe for
// concurrent use, one verification for concurrent first requests. An
// outcome is reused only at times inside the window of the evidence's
// certificates; tdx outcomes checked against collateral are not reused.
// Everything else (claims signature, measurement, manifest, certificate
// time and key) is checked on every call.
//
// # Offline by construction
//
// Nothing here opens a connection: roots, manifest and clock are injected;
// go-sev-guest is called with certificate fetching disabled and a getter
// that refuses every request. No package of this module on verify's
// dependency path (the root acds package, attestation and its evidence
// packages, manifest, mpctls) imports net/http; TestVerifyPathImports walks
// that path and proves it. Packages of other modules on the path do import
// it, for fetching this package never enables: go-sev-guest's verify/trust
// (AMD KDS), go-tdx-guest's pcs and verify/trust (Intel PCS) and
// go-tpm-tools' client (its internal package). Tests prove that
// verification succeeds with every dial failing.
package verify
