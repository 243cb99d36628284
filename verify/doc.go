// Package verify checks ACDS attestation bundles offline: given the bundle
// bytes and a [Policy], it says whether the output is what a genuine enclave
// running a published code hash produced, and why not when it is not.
//
//	v := verify.New(verify.Policy{Manifest: m})
//	res, err := v.Verify(bundle)          // err: not a bundle at all
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
//     Policy.AllowSimulation is set, and the result says so.
//   - Code hash (EnclaveHashMatch): the authenticated measurement is one the
//     policy (or its manifest) lists for the profile, and equals the
//     measurement in the claims.
//   - MPC-TLS (MPCTLSVerified, mpc-tls sources only): every notary statement
//     the claims name is in the bundle (digest match), signed by a trusted
//     notary key, for the claimed host (SNI), and within the claims' issue
//     time window. For a raw submission it is false and does not apply.
//   - Freshness (Policy.MaxAge) and, with [Verifier.VerifyOutput], that the
//     output's digest is the attested one.
//
// Valid is true only when every check that applies passed. Result.Failures
// lists each failed check with a typed error (errors.Is with the Err*
// values), Result.Relaxations each weakening the policy applied.
//
// # Offline by construction
//
// Nothing here opens a connection: roots, manifest and clock are injected;
// go-sev-guest is called with certificate fetching disabled and a getter
// that refuses every request; no package of ours on this path imports
// net/http (go-sev-guest's trust package does, for the fetching this package
// never enables). Tests prove that verification succeeds with every dial
// failing.
package verify
