// Package mpc is the two-party computation engine under ACDS's MPC-mode
// TLS: the prover (P, inside the enclave) and the notary (N) jointly
// compute on secrets neither holds alone — the ECDHE secret of a TLS
// session, its key schedule, the traffic keys — over one byte stream
// between them.
//
// The engine is malicious-secure against either party, with asymmetric
// privacy: P's inputs stay private forever; N's inputs (its key shares and
// masks, all ephemeral) stay private until Finalize, where N reveals them
// so that P can prove that every value decoded during the session was
// computed correctly. A TLS client built on it lets N sign only sessions
// that finalized, so a forged record needs a broken enclave and a
// colluding notary.
//
// # API
//
// Both parties build the same circuits (package circuit) and make the same
// calls on a Session in the same order, with the same public arguments
// (lengths, circuits, audiences); only private values differ. A divergence
// is detected and reported as ErrProtocol.
//
//	s, err := mpc.NewSession(ctx, conn, mpc.Prover, mpc.Config{}) // conn: a net.Conn to the peer
//	defer s.Close()
//
//	pub, err := s.KeyShare(ctx)          // P-256 client key share aG+bG (65 bytes), on both
//	pms, err := s.ECDH(ctx, serverShare) // Value: x((a+b)S), 256 bits; nobody learns it
//
//	x, err := s.Input(mpc.Prover, 512)   // declare a private input of P
//	err = s.Assign(ctx, x, block)        // both call it; the owner passes the bytes, the other nil
//	out, err := s.Call(ctx, c, pms, x)   // c: a *circuit.Circuit; out: one Value per output group
//
//	v, err := s.Open(ctx, out[0], mpc.ToProver) // the bytes on P, nil on N
//	sh, err := s.Share(ctx, out[1])             // each party's XOR share; nobody learns the value
//	err = s.Finalize(ctx)                       // N reveals, P proves; nil on N: every output was right
//
// InputValue declares and assigns in one call. Stats reports the bytes of
// each stream, the AND gates, OTs and decoded bits.
//
// A Value is a vector of secret bits held inside the session: labels on
// both sides, never the bits. Values are reused as inputs to later calls
// without leaving the session (a SHA-256 midstate kept between HMAC
// compressions, a traffic secret kept for the next KeyUpdate); Slice and
// Concat rearrange them for free. Bit i of a Value is bit 7-(i mod 8) of
// byte i/8 of its byte form (big-endian bit order), the order of SHA-256
// message bits and of AES blocks.
//
// Calls may precede the assignment of their inputs: P garbles as soon as
// the circuit is known and streams the tables while the inputs are still
// being computed (the TLS handshake, ECDH), and N evaluates when it needs
// a value. Large transfers (garbled tables) travel on a bulk stream that
// never delays the small messages of the control stream.
//
// Outputs go to P only (ToProver), to N only (ToNotary), to both (ToBoth),
// or stay shared (Share: P gets v⊕m, N gets m). Open after Share reveals a
// shared value later, for instance a server-direction key once N has
// committed to the records it protects. Values N learns with ToNotary are
// revealed to P at Finalize with the rest of N's inputs.
//
// # Constructions
//
//   - Garbling: three-halves garbling with free-XOR (Rosulek–Roy 2021),
//     1.5κ + 5 bits per AND gate, over the tweakable circular
//     correlation-robust hash π(π(x)⊕i)⊕π(x) of fixed-key AES
//     (Guo–Katz–Wang–Yu 2020); P garbles, N evaluates.
//   - Base OT: Masny–Rindal endemic OT over P-256 (CCS 2019).
//   - OT extension: IKNP correlated OT with the KOS consistency check
//     (Ishai–Kilian–Nissim–Petrank 2003; Keller–Orsini–Scholl 2015), in
//     both directions; the correlation is the garbling offset Δ.
//   - Malicious security: dual execution with asymmetric privacy (DEAP,
//     TLSNotary), whose second execution is a zero-knowledge proof from
//     garbled circuits (Jawurek–Kerschbaum–Orlandi 2013): N garbles the
//     same calls privacy-free (one ciphertext per AND; Frederiksen–
//     Nielsen–Orlandi 2015, ZRE15 §5), P evaluates them at Finalize on
//     N's revealed inputs and commits to the output labels before N opens
//     its garbling and OTs. P's upload is one garbling; the proof
//     travels from N to P.
//   - ECDH to field shares (ECtF) over P-256: A2M and M2A share conversion
//     (DECO, Zhang et al. 2020; TLSNotary) with Gilboa's OT-based
//     multiplication (1999), constant-time field arithmetic (bigmod) and
//     points (nistec); N's part is opened and replayed by P at Finalize.
//
// # Security in short
//
// Against a deviating prover: if Finalize succeeds on the notary, every
// value opened during the session is the circuits' output on the
// notary's inputs and on inputs the prover fixed when it assigned them.
// Before that, such a prover may have learnt the notary's (ephemeral)
// inputs; so the notary signs only after Finalize. Against a deviating
// notary: it learns nothing of the prover's inputs beyond what is opened
// to it; values opened to the prover are authentic at once; everything
// else the notary sent is checked at Finalize by checks that do not
// depend on the prover's inputs. The engine checks what it can see: it
// cannot check that the prover's inputs are the "right" ones (the TLS
// handshake checks the ECDH share), and it does not encrypt its stream.
//
// What each step assumes and leaks, and the tests behind each claim, are
// in docs/mpc-tls.md ("The two-party computation engine").
package mpc
