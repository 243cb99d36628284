// Package prover is the enclave's side of ACDS's notarized TLS sessions
// (MPC-TLS stage 1): a dialer that tunnels each TLS connection through a
// recording notary (mpctls/notary), keeps the raw records and the session
// keys in memory, and turns each closed connection into a verified notary
// statement plus what it takes to build presentations.
//
// # Using it
//
//	d := &prover.Dialer{Notary: "127.0.0.1:7047", NotaryKeys: trusted, TLSConfig: &tls.Config{RootCAs: roots}}
//	tr := &http.Transport{DialTLSContext: d.DialTLSContext}
//	resp, err := (&http.Client{Transport: tr}).Get("https://portal.example/Patient/1")
//	... read and close the body ...
//	tr.CloseIdleConnections()          // ends the notarized sessions
//	results, err := d.FinalizeAll(ctx) // one Result per TLS connection
//	d.CloseIdleConnections()           // the control connections to the notary
//	p, err := results[0].PresentAll()  // or Presentation(selected seqs)
//
// Each TLS connection is one notarized session. The dialer runs crypto/tls
// with TLS 1.2 or 1.3, ECDHE AEAD suites only (AES-128-GCM, AES-256-GCM,
// ChaCha20-Poly1305), no session cache and no tickets, HTTP/1.1 only, and
// ServerName equal to the dialled host, whatever TLSConfig says. Its key
// log (tls.Config.KeyLogWriter) is an in-memory buffer that is read once
// after the handshake and wiped; secrets never reach a log, an error or a
// file.
//
// # What Finalize checks
//
// While the connection runs, a goroutine authenticates every server
// record the prover received under the server keys of its epoch (the
// handshake traffic secret for the TLS 1.3 handshake flight, then
// application_traffic_secret_N following KeyUpdate, passing over
// NewSessionTicket; the server write key after the TLS 1.2
// ChangeCipherSpec); every record's Merkle leaf is hashed as the capture
// assembles it. Closing the
// connection half-closes the tunnel and reads whatever the server still
// sends (its close_notify), so the prover has seen every record the
// notary relayed. Finalize then discloses to the notary only what its
// identity check needs (TLS 1.3: the server handshake traffic secret; TLS
// 1.2: nothing) and the record counts, and verifies the answer: the
// statement is signed by one of NotaryKeys, names this session, this
// host, a time within ClockSkew of the session, the negotiated version
// and suite, the certificate chain crypto/tls verified, the prover's own
// record and byte counts, and the Merkle root of the prover's own records
// in the notary's arrival order. Any difference is an error wrapping
// ErrMismatch, mpctls.ErrSignature, mpctls.ErrExpectation or
// mpctls.ErrDecrypt; a notary refusal is a *NotaryError.
//
// It does not check what the notary cannot know either: that the portal
// said anything in particular. Presentations (Result.Presentation,
// mpctls.VerifyPresentation) carry the server traffic secret — never a
// client key — so that a third party can re-check the records it is shown.
//
// # What it costs
//
// Beyond a direct fetch, any implementation of this design pays at least
// one more TCP hop, SHA-256 of every record at the notary and again at the
// prover, one AEAD pass over the server's records at the prover and the
// notary's spool write; on loopback that floor alone costs more CPU than a
// direct fetch, because nothing hides it. BenchmarkFetch measures that floor
// in the same run as the direct and notarized fetches and reports the
// ratios; the per-session constants (the notary's handshake check and
// signature, the finalize round trip) weigh more on small records.
// The notary hashes and spools beside the relay, behind a
// bounded queue, with recycled record buffers; the prover hashes each
// record as it arrives and authenticates it on a second goroutine.
package prover
