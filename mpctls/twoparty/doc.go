// Package twoparty is MPC mode of ACDS's notarized TLS sessions: a TLS
// 1.3 and 1.2 client whose ECDHE secret and key schedule the prover (P,
// in the enclave) computes together with the notary (N) in two-party
// computation (package mpc), so that P never holds a server-direction
// application key before N has committed to the records it protects.
//
// Conn is P's side: a net.Conn over the tunnel N relays. Notary is N's
// side: it follows P's requests on the engine's control stream, checks
// each against the records it relays (a Relay: package notary's session),
// makes its half of the computation and reveals a server key epoch only
// after the records of that epoch are committed and a checkpoint signed.
// docs/mpc-tls.md gives the design, the key-schedule split and the
// security argument; in short:
//
//   - The client key share comes from the engine (aG+bG); the ECDHE
//     secret exists only inside it.
//   - Each HMAC with a secret key is a reduced HMAC: its two midstates and
//     its output are SHA-256 compressions in the circuit; the inner
//     midstate is opened to both, and the transcript-dependent inner
//     hashes are N's inputs, never P's.
//   - TLS 1.3: P learns the handshake traffic secrets (to check the
//     server's flight and write its Finished) and the client application
//     secret (N is the only path to the server). The server application
//     keys stay in the engine; P reads a response by requesting a
//     KeyUpdate, after which N commits the epoch's records, signs a
//     checkpoint and opens that epoch's key and IV to P alone. SATS₀, from
//     which presentations derive every epoch, is opened once the tunnel
//     has closed.
//   - TLS 1.2: one response per connection; N opens the server key once
//     the server's direction is over (or N has cut it), after checking
//     the server's Finished in two-party computation.
//
// A server MPC mode cannot serve (another group, a suite other than
// AES-128-GCM or, in TLS 1.3, ChaCha20-Poly1305, TLS 1.2 without the
// extended master secret) fails the handshake with ErrUnsupported before
// anything but the ClientHello was sent.
package twoparty
