// Package mpctls holds the offline core of ACDS's notarized TLS ("MPC-TLS",
// stage 1): TLS record parsing, the Merkle transcript of a session, the TLS
// 1.3 key schedule and record protection, the handshake identity checks a
// notary runs before it signs, signed notary statements, and presentations
// that let anyone re-check disclosed server records offline.
//
// It does no networking and never imports net/http: it is on the offline
// verification path. The recording proxy lives in mpctls/notary and the
// enclave's dialer in mpctls/prover.
package mpctls
