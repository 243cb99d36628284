// Package tpm verifies TPM 2.0 evidence: a quote over a nonce by an
// attestation key (AK), the PCR values it covers and the TCG event log
// that explains them, built on go-tpm-tools' server package.
//
//   - Package attestation/tpm/device (machine side) is the
//     attestation.Backend of a TPM: it quotes all PCR banks over the
//     report data with the AK and returns the protobuf-encoded
//     go-tpm-tools Attestation, event log and AK certificate included,
//     and seals its key to the PCRs. It is the only code that talks to a
//     TPM; nothing here does.
//   - Verify (anyone, offline) checks that the AK is trusted — pinned in
//     Options.TrustedAKs, or certified by a certificate chaining to
//     Options.Roots at the injected time — and is a restricted signing key;
//     that it signed the SHA-256-bank quote; that the quote's qualifying data
//     is the nonce; that the PCR values carried hash to the quoted digest; and
//     that go-tpm-tools' server.VerifyAttestation accepts the attestation,
//     which replays the event log against those PCRs.
//
// The zero Options trusts no AK and fails closed (ErrNoTrust).
//
// [Verifier] is Verify in the shape all evidence kinds share
// (attestation.EvidenceVerifier, also implemented by packages sevsnp and
// tdx): [Verifier.VerifyEvidence] takes the attestation, the time and the
// report data (the quote's nonce), and returns the measurement and the AK
// chain's validity window.
//
// # Measurement
//
// The code hash of a TPM machine is a digest over a PCR set of the SHA-256
// bank (Options.PCRs, by default DefaultPCRs: 0 to 9):
//
//	SHA-256(PCR[i₁] ‖ PCR[i₂] ‖ … ‖ PCR[iₙ]),  i₁ < i₂ < … < iₙ
//
// over the raw 32-byte values (MeasurementOf). It equals the TPM's own
// pcrDigest for a quote of exactly that selection, so it can be computed
// from a known-good machine with standard tools. Evidence also carries every
// quoted PCR value for finer policies.
//
// # Errors
//
// Every failure is an *Error naming the Check that failed, with a class
// (ErrMalformed, ErrNoTrust, ErrUntrustedAK, ErrSignature, ErrNonce, ErrPCR,
// ErrEventLog) reachable with errors.Is. Attestations are limited
// to MaxAttestationSize bytes.
//
// # Tests
//
// Plain `go test` verifies a committed attestation made on the TPM reference
// simulator. With `-tags tpmsim` (cgo and libssl-dev) the tests also drive
// the simulator: attest, verify, and reject a wrong nonce, a tampered quote,
// tampered PCRs, a diverging event log and untrusted AKs.
package tpm
