// Package circuit builds the boolean circuits that package mpc computes on
// between two parties: a Builder that folds constants and drops dead
// gates, the built Circuit (inputs, gates in topological order, outputs)
// with a plaintext evaluator and a structural digest, and the circuits
// MPC-mode TLS needs, each checked against the standard library:
//
//   - SHA256Compress: one SHA-256 compression from a midstate (22,573 AND,
//     the Bristol figure); Midstate and ResumeSHA256 move chaining states
//     in and out of crypto/sha256, so the inner hash of a reduced HMAC can
//     be computed locally from a revealed inner midstate;
//   - AES128, AES128KeySchedule, AES128Expanded: AES-128 with and without
//     the key schedule (34 AND per S-box, the Boyar–Peralta depth-16
//     circuit: 6,800 and 5,440 AND against Bristol's 6,400 and 5,120);
//   - Add, AddMod (a + b mod m, about 3n AND) and Equal (n-1 AND).
//
// Bits travel in big-endian bit order: bit i of a group is bit 7-(i mod 8)
// of byte i/8, so a byte string, a SHA-256 block and an AES block map to
// wires in their natural order.
//
//	b := circuit.NewBuilder()
//	state, block := b.Input(256), b.Input(512)
//	b.Output(circuit.SHA256Compress(b, state, block))
//	c, err := b.Build()
//	out, err := c.Eval(circuit.SHA256IV[:], paddedBlock) // out[0]: the new state
package circuit
