package attestation

import (
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"errors"
	"fmt"
	"math/big"
	"net"
	"time"
)

// OIDBootEvidence identifies the X.509 extension in which an enclave's TLS
// certificate carries its boot evidence (the [BootEvidence.Marshal] bytes),
// RA-TLS style. It lies in the 2.25 arc of ITU-T X.667 (UUID
// 00000000-0000-0000-0000-0000613510ea). The extension is not critical:
// ordinary TLS clients ignore it; attested-TLS clients (package verify)
// require it.
var OIDBootEvidence = asn1.ObjectIdentifier{2, 25, 1630867690}

// ErrNoTLSKey: the enclave was started without Options.TLS.
var ErrNoTLSKey = errors.New("attestation: the enclave has no TLS key")

// TLSCertificate returns a self-signed certificate for the enclave's TLS key
// carrying the boot evidence in the [OIDBootEvidence] extension, valid from
// an hour ago for validity (zero: 30 days). hosts are DNS names or IP
// addresses for the certificate's subject alternative names; "localhost",
// 127.0.0.1 and ::1 are always included. A client trusts it not through a CA
// but by verifying the evidence and checking that the certificate's key is
// the TLS key the evidence binds. The private key never leaves the enclave:
// the returned certificate signs handshakes through [Enclave.TLSSigner].
func (e *Enclave) TLSCertificate(validity time.Duration, hosts ...string) (tls.Certificate, error) {
	signer := e.TLSSigner()
	if signer == nil {
		return tls.Certificate{}, ErrNoTLSKey
	}
	if validity <= 0 {
		validity = 30 * 24 * time.Hour
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return tls.Certificate{}, err
	}
	now := e.now()
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: "acds attested enclave (" + e.profile + ")"},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(validity),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:     []string{"localhost"},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		ExtraExtensions: []pkix.Extension{
			{Id: OIDBootEvidence, Critical: false, Value: e.bootWire},
		},
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else if h != "" && h != "localhost" {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, signer.Public(), signer)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("attested TLS certificate: %w", err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: signer, Leaf: leaf}, nil
}

// BootEvidenceFromCertificate returns the raw boot evidence a certificate
// carries in the OIDBootEvidence extension, or nil. It does not verify it.
func BootEvidenceFromCertificate(cert *x509.Certificate) []byte {
	for _, ext := range cert.Extensions {
		if ext.Id.Equal(OIDBootEvidence) {
			return ext.Value
		}
	}
	return nil
}
