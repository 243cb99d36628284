package attestation

import (
	"crypto/sha512"
	"encoding/binary"
)

// BootDomain is the domain-separation prefix of the boot report data.
const BootDomain = "acds/v1/boot"

// BootNonceSize is the length of the random boot nonce in bytes.
const BootNonceSize = 32

// BootReportData returns the 64 bytes an enclave puts into its one boot
// quote's report data:
//
//	SHA-512( "acds/v1/boot" ‖ 0x00 ‖
//	         len(signingSPKI) ‖ signingSPKI ‖
//	         len(tlsSPKI)     ‖ tlsSPKI ‖
//	         len(nonce)       ‖ nonce )
//
// where each len is the byte length as a 4-byte big-endian unsigned integer,
// signingSPKI and tlsSPKI are DER SubjectPublicKeyInfo encodings of the
// output-signing key and of the TLS key (tlsSPKI is empty, with length 0,
// when the enclave has no TLS key), and nonce is the boot nonce. The length
// prefixes make the encoding injective: no two different key/nonce triples
// hash the same input.
func BootReportData(signingSPKI, tlsSPKI, nonce []byte) [64]byte {
	h := sha512.New()
	h.Write([]byte(BootDomain))
	h.Write([]byte{0})
	for _, part := range [][]byte{signingSPKI, tlsSPKI, nonce} {
		var n [4]byte
		binary.BigEndian.PutUint32(n[:], uint32(len(part)))
		h.Write(n[:])
		h.Write(part)
	}
	var out [64]byte
	h.Sum(out[:0])
	return out
}
