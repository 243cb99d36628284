// Package sim is the simulated SEV-SNP enclave ("sev-snp-sim"), the embedded
// default TEE of ACDS on machines without confidential-computing hardware.
//
// On first start in a data directory it creates a per-installation chain in
// the shape of AMD's: an RSA-4096 ARK (self-signed) and ASK, and an ECDSA
// P-384 VCEK carrying the AMD KDS certificate extensions (product name, TCB
// security patch levels, hardware ID). Keys are fresh from crypto/rand, kept
// in <dir>/enclave-sim (directory 0700, key files 0600) and never committed
// anywhere; the same directory holds the AES-256 sealing key.
//
// Reports have the exact SEV-SNP ATTESTATION_REPORT layout and are signed
// with ECDSA P-384 by the VCEK, so package verify checks them with the very
// same go-sev-guest verify/validate code as hardware, with the simulated ARK
// as the trusted root. The measurement is SHA-384 of the running executable
// ([MeasureSelf]): a different build has a different code hash.
//
// A simulated quote proves the code path, not hardware: verifiers accept the
// profile only when their policy allows simulation.
package sim
