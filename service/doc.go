// Package service runs the real ACDS server inside your own Go program:
// the same wiring as `acds serve`, as a value you open, mount and close.
//
// One entry point, two depths. Package server is the entry point: an
// http.Handler opened with server.New and a server.Config whose seams
// (Store, Pipeline, Enclave, Fetcher, Verifier) take the domain types, so
// an embedder with its own store (any store.Store), enclave backend,
// fetcher or pipeline constructs a server.Config and nothing else. Package
// service is what is not a seam: the installation. It owns a data directory (its lock, sealed keys, the SQLite file), starts
// a notary and opens the enclave backend, which are process resources
// with a lifetime a handler should not own. It holds no adapter and no
// type of its own for a seam; Options.Server and Options.Configure reach
// every server.Config field. It fills the seams with:
//
//   - a durable store: SQLite in the data directory by default, or
//     PostgreSQL shared by several replicas (Options.Store, OpenStore);
//   - an enclave: Options.Enclave (any attestation.Backend), or the
//     backend OpenBackend opens for Options.EnclaveKind — SEV-SNP, TDX or
//     TPM hardware through packages attestation/…/device, "auto" (the
//     hardware found, else a loud fallback to simulation), or by default
//     the simulated SEV-SNP enclave whose keys and per-installation root
//     are kept in the data directory (a simulated quote proves the code
//     path, not hardware; verifiers must allow simulation explicitly).
//     Hardware that seals (SEV-SNP's derived key, a TPM's PCR-sealed key)
//     keeps sealed credentials across restarts; TDX cannot, so its
//     credentials last one boot and fetches still queued after a restart
//     end failed with a problem that says so. A TPM server writes its
//     attestation key to DataDir/tpm-ak.pem (TPMAKFile) for verifiers to
//     pin. Replicas sharing a PostgreSQL store each claim only the fetches
//     they sealed (DataDir/replica.id is their claim affinity, see
//     store.Request.Affinity);
//   - the FHIR R4 pipeline of package fhir, with a de-identification key
//     made once per installation and kept sealed by the enclave;
//   - portal fetching through the MPC-TLS prover and a notary: an
//     in-process one on loopback by default, or an external `acds notary`
//     (Options.Notary, Options.NotaryKey);
//   - POST /v1/verify with package verify, trusting this enclave and
//     every replica registered in the shared store: at Open each replica
//     writes its trust anchor (its measurement, its simulated root or
//     TPM attestation key, its notary keys; public material only) to a
//     store that implements store.TrustRegistry, and the verifier trusts
//     the union, read again every minute and on a bundle it cannot
//     verify. Trusting the store is trusting whoever can write the
//     database: a bundle valid only through another replica's anchor says
//     so in its reasons, and GET /v1/attestation shows the policy in force
//     (the verifyPolicy extension). A store without a registry leaves the
//     replica trusting itself only.
//
// Open starts all of it and returns a Service; Handler is an http.Handler
// to mount under any prefix, and Close drains the workers, stops the
// notary and closes the store:
//
//	svc, err := service.Open(ctx, service.Options{DataDir: "./acds-data"})
//	if err != nil { … }
//	defer svc.Close(context.Background())
//	mux.Handle("/clinical/", http.StripPrefix("/clinical", svc.Handler()))
//
// Every accepted request (a 202) is on disk before the answer, so a
// restart with the same data directory continues where it stopped.
//
// With Options.TLS the enclave also makes an attested TLS key; TLSConfig
// returns a tls.Config whose certificate carries the boot evidence, so
// clients (client/attested, `acds verify --server`) check they talk to the
// enclave before sending anything. Serve it with tls.NewListener.
//
// Policy is the verification policy the server applies to its own
// bundles at POST /v1/verify (other replicas' are trusted through the
// store, as above). Anyone who should not trust the server verifies offline
// with package verify and a policy built from published code hashes; the
// in-process notary's key (NotaryKey) is then trusted only when named.
//
// The package never reads flags or environment variables and never prints:
// everything comes from Options, and logs go to Options.Logger.
package service
