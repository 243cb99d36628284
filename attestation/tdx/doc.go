// Package tdx verifies Intel TDX evidence: version 4 quotes from a trust
// domain's TDX guest device, checked offline against the Intel SGX Root CA
// embedded in this package.
//
// The family keeps three things apart, in the manner of go-tdx-guest, on
// which it is built:
//
//   - Package attestation/tdx/device obtains raw quotes from the device
//     (configfs-tsm or /dev/tdx_guest): the attestation.Backend of a TD. It
//     is the only code that touches the machine; nothing here does.
//   - Verify does the cryptography: the PCK certificate chain up to a
//     trusted Intel root at an injected time, the quote signature by the
//     attestation key, the QE report signature by the PCK key and the QE
//     report's binding of the attestation key; and, when the caller supplies
//     Intel PCS collateral (TCB info and QE identity), their signatures,
//     freshness and the platform's TCB level. It returns Evidence: the
//     registers (MRTD, RTMR0–3), the 64-byte report data, the TCB status, and
//     lists of what was and was not checked. Revocation is checked when the
//     caller supplies the PCK and root CA CRLs. Nothing is ever fetched.
//   - Validate applies a Policy to Evidence: expected report data, allowed
//     MRTDs, RTMR values or composite measurements, debug (refused unless
//     allowed), a minimum TEE TCB SVN and accepted TCB statuses.
//
// [Verifier] combines them in the shape all evidence kinds share
// (attestation.EvidenceVerifier, also implemented by packages sevsnp and
// tpm): [Verifier.VerifyEvidence] takes the raw quote, the time, the
// expected report data and whether debug is allowed, and returns the
// measurement, report data and the PCK chain's validity window.
//
// # Measurement
//
// The code hash of a TD is the composite
//
//	SHA-384(MRTD ‖ RTMR[0] ‖ RTMR[1] ‖ RTMR[2] ‖ RTMR[3])
//
// (MeasurementOf), 48 bytes printed as hex. Evidence also carries each
// register so that a policy can pin them individually.
//
// # Errors
//
// Every verification error is an *Error naming the failed Check, whose class
// (ErrMalformed, ErrCertificate, ErrSignature, ErrCollateral, ErrTCB,
// ErrPolicy) is reachable with errors.Is:
//
//	ev, err := tdx.Verify(quote, tdx.Options{})
//	var e *tdx.Error
//	if errors.As(err, &e) && e.Check == tdx.CheckQuoteSignature { … }
//
// Quotes are limited to MaxQuoteSize bytes and each collateral part to
// MaxCollateralSize.
package tdx
