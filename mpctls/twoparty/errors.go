package twoparty

import (
	"errors"
	"fmt"
)

// Error classes of the package. Every error it returns wraps one of them
// or an mpctls sentinel (mpctls.ErrCertificate for a server certificate
// that does not verify, mpctls.ErrDecrypt for a record that does not
// authenticate, …).
var (
	// ErrUnsupported reports a server that MPC mode cannot serve: it
	// chose a group other than secp256r1, a suite MPC mode does not
	// compute, or TLS 1.2 without the extended master secret. Nothing but
	// the ClientHello was sent; the session can be retried in proxy mode.
	ErrUnsupported = errors.New("twoparty: the server cannot be served in mpc mode")
	// ErrProtocol reports a peer (the other party of the two-party
	// computation) that deviated from the protocol or answered something
	// malformed.
	ErrProtocol = errors.New("twoparty: protocol violation")
	// ErrRefused reports a request the notary refused; a *RefusedError
	// gives its reason.
	ErrRefused = errors.New("twoparty: the notary refused")
	// ErrEpoch reports a server record stream whose key epochs do not end
	// where the reveals said they would (the record taken for the
	// server's KeyUpdate was not one), so the rest of the session cannot
	// be read without breaking the reveal rule.
	ErrEpoch = errors.New("twoparty: server key epoch does not end at its reveal point")
	// ErrTimeout reports a wait that ran out: the server did not answer a
	// KeyUpdate, or records did not arrive in time.
	ErrTimeout = errors.New("twoparty: timed out")
)

// RefusedError is the notary's refusal of a request, with its reason.
type RefusedError struct{ Reason string }

// Error gives the reason.
func (e *RefusedError) Error() string { return fmt.Sprintf("%v: %s", ErrRefused, e.Reason) }

// Unwrap returns ErrRefused.
func (e *RefusedError) Unwrap() error { return ErrRefused }
