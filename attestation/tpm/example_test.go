package tpm_test

import (
	"crypto"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/acds-project/acds/attestation/tpm"
)

// Verify a TPM attestation offline with a pinned attestation key. The
// attestation in testdata was made on the TPM reference simulator; on a
// real machine it comes from package attestation/tpm/device:
//
//	b, err := device.Open(ctx, device.Options{StateDir: dir}) // /dev/tpmrm0
//	att, err := b.Quote(ctx, reportData)
func ExampleVerify() {
	att, _ := os.ReadFile("testdata/sim-attestation.pb")
	nonceHex, _ := os.ReadFile("testdata/sim-nonce.hex")
	akPEM, _ := os.ReadFile("testdata/sim-ak.pem")
	nonce, _ := hex.DecodeString(strings.TrimSpace(string(nonceHex)))
	blk, _ := pem.Decode(akPEM)
	ak, err := x509.ParsePKIXPublicKey(blk.Bytes)
	if err != nil {
		fmt.Println(err)
		return
	}

	ev, err := tpm.Verify(att, nonce, tpm.Options{TrustedAKs: []crypto.PublicKey{ak}})
	if err != nil {
		fmt.Println("invalid:", err)
		return
	}
	fmt.Println("measured PCRs:", ev.MeasuredPCRs)
	fmt.Println("measurement bytes:", len(ev.Measurement))

	// The wrong nonce is a typed error naming the check.
	_, err = tpm.Verify(att, []byte("another nonce"), tpm.Options{TrustedAKs: []crypto.PublicKey{ak}})
	var e *tpm.Error
	if errors.As(err, &e) {
		fmt.Println("wrong nonce fails at:", e.Check)
	}
	// Output:
	// measured PCRs: [0 1 2 3 4 5 6 7 8 9]
	// measurement bytes: 32
	// wrong nonce fails at: nonce
}
