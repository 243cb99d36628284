// Package ot is the oblivious transfer of package mpc: base OTs over P-256
// and their extension into as many correlated OTs as a session needs.
//
//   - BaseSender and BaseReceiver: Masny–Rindal endemic OT from
//     Diffie–Hellman over P-256 (CCS 2019), random OT with 128-bit seeds;
//     one flight each way, the two flights independent. Points and scalars
//     go through filippo.io/nistec and filippo.io/bigmod (constant time);
//     the random oracle onto the curve (try-and-increment) only ever
//     hashes public points.
//   - Sender and Receiver: IKNP correlated OT extension with the KOS
//     consistency check. The sender holds the correlation Δ (its base-OT
//     choice bits) and gets q_j; the receiver gets a random choice r_j and
//     t_j = q_j ⊕ r_j·Δ. With Δ the garbling offset, q_j and q_j ⊕ Δ are a
//     wire's two labels, and the receiver holds the one of its choice.
//     Each batch costs the receiver 16 bytes per OT, plus 256 check OTs.
//   - Pad turns a correlated OT into a random OT of any length (a hash of
//     the block), for OT-based multiplication.
//
// Everything here is a state machine over byte messages, with no I/O:
// package mpc carries the messages, and every parser is fuzzed. Messages
// of the wrong size, points off the curve or at infinity fail with
// ErrMessage; a failed check with ErrConsistency.
package ot
