package attestation_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha512"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"math/big"
	"os"
	"time"

	"github.com/acds-project/acds/attestation"
	"github.com/acds-project/acds/attestation/sim"
)

// An operator CA issues the enclave's attested TLS certificate: the
// certificate chains to the CA, is for the TLS key the boot quote binds,
// and carries the boot evidence.
func ExampleEnclave_IssuedTLSCertificate() {
	dir, _ := os.MkdirTemp("", "acds-example-")
	defer os.RemoveAll(dir)
	m := sha512.Sum384([]byte("example build"))
	backend, err := sim.NewBackend(dir, sim.Options{Measurement: m[:], RSABits: 2048})
	if err != nil {
		fmt.Println(err)
		return
	}
	enclave, err := attestation.New(context.Background(), backend, attestation.Options{TLS: true})
	if err != nil {
		fmt.Println(err)
		return
	}

	// The operator's CA (in practice: attestation.ParseIssuer of PEM files).
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "operator CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(365 * 24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, _ := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &caKey.PublicKey, caKey)
	caCert, _ := x509.ParseCertificate(der)
	ca := &attestation.Issuer{Certificate: caCert, Signer: caKey}

	cert, err := enclave.IssuedTLSCertificate(ca, 0, "acds.example.org")
	if err != nil {
		fmt.Println(err)
		return
	}
	roots := x509.NewCertPool()
	roots.AddCert(caCert)
	_, err = cert.Leaf.Verify(x509.VerifyOptions{Roots: roots, DNSName: "acds.example.org"})
	fmt.Println("chains to the operator CA:", err == nil)
	bound, _ := enclave.BootEvidence().TLSPublicKey()
	fmt.Println("for the bound TLS key:", bound.Equal(cert.Leaf.PublicKey))
	fmt.Println("carries the evidence:", bytes.Equal(attestation.BootEvidenceFromCertificate(cert.Leaf), enclave.MarshalBootEvidence()))
	// Output:
	// chains to the operator CA: true
	// for the bound TLS key: true
	// carries the evidence: true
}
