// Package notary is the recording notary of ACDS's notarized TLS sessions
// (MPC-TLS stage 1): an HTTP CONNECT proxy that relays a prover's TLS
// session to a portal, records every TLS record of both directions, and,
// once the session is over, checks the server's identity and signs a
// statement (mpctls.Statement) that commits to everything it relayed.
// `acds notary` runs one standalone; `acds serve` runs one in-process.
//
// # Using it
//
//	n, err := notary.New(notary.Config{Key: key, Roots: portalRoots})
//	...
//	go n.Serve(listener) // or mount n.Handler() in an HTTP/1.1 server
//	defer n.Close()
//
// The prover side is mpctls/prover. Config documents every knob; each
// zero value is usable (system roots, system resolver, 5-minute sessions,
// 64 sessions, 256 MiB per session, …).
//
// # Wire protocol
//
//  1. The prover sends `CONNECT host:port HTTP/1.1`. The notary resolves
//     host itself, skips the addresses Config.AllowAddr refuses, dials the
//     others in order until one answers (the statement names it) and answers
//     `200 Connection Established` with the session id in the
//     Acds-Notary-Session header (SessionHeader) and the "ip:port" it
//     dialled in Acds-Notary-Address (AddressHeader), which a prover may
//     check before it sends anything (prover.Dialer.AllowAddr). A full
//     notary answers 503 with Retry-After; a malformed or forbidden
//     target 403 (ProblemTarget, naming the target as given but never an
//     address a name resolved to), a name that does not resolve 502
//     (ProblemTargetUnresolved, never naming the notary's resolver) and a
//     target none of whose addresses answers 502 (ProblemTarget), as RFC
//     9457 problem documents.
//  2. The tunnel carries the TLS session. The notary parses it record by
//     record (mpctls.NewRecordReader) and, before relaying the hellos,
//     refuses what it will not notarize (ErrRefused): traffic that is not
//     TLS, a first client record that is not a ClientHello, a ClientHello
//     whose server_name is missing or differs from the CONNECT host, a
//     client that offers nothing above TLS 1.1, a pre_shared_key (session
//     resumption), early_data (0-RTT) or a TLS 1.2 session ticket, a
//     ServerHello choosing TLS below 1.2, a suite that is not an ECDHE
//     AEAD suite, a PSK, or a TLS 1.2 session-id resumption, and unknown
//     record types at any time. A refused session is cut at once; its
//     ClientHello never reaches the portal when the refusal is about the
//     hello. Every relayed record goes into the session's
//     mpctls.Transcript (the Merkle root) and into a spool file, with its
//     time offset; only the records up to the client's first encrypted
//     record stay in memory, for the handshake check, and those are
//     capped at 256 KiB. Memory per session is bounded: two record
//     buffers, the handshake records and a queue of at most 32 records
//     waiting to be hashed.
//  3. When one side ends the stream (FIN, or a reset at a record
//     boundary, which many servers send instead), the notary half-closes
//     the other side and gives it Config.DrainTimeout to finish. A stream
//     that ends inside a record is a truncation: the session is not
//     notarized. Records that arrive after their receiver has gone are
//     still recorded, as seen from their sender, but not forwarded. The whole tunnel
//     is bounded by Config.SessionTimeout and Config.MaxSessionBytes.
//  4. The prover then POSTs a FinalizeRequest to
//     /v1/sessions/{id}/finalize (FinalizePath): for TLS 1.3 the server
//     handshake traffic secret, for TLS 1.2 nothing, and how many records
//     of each direction it saw. The notary runs mpctls.VerifyHandshake
//     with its roots, for the CONNECT host, at the session start time;
//     builds the statement over the records below the prover's counts
//     (all of them, usually; a prefix is rebuilt from the spool when the
//     prover never read the server's last records); signs it with
//     Config.Key; and answers with the statement and the arrival order of
//     the records (FinalizeResponse). A session can be finalized once;
//     unclaimed sessions are discarded after Config.FinalizeTimeout. The
//     session id (128 random bits, sent only to the CONNECT client) is the
//     capability to finalize; a statement binds no identity of the prover.
//     Serve closes a connection left idle between requests after
//     Config.IdleTimeout.
//
// The notary never receives client-direction keys, credentials or
// response plaintext: the disclosed secret decrypts the server's
// handshake flight only.
//
// # Trust
//
// A statement means "this notary relayed exactly these records between a
// client and the address it resolved for this name, and the server in that
// session proved possession of a certificate valid for the name". It rests
// on the assumptions stated in the mpctls package documentation: no
// attacker between notary and portal, a notary that does not collude with
// the prover, and the prover's TEE. Run the notary where its path to the
// portals is trustworthy, keep its key (`acds notary --key`, mode 0600)
// private, and set AllowAddr when it is reachable by anyone but its
// prover, since a CONNECT proxy would otherwise reach private addresses.
// The package has no address rule of its own (DESIGN §2: mpctls imports
// nothing of ACDS); `acds notary` and package service inject
// portal.Guard's, the one SSRF rule, so that the notary and the service's
// own connections refuse exactly the same addresses.
//
// Stage 2 (planned) moves to a notary-held key share (2PC), so that the
// prover alone never holds the session keys.
package notary
