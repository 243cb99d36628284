// Package ectf turns an ECDH secret shared as two points into additive
// shares of its x-coordinate (ECDH to field, ECtF), for package mpc's
// two-party TLS client: P holds P₁ = a·S and N holds P₂ = b·S for the
// server's share S, and they end with s_P + s_N = x(P₁ + P₂) mod p without
// either learning x(P₁ + P₂), the TLS pre-master secret.
//
// The construction is the A2M/M2A conversion of DECO (Zhang et al., CCS
// 2020) and TLSNotary's key exchange: two additive-to-multiplicative
// conversions (of xq - xp and yq - yp), a local squaring of the quotient,
// and one multiplicative-to-additive conversion of λ², each multiplication
// Gilboa's from 256 correlated OTs (CRYPTO 1999). Field arithmetic is
// filippo.io/bigmod's, in constant time; inversion is x^(p-2).
//
// P is the OT receiver of all three multiplications and chooses with the
// bits of its random masks only; N sends corrections of its values. So a
// deviating N can only bias values P derives from its masks (learning bits
// of them through an abort at most), and a deviating P can only choose
// other masks — both make the pre-master secret wrong, which the TLS
// handshake exposes. N's part is deterministic given its point and the
// OTs' correlation, which package mpc has N open after the session:
// Prover.VerifyNotary replays it and rejects any correction, or any share,
// the protocol would not have produced (ErrCheat).
//
// The package is a state machine over byte messages with no I/O; package
// mpc supplies the correlated OTs and carries the messages.
package ectf
