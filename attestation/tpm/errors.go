package tpm

import (
	"errors"
	"fmt"
)

// Error classes. Every error from Verify is an *Error whose
// class is one of these (errors.Is), naming the failed Check (errors.As).
var (
	// ErrMalformed: the attestation is too large, not a go-tpm-tools
	// Attestation, or lacks a usable SHA-256 quote.
	ErrMalformed = errors.New("tpm: malformed attestation")
	// ErrNoTrust: Options supply no trust anchor (neither pinned AK keys nor
	// AK certificate roots), or both.
	ErrNoTrust = errors.New("tpm: no trust anchor configured")
	// ErrUntrustedAK: the attestation key is neither pinned nor certified by
	// a trusted root, or is not a restricted signing key.
	ErrUntrustedAK = errors.New("tpm: untrusted attestation key")
	// ErrSignature: the quote signature does not verify under the AK.
	ErrSignature = errors.New("tpm: bad quote signature")
	// ErrNonce: the quote was made over a different nonce (qualifying data).
	ErrNonce = errors.New("tpm: nonce mismatch")
	// ErrPCR: the PCR values carried with the quote do not match the
	// quoted PCR digest or selection, or lack a PCR the measurement needs.
	ErrPCR = errors.New("tpm: pcr mismatch")
	// ErrEventLog: the TCG event log does not replay to the quoted PCRs.
	ErrEventLog = errors.New("tpm: event log rejected")
)

// Check names one step of Verify.
type Check string

// The checks, in the order Verify runs them.
const (
	CheckSize           Check = "size"            // attestation within MaxAttestationSize
	CheckParse          Check = "parse"           // protobuf, AK public area, TPMS_ATTEST
	CheckTrust          Check = "trust"           // options name exactly one trust mechanism
	CheckAK             Check = "ak"              // AK pinned or certified; restricted signing key
	CheckQuoteSignature Check = "quote-signature" // AK signs the TPMS_ATTEST
	CheckNonce          Check = "nonce"           // TPMS_ATTEST.extraData equals the nonce
	CheckPCRDigest      Check = "pcr-digest"      // carried PCR values hash to the quoted digest
	CheckPCRSelection   Check = "pcr-selection"   // every measured PCR was quoted
	CheckEventLog       Check = "event-log"       // go-tpm-tools server replays the event log
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
