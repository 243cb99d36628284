package mpctls

import (
	"errors"
	"fmt"
)

// Sentinel error classes. Every error returned by this package wraps one of
// them, so callers can branch with errors.Is without matching strings; the
// structured errors below carry the detail and are reachable with errors.As.
var (
	// ErrNotTLS reports that a stream does not start with a TLS handshake
	// record (plain HTTP, SSH, garbage, …).
	ErrNotTLS = errors.New("mpctls: not a tls stream")
	// ErrUnknownRecordType reports a record whose content type is not one of
	// change_cipher_spec, alert, handshake or application_data.
	ErrUnknownRecordType = errors.New("mpctls: unknown tls record type")
	// ErrRecordTooLarge reports a record whose fragment exceeds MaxFragment.
	ErrRecordTooLarge = errors.New("mpctls: tls record too large")
	// ErrMalformedRecord reports a record that is not well formed: bad
	// version, empty fragment, a Raw that disagrees with its header.
	ErrMalformedRecord = errors.New("mpctls: malformed tls record")
	// ErrTruncated reports a stream or message that ends in the middle of a
	// record or structure.
	ErrTruncated = errors.New("mpctls: truncated")
	// ErrSequence reports records out of order: a gap, a duplicate, a
	// reordering, or a sequence number that does not match its position.
	ErrSequence = errors.New("mpctls: record sequence violation")
	// ErrProof reports an inclusion proof that does not lead to the
	// expected Merkle root or does not fit the tree.
	ErrProof = errors.New("mpctls: invalid inclusion proof")
	// ErrStatement reports a statement that cannot be decoded or is not
	// well formed.
	ErrStatement = errors.New("mpctls: invalid statement")
	// ErrSignature reports a statement whose signature does not verify
	// under any of the trusted notary keys, or that names an untrusted key.
	ErrSignature = errors.New("mpctls: statement signature not trusted")
	// ErrExpectation reports a well-formed, trusted statement that does not
	// match what the caller expected (SNI, time window).
	ErrExpectation = errors.New("mpctls: statement does not match expectation")
	// ErrUnsupported reports a protocol version, cipher suite, signature
	// algorithm or feature that this package refuses (TLS < 1.2, non-AEAD
	// suites, resumption, PSK, 0-RTT, …).
	ErrUnsupported = errors.New("mpctls: unsupported tls feature")
	// ErrHandshake reports a handshake that does not parse or whose
	// messages are inconsistent.
	ErrHandshake = errors.New("mpctls: invalid tls handshake")
	// ErrCertificate reports a certificate chain that does not verify for
	// the expected name at the session time.
	ErrCertificate = errors.New("mpctls: server certificate not verified")
	// ErrHandshakeSignature reports a CertificateVerify or
	// ServerKeyExchange signature that does not verify.
	ErrHandshakeSignature = errors.New("mpctls: server handshake signature invalid")
	// ErrFinished reports a server Finished message whose verify_data is
	// wrong.
	ErrFinished = errors.New("mpctls: server finished mismatch")
	// ErrDecrypt reports a record that does not authenticate under the
	// keys it should have been protected with (flipped bit, wrong secret,
	// wrong sequence number).
	ErrDecrypt = errors.New("mpctls: record authentication failed")
	// ErrPresentation reports a presentation that is malformed or does not
	// belong to the statement it is checked against.
	ErrPresentation = errors.New("mpctls: invalid presentation")
	// ErrTooLarge reports an encoded object above its size limit.
	ErrTooLarge = errors.New("mpctls: input too large")
)

// RecordError gives the detail of a record-level failure: which direction,
// which record, and why. It wraps one of the sentinel classes.
type RecordError struct {
	Dir    Direction // direction of the offending record
	Seq    uint64    // index of the record in its direction
	Reason string    // short human-readable reason
	Err    error     // sentinel class (ErrMalformedRecord, ErrDecrypt, …)
}

// Error describes the failure with its direction and record number.
func (e *RecordError) Error() string {
	return fmt.Sprintf("%v: %s record %d: %s", e.Err, e.Dir, e.Seq, e.Reason)
}

// Unwrap returns the sentinel class.
func (e *RecordError) Unwrap() error { return e.Err }

// HandshakeError gives the detail of a handshake check failure. It wraps a
// sentinel class and, where there is one, the underlying cause (for example
// an x509 error).
type HandshakeError struct {
	Step  string // which check failed, e.g. "certificate", "finished"
	Err   error  // sentinel class
	Cause error  // underlying error, may be nil
}

// Error describes the failed step and its cause.
func (e *HandshakeError) Error() string {
	if e.Cause != nil {
		return fmt.Sprintf("%v: %s: %v", e.Err, e.Step, e.Cause)
	}
	return fmt.Sprintf("%v: %s", e.Err, e.Step)
}

// Unwrap returns the sentinel class and the cause.
func (e *HandshakeError) Unwrap() []error {
	if e.Cause != nil {
		return []error{e.Err, e.Cause}
	}
	return []error{e.Err}
}

// ExpectationError says which expectation a statement failed.
type ExpectationError struct {
	Field string // "sni", "not-before", "not-after"
	Want  string
	Got   string
}

// Error names the unmet expectation with the wanted and actual values.
func (e *ExpectationError) Error() string {
	return fmt.Sprintf("%v: %s: want %s, got %s", ErrExpectation, e.Field, e.Want, e.Got)
}

// Unwrap returns ErrExpectation.
func (e *ExpectationError) Unwrap() error { return ErrExpectation }

func hsErr(sentinel error, step string, cause error) error {
	return &HandshakeError{Step: step, Err: sentinel, Cause: cause}
}

// AlertError is an alert a peer sent where a handshake message was
// expected (for instance handshake_failure in answer to a ClientHello
// whose suites or groups the server does not accept).
type AlertError struct {
	Dir         Direction // who sent it
	Level       uint8     // 1 warning, 2 fatal
	Description uint8     // RFC 8446 §6 AlertDescription
}

// Error names the sender and the alert.
func (e *AlertError) Error() string {
	return fmt.Sprintf("%s sent alert %d (level %d)", e.Dir, e.Description, e.Level)
}
