package mpc

import "errors"

// Error classes. Every error a Session returns wraps one of them (with
// errors.Is); a Session that has failed returns its first error from every
// later call.
var (
	// ErrCheat reports a check that failed because the peer deviated from
	// the protocol: a garbling, an OT, an ECDH part or a decoding that is
	// not what the protocol produces. The session is over; nothing it
	// computed may be used.
	ErrCheat = errors.New("mpc: the peer deviated from the protocol")
	// ErrProtocol reports a message that is malformed, of the wrong size,
	// or not the one due at this step (the parties did not make the same
	// calls, or a message was replayed, reordered or dropped).
	ErrProtocol = errors.New("mpc: protocol violation")
	// ErrTruncated reports a connection that ended mid-session.
	ErrTruncated = errors.New("mpc: connection ended")
	// ErrTimeout reports a peer silent for longer than Config.IdleTimeout.
	ErrTimeout = errors.New("mpc: peer timed out")
	// ErrPeerAborted reports a peer that ended the session with an error.
	ErrPeerAborted = errors.New("mpc: the peer aborted the session")
	// ErrLimit reports a configured bound exceeded: AND gates, input bits,
	// buffered bytes, message sizes.
	ErrLimit = errors.New("mpc: limit exceeded")
	// ErrUsage reports a call the engine cannot make: a Value of another
	// session, a length that does not fit the circuit, a decoding of a
	// value that depends on an input not yet assigned, a role that is not
	// the caller's. Both parties detect it identically, without I/O.
	ErrUsage = errors.New("mpc: invalid call")
	// ErrClosed reports a session that was closed.
	ErrClosed = errors.New("mpc: session closed")
)
