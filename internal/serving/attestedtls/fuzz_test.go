package attestedtls_test

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"testing"
	"time"

	"github.com/acds-project/acds/attestation"
	"github.com/acds-project/acds/client/attested"
	"github.com/acds-project/acds/verify"
)

// FuzzVerifyConnection feeds arbitrary bytes as the boot-evidence
// extension of a certificate for the enclave's TLS key: the check must
// never panic, must refuse with a *verify.CertificateError, and may accept
// only evidence that binds this very key. Plain `go test` replays the seeds.
func FuzzVerifyConnection(f *testing.F) {
	h := getHarness(f)
	genuine := attestation.BootEvidenceFromCertificate(h.cert.Leaf)
	f.Add(genuine)
	f.Add([]byte{})
	f.Add(genuine[:len(genuine)/2])
	f.Add(append(bytes.Clone(genuine), 0))
	tampered := bytes.Clone(genuine)
	tampered[len(tampered)-5] ^= 1
	f.Add(tampered)
	f.Add(attestation.BootEvidenceFromCertificate(mustCert(f, h.other)))
	f.Add([]byte{0xbf, 0xff}) // an empty indefinite-length CBOR map

	ch := mustChecker(f, h.policy(f), &attested.Options{CacheSize: -1})
	spki := h.cert.Leaf.RawSubjectPublicKeyInfo
	now := time.Now()
	f.Fuzz(func(t *testing.T, ev []byte) {
		cert := &x509.Certificate{
			Raw:                     append([]byte("fuzz"), ev...),
			RawSubjectPublicKeyInfo: spki,
			PublicKey:               h.cert.Leaf.PublicKey,
			NotBefore:               now.Add(-time.Hour),
			NotAfter:                now.Add(time.Hour),
			Extensions:              []pkix.Extension{{Id: attestation.OIDBootEvidence, Value: ev}},
		}
		err := ch.VerifyConnection(tls.ConnectionState{PeerCertificates: []*x509.Certificate{cert}})
		if bytes.Equal(ev, genuine) && err != nil {
			t.Fatalf("the genuine evidence refused: %v", err)
		}
		if err == nil {
			be, perr := attestation.ParseBootEvidence(ev)
			if perr != nil || !bytes.Equal(be.TLSKey, spki) {
				t.Fatalf("accepted evidence that does not bind the certificate's key (%v)", perr)
			}
			return
		}
		var ce *verify.CertificateError
		if !errors.As(err, &ce) || len(ce.Result.Failures) == 0 {
			t.Fatalf("refusal is not a *verify.CertificateError naming a check: %v", err)
		}
	})
}

func mustCert(tb testing.TB, e *attestation.Enclave) *x509.Certificate {
	tb.Helper()
	c, err := e.TLSCertificate(time.Hour)
	if err != nil {
		tb.Fatal(err)
	}
	return c.Leaf
}
