package notary

import (
	"errors"
	"fmt"
)

// Error classes of the notary. Every error a session ends with or that
// Finalize returns wraps one of them (or an mpctls sentinel for a failed
// handshake check), so callers branch with errors.Is.
var (
	// ErrRefused reports traffic the notary does not notarize: not TLS,
	// TLS below 1.2, a non-AEAD suite, resumption, PSK or 0-RTT, an
	// unknown record type, a server name that is not the CONNECT host.
	ErrRefused = errors.New("notary: session refused")
	// ErrCapacity reports that the notary already runs its maximum number
	// of sessions (HTTP 503).
	ErrCapacity = errors.New("notary: too many sessions")
	// ErrLimit reports a session that exceeded its byte or time budget.
	ErrLimit = errors.New("notary: session limit exceeded")
	// ErrTarget reports a CONNECT target that is malformed, does not
	// resolve, is not allowed, or cannot be dialled.
	ErrTarget = errors.New("notary: bad target")
	// ErrUnresolved is the case of ErrTarget whose host name does not
	// resolve (no such host, no address, a failing or silent resolver):
	// answered 502 with ProblemTargetUnresolved, not 403, since nothing
	// was refused. An error wrapping it also wraps ErrTarget.
	ErrUnresolved = fmt.Errorf("%w (unresolved)", ErrTarget)
	// ErrNoSession reports a session id the notary does not know (never
	// existed, already finalized, or expired).
	ErrNoSession = errors.New("notary: no such session")
	// ErrSession reports a session that ended in an error and cannot be
	// notarized; the SessionError carries the cause.
	ErrSession = errors.New("notary: session failed")
	// ErrDisclosure reports a finalize request that is malformed or
	// inconsistent with what the notary recorded.
	ErrDisclosure = errors.New("notary: bad disclosure")
	// ErrExpired reports a session discarded because no finalize request
	// came within Config.FinalizeTimeout.
	ErrExpired = errors.New("notary: session expired before finalization")
	// ErrClosed reports a notary that has been closed.
	ErrClosed = errors.New("notary: closed")
)

// SessionError says which session failed and why.
type SessionError struct {
	ID  string // session id
	Err error  // cause; wraps one of the classes above or an mpctls sentinel
}

// Error describes the failed session.
func (e *SessionError) Error() string { return fmt.Sprintf("notary: session %s: %v", e.ID, e.Err) }

// Unwrap returns ErrSession and the cause.
func (e *SessionError) Unwrap() []error { return []error{ErrSession, e.Err} }
