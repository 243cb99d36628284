package attestation

import (
	"errors"
	"fmt"
)

// Error classes. Every error this package returns for bad input wraps one of
// them, so callers can branch with errors.Is.
var (
	// ErrMalformed marks bytes that are not a well-formed bundle, boot
	// evidence, claims or evidence structure.
	ErrMalformed = errors.New("attestation: malformed input")
	// ErrTooLarge marks input larger than the limit for its kind.
	ErrTooLarge = errors.New("attestation: input too large")
	// ErrSignature marks a signature that does not verify.
	ErrSignature = errors.New("attestation: signature does not verify")
	// ErrUnsupportedProfile marks a profile this build cannot produce or
	// check.
	ErrUnsupportedProfile = errors.New("attestation: profile not supported")
	// ErrNoTEE marks a machine without the TEE interface a profile needs
	// (for example no /dev/sev-guest and no configfs-tsm).
	ErrNoTEE = errors.New("attestation: trusted execution environment not available")
	// ErrSealed marks sealed data that cannot be opened: wrong key, wrong
	// associated data or tampered ciphertext.
	ErrSealed = errors.New("attestation: sealed data cannot be opened")
)

// FieldError says which field of a structure was rejected and why. It wraps
// one of the error classes above.
type FieldError struct {
	Struct string // "bundle", "claims", "evidence", ...
	Field  string
	Reason string
	Err    error // class, e.g. ErrMalformed
}

func (e *FieldError) Error() string {
	return fmt.Sprintf("%s field %s: %s", e.Struct, e.Field, e.Reason)
}

// Unwrap returns the error class.
func (e *FieldError) Unwrap() error { return e.Err }

func malformed(structName, field, reason string) error {
	return &FieldError{Struct: structName, Field: field, Reason: reason, Err: ErrMalformed}
}
