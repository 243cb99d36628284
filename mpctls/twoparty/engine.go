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

// Messages carries the TLS layer's own messages between the prover and
// the notary, in order: the prover Sends a request and Recvs its answer;
// the notary Recvs the request and Sends the answer, and then both make
// the engine calls of that step. Package prover sends each request as an
// HTTP request to the notary (notary.MPCStepPath); package notary's
// handler of those requests is the notary's side. Recv refuses a message
// above max bytes.
type Messages interface {
	Send(ctx context.Context, msg []byte) error
	Recv(ctx context.Context, max int) ([]byte, error)
}

// engine is the part of a two-party session (package mpc's Session) the
// TLS layer uses. Both sides make the same calls in the same order with
// the same public arguments; only the private bytes differ.
type engine interface {
	// KeyShare returns the client key share aG+bG (65 bytes) on both sides.
	KeyShare(ctx context.Context) ([]byte, error)
	// ECDH returns x((a+b)S) for the server's share S as a value.
	ECDH(ctx context.Context, serverShare []byte) (value, error)
	// Input declares a private input of owner of bits bits.
	Input(owner party, bits int) (value, error)
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
	// Close ends the session and closes its connection.
	Close() error
}
