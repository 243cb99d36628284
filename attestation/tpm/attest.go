package tpm

import (
	"io"

	"github.com/google/go-tpm-tools/client"
	"google.golang.org/protobuf/proto"
)

// MaxNonceSize is the largest nonce a TPM 2.0 accepts as qualifying data
// (the size of a SHA-512 digest).
const MaxNonceSize = 64

// Attest makes a TPM attestation over nonce with go-tpm-tools' client: it
// loads the ECC P-256 attestation key of the owner hierarchy (go-tpm-tools'
// AK template, created and cached at its default persistent handle if
// absent), quotes every allocated PCR bank over the nonce, and attaches the
// TCG event log and the AK certificate when the TPM holds one. The event log
// comes from rw when rw implements client.EventLogGetter, otherwise from
// /sys/kernel/security/tpm0/binary_bios_measurements.
//
// The result is the deterministic protobuf encoding of a go-tpm-tools
// attest.Attestation, which Verify accepts. No TEE (SEV-SNP, TDX) report is
// added. The nonce must be 1 to MaxNonceSize bytes.
func Attest(rw io.ReadWriter, nonce []byte) ([]byte, error) {
	if len(nonce) == 0 || len(nonce) > MaxNonceSize {
		return nil, fail(CheckDevice, ErrDevice, "nonce is %d bytes, want 1 to %d", len(nonce), MaxNonceSize)
	}
	ak, err := client.AttestationKeyECC(rw)
	if err != nil {
		return nil, fail(CheckDevice, ErrDevice, "loading the attestation key: %w", err)
	}
	defer ak.Close()
	att, err := ak.Attest(client.AttestOpts{Nonce: nonce, SkipTeeAttestation: true})
	if err != nil {
		return nil, fail(CheckDevice, ErrDevice, "quoting: %w", err)
	}
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(att)
	if err != nil {
		return nil, fail(CheckDevice, ErrDevice, "encoding: %w", err)
	}
	return b, nil
}
