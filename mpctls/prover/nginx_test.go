package prover

import (
	"bytes"
	"crypto/tls"
	"testing"

	"github.com/acds-project/acds/internal/testrig/corpus"
	"github.com/acds-project/acds/mpctls"
	"github.com/acds-project/acds/mpctls/notary"
	"github.com/acds-project/acds/mpctls/notary/notarytest"
)

// fhirFile returns a real FHIR Bundle of the corpus.
func fhirFile(t *testing.T) []byte {
	return corpus.Read(t, corpus.CARIN)
}

// TestInteropNginx fetches a FHIR file from nginx (OpenSSL) through the
// notary for TLS 1.3 with each suite and TLS 1.2 with each ECDHE AEAD
// suite, RSA and ECDSA certificates, two requests per keep-alive session,
// and verifies the statement and the presentation of the responses.
func TestInteropNginx(t *testing.T) {
	ca := notarytest.NewCA(t)
	const host = "nginx.test"
	certs := map[notarytest.KeyType]tls.Certificate{
		notarytest.ECDSA: ca.Issue(t, notarytest.ECDSA, host),
		notarytest.RSA:   ca.Issue(t, notarytest.RSA, host),
	}
	n := notarytest.StartNotary(t, notary.Config{Roots: ca.Pool()})
	fhir := fhirFile(t)
	big := payload(1 << 20)
	files := map[string][]byte{"Bundle/888.json": fhir, "big.bin": big}
	type tc struct {
		name, protocols, ciphers, suites13 string
		key                                notarytest.KeyType
		version, suite                     uint16
		curves                             string
	}
	cases := []tc{
		{"tls13-aes128", "TLSv1.3", "", "TLS_AES_128_GCM_SHA256", notarytest.ECDSA, tls.VersionTLS13, 0x1301, ""},
		{"tls13-aes256", "TLSv1.3", "", "TLS_AES_256_GCM_SHA384", notarytest.RSA, tls.VersionTLS13, 0x1302, ""},
		{"tls13-chacha20", "TLSv1.3", "", "TLS_CHACHA20_POLY1305_SHA256", notarytest.ECDSA, tls.VersionTLS13, 0x1303, ""},
		{"tls13-hello-retry", "TLSv1.3", "", "TLS_AES_128_GCM_SHA256", notarytest.RSA, tls.VersionTLS13, 0x1301, "secp384r1"},
		{"tls12-ecdsa-aes128", "TLSv1.2", "ECDHE-ECDSA-AES128-GCM-SHA256", "", notarytest.ECDSA, tls.VersionTLS12, 0xc02b, ""},
		{"tls12-ecdsa-aes256", "TLSv1.2", "ECDHE-ECDSA-AES256-GCM-SHA384", "", notarytest.ECDSA, tls.VersionTLS12, 0xc02c, ""},
		{"tls12-ecdsa-chacha20", "TLSv1.2", "ECDHE-ECDSA-CHACHA20-POLY1305", "", notarytest.ECDSA, tls.VersionTLS12, 0xcca9, ""},
		{"tls12-rsa-aes128", "TLSv1.2", "ECDHE-RSA-AES128-GCM-SHA256", "", notarytest.RSA, tls.VersionTLS12, 0xc02f, ""},
		{"tls12-rsa-aes256", "TLSv1.2", "ECDHE-RSA-AES256-GCM-SHA384", "", notarytest.RSA, tls.VersionTLS12, 0xc030, ""},
		{"tls12-rsa-chacha20", "TLSv1.2", "ECDHE-RSA-CHACHA20-POLY1305", "", notarytest.RSA, tls.VersionTLS12, 0xcca8, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			port := notarytest.StartNginx(t, notarytest.NginxConfig{
				Cert: certs[c.key], ServerName: host, Protocols: c.protocols,
				Ciphers: c.ciphers, Ciphersuites: c.suites13, Curves: c.curves, Files: files,
			})
			fr := fetch(t, n, ca.Pool(), host, port, nil, "/Bundle/888.json", "/big.bin")
			if len(fr.results) != 1 {
				t.Fatalf("%d sessions, want 1 keep-alive session", len(fr.results))
			}
			if !bytes.Equal(fr.bodies[0], fhir) || !bytes.Equal(fr.bodies[1], big) {
				t.Fatal("wrong bodies")
			}
			r := fr.results[0]
			checkResult(t, n, r, host, c.version, c.suite)
			if c.curves != "" && countServerHellos(r) != 2 {
				t.Errorf("%d plaintext server handshake records, want a HelloRetryRequest and a ServerHello", countServerHellos(r))
			}
			data := disclosed(t, n, r)
			if !bytes.Contains(data, fhir) || !bytes.Contains(data, big) || !bytes.Contains(data, []byte("Server: nginx")) {
				t.Fatal("disclosed plaintext lacks the responses")
			}
			// OpenSSL sends TLS 1.3 NewSessionTickets even with tickets
			// off: the prover's check and the presentation cross them.
			if r.Parsed.Version == mpctls.VersionTLS13 && r.Tickets == 0 {
				t.Errorf("expected NewSessionTicket messages from OpenSSL, got none")
			}
		})
	}
}

// countServerHellos counts the server's plaintext handshake records.
func countServerHellos(r *Result) int {
	n := 0
	for _, rec := range r.Records {
		if rec.Dir == mpctls.ServerToClient && rec.Type == mpctls.RecordHandshake {
			n++
		}
	}
	return n
}
