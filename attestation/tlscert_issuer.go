package attestation

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"time"
)

// Limits on the bytes an operator CA and an enclave accept from each other.
const (
	// MaxCertificateRequestSize bounds a certificate request given to
	// [Issuer.Issue]: the boot evidence it carries plus a little.
	MaxCertificateRequestSize = MaxBundleSize
	// MaxIssuerPEMSize bounds each PEM file given to [ParseIssuer].
	MaxIssuerPEMSize = 1 << 20
	// maxChainCertificates bounds the certificates of a chain given to
	// [Enclave.TLSCertificateFromChain].
	maxChainCertificates = 8
)

// Errors of operator-CA issuance.
var (
	// ErrIssuer: the operator CA cannot issue certificates: its
	// certificate is not a CA certificate allowed to sign certificates,
	// its key is not the certificate's, or it is not valid at the clock.
	ErrIssuer = errors.New("attestation: operator CA cannot issue")
	// ErrNotEnclaveCertificate: a certificate offered to the enclave is
	// not for its TLS key, or does not carry its boot evidence.
	ErrNotEnclaveCertificate = errors.New("attestation: certificate is not the enclave's")
)

// Issuer is an operator certificate authority that issues an enclave's
// attested TLS certificate, in place of the self-signed certificate of
// [Enclave.TLSCertificate]. The certificate it issues is still for the
// enclave's TLS key, whose private half never leaves the enclave (the CA
// signs a certificate request the enclave made), and still carries the
// boot evidence in the [OIDBootEvidence] extension, so attested-TLS
// clients verify the evidence exactly as before; clients that trust the
// CA (RootCAs) check the CA chain and the host name as well. A CA never
// replaces the evidence: it adds an operator's name to it.
//
// The zero value is not usable: Certificate and Signer are required.
type Issuer struct {
	// Certificate is the CA certificate that signs: a CA certificate
	// (basic constraints) whose key usage, when present, allows signing
	// certificates. Its public key must be Signer's. When it is not
	// self-signed (an intermediate CA) it is sent to clients after the
	// enclave's certificate.
	Certificate *x509.Certificate
	// Signer is the CA's private key.
	Signer crypto.Signer
	// Chain are further certificates sent to clients after Certificate,
	// up to (not including) a root they trust. Zero value: none.
	Chain []*x509.Certificate
}

// Check reports whether ca can issue certificates at now: a wrapped
// ErrIssuer says why not. It does not check ca's chain to a root.
func (ca *Issuer) Check(now time.Time) error {
	switch {
	case ca == nil || ca.Certificate == nil:
		return fmt.Errorf("%w: no CA certificate", ErrIssuer)
	case ca.Signer == nil:
		return fmt.Errorf("%w: no CA key", ErrIssuer)
	case !ca.Certificate.BasicConstraintsValid || !ca.Certificate.IsCA:
		return fmt.Errorf("%w: certificate %q is not a CA certificate", ErrIssuer, ca.Certificate.Subject)
	case ca.Certificate.KeyUsage != 0 && ca.Certificate.KeyUsage&x509.KeyUsageCertSign == 0:
		return fmt.Errorf("%w: certificate %q may not sign certificates (key usage)", ErrIssuer, ca.Certificate.Subject)
	case now.Before(ca.Certificate.NotBefore) || !now.Before(ca.Certificate.NotAfter):
		return fmt.Errorf("%w: certificate %q is valid %s to %s", ErrIssuer, ca.Certificate.Subject,
			ca.Certificate.NotBefore.UTC().Format(time.RFC3339), ca.Certificate.NotAfter.UTC().Format(time.RFC3339))
	}
	pub, ok := ca.Signer.Public().(interface{ Equal(crypto.PublicKey) bool })
	if !ok || !pub.Equal(ca.Certificate.PublicKey) {
		return fmt.Errorf("%w: the key is not the CA certificate's", ErrIssuer)
	}
	return nil
}

// Issue signs the certificate request csr (DER, as
// [Enclave.TLSCertificateRequest] makes it) with the CA, and returns the
// chain to serve: the new certificate, then Certificate when it is not
// self-signed, then Chain. The certificate is valid from an hour before
// now (not before the CA's start) for validity (zero: 30 days), and never
// beyond the CA certificate's end. It is a TLS server certificate with the
// request's subject, DNS names and IP addresses, and the boot evidence
// extension copied unchanged.
//
// Issue checks that the request is signed by its key (proof of
// possession), that it carries boot evidence, and that the evidence binds
// the request's key as the TLS key. It does NOT verify the evidence (the
// quote, its vendor chain, the measurement): a CA that should only
// certify enclaves it trusts verifies the evidence first (package verify,
// VerifyBoot). Errors wrap ErrIssuer for the CA, and ErrTooLarge,
// ErrMalformed or ErrSignature for the request.
func (ca *Issuer) Issue(csr []byte, now time.Time, validity time.Duration) ([][]byte, error) {
	if err := ca.Check(now); err != nil {
		return nil, err
	}
	if len(csr) > MaxCertificateRequestSize {
		return nil, fmt.Errorf("certificate request of %d bytes (limit %d): %w", len(csr), MaxCertificateRequestSize, ErrTooLarge)
	}
	req, err := x509.ParseCertificateRequest(csr)
	if err != nil {
		return nil, &FieldError{Struct: "certificate request", Field: "der", Reason: err.Error(), Err: ErrMalformed}
	}
	if err := req.CheckSignature(); err != nil {
		return nil, fmt.Errorf("certificate request: %w: %w", ErrSignature, err)
	}
	var ev []byte
	for _, ext := range req.Extensions {
		if ext.Id.Equal(OIDBootEvidence) {
			if ev != nil {
				return nil, malformed("certificate request", "extensions", "boot evidence requested twice")
			}
			ev = ext.Value
		}
	}
	if ev == nil {
		return nil, malformed("certificate request", "extensions", "no boot evidence")
	}
	boot, err := ParseBootEvidence(ev)
	if err != nil {
		return nil, fmt.Errorf("certificate request: %w", err)
	}
	bound, err := boot.TLSPublicKey()
	if err != nil {
		return nil, fmt.Errorf("certificate request: %w", err)
	}
	if bound == nil || !bound.Equal(req.PublicKey) {
		return nil, malformed("certificate request", "public key", "not the TLS key the boot evidence binds")
	}
	if validity <= 0 {
		validity = 30 * 24 * time.Hour
	}
	notBefore, notAfter := now.Add(-time.Hour), now.Add(validity)
	if notBefore.Before(ca.Certificate.NotBefore) {
		notBefore = ca.Certificate.NotBefore
	}
	if notAfter.After(ca.Certificate.NotAfter) {
		notAfter = ca.Certificate.NotAfter
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:    serial,
		Subject:         req.Subject,
		NotBefore:       notBefore,
		NotAfter:        notAfter,
		KeyUsage:        x509.KeyUsageDigitalSignature,
		ExtKeyUsage:     []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:        req.DNSNames,
		IPAddresses:     req.IPAddresses,
		ExtraExtensions: []pkix.Extension{{Id: OIDBootEvidence, Critical: false, Value: ev}},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Certificate, req.PublicKey, ca.Signer)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrIssuer, err)
	}
	chain := [][]byte{der}
	if !selfSigned(ca.Certificate) {
		chain = append(chain, ca.Certificate.Raw)
	}
	for _, c := range ca.Chain {
		chain = append(chain, c.Raw)
	}
	return chain, nil
}

func selfSigned(c *x509.Certificate) bool {
	return bytes.Equal(c.RawIssuer, c.RawSubject) && c.CheckSignatureFrom(c) == nil
}

// TLSCertificateRequest returns a certificate request (DER) for the
// enclave's TLS key, signed by it, carrying the boot evidence in the
// [OIDBootEvidence] extension, for an operator CA to sign ([Issuer.Issue],
// or a CA outside the enclave). hosts are DNS names or IP addresses for the
// subject alternative names; "localhost", 127.0.0.1 and ::1 are always
// included. It returns ErrNoTLSKey when the enclave has no TLS key.
func (e *Enclave) TLSCertificateRequest(hosts ...string) ([]byte, error) {
	signer := e.TLSSigner()
	if signer == nil {
		return nil, ErrNoTLSKey
	}
	tmpl := &x509.CertificateRequest{
		Subject:         pkix.Name{CommonName: "acds attested enclave (" + e.profile + ")"},
		DNSNames:        []string{"localhost"},
		IPAddresses:     []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		ExtraExtensions: []pkix.Extension{{Id: OIDBootEvidence, Critical: false, Value: e.bootWire}},
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else if h != "" && h != "localhost" {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, tmpl, signer)
	if err != nil {
		return nil, fmt.Errorf("attested TLS certificate request: %w", err)
	}
	return der, nil
}

// TLSCertificateFromChain returns a TLS server certificate of the enclave
// from a chain a CA issued (DER, the enclave's certificate first): the
// certificate must be for the enclave's TLS key and carry exactly its boot
// evidence (else ErrNotEnclaveCertificate), so the enclave never serves a
// certificate that an attested-TLS client would refuse for its key or its
// evidence. The handshakes sign with [Enclave.TLSSigner]. It does not
// verify the chain's signatures or validity: clients do.
func (e *Enclave) TLSCertificateFromChain(chain [][]byte) (tls.Certificate, error) {
	signer := e.TLSSigner()
	if signer == nil {
		return tls.Certificate{}, ErrNoTLSKey
	}
	if len(chain) == 0 || len(chain) > maxChainCertificates {
		return tls.Certificate{}, fmt.Errorf("%w: a chain of %d certificates (want 1 to %d)", ErrNotEnclaveCertificate, len(chain), maxChainCertificates)
	}
	leaf, err := x509.ParseCertificate(chain[0])
	if err != nil {
		return tls.Certificate{}, &FieldError{Struct: "certificate", Field: "der", Reason: err.Error(), Err: ErrMalformed}
	}
	if pub, ok := leaf.PublicKey.(*ecdsa.PublicKey); !ok || !pub.Equal(signer.Public()) {
		return tls.Certificate{}, fmt.Errorf("%w: it is for another key", ErrNotEnclaveCertificate)
	}
	if !bytes.Equal(BootEvidenceFromCertificate(leaf), e.bootWire) {
		return tls.Certificate{}, fmt.Errorf("%w: it does not carry the enclave's boot evidence", ErrNotEnclaveCertificate)
	}
	out := make([][]byte, len(chain))
	for i, c := range chain {
		out[i] = bytes.Clone(c)
	}
	return tls.Certificate{Certificate: out, PrivateKey: signer, Leaf: leaf}, nil
}

// IssuedTLSCertificate returns an attested TLS certificate for the
// enclave's key issued by the operator CA ca, valid from an hour ago for
// validity (zero: 30 days) but not beyond the CA certificate: the enclave
// makes a certificate request ([Enclave.TLSCertificateRequest]), ca signs
// it ([Issuer.Issue]) at the enclave's clock, and the enclave checks the
// result ([Enclave.TLSCertificateFromChain]). A nil ca gives the
// self-signed certificate of [Enclave.TLSCertificate]. The private key
// never leaves the enclave.
func (e *Enclave) IssuedTLSCertificate(ca *Issuer, validity time.Duration, hosts ...string) (tls.Certificate, error) {
	if ca == nil {
		return e.TLSCertificate(validity, hosts...)
	}
	csr, err := e.TLSCertificateRequest(hosts...)
	if err != nil {
		return tls.Certificate{}, err
	}
	chain, err := ca.Issue(csr, e.now(), validity)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("attested TLS certificate: %w", err)
	}
	return e.TLSCertificateFromChain(chain)
}

// ParseIssuer returns the operator CA of a PEM certificate file and a PEM
// private key file. certPEM holds the CA certificate, optionally followed
// by the certificates of its chain (see Issuer.Chain); keyPEM holds its
// key as PKCS #8 ("PRIVATE KEY"), SEC 1 ("EC PRIVATE KEY") or PKCS #1
// ("RSA PRIVATE KEY"), unencrypted. Errors wrap ErrIssuer, ErrTooLarge or
// ErrMalformed and never contain key material. It does not check the
// validity period: see [Issuer.Check].
func ParseIssuer(certPEM, keyPEM []byte) (*Issuer, error) {
	if len(certPEM) > MaxIssuerPEMSize || len(keyPEM) > MaxIssuerPEMSize {
		return nil, fmt.Errorf("operator CA file larger than %d bytes: %w", MaxIssuerPEMSize, ErrTooLarge)
	}
	ca := &Issuer{}
	for rest := certPEM; ; {
		var b *pem.Block
		if b, rest = pem.Decode(rest); b == nil {
			break
		}
		if b.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return nil, &FieldError{Struct: "operator CA", Field: "certificate", Reason: err.Error(), Err: ErrMalformed}
		}
		if ca.Certificate == nil {
			ca.Certificate = c
		} else if len(ca.Chain) < maxChainCertificates {
			ca.Chain = append(ca.Chain, c)
		} else {
			return nil, malformed("operator CA", "certificate", fmt.Sprintf("more than %d certificates", maxChainCertificates+1))
		}
	}
	if ca.Certificate == nil {
		return nil, malformed("operator CA", "certificate", "no PEM CERTIFICATE block")
	}
	var key any
	for rest := keyPEM; key == nil; {
		var b *pem.Block
		if b, rest = pem.Decode(rest); b == nil {
			break
		}
		var err error
		switch b.Type {
		case "PRIVATE KEY":
			key, err = x509.ParsePKCS8PrivateKey(b.Bytes)
		case "EC PRIVATE KEY":
			key, err = x509.ParseECPrivateKey(b.Bytes)
		case "RSA PRIVATE KEY":
			key, err = x509.ParsePKCS1PrivateKey(b.Bytes)
		case "ENCRYPTED PRIVATE KEY":
			return nil, malformed("operator CA", "key", "encrypted keys are not supported")
		default:
			continue
		}
		if err != nil {
			// x509's parse errors name the structure, never key bytes.
			return nil, &FieldError{Struct: "operator CA", Field: "key", Reason: err.Error(), Err: ErrMalformed}
		}
	}
	switch k := key.(type) {
	case *ecdsa.PrivateKey:
		ca.Signer = k
	case *rsa.PrivateKey:
		ca.Signer = k
	case ed25519.PrivateKey:
		ca.Signer = k
	case nil:
		return nil, malformed("operator CA", "key", "no PEM private key block")
	default:
		return nil, malformed("operator CA", "key", fmt.Sprintf("unsupported key type %T", key))
	}
	pub, ok := ca.Signer.Public().(interface{ Equal(crypto.PublicKey) bool })
	if !ok || !pub.Equal(ca.Certificate.PublicKey) {
		return nil, fmt.Errorf("%w: the key is not the CA certificate's", ErrIssuer)
	}
	return ca, nil
}
