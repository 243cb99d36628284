package attestedtls_test

import (
	"crypto/tls"
	"crypto/x509"
	"strings"
	"testing"
	"time"

	"github.com/acds-project/acds/internal/serving/attestedtls"
)

// BenchmarkOperatorCATimeToFirstByte measures in one run, interleaved as
// BenchmarkTimeToFirstByte does, the time to the first response byte of
// GET /v1/health from a server whose attested certificate an operator CA
// issued, each a new TCP and TLS connection:
//
//   - plain-ns: plain TLS trusting the operator CA (chain and host name
//     verified), the baseline of any HTTPS client of such a server;
//   - later-ns: attested TLS trusting the operator CA too (chain, host
//     name, then the evidence from the warm cache);
//   - later-noca-ns: attested TLS without RootCAs (evidence only, warm).
//
// later/plain is what the CA-trusting attested client costs over plain
// TLS to the same server (goal, as issue 7's: ≤ 1.1).
func BenchmarkOperatorCATimeToFirstByte(b *testing.B) {
	h := getHarness(b)
	now := time.Now()
	ca := operatorCA(b, "bench operator CA", now.Add(-time.Hour), now.Add(24*time.Hour))
	certs, err := attestedtls.NewCertificates(h.enclave, attestedtls.Options{Issuer: ca})
	if err != nil {
		b.Fatal(err)
	}
	base, _ := h.serveTLS(b, certs.TLSConfig())
	addr := strings.TrimPrefix(base, "https://")
	roots := x509.NewCertPool()
	roots.AddCert(ca.Certificate)

	ch := mustChecker(b, h.policy(b), nil)
	plainCfg := ch.TLSConfig("localhost")
	plainCfg.InsecureSkipVerify, plainCfg.VerifyConnection, plainCfg.RootCAs = false, nil, roots
	caCfg := ch.TLSConfig("localhost")
	caCfg.InsecureSkipVerify, caCfg.RootCAs = false, roots
	noCACfg := ch.TLSConfig("localhost")
	var plain, later, noCA samples
	steps := []struct {
		s   *samples
		cfg *tls.Config
	}{{&plain, plainCfg}, {&later, caCfg}, {&noCA, noCACfg}}
	for _, st := range steps { // warm up both paths and fill the cache
		if _, err := firstByte(addr, st.cfg); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for j := range steps {
			st := steps[(i+j)%len(steps)]
			d, err := firstByte(addr, st.cfg)
			if err != nil {
				b.Fatal(err)
			}
			*st.s = append(*st.s, d)
		}
	}
	b.StopTimer()
	if s := ch.Stats(); s.Verified != 1 {
		b.Fatalf("the checker verified %d times, want once", s.Verified)
	}
	pm, lm, nm := plain.median(), later.median(), noCA.median()
	b.ReportMetric(pm, "plain-ns")
	b.ReportMetric(lm, "later-ns")
	b.ReportMetric(nm, "later-noca-ns")
	b.ReportMetric(lm/pm, "later/plain")
	b.ReportMetric(nm/pm, "later-noca/plain")
}
