package tdx

import (
	"errors"
	"fmt"
)

// Error classes. Every error returned by Verify, Validate and Bind is an
// *Error whose class is one of these, so callers can branch with errors.Is
// and read the failed check with errors.As.
var (
	// ErrMalformed: the quote could not be parsed, is too large, or has a
	// layout this package does not accept.
	ErrMalformed = errors.New("tdx: malformed quote")
	// ErrCertificate: the PCK certificate chain in the quote, or the issuer
	// chain of the collateral, does not lead to a trusted Intel root at the
	// verification time.
	ErrCertificate = errors.New("tdx: untrusted certificate")
	// ErrSignature: a signature inside the quote does not verify.
	ErrSignature = errors.New("tdx: bad signature")
	// ErrCollateral: supplied TCB info or QE identity is malformed, not signed
	// by Intel, expired, or does not describe this platform.
	ErrCollateral = errors.New("tdx: collateral rejected")
	// ErrTCB: the platform's TCB matches no level of the TCB info.
	ErrTCB = errors.New("tdx: tcb level")
	// ErrPolicy: the verified evidence does not satisfy the policy.
	ErrPolicy = errors.New("tdx: policy")
)

// Check names one check of the verification or of the policy.
type Check string

// The checks, in the order Verify and Validate run them.
const (
	CheckSize              Check = "size"                // quote length within MaxQuoteSize
	CheckParse             Check = "parse"               // ABI layout of header, body and signed data
	CheckTEEType           Check = "tee-type"            // header says TDX, quote version 4, ECDSA P-256 key
	CheckPCKChain          Check = "pck-chain"           // PCK leaf → intermediate → trusted Intel root at the clock
	CheckQuoteSignature    Check = "quote-signature"     // attestation key signs header ‖ TD quote body
	CheckQEReportSignature Check = "qe-report-signature" // PCK key signs the QE report
	CheckQEReportData      Check = "qe-report-data"      // QE report binds the attestation key
	CheckTCBInfo           Check = "tcb-info"            // TCB info signed by Intel, fresh, for this FMSPC/PCE/SEAM
	CheckTCBLevel          Check = "tcb-level"           // a TCB level matches the platform
	CheckQEIdentity        Check = "qe-identity"         // QE identity signed by Intel, fresh, matches the QE report
	CheckRevocation        Check = "revocation"          // CRLs signed, fresh, revoke neither PCK certificate nor PCK CA
	CheckReportData        Check = "report-data"         // policy: REPORTDATA equals the expected value
	CheckMRTD              Check = "mrtd"                // policy: MRTD is allowed
	CheckRTMR              Check = "rtmr"                // policy: RTMRs equal the expected values
	CheckMeasurement       Check = "measurement"         // policy: composite measurement is allowed
	CheckDebug             Check = "debug"               // policy: TD is not debuggable unless allowed
	CheckMinTCB            Check = "min-tcb"             // policy: TEE TCB SVN and TCB status acceptable
)

// Error reports which check failed and why.
type Error struct {
	Check Check // the check that failed
	Class error // one of the Err* classes above
	Err   error // the detail
}

func (e *Error) Error() string {
	return fmt.Sprintf("%v: %s check failed: %v", e.Class, e.Check, e.Err)
}

// Unwrap returns the class and the detail, so errors.Is matches either.
func (e *Error) Unwrap() []error { return []error{e.Class, e.Err} }

func fail(c Check, class error, format string, args ...any) *Error {
	return &Error{Check: c, Class: class, Err: fmt.Errorf(format, args...)}
}
