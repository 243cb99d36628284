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
	// ErrSealedByOtherKey marks sealed data that an enclave with another
	// sealing key made: another boot of an enclave whose hardware offers
	// no persistent sealing key (TDX), another replica, or another
	// installation. It wraps ErrSealed.
	ErrSealedByOtherKey = fmt.Errorf("%w: sealed under another enclave sealing key", ErrSealed)
	// ErrNoSealingKey is what a [Backend]'s SealingKey returns when the
	// hardware offers no sealing key (TDX). [New] then seals with a key
	// made for this boot and kept in memory only: sealed data cannot be
	// opened after a restart ([Enclave.PersistentSealing] is false).
	ErrNoSealingKey = errors.New("attestation: the TEE offers no sealing key")
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
