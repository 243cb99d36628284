// Package attestedtls serves an enclave's attested TLS certificate
// ([Certificates], for `acds serve --tls`), and holds the end-to-end tests
// and the benchmark of attested TLS to the ACDS service: the real server
// handler (server.New on SQLite) served over TLS with the certificate of a
// simulated SEV-SNP enclave (attestation/sim), and clients built with
// package client/attested.
//
//	certs, err := attestedtls.NewCertificates(enclave, attestedtls.Options{})
//	hs := &http.Server{Handler: srv.Handler(), TLSConfig: certs.TLSConfig()}
//	err = hs.ServeTLS(ln, "", "")
//
// The certificates are self-signed by default. With Options.Issuer an
// operator CA (attestation.Issuer) issues them instead: the enclave makes
// a certificate request carrying the boot evidence, the CA signs it, and
// the enclave serves the result only if it is for its key and carries its
// evidence. Clients that trust the CA (RootCAs) then check the chain and
// host name as well as the evidence; the CA never replaces the evidence.
//
// The tests prove that a client talks to the right enclave and refuses,
// during the handshake and before a byte of any request reaches the server,
// a certificate whose key the quote does not bind (evidence copied from
// another enclave), a measurement outside the manifest, simulated evidence
// without Policy.UnsafeAllowSimulation, a tampered evidence extension, an expired
// certificate and a plain TLS server, each with the typed error of the
// check that failed; and that verified evidence is cached once, by the
// verifier, per evidence. With an operator CA, a client that trusts it accepts the CA-issued
// certificate and refuses one from another CA, a CA-issued certificate for
// a key the quote does not bind and an expired one; a client without
// RootCAs still decides by the evidence.
//
// BenchmarkTimeToFirstByte measures, in one run, the time to the first
// response byte of GET /v1/health over plain TLS, over attested TLS on a
// first connection (cold verifier) and on later connections (new TCP and
// TLS each, cache warm), and one bundle verification, and reports the
// ratios the issue sets as goals.
package attestedtls
