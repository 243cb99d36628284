package twoparty

import (
	"context"

	"github.com/acds-project/acds/mpctls/mpc/circuit"
)

// party names a side of the two-party computation.
type party int

const (
	prover party = iota // P, the enclave's TLS client
	notary              // N, the recording notary
)

func (p party) String() string {
	if p == prover {
		return "prover"
	}
	return "notary"
}

// audience says who learns a value the engine opens.
type audience int

const (
	toProver audience = iota
	toNotary
	toBoth
)

// value is a secret vector of bits held inside the engine (labels on
// both sides, never the bits), as package mpc's Value.
type value any

// engine is the part of a two-party session (package mpc's Session) the
// TLS layer uses. Both sides make the same calls in the same order with
// the same public arguments; only the private bytes differ. Send and Recv
// carry the TLS layer's own messages on the session's control stream, in
// order with the calls.
type engine interface {
	// KeyShare returns the client key share aG+bG (65 bytes) on both sides.
	KeyShare(ctx context.Context) ([]byte, error)
	// ECDH returns x((a+b)S) for the server's share S as a value.
	ECDH(ctx context.Context, serverShare []byte) (value, error)
	// Input declares a private input of owner of bits bits.
	Input(owner party, bits int) value
	// Assign gives an input its bytes: the owner passes them, the other
	// side nil.
	Assign(ctx context.Context, v value, data []byte) error
	// Call computes c on in (one value per input group) and returns one
	// value per output group.
	Call(ctx context.Context, c *circuit.Circuit, in ...value) ([]value, error)
	// Open reveals v to the audience: its bytes there, nil elsewhere.
	Open(ctx context.Context, v value, to audience) ([]byte, error)
	// Finalize ends the session's computation: N reveals its inputs and
	// P proves every value decoded was right. An error means some value
	// either side relied on may be wrong.
	Finalize(ctx context.Context) error
	// Send and Recv exchange a message of the TLS layer; Recv refuses one
	// above max bytes.
	Send(ctx context.Context, msg []byte) error
	Recv(ctx context.Context, max int) ([]byte, error)
	// Sent and Received count the bytes the session sent and received.
	Sent() int64
	Received() int64
	// Close ends the session and closes its connection.
	Close() error
}
