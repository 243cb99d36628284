// Package mpctls is the offline core of ACDS's notarized TLS sessions
// ("MPC-TLS", stage 1). It turns the bytes a notary relayed between an
// enclave (the prover) and a clinical portal into a small signed statement,
// and lets whoever holds data from that session prove, offline, that the
// data came from the portal in that session.
//
// The package does no networking and never imports net/http: it sits on
// the offline verification path. The recording proxy lives in
// mpctls/notary and the enclave's dialer in mpctls/prover; both build on
// the pieces below.
//
// # Pieces
//
//   - Records: NewRecordReader splits one direction of a TCP stream into
//     TLS records (Record), strictly: the first record must be a handshake
//     record or an alert (ErrNotTLS), content types are limited to the four TLS ones
//     (ErrUnknownRecordType), fragments to MaxFragment (ErrRecordTooLarge).
//   - Transcript: a streaming Merkle accumulator over every record of both
//     directions in arrival order, in O(log n) memory. Leaves are
//     SHA-256(0x00 ‖ dir ‖ seq (8 bytes big endian) ‖ record bytes), nodes
//     SHA-256(0x01 ‖ left ‖ right), and the tree is the one of RFC 6962
//     §2.1 (see transcript.go for the exact construction). Order tells the
//     prover the arrival order; NewTree and Tree.Prove make inclusion
//     proofs, VerifyProof checks them.
//   - Key schedule and record protection: HKDFExpandLabel, DeriveSecret,
//     TrafficKey, NextTrafficSecret (KeyUpdate) for TLS 1.3, checked
//     against RFC 8448; ServerWriteKey12 for TLS 1.2; Opener removes the
//     AEAD protection of one record (AES-128/256-GCM, ChaCha20-Poly1305 in
//     both versions, with their nonce and additional-data rules).
//   - VerifyHandshake: the identity check the notary runs before signing.
//   - Statement: what the notary signs (COSE_Sign1, Ed25519, over
//     deterministic CBOR, about 330 bytes); ParseStatement decodes,
//     VerifyStatement also checks the signature against trusted notary keys
//     and the caller's expectations (Expect).
//   - Presentation: server records chosen by the holder, their inclusion
//     proofs and the server traffic secret; BuildPresentation makes one,
//     VerifyPresentation checks it and returns the plaintext (Disclosed).
//
// # What each check proves
//
// VerifyHandshake, for TLS 1.3, decrypts the server's handshake flight
// with the server handshake traffic secret the prover disclosed, and
// verifies the certificate chain against the notary's roots for the
// expected name at the session time, the CertificateVerify signature over
// the transcript (which includes both hellos and so the key shares), and
// the server Finished MAC. Together these show that the party holding the
// certificate's key took part in this handshake, and that the disclosed
// secret is the one of this handshake (otherwise the flight would not
// decrypt and the Finished would not verify). The secret opens only the
// server's handshake messages, never application data or anything the
// client sent. For TLS 1.2 the certificate and the ServerKeyExchange are in
// the clear: the check verifies the chain and the ServerKeyExchange
// signature over both hello randoms and the ECDHE parameters. The server
// Finished is encrypted under keys the notary never gets, and nothing the
// notary sees authenticates the client's hello beyond its random.
//
// The Statement commits to every record of both directions (the Merkle
// root), the byte and record counts, the certificate chain (CertChainDigest)
// and the address the notary itself resolved and dialed. It says nothing
// about plaintext.
//
// VerifyPresentation shows that each disclosed record is the record at its
// position in the notarized session (inclusion proof), and that it
// authenticates under the server's traffic key of its key epoch, so it was
// produced by a holder of the session keys as the server-direction record
// with that sequence number; under the assumptions below, by the server.
// Disclosed.Complete and Disclosed.CloseNotify say whether the disclosure
// covers the whole server stream up to a close_notify, and
// Disclosed.CheckComplete turns a gap or a missing close_notify into
// ErrTruncated, so truncation is visible.
//
// # Trust model and assumptions (stage 1)
//
// In stage 1 the prover knows all session keys. What stops it from
// forging server records is that the notary recorded the ciphertext as it
// came from the network, before the prover could see it. The conclusions
// above therefore rest on three assumptions:
//
//   - No attacker on the path between notary and portal. The prover
//     knows the session keys, so anyone who can inject bytes into the
//     notary's connection to the portal, handed those keys by the prover,
//     could add server records that authenticate. The notary resolves and
//     dials the portal itself (the statement names the address), so the
//     prover alone cannot sit on that path.
//   - The notary does not collude with the prover. A notary that signs
//     whatever the prover asks proves nothing; verifiers choose which
//     notary keys to trust.
//   - The prover runs in an attested TEE (see package attestation). The
//     notary cannot read the request the prover sent, and the prover
//     could decrypt and re-encrypt anything on its side of the session;
//     only the TEE measurement tells a verifier that the request and the
//     handling of the response were those of the published code.
//
// # Stage 2
//
// The planned stage 2 splits the session keys between the prover and the
// notary with two-party computation (a notary-held key share, as in
// TLSNotary's MPC mode): the prover then never knows the server write key
// alone while the session runs, which removes the "no attacker on the
// path" and part of the TEE assumption. The statement, presentation and
// verification formats of this package are meant to carry over unchanged.
package mpctls
