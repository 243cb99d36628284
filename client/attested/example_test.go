package attested_test

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/acds-project/acds/attestation/manifest"
	"github.com/acds-project/acds/client/attested"
	"github.com/acds-project/acds/verify"
)

// A caller trusts the code hashes its publisher signed, and sends its
// requests (and the bearer token) only to an enclave running one of them.
func Example() {
	ctx := context.Background()
	signed, _ := os.ReadFile("manifest.cbor")    // the published reference values
	publisher, _ := os.ReadFile("publisher.key") // the publisher's Ed25519 public key
	m, err := manifest.Verify(signed, ed25519.PublicKey(publisher), time.Now())
	if err != nil {
		fmt.Println("manifest:", err)
		return
	}
	ch, err := attested.NewChecker(verify.Policy{Manifest: m}, nil)
	if err != nil {
		fmt.Println("policy:", err)
		return
	}
	c, err := ch.Client("https://acds.example.org", nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	sess, err := c.Anon(ctx, "")
	var ce *verify.CertificateError
	switch {
	case errors.As(err, &ce):
		// Nothing was sent: say which checks failed.
		for _, f := range ce.Result.Failures {
			fmt.Printf("refused (%s): %v\n", f.Check, f.Err)
		}
	case err != nil:
		fmt.Println(err)
	default:
		fmt.Println("session", sess.Pseudonym)
	}
}

// A raw TLS connection to an enclave, checked the same way.
func ExampleChecker_TLSConfig() {
	ms, err := verify.ParseMeasurements("<the code hash the publisher announced, 96 hex digits>")
	if err != nil {
		fmt.Println(err)
		return
	}
	ch, err := attested.NewChecker(verify.Policy{Measurements: ms}, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	cfg := ch.TLSConfig("acds.example.org")
	_ = cfg // tls.Dial("tcp", "acds.example.org:443", cfg)
}
