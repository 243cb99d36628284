package verify_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"io"
	"math/big"
	"net"
	"testing"
	"time"

	"github.com/acds-project/acds/attestation"
	"github.com/acds-project/acds/verify"
)

// serveTLS accepts TLS connections on loopback with cert and answers each
// with "hello"; it returns the address.
func serveTLS(t *testing.T, cert tls.Certificate) string {
	t.Helper()
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{cert}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				c.Write([]byte("hello"))
			}()
		}
	}()
	return ln.Addr().String()
}

func dialAttested(addr string, v *verify.Verifier) (string, error) {
	c, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true, VerifyConnection: v.VerifyConnection, MinVersion: tls.VersionTLS13})
	if err != nil {
		return "", err
	}
	defer c.Close()
	b, err := io.ReadAll(c)
	return string(b), err
}

func tlsEnclave(t *testing.T, now time.Time) *attestation.Enclave {
	t.Helper()
	f := getFixture(t)
	e, err := attestation.New(context.Background(), f.backend, attestation.Options{TLS: true, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func TestAttestedTLS(t *testing.T) {
	f := getFixture(t)
	e := tlsEnclave(t, f.now)
	cert, err := e.TLSCertificate(0, "enclave.example.org")
	if err != nil {
		t.Fatal(err)
	}
	addr := serveTLS(t, cert)
	v := mustNew(t, f.policy())
	if got, err := dialAttested(addr, v); err != nil || got != "hello" {
		t.Fatalf("attested TLS to a genuine enclave: %q %v", got, err)
	}
	// The evidence was verified once; later checks of it are cache hits.
	before := v.Stats()
	if r1, r2 := v.VerifyCertificate(cert.Leaf), v.VerifyCertificate(cert.Leaf); !r1.Valid || !r2.Valid {
		t.Fatal("verified certificate refused again")
	}
	if s := v.Stats(); before.Verified != 1 || s.Verified != 1 || s.Cached != before.Cached+2 {
		t.Fatalf("stats %+v then %+v, want one verification and two hits", before, s)
	}

	refuse := func(name, addr string, v *verify.Verifier, want error) {
		t.Helper()
		_, err := dialAttested(addr, v)
		var ce *verify.CertificateError
		if !errors.As(err, &ce) || !errors.Is(err, want) {
			t.Errorf("%s: got %v, want %v", name, err, want)
		}
	}
	// Simulation not allowed.
	p := f.policy()
	p.UnsafeAllowSimulation, p.UnsafeTrustBundleSimulatedRoot = false, false
	refuse("simulation", addr, mustNew(t, p), verify.ErrSimulation)
	// Measurement outside the policy.
	p = f.policy()
	p.Measurements = map[string][][]byte{attestation.ProfileSEVSNPSim: {make([]byte, 48)}}
	refuse("measurement", addr, mustNew(t, p), verify.ErrMeasurement)

	// A plain TLS server.
	plain := selfSignedTLS(t, nil, nil)
	refuse("plain TLS", serveTLS(t, plain), mustNew(t, f.policy()), verify.ErrNoEvidence)
	// The genuine evidence copied into another key's certificate.
	copied := selfSignedTLS(t, attestation.BootEvidenceFromCertificate(cert.Leaf), nil)
	refuse("copied evidence", serveTLS(t, copied), mustNew(t, f.policy()), verify.ErrTLSKeyNotBound)
	// A tampered extension.
	ev := append([]byte(nil), attestation.BootEvidenceFromCertificate(cert.Leaf)...)
	ev[len(ev)/3] ^= 1 // inside the SNP report or its certificates
	refuse("tampered evidence", serveTLS(t, selfSignedTLS(t, ev, nil)), mustNew(t, f.policy()), verify.ErrEvidence)
	ev = append([]byte(nil), attestation.BootEvidenceFromCertificate(cert.Leaf)...)
	ev[len(ev)-5] ^= 1 // the boot nonce
	refuse("tampered nonce", serveTLS(t, selfSignedTLS(t, ev, nil)), mustNew(t, f.policy()), verify.ErrBinding)
	// Evidence without a TLS key (an enclave started without --tls).
	noTLS := selfSignedTLS(t, f.enclave.MarshalBootEvidence(), nil)
	refuse("no bound TLS key", serveTLS(t, noTLS), mustNew(t, f.policy()), verify.ErrTLSKeyNotBound)
	// An expired certificate of a genuine enclave.
	old := tlsEnclave(t, f.now.Add(-48*time.Hour))
	expired, err := old.TLSCertificate(time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	refuse("expired certificate", serveTLS(t, expired), mustNew(t, f.policy()), verify.ErrCertificateTime)
}

// selfSignedTLS makes a certificate for a fresh key, carrying ev in the
// boot-evidence extension when ev is not nil.
func selfSignedTLS(t *testing.T, ev []byte, _ any) tls.Certificate {
	t.Helper()
	k, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "impostor"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}}
	if ev != nil {
		tmpl.ExtraExtensions = []pkix.Extension{{Id: attestation.OIDBootEvidence, Value: ev}}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: k}
}
