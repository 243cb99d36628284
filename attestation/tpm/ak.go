package tpm

import (
	"crypto"
	"crypto/x509"

	attestpb "github.com/google/go-tpm-tools/proto/attest"
	"github.com/google/go-tpm/legacy/tpm2"
	"google.golang.org/protobuf/proto"
)

// ParseAK returns the attestation key an attestation names, and its DER
// certificate when it carries one (nil otherwise), without verifying
// anything: what an operator pins after checking it out of band (`acds
// verify --tpm-ak`), or what a server pins to verify its own bundles.
// Errors are *Error values of class ErrMalformed.
func ParseAK(att []byte) (crypto.PublicKey, []byte, error) {
	if len(att) > MaxAttestationSize {
		return nil, nil, fail(CheckSize, ErrMalformed, "attestation is %d bytes, limit %d", len(att), MaxAttestationSize)
	}
	var a attestpb.Attestation
	if err := proto.Unmarshal(att, &a); err != nil {
		return nil, nil, fail(CheckParse, ErrMalformed, "not an attestation: %v", err)
	}
	pub, err := safely(func() (tpm2.Public, error) { return tpm2.DecodePublic(a.GetAkPub()) })
	if err != nil {
		return nil, nil, fail(CheckParse, ErrMalformed, "AK public area: %v", err)
	}
	ak, err := safely(pub.Key)
	if err != nil {
		return nil, nil, fail(CheckParse, ErrMalformed, "AK public key: %v", err)
	}
	if _, err := x509.MarshalPKIXPublicKey(ak); err != nil {
		return nil, nil, fail(CheckParse, ErrMalformed, "AK public key: %v", err)
	}
	var cert []byte
	if c := a.GetAkCert(); len(c) > 0 {
		cert = append([]byte(nil), c...)
	}
	return ak, cert, nil
}
